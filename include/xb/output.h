/* output.h - what every output of a sampling run gets besides the
 * profile: where it came from and how it was taken. */
#ifndef XB_OUTPUT_H
#define XB_OUTPUT_H

#include <stdint.h>

struct xb_out_meta {
	const char *title;        /* e.g. "erlang-sample 1234 (OTP 25, jit)" */
	uint64_t start_unix_ns;   /* wall-clock start */
	uint64_t duration_ns;
	uint64_t period_ns;       /* ns of CPU per sample (1e9 / frequency) */
	uint64_t processed, received;
	const char *blame;        /* non-NULL: the profile holds only stacks containing this native fn */
	unsigned max_depth;       /* for the truncation note */
};

#endif

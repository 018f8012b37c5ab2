/* output.h - picture formats of a profile: flame graph (SVG), speedscope
 * (JSON) and pprof (gzipped profile.proto).  Each writer is a pure
 * function of a finished struct xb_profile and the run's metadata; none
 * keeps state or looks at anything else.
 *
 * Frames: XB_FK_GROUP frames (the outermost frame of a stack under --by)
 * are the root frame in the flame graph and pprof; speedscope writes one
 * `sampled` profile per group instead.  XB_FK_MARK frames ("[callers
 * unknown]", "[truncated]") are drawn as frames.  A frame's file/line go
 * to speedscope's Frame.file/line and pprof's Function.filename/Line.line;
 * the flame graph shows names as they are.
 *
 * Every writer returns 0, or -1 with a message (xb_err()) when the stream
 * reports an error (a full disk included: the stream is flushed and
 * checked) or memory runs out.  What was written before the error is not
 * removed: the caller owns the file. */
#ifndef XB_OUTPUT_H
#define XB_OUTPUT_H

#include "xb/profile.h"

#include <stdint.h>
#include <stdio.h>

struct xb_out_meta {
	const char *title;      /* e.g. "erlang-sample 1234 (OTP 25, jit)"; NULL: "erlang-sample" */
	uint64_t start_unix_ns; /* wall-clock start; 0: unknown */
	uint64_t duration_ns;
	uint64_t period_ns; /* ns of CPU per sample (1e9 / frequency); 0: unknown */
	uint64_t processed, received;
	const char *blame; /* non-NULL: the profile holds only stacks containing this native fn */
	unsigned max_depth; /* --max-callchain-depth, for the "[truncated]" note; 0: not said */
	bool wall;          /* --wall: a sample is period_ns of a process's wall-clock time, not CPU */
};

/* Self-contained SVG: no external resources, inline script (zoom, search),
 * root at the bottom, children sorted by name, frames narrower than
 * XB_FLAME_MIN_FRACTION of all samples merged into their parent.  Should
 * the frames drawn still take more than about XB_FLAME_MAX_FRAME_BYTES,
 * the minimum doubles until they do not (the legend says which minimum
 * was used): any profile gives an SVG under 10 MB. */
#define XB_FLAME_MIN_FRACTION 0.001
#define XB_FLAME_MAX_FRAME_BYTES 9000000
int xb_write_flamegraph(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m);

/* speedscope file format (https://www.speedscope.app/file-format-schema.json),
 * unit "none", weights = sample counts, one profile per group. */
int xb_write_speedscope(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m);

/* gzipped perftools.profiles.Profile (vendor/pprof/profile.proto). */
int xb_write_pprof(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m);

#endif

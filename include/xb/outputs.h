/* outputs.h - the sinks of erlang-sample (src/output/): each turns a
 * session's samples into one result. */
#ifndef XB_OUTPUTS_H
#define XB_OUTPUTS_H

#include "xb/sink.h"

#include <stdbool.h>
#include <stddef.h>

enum xb_format { XB_FMT_TABLE, XB_FMT_FOLDED };

struct xb_profile_sink_opts {
	enum xb_format format;
	const char *blame; /* only samples whose native stack has this function */
	size_t top;        /* table rows */
	bool only_erlang;  /* table: count the innermost Erlang frame */
};

/* The session's aggregated profile, written in one format. */
struct xb_sink *xb_profile_sink_new(const struct xb_profile_sink_opts *o);

struct xb_pstack_opts {
	bool idle_stacks; /* unwind where idle schedulers wait */
};
/* --pstack: one stack per scheduler, the best seen while sampling. */
struct xb_sink *xb_pstack_sink_new(const struct xb_pstack_opts *o);

#endif

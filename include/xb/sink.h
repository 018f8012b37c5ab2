/* sink.h - where resolved samples go.  A session (session.h) hands every
 * sample it resolved to its sinks; a sink aggregates what it needs, may
 * redraw on a periodic tick (a live view), and writes its result at the
 * end.  Table, folded, pstack, flame graph, speedscope and pprof are
 * sinks (src/output/); a new output is one new sink. */
#ifndef XB_SINK_H
#define XB_SINK_H

#include "xb/rsample.h"

#include <stdbool.h>
#include <stdio.h>

struct xb_session;

struct xb_sink;
struct xb_sink_ops {
	const char *name;
	/* A resolved sample (may be NULL: the sink only writes the profile). */
	void (*add)(struct xb_sink *k, struct xb_session *s, const struct xb_rsample *rs);
	/* Sampling starts and stops (xb_session_run; may be NULL): the
	 * window a sink measures outside the samples, e.g. the threads' CPU
	 * time from the kernel's accounting (--schedulers). */
	void (*started)(struct xb_sink *k, struct xb_session *s);
	void (*stopped)(struct xb_sink *k, struct xb_session *s);
	/* Called about every 100 ms while sampling (may be NULL). */
	void (*tick)(struct xb_sink *k, struct xb_session *s);
	/* Called after every drain of the rings, about every --drain-ms
	 * (may be NULL): cheap looks at the VM between samples (the
	 * scheduler views watch for schedulers blocked off the CPU). */
	void (*poll)(struct xb_sink *k, struct xb_session *s);
	/* True when the sink has all it wants and sampling may stop (may be NULL). */
	bool (*done)(struct xb_sink *k, struct xb_session *s);
	/* Write the result; 0, or -1 with xb_err. */
	int (*write)(struct xb_sink *k, struct xb_session *s, FILE *out);
	void (*free)(struct xb_sink *k);
};

struct xb_sink {
	const struct xb_sink_ops *ops;
};

#endif

/* rsample.h - a resolved sample: what the pipeline knows about one sample
 * once its frames are named (src/session/ builds it, the sinks of
 * sink.h and the classifiers of src/profile/ read it). */
#ifndef XB_RSAMPLE_H
#define XB_RSAMPLE_H

#include "xb/erlstack.h"
#include "xb/sampler.h"
#include "xb/unwind.h"

#include <stdint.h>

/* A sample with everything known about it. */
struct xb_rsample {
	const struct xb_sample *s;    /* registers, time, cpu, tid */
	const struct xb_thread *t;    /* the sampled thread: kind, scheduler number, name */
	const struct xb_unwind *uw;   /* native frames */
	const struct xb_estack *es;   /* process and Erlang frames */
	const uint32_t *ids;          /* frame ids in the session's profile, innermost first */
	uint32_t n, nnative;
};

#endif

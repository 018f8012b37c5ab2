/* longcalls.h - NIF and BIF calls that held a normal scheduler across
 * samples (src/output/longcalls.c): a pure function of the samples fed
 * to it, one thread at a time, in time order.
 *
 * A call is a run of samples of one thread in the same function, for the
 * same process, with the same call identity (struct xb_call_id:
 * c_p->fcalls tells calls within a time slice apart, c_p->reds calls in
 * different slices).  What was read from the sample itself (a register,
 * memory captured with it) is exact; what was read live, a moment later,
 * only counts as proof for samples taken after an earlier read of the
 * same run returned the same identity (the identity was already stored
 * then, and nothing stored another one before the later read).  So two
 * calls are never merged; a call whose first samples were read too late
 * only loses them from its lower bound.
 *
 * Bounds of a call's length: lower, from the first to the last sample
 * proven to be in it; upper, from the thread's sample before the run to
 * the first sample proven outside it after (or to the live read that saw
 * another identity).  Unknown (UINT64_MAX) when sampling started or
 * stopped during the call.  Each call says whether its edges were proven
 * by the samples at their own time (start_exact, end_exact). */
#ifndef XB_LONGCALLS_H
#define XB_LONGCALLS_H

#include "xb/erlstack.h"

#include <stddef.h>
#include <stdint.h>

#define XB_LC_NONE UINT32_MAX

/* One sample of a thread, as the tracker sees it. */
struct xb_lc_sample {
	uint64_t t;       /* when it was taken (ns) */
	bool in_call;     /* a process is in a NIF or BIF it called (normal scheduler) */
	uint64_t c_p;
	uint32_t fn;      /* the function (a frame id) */
	struct xb_call_id id;
	uint64_t read_ns; /* when the parts of id that are not exact were read (>= t) */
	uint32_t caller;  /* the Erlang caller's frame id, or XB_LC_NONE */
	const char *pid, *name; /* for the report ("" when unknown) */
};

struct xb_long_call {
	uint32_t fn, caller;
	char pid[32], name[256];
	int thread;               /* the caller's thread index */
	uint64_t first_ns, last_ns; /* its first and last sample */
	uint64_t min_ns, max_ns;  /* bounds of its length; max_ns UINT64_MAX: unknown */
	unsigned samples;         /* samples in it (off_cpu: observations) */
	bool off_cpu;             /* seen blocked off the CPU, not sampled on it */
	/* Edges bounded by what the samples themselves proved: START_EXACT,
	 * its first sample's identity came with the sample (so the lower
	 * bound starts there); END_EXACT, it was closed by a sample proven
	 * outside it at its own time.  Otherwise an identity read live, at
	 * the next drain, proved that edge: the bounds hold the call all the
	 * same, wider by up to that read's delay. */
	bool start_exact, end_exact;
	uint64_t blocked_ns;      /* off_cpu: time between looks that both saw it blocked */
	uint64_t c_p;             /* its identity: process and call (struct xb_call_id) */
	struct xb_call_id id;
};

/* Per thread: every run of samples in one call, long or not. */
struct xb_lc_stats {
	uint64_t calls;           /* runs (calls seen) */
	uint64_t samples;         /* their samples */
	uint64_t longest_min_ns, longest_max_ns; /* the run with the longest lower bound */
	bool have_longest;
	uint64_t off_cpu_calls;   /* calls seen blocked off the CPU (the looks between drains) */
	uint64_t off_cpu_ns;      /* the time they were seen blocked (a lower bound) */
};

struct xb_lc_run;
struct xb_longcalls {
	uint64_t threshold_ns;    /* calls whose lower bound reaches it are kept */
	struct xb_lc_run *runs;   /* by thread index */
	struct xb_lc_stats *stats;
	size_t nthreads, cap;
	struct xb_long_call *calls;
	size_t ncalls, callcap;
	uint64_t out_of_order;    /* samples older than their thread's last: not used */
};

void xb_lc_init(struct xb_longcalls *lc, uint64_t threshold_ns);
void xb_lc_free(struct xb_longcalls *lc);
/* The next sample of thread THREAD (>= 0), in time order (one older than
 * the thread's last sample is counted in out_of_order and not used: the
 * samples used stay in order, so every bound still holds).  0, or -1 when
 * memory runs out. */
int xb_lc_add(struct xb_longcalls *lc, int thread, const struct xb_lc_sample *s);
/* A call found by other means than samples (a scheduler seen blocked
 * off the CPU in it, schedulers.c), its bounds measured by the caller:
 * kept when its lower bound reaches the threshold, counted in its
 * thread's stats.  0, or -1 when memory runs out. */
int xb_lc_add_call(struct xb_longcalls *lc, const struct xb_long_call *c);
/* Sampling stopped: close the open runs (no upper bound), merge a call
 * seen both on the CPU (samples) and off it (xb_lc_add_call) into one (the
 * same thread, process, function and identity: the same call; its lower
 * bound the span of both, its upper the tighter of the two), sort the
 * calls longest first (lower bound, then upper). */
void xb_lc_finish(struct xb_longcalls *lc);
const struct xb_lc_stats *xb_lc_stats_of(const struct xb_longcalls *lc, int thread);

#endif

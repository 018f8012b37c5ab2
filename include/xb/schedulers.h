/* schedulers.h - --schedulers and --long-calls (src/output/schedulers.c):
 * who ran where, and the NIF calls that held schedulers.
 *
 * Per scheduler (normal, dirty CPU, dirty I/O) over the sampling window:
 *   utilization     share of wall time on a CPU, from the kernel's
 *                   per-thread accounting (include/xb/threadcpu.h)
 *   runqueue_wait   share of wall time runnable but waiting for a CPU
 *                   (a busy machine; the VM's own clock counts it active)
 *   states          of its on-CPU samples, what it did (include/xb/states.h)
 *   top_processes   the processes seen on it, by share of its samples
 *   migrations      processes seen on it that were seen on another normal
 *                   scheduler before (in) or next (out)
 * then the long NIF/BIF calls on normal schedulers (include/xb/longcalls.h),
 * the processes seen on more than one normal scheduler, and per CPU the
 * share of its samples per scheduler thread (and the threads that moved
 * between CPUs).  --long-calls prints only the long calls and the
 * per-scheduler NIF summary.  As a table (text) or JSON (keys in erlang-sample(1), SCHEDULER REPORT). */
#ifndef XB_SCHEDULERS_H
#define XB_SCHEDULERS_H

#include "xb/sink.h"

#include <stdbool.h>
#include <stddef.h>

struct xb_sched_opts {
	bool json;
	bool long_calls_only; /* --long-calls */
	double long_calls_ms; /* --long-calls-ms: calls at least this long (lower bound) */
	size_t top;           /* rows of long calls, migrating processes */
};

struct xb_sink *xb_schedulers_sink_new(const struct xb_sched_opts *o);

#endif

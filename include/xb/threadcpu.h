/* threadcpu.h - a thread's CPU time from the kernel's own accounting
 * (src/base/threadcpu.c), for scheduler utilisation (--schedulers). */
#ifndef XB_THREADCPU_H
#define XB_THREADCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct xb_thread_cpu {
	uint64_t run_ns;  /* time on a CPU */
	uint64_t wait_ns; /* time runnable, waiting on a run queue for a CPU */
	bool have_wait;   /* from schedstat (else wait_ns is 0) */
	/* /proc/PID/task/TID/status: the thread gave up the CPU itself
	 * (slept, waited) or was preempted; a wait for a CPU follows either */
	uint64_t voluntary, involuntary;
	bool have_switches;
};

/* /proc/PID/task/TID/schedstat: "run_ns wait_ns timeslices" (the task's
 * sum_exec_runtime and run_delay in ns, fs/proc/base.c
 * proc_pid_schedstat); where the kernel has no schedstat, utime + stime
 * of /proc/PID/task/TID/stat (clock ticks, no wait time); and the
 * voluntary and involuntary context switches of .../status
 * (fs/proc/array.c task_context_switch_counts).  0, or -1 when the thread
 * is gone. */
int xb_thread_cpu_read(pid_t pid, pid_t tid, struct xb_thread_cpu *out);

#endif

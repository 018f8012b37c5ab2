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
	char state; /* status's State: 'R' running or runnable, 'S', 'D', ... (0: not read) */
};

/* /proc/PID/task/TID/schedstat: "run_ns wait_ns timeslices" (the task's
 * sum_exec_runtime and run_delay in ns, fs/proc/base.c
 * proc_pid_schedstat); where the kernel has no schedstat, utime + stime
 * of /proc/PID/task/TID/stat (clock ticks, no wait time); and the
 * voluntary and involuntary context switches of .../status
 * (fs/proc/array.c task_context_switch_counts).  0, or -1 when the thread
 * is gone. */
int xb_thread_cpu_read(pid_t pid, pid_t tid, struct xb_thread_cpu *out);

/* Is a thread asleep: not runnable when looked at, and its CPU time
 * grown by at most XB_ASLEEP_RUN_NS (a timer wake-up) over the last
 * XB_ASLEEP_NS?  Call it as often as
 * wanted with NOW (xb_now_ns) and a zeroed struct per thread: the first
 * call starts the window, /proc is read at most every XB_ASLEEP_POLL_NS.
 * False when the thread is gone or unreadable.  --pstack and --dump stop
 * waiting for a scheduler that sleeps for want of work. */
#define XB_ASLEEP_NS (100ull * 1000 * 1000)
#define XB_ASLEEP_RUN_NS (1ull * 1000 * 1000)
#define XB_ASLEEP_POLL_NS (20ull * 1000 * 1000)
struct xb_asleep {
	uint64_t run_ns;   /* CPU time when last seen to run */
	uint64_t since_ns; /* since when it has not (0: not looked at yet) */
	uint64_t checked_ns;
};
bool xb_thread_asleep(pid_t pid, pid_t tid, struct xb_asleep *a, uint64_t now);

#endif

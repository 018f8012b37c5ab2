/* tasks.h - the threads of a process (/proc/PID/task). */
#ifndef XB_TASKS_H
#define XB_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct xb_task {
	pid_t tid;
	char comm[17]; /* /proc/PID/task/TID/comm, without the newline ("" if unreadable) */
};

/* The threads of PID now, in *out (free it).  Returns the count, or -1
 * (xb_err) when the process is gone. */
int xb_tasks_list(pid_t pid, struct xb_task **out);
/* The name of thread TID of PID into buf; 0, or -1 when it is gone. */
int xb_task_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/* Is thread TID of PID blocked in a system call (asleep, off the CPU)?
 * Then its user stack pointer and pc there (/proc/PID/task/TID/syscall:
 * "NR ARGS... SP PC"; "running" when it runs, which is false).  Reading
 * it does not stop the thread. */
bool xb_task_blocked_at(pid_t pid, pid_t tid, uint64_t *sp, uint64_t *pc);

#endif

/* tasks.c - the threads of a process (/proc/PID/task). */
#define _GNU_SOURCE
#include "xb/tasks.h"
#include "xb/common.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int xb_task_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	char *comm = xb_slurp(path, NULL);
	if (!comm) {
		if (len)
			buf[0] = 0;
		return -1;
	}
	comm[strcspn(comm, "\n")] = 0;
	snprintf(buf, len, "%s", comm);
	free(comm);
	return 0;
}

int xb_tasks_list(pid_t pid, struct xb_task **out)
{
	*out = NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return xb_fail("process %d exited", (int)pid);
	struct dirent *de;
	size_t n = 0, cap = 0;
	while ((de = readdir(d))) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		if (*end || tid <= 0)
			continue;
		if (xb_grow((void **)out, &cap, n + 1, sizeof(**out)) < 0)
			break;
		struct xb_task *t = &(*out)[n++];
		t->tid = (pid_t)tid;
		xb_task_comm(pid, t->tid, t->comm, sizeof(t->comm));
	}
	closedir(d);
	return (int)n;
}

bool xb_task_blocked_at(pid_t pid, pid_t tid, uint64_t *sp, uint64_t *pc)
{
	char path[96], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	*sp = *pc = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* "NR ARGS... SP PC" in a system call; "-1 SP PC" blocked outside
	 * one (a page fault: not a call that waits); "running" */
	if (buf[0] < '0' || buf[0] > '9')
		return false;
	unsigned long long a = 0, b = 0;
	char *p = strrchr(buf, ' ');
	if (!p || sscanf(p, " %llx", &b) != 1)
		return false;
	*p = 0;
	char *q = strrchr(buf, ' ');
	if (!q || sscanf(q, " %llx", &a) != 1)
		return false;
	*sp = a;
	*pc = b;
	return a && b;
}


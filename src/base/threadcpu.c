/* threadcpu.c - a thread's CPU time from the kernel's accounting. */
#define _GNU_SOURCE
#include "xb/threadcpu.h"
#include "xb/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void read_status(pid_t pid, pid_t tid, struct xb_thread_cpu *out)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	char *text = xb_slurp(path, NULL);
	const char *st = text ? strstr(text, "\nState:") : NULL;
	char state;
	if (st && sscanf(st, "\nState: %c", &state) == 1)
		out->state = state;
	const char *v = text ? strstr(text, "\nvoluntary_ctxt_switches:") : NULL;
	const char *nv = text ? strstr(text, "\nnonvoluntary_ctxt_switches:") : NULL;
	unsigned long long a, b;
	if (v && nv && sscanf(v, "\nvoluntary_ctxt_switches: %llu", &a) == 1 &&
	    sscanf(nv, "\nnonvoluntary_ctxt_switches: %llu", &b) == 1) {
		out->voluntary = a;
		out->involuntary = b;
		out->have_switches = true;
	}
	free(text);
}

int xb_thread_cpu_read(pid_t pid, pid_t tid, struct xb_thread_cpu *out)
{
	char path[96];
	memset(out, 0, sizeof(*out));
	read_status(pid, tid, out);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	char *text = xb_slurp(path, NULL);
	unsigned long long run, wait;
	if (text && sscanf(text, "%llu %llu", &run, &wait) == 2) {
		free(text);
		out->run_ns = run;
		out->wait_ns = wait;
		out->have_wait = true;
		return 0;
	}
	free(text);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	text = xb_slurp(path, NULL);
	/* "tid (comm) state ppid ...": comm may hold spaces and parentheses;
	 * utime and stime are fields 14 and 15, the 12th and 13th after it. */
	char *p = text ? strrchr(text, ')') : NULL;
	unsigned long long ut, stt;
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) != 2) {
		free(text);
		return xb_fail("thread %d of %d: no CPU accounting", (int)tid, (int)pid);
	}
	free(text);
	long hz = sysconf(_SC_CLK_TCK);
	out->run_ns = (ut + stt) * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
	return 0;
}

bool xb_thread_asleep(pid_t pid, pid_t tid, struct xb_asleep *a, uint64_t now)
{
	if (a->since_ns && now - a->checked_ns < XB_ASLEEP_POLL_NS)
		return now - a->since_ns >= XB_ASLEEP_NS;
	struct xb_thread_cpu c;
	if (xb_thread_cpu_read(pid, tid, &c) != 0)
		return false;
	a->checked_ns = now;
	/* A runnable thread ('R': running or waiting for a CPU) is not
	 * asleep, whatever its CPU time did: one that spins but is kept off
	 * the CPUs by a saturated machine gains none (--pstack once gave up
	 * on the fixture's spinning scheduler after 0.2 s while three test
	 * shards loaded the 2 CPUs), and schedstat adds its wait only once
	 * it runs again. */
	if (!a->since_ns || c.state == 'R' || c.run_ns > a->run_ns + XB_ASLEEP_RUN_NS) {
		a->since_ns = now;
		a->run_ns = c.run_ns;
		return false;
	}
	return now - a->since_ns >= XB_ASLEEP_NS;
}

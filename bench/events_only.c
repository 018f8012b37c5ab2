/* events_only - the kernel's share of what erlang-sample costs a VM.
 *
 * Opens exactly the perf events erlang-sample opens (src/sampling/sampler.c,
 * same options as its defaults: cpu-clock at 997 Hz, registers and a 16 KiB
 * user-stack copy per sample, one event per VM thread, rings drained every
 * 5 ms as erlang-sample does for a JIT VM, --drain MS otherwise) and throws
 * every sample away: no unwinding, no reads of the VM.
 * bench/sample_bench.py runs it in windows interleaved with erlang-sample's,
 * so the difference between the two losses is what erlang-sample's own work
 * costs the VM, and this one's loss is the floor any sampler built on these
 * events pays on the machine.
 *
 *   events_only [-F HZ] [--user-stack BYTES] [--drain MS] -d SECONDS PID
 * prints "received N samples in S s" on stdout. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/sampler.h"
#include "xb/vm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ring sizes follow the thread kind, classified as erlang-sample does. */
static char thread_kind(const void *vm, const char *comm, int *no)
{
	return xb_vm_thread_kind(vm, comm, no);
}

static void drop(const struct xb_sample *s, void *arg)
{
	(void)s;
	(*(unsigned long long *)arg)++;
}

int main(int argc, char **argv)
{
	struct xb_vm vm;
	struct xb_sampler_opts o = { .freq = 997, .stack_bytes = 16384, .force_software = false,
				     .thread_kind = thread_kind, .thread_kind_arg = &vm };
	double dur = 0;
	int pid = 0, drain_ms = 5;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-F") == 0 && i + 1 < argc)
			o.freq = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--user-stack") == 0 && i + 1 < argc)
			o.stack_bytes = (uint32_t)atoi(argv[++i]);
		else if (strcmp(argv[i], "--drain") == 0 && i + 1 < argc)
			drain_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
			dur = atof(argv[++i]);
		else
			pid = atoi(argv[i]);
	}
	if (pid <= 0 || dur <= 0) {
		fprintf(stderr, "usage: events_only [-F HZ] [--user-stack BYTES] [--drain MS] -d SECONDS PID\n");
		return 2;
	}
	if (xb_vm_attach(&vm, pid) < 0) {
		fprintf(stderr, "events_only: %s\n", xb_err());
		return 1;
	}
	struct xb_sampler s;
	if (xb_sampler_open(&s, pid, &o) < 0) {
		fprintf(stderr, "events_only: %s\n", xb_err());
		xb_vm_detach(&vm);
		return 1;
	}
	unsigned long long n = 0;
	uint64_t t0 = xb_now_ns(), end = t0 + (uint64_t)(dur * 1e9);
	while (xb_now_ns() < end) {
		bool gone = false;
		if (xb_sampler_poll(&s, drain_ms, drop, &n, &gone) < 0 || gone)
			break;
		xb_sampler_scan_threads(&s, false);
	}
	printf("received %llu samples in %.3f s (%s)\n", n, (double)(xb_now_ns() - t0) * 1e-9,
	       s.event_name);
	xb_sampler_close(&s);
	xb_vm_detach(&vm);
	return 0;
}

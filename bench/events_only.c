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
 * --floor opens the cheapest sampling event there is instead: cpu-clock,
 * IP and TID only (no registers, no stack copy), on the normal scheduler
 * threads only.  Its loss is what the sampling interrupt itself costs the
 * VM on this machine, below which no perf_event sampler at this rate can go.
 *
 *   events_only [-F HZ] [--user-stack BYTES] [--drain MS] [--floor] -d SECONDS PID
 * prints "received N samples in S s" on stdout. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/sampler.h"
#include "xb/vm.h"

#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

enum { FLOOR_MAX = 64, FLOOR_PAGES = 16 };

struct floor_ev {
	int fd;
	struct perf_event_mmap_page *ring;
};

/* One IP-only cpu-clock event per normal scheduler thread. */
static int floor_open(const struct xb_vm *vm, unsigned freq, struct floor_ev *ev)
{
	struct xb_vm_thread *th;
	int nth = xb_vm_threads(vm, &th);
	int n = 0;
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < nth && n < FLOOR_MAX; i++) {
		if (th[i].kind != 's')
			continue;
		struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
					     .config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1,
					     .sample_freq = freq,
					     .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID,
					     .exclude_kernel = 1, .exclude_hv = 1, .watermark = 1,
					     .wakeup_watermark = (uint32_t)(FLOOR_PAGES * page / 2) };
		int fd = (int)syscall(SYS_perf_event_open, &a, th[i].tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			continue;
		void *r = mmap(NULL, (size_t)(1 + FLOOR_PAGES) * (size_t)page, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, 0);
		if (r == MAP_FAILED) {
			close(fd);
			continue;
		}
		ev[n].fd = fd;
		ev[n++].ring = r;
	}
	free(th);
	return n;
}

static unsigned long long floor_drain(struct floor_ev *ev, int n)
{
	unsigned long long got = 0;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t size = (uint64_t)FLOOR_PAGES * (uint64_t)page;
	for (int i = 0; i < n; i++) {
		uint64_t head = __atomic_load_n(&ev[i].ring->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = ev[i].ring->data_tail;
		const uint8_t *base = (const uint8_t *)ev[i].ring + page;
		while (tail < head) {
			struct perf_event_header h;
			/* Headers are 8-byte aligned records; one never wraps. */
			memcpy(&h, base + tail % size, sizeof(h));
			if (h.size == 0)
				break;
			got += h.type == PERF_RECORD_SAMPLE;
			tail += h.size;
		}
		__atomic_store_n(&ev[i].ring->data_tail, head, __ATOMIC_RELEASE);
	}
	return got;
}

static int run_floor(const struct xb_vm *vm, pid_t pid, unsigned freq, double dur, int drain_ms)
{
	struct floor_ev ev[FLOOR_MAX];
	int n = floor_open(vm, freq, ev);
	if (n == 0) {
		fprintf(stderr, "events_only: --floor opened no event on a scheduler thread of %d\n", (int)pid);
		return 1;
	}
	unsigned long long got = 0;
	uint64_t t0 = xb_now_ns(), end = t0 + (uint64_t)(dur * 1e9);
	while (xb_now_ns() < end) {
		usleep((useconds_t)drain_ms * 1000);
		got += floor_drain(ev, n);
	}
	got += floor_drain(ev, n);
	printf("received %llu samples in %.3f s (cpu-clock, IP only, %d scheduler thread%s)\n", got,
	       (double)(xb_now_ns() - t0) * 1e-9, n, n == 1 ? "" : "s");
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < n; i++) {
		munmap(ev[i].ring, (size_t)(1 + FLOOR_PAGES) * (size_t)page);
		close(ev[i].fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct xb_vm vm;
	struct xb_sampler_opts o = { .freq = 997, .stack_bytes = 16384, .force_software = false,
				     .thread_kind = thread_kind, .thread_kind_arg = &vm };
	double dur = 0;
	int pid = 0, drain_ms = 5;
	bool floor_mode = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-F") == 0 && i + 1 < argc)
			o.freq = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--user-stack") == 0 && i + 1 < argc)
			o.stack_bytes = (uint32_t)atoi(argv[++i]);
		else if (strcmp(argv[i], "--drain") == 0 && i + 1 < argc)
			drain_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--floor") == 0)
			floor_mode = true;
		else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
			dur = atof(argv[++i]);
		else
			pid = atoi(argv[i]);
	}
	if (pid <= 0 || dur <= 0) {
		fprintf(stderr, "usage: events_only [-F HZ] [--user-stack BYTES] [--drain MS] [--floor] -d SECONDS PID\n");
		return 2;
	}
	if (xb_vm_attach(&vm, pid) < 0) {
		fprintf(stderr, "events_only: %s\n", xb_err());
		return 1;
	}
	if (floor_mode) {
		int rc = run_floor(&vm, pid, o.freq, dur, drain_ms);
		xb_vm_detach(&vm);
		return rc;
	}
	struct xb_sampler s;
	if (xb_sampler_open(&s, pid, &o) < 0 || xb_sampler_enable(&s) < 0) {
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

/* sampler.h - stage 1: one perf_event per VM thread, sampling user
 * registers and a copy of the user stack.  Threads that appear later
 * (dirty schedulers, async threads) are picked up by rescanning
 * /proc/PID/task. */
#ifndef XB_SAMPLER_H
#define XB_SAMPLER_H

#include "xb/regs.h"
#include "xb/remote.h"

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define XB_MAX_KFRAMES 64

struct xb_sample {
	pid_t tid;
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t ip;
	bool user;        /* has user registers (not a kernel-only sample) */
	uint64_t regs[XB_PREG_COUNT];
	const uint8_t *stack; /* copy of [regs[SP], regs[SP] + stack_size) */
	uint64_t stack_size;
	uint64_t kips[XB_MAX_KFRAMES]; /* kernel frames, innermost first */
	unsigned nkips;
	int thread; /* index into sampler->threads */
	int cpu;    /* CPU the kernel recorded for the sample, -1 if unknown */
	/* Memory of the target captured at the moment of the sample: the user
	 * stack (regions[0], == stack/stack_size, when present) and, with BPF
	 * capture, the scheduler's current_process slot, the process struct
	 * and the top of its Erlang stack.  See xb_remote_set_overlay. */
	struct xb_region regions[XB_MAX_REGIONS];
	unsigned nregions;
	unsigned capture_faults; /* BPF: reads it could not make (page not resident) */
	bool bpf;                /* came through the BPF capture path */
};

typedef void (*xb_sample_cb)(const struct xb_sample *smp, void *arg);

struct xb_thread {
	pid_t tid;
	char comm[20];
	int fd;     /* its own event (-1 when it has per-CPU events, or none) */
	void *ring;
	size_t ring_size, data_size;
	int *cpu_fds; /* per-CPU events (xb_sampler_opts.percpu_kinds): one per
		       * entry of xb_sampler.cpus, writing to that CPU's ring */
	bool open;    /* has events (its own, or per-CPU) */
	bool dead;
	bool grow, grown; /* its small ring filled up: give it a big one (once) */
	uint64_t samples;
	int sched_no;   /* N of N_scheduler, N_dirty_cpu_sch, N_dirty_io_sche; else 0 */
	char kind;      /* 's' scheduler, 'c' dirty cpu, 'i' dirty io, 'o' other */
};

struct xb_sampler_opts {
	unsigned freq;        /* Hz (used when period == 0) */
	uint64_t period;      /* events between samples, 0 = use freq */
	uint32_t stack_bytes; /* user stack copy size */
	bool include_kernel;
	bool force_software;  /* skip the hardware cycles attempt */
	unsigned wakeup;      /* samples per wakeup; 0 = drain on a timer (default) */
	/* Classifies threads by name ('s', 'c', 'i', 'o'; see vm.h). */
	char (*thread_kind)(const void *arg, const char *comm, int *no);
	const void *thread_kind_arg;
	/* BPF capture (bpf_capture.h): a program attached to every event
	 * writes the samples to its own ring, so the events ask for no sample
	 * data and get small rings, which carry only LOST/THROTTLE records
	 * (xb_sampler_poll still counts them).  Excludes include_kernel. */
	bool bpf;
	/* Called once a thread's event is open (again after a re-open), with
	 * the thread's kind and number known: e.g. xb_bpf_attach.  -1 (with
	 * xb_fail) makes xb_sampler_open / _scan_threads fail; -2: this
	 * thread cannot be sampled (no room: counted unsampled, ENOSPC). */
	int (*attach)(void *arg, int fd, const struct xb_thread *t);
	/* At most this many threads with events (0: no limit but the fds'):
	 * the rest are counted unsampled (ENOSPC) without an event opened
	 * (e.g. BPF capture's thread map). */
	size_t max_threads;
	void *attach_arg;
	/* Called when a thread's event is closed for good (it exited): e.g.
	 * xb_bpf_detach_thread, so the BPF thread map does not grow. */
	void (*detach)(void *arg, pid_t tid);
	/* Threads of these kinds (e.g. "sci": the schedulers, which run
	 * Erlang code) get one event per CPU instead of one of their own,
	 * and each CPU's events write to one ring per CPU (cpus[]), woken
	 * at every sample, for a reader on that CPU (prompt.h) that must
	 * see each sample before the sampled thread runs on.  Those rings
	 * are not drained by xb_sampler_poll.  NULL: none.  Threads whose
	 * per-CPU events cannot all be opened (out of fds) get their own. */
	const char *percpu_kinds;
	/* The CPUs to open per-CPU events on (NULL: every online CPU). */
	const cpu_set_t *percpu_cpus;
};

/* One CPU's ring (per-CPU events): a dummy event of this process on that
 * CPU owns it, and every per-CPU event on that CPU writes into it
 * (PERF_EVENT_IOC_SET_OUTPUT). */
struct xb_cpu_ring {
	int cpu;
	int fd; /* the dummy event: poll it for data */
	void *ring;
	size_t ring_size, data_size;
	/* Counted by whoever drains the ring (another thread): */
	uint64_t lost, throttled;
};

struct xb_sampler {
	pid_t pid;
	struct xb_sampler_opts o;
	struct xb_thread *threads;
	size_t nthreads, cap;
	const char *event_name; /* "cycles" or "cpu-clock" */
	int event_type;
	uint64_t event_config;
	uint64_t lost, throttled, unthrottled, received;
	uint64_t rings_grown; /* small rings replaced by big ones (busy non-scheduler threads) */
	uint64_t last_scan_ns, last_full_drain_ns;
	/* Slots of exited threads are reused by new ones (a VM creating and
	 * ending threads for hours stays at its peak thread count); this
	 * changes whenever a slot's thread does, for index caches. */
	uint64_t generation;
	size_t nlive;
	uint64_t opened;  /* threads opened since the start */
	size_t free_hint; /* no free slot below this index */
	/* Threads that could not be sampled (no fd left, locked-memory
	 * limit, ...) at the last scan, and why: reported once by the tool. */
	size_t unsampled;
	int unsampled_errno;
	bool unsampled_reported;
	size_t unsampled_said; /* how many the warning said */
	uint8_t *scratch; /* record reassembly */
	size_t scratch_size;
	size_t page_size;
	int epfd;
	/* An fd held for the thread scan's opendir: with every fd taken by
	 * thread events it is closed to list the threads (so that new ones
	 * are seen and counted unsampled, not missed in silence), then taken
	 * again.  reserve_fd + 1 is stored, 0 meaning none. */
	int reserve_fd1;
	uint64_t fd_ceiling; /* thread events take fds below this (sampler.c FD_HEADROOM) */
	bool enabled; /* xb_sampler_enable was called: new events open enabled */
	struct xb_cpu_ring *cpus; /* per-CPU rings (percpu_kinds), ncpus of them */
	size_t ncpus;
	uint64_t percpu_fallbacks; /* threads of percpu_kinds given their own event */
};

int xb_sampler_open(struct xb_sampler *s, pid_t pid, const struct xb_sampler_opts *o);
/* Start sampling: every event is opened disabled (so nothing is lost
 * while the caller sets up); call right before the first poll. */
int xb_sampler_enable(struct xb_sampler *s);
/* Stop sampling (the run is over): what the rings hold can then be
 * drained to the end without more arriving.  Threads found later open
 * disabled. */
void xb_sampler_disable(struct xb_sampler *s);
void xb_sampler_close(struct xb_sampler *s);
/* Pick up new threads (rate-limited unless force).  Threads that cannot
 * be sampled are counted in s->unsampled; -1 only when none can be. */
int xb_sampler_scan_threads(struct xb_sampler *s, bool force);
/* Why s->unsampled threads could not be sampled, and how to fix it. */
const char *xb_sampler_unsampled_fix(const struct xb_sampler *s);
/* Wait up to timeout_ms for data, then call cb for every sample.  Returns
 * the number of samples delivered, or -1.  *all_gone is set when every
 * event has hung up (the process exited). */
int xb_sampler_poll(struct xb_sampler *s, int timeout_ms, xb_sample_cb cb, void *arg,
		    bool *all_gone);
/* Parse one PERF_RECORD_SAMPLE body (pure; exposed for unit tests). */
/* Samples the kernel lost and throttling records, the per-CPU rings' included. */
uint64_t xb_sampler_lost(const struct xb_sampler *s);
uint64_t xb_sampler_throttled(const struct xb_sampler *s);
/* Is thread T's kind one that gets per-CPU events? */
bool xb_sampler_percpu_kind(const struct xb_sampler *s, char kind);
/* Every record of a perf ring (data pages DATA of DATA_SIZE bytes, a power
 * of two, after the control page META) from its tail to its head: SAMPLE
 * records parsed and given to CB, LOST and THROTTLE counted.  SCRATCH
 * (SCRATCH_SIZE bytes) reassembles records that wrap.  Returns the samples
 * delivered.  Safe to call from any one thread per ring. */
struct xb_ring_counts {
	uint64_t received, lost, throttled, unthrottled;
	bool lost_seen, half_full;
};
int xb_ring_drain(void *meta, const uint8_t *data, uint64_t data_size, uint8_t *scratch, size_t scratch_size,
		  bool callchain, xb_sample_cb cb, void *arg, struct xb_ring_counts *c);
int xb_sampler_parse(const uint8_t *rec, size_t len, bool callchain, struct xb_sample *out);

#endif

/* sampler.c - perf_event_open(2) per thread, mmap ring buffers. */
#define _GNU_SOURCE
#include "xb/sampler.h"
#include "xb/common.h"
#include "xb/priv.h"

#include <dirent.h>
#include <linux/capability.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Data pages per thread (powers of two).  Scheduler threads do the work
 * and get room for ~30 samples of 16 KiB stack copies; the many other
 * threads mostly sleep.  Smaller rings are tried when the locked-memory
 * limit (perf_event_mlock_kb, RLIMIT_MEMLOCK) refuses a big one. */
#define RING_PAGES_BUSY 128
#define RING_PAGES_QUIET 16
#define RING_PAGES_BPF 2 /* LOST/THROTTLE records only: BPF writes the samples */
#define RESCAN_NS (100ull * 1000 * 1000)
/* File descriptors left to the tool itself when thread events would take
 * them all (a VM with more threads than the fd limit): the per-CPU
 * readers' epoll (prompt.c), symbol files libdwfl opens at a module's
 * first unwind, /proc/PID/maps at a code map refresh, a NIF library
 * loaded mid-run, the output file written at the end.  Without it, a
 * VM growing threads under a tight limit took the readers' fds before
 * they started (no scheduler sample read in 4 s, ASan build, saturated
 * machine) and left the native frames unnamed ("Too many open files"). */
#define FD_HEADROOM 16

/* x86-64 user registers we ask for: AX..IP and R8..R15 (perf_regs.h).
 * The segment registers are not available on x86-64. */
#define REGS_MASK ((((uint64_t)1 << (XB_PREG_IP + 1)) - 1) | ((uint64_t)0xff << XB_PREG_R8))

static long perf_event_open(struct perf_event_attr *a, pid_t tid, int cpu, int group,
			    unsigned long flags)
{
	return syscall(SYS_perf_event_open, a, tid, cpu, group, flags);
}

static void fill_attr(struct xb_sampler *s, struct perf_event_attr *a, size_t ring_pages, bool percpu)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = (uint32_t)s->event_type;
	a->config = s->event_config;
	if (s->o.period) {
		a->sample_period = s->o.period;
	} else {
		a->freq = 1;
		a->sample_freq = s->o.freq;
	}
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			 PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	if (s->o.bpf) {
		/* The BPF program reads the registers from its context (user
		 * registers only with exclude_kernel) and returns 0: nothing
		 * of the sample is written here. */
		a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
		a->exclude_kernel = 1;
	} else if (s->o.include_kernel) {
		a->sample_type |= PERF_SAMPLE_CALLCHAIN;
		a->exclude_callchain_user = 1;
	} else {
		a->exclude_kernel = 1;
	}
	a->exclude_hv = 1;
	if (!s->o.bpf) {
		a->sample_regs_user = REGS_MASK;
		a->sample_stack_user = s->o.stack_bytes;
	}
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	/* Two ways to learn about samples:
	 * - wakeup N: the kernel wakes us every N samples of a thread.  The
	 *   wakeup comes from the sampled CPU, and the scheduler likes to run
	 *   the woken task right there (wake-affine): at ~1 kHz that alone
	 *   cost a one-scheduler VM 5% of its throughput (bench/).
	 * - wakeup 0 (default): we drain every ring on our own timer
	 *   (s->o.drain_ms), and the kernel wakes us only if a ring is half
	 *   full.  Samples wait at most a drain interval. */
	/* - per-CPU events (percpu_kinds): every sample wakes the reader of
	 *   its CPU (prompt.c), which must see it before the sampled thread
	 *   runs on. */
	if (percpu) {
		a->wakeup_events = 1;
	} else if (s->o.wakeup) {
		a->wakeup_events = s->o.wakeup;
	} else {
		a->watermark = 1;
		a->wakeup_watermark = (uint32_t)(ring_pages * s->page_size / 2);
	}
	/* Events are opened disabled until the loop is about to drain them
	 * (xb_sampler_enable): a scheduler's ring holds ~30 ms of samples
	 * with their stack copies, and setting up after the open (libdwfl's
	 * tables, BPF attach) takes longer than that on a busy machine (the
	 * kernel lost 150-230 samples at every start, a fifth of a 1 s run).
	 * Threads found later are opened enabled. */
	a->disabled = !s->enabled;
}

/* FD, just opened for a thread's event, when it leaves the tool its
 * FD_HEADROOM; else closed, and -1 with errno EMFILE (the thread goes
 * unsampled, reported with how to raise the limit).  fds are handed out
 * lowest first, so the number says how many are taken. */
static int within_headroom(const struct xb_sampler *s, int fd)
{
	if (fd < 0 || (uint64_t)fd < s->fd_ceiling)
		return fd;
	close(fd);
	errno = EMFILE;
	return -1;
}

/* Open the event of thread TID with a ring of PAGES data pages (fewer
 * when the locked-memory limit refuses), registered in epoll as index IX. */
static int open_event(struct xb_sampler *s, pid_t tid, size_t pages, size_t ix, int *fdp,
		      void **ringp, size_t *lenp)
{
	struct perf_event_attr a;
	size_t len = 0;
	fill_attr(s, &a, pages, false);
	int fd = within_headroom(s, (int)perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
	if (fd < 0)
		return -errno;
	void *ring = MAP_FAILED;
	for (; pages >= 2 && ring == MAP_FAILED; pages /= 2) {
		len = (1 + pages) * s->page_size;
		ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	}
	if (ring == MAP_FAILED) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = ix };
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		munmap(ring, len);
		close(fd);
		return -e;
	}
	*fdp = fd;
	*ringp = ring;
	*lenp = len;
	return 0;
}

static void forget_thread(struct xb_sampler *s, struct xb_thread *t);

/* Thread TID's events on every CPU of s->cpus, each writing into that
 * CPU's ring; 0, or -errno with none left open. */
static int open_percpu(struct xb_sampler *s, pid_t tid, int **fdsp)
{
	struct perf_event_attr a;
	fill_attr(s, &a, 0, true);
	int *fds = malloc(s->ncpus * sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	for (size_t k = 0; k < s->ncpus; k++) {
		int fd = within_headroom(s, (int)perf_event_open(&a, tid, s->cpus[k].cpu, -1,
								 PERF_FLAG_FD_CLOEXEC));
		int e = fd < 0 ? -errno : 0;
		if (fd >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, s->cpus[k].fd) < 0) {
			e = -errno;
			close(fd);
		}
		if (e < 0) {
			while (k--)
				close(fds[k]);
			free(fds);
			return e;
		}
		fds[k] = fd;
	}
	*fdsp = fds;
	return 0;
}

bool xb_sampler_percpu_kind(const struct xb_sampler *s, char kind)
{
	return s->ncpus && s->o.percpu_kinds && kind != 0 && strchr(s->o.percpu_kinds, kind);
}

static int open_thread(struct xb_sampler *s, pid_t tid)
{
	/* The slot of a thread that exited, else a new one. */
	size_t ix = s->nthreads;
	for (size_t i = s->free_hint; i < s->nthreads; i++)
		if (s->threads[i].dead && !s->threads[i].open) {
			ix = i;
			break;
		}
	if (ix == s->nthreads && xb_grow((void **)&s->threads, &s->cap, s->nthreads + 1, sizeof(*s->threads)) < 0)
		return -ENOMEM;
	char comm[20] = "", path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)s->pid, (int)tid);
	char *c = xb_slurp(path, NULL);
	if (c) {
		c[strcspn(c, "\n")] = 0;
		snprintf(comm, sizeof(comm), "%s", c);
		free(c);
	}
	int sched_no = 0;
	char kind = s->o.thread_kind ? s->o.thread_kind(s->o.thread_kind_arg, comm, &sched_no) : 'o';
	if (s->o.max_threads && s->nlive >= s->o.max_threads)
		return -ENOSPC; /* no room (BPF's thread map): unsampled, counted */
	int fd = -1, *cpu_fds = NULL;
	void *ring = NULL;
	size_t len = 0;
	int e = -1;
	if (xb_sampler_percpu_kind(s, kind)) {
		e = open_percpu(s, tid, &cpu_fds);
		if (e < 0 && e != -ESRCH)
			s->percpu_fallbacks++; /* out of fds: its own event, drained here */
	}
	if (!cpu_fds) {
		size_t pages = s->o.bpf ? RING_PAGES_BPF : kind != 'o' ? RING_PAGES_BUSY : RING_PAGES_QUIET;
		e = open_event(s, tid, pages, ix, &fd, &ring, &len);
		if (e < 0)
			return e;
	}
	if (ix == s->nthreads)
		s->nthreads++;
	s->free_hint = ix + 1;
	s->generation++;
	s->nlive++;
	s->opened++;
	struct xb_thread *t = &s->threads[ix];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->fd = fd;
	t->ring = ring;
	t->ring_size = len;
	t->data_size = len ? len - s->page_size : 0;
	t->cpu_fds = cpu_fds;
	t->open = true;
	memcpy(t->comm, comm, sizeof(t->comm));
	t->kind = kind;
	t->sched_no = sched_no;
	int a = s->o.attach ? s->o.attach(s->o.attach_arg, fd, t) : 0;
	if (a < 0) {
		forget_thread(s, t);
		t->dead = true;
		s->opened--;
		/* -2: no room for it (counted unsampled); else xb_err() says why */
		return a == -2 ? -ENOSPC : -ECANCELED;
	}
	return 0;
}

static void forget_thread(struct xb_sampler *s, struct xb_thread *t)
{
	if (!t->open)
		return;
	if (t->ring) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, t->fd, NULL);
		munmap(t->ring, t->ring_size);
		close(t->fd);
	}
	if (t->cpu_fds) {
		for (size_t k = 0; k < s->ncpus; k++)
			close(t->cpu_fds[k]);
		free(t->cpu_fds);
	}
	t->cpu_fds = NULL;
	t->open = false;
	t->ring = NULL;
	t->fd = -1;
	s->generation++;
	if (s->nlive)
		s->nlive--;
	size_t ix = (size_t)(t - s->threads);
	if (ix < s->free_hint)
		s->free_hint = ix;
}

/* A thread that exited: its event closed, its slot free for a new one. */
static void thread_gone(struct xb_sampler *s, struct xb_thread *t)
{
	forget_thread(s, t);
	t->dead = true;
	if (s->o.detach)
		s->o.detach(s->o.attach_arg, t->tid);
}

static int try_event(struct xb_sampler *s, int type, uint64_t config, const char *name)
{
	s->event_type = type;
	s->event_config = config;
	s->event_name = name;
	struct perf_event_attr a;
	fill_attr(s, &a, RING_PAGES_QUIET, false);
	int fd = (int)perf_event_open(&a, s->pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* The kernel refused a perf event for TID: say which privilege is
 * missing.  Sampling another user's process needs ptrace access to it
 * (CAP_SYS_PTRACE); kernel frames (--include-kernel) need CAP_PERFMON or
 * kernel.perf_event_paranoid <= 1, user space alone paranoid <= 2. */
static int perf_perm_error(struct xb_sampler *s, pid_t tid)
{
	bool ptrace = geteuid() == 0 || xb_have_cap(CAP_SYS_PTRACE);
	bool perfmon = geteuid() == 0 || xb_have_cap(CAP_PERFMON) || xb_have_cap(CAP_SYS_ADMIN);
	int paranoid = xb_perf_event_paranoid();
	if (s->o.include_kernel && !perfmon && paranoid > 1)
		return xb_fail("permission denied opening perf events on %d: kernel frames "
			       "(--include-kernel) need CAP_PERFMON (or kernel.perf_event_paranoid <= 1, it is %d); "
			       "drop --include-kernel or give this tool CAP_PERFMON", (int)tid, paranoid);
	if (!perfmon && paranoid > 2)
		return xb_fail("permission denied opening perf events on %d: kernel.perf_event_paranoid is "
			       "%d; give this tool CAP_PERFMON or set it to 2 or lower", (int)tid, paranoid);
	if (!ptrace)
		return xb_fail("permission denied opening perf events on %d: this tool lacks "
			       "CAP_SYS_PTRACE (ptrace access to the VM); run as root, as the VM's user, or "
			       "give it CAP_SYS_PTRACE", (int)tid);
	return xb_fail("permission denied opening perf events on %d even with %s: a security module "
		       "or the VM's namespace forbids it", (int)tid, geteuid() == 0 ? "root" : "CAP_SYS_PTRACE");
}

/* Per-CPU rings: on each CPU a dummy software event of this thread
 * (pid 0: it never samples) owns a ring; per-CPU events of the VM's
 * threads on that CPU are redirected into it. */
static int open_cpu_rings(struct xb_sampler *s)
{
	cpu_set_t online;
	if (s->o.percpu_cpus) {
		online = *s->o.percpu_cpus;
	} else {
		CPU_ZERO(&online);
		long n = sysconf(_SC_NPROCESSORS_CONF);
		for (long c = 0; c < n && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &online); /* offline ones fail below */
	}
	size_t n = (size_t)CPU_COUNT(&online);
	s->cpus = calloc(n ? n : 1, sizeof(*s->cpus));
	if (!s->cpus)
		return xb_fail("out of memory");
	for (int c = 0; c < CPU_SETSIZE && s->ncpus < n; c++) {
		if (!CPU_ISSET(c, &online))
			continue;
		struct perf_event_attr a;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_SOFTWARE;
		a.config = PERF_COUNT_SW_DUMMY;
		a.exclude_kernel = 1;
		a.exclude_hv = 1;
		a.use_clockid = 1; /* the clock of the events writing here */
		a.clockid = CLOCK_MONOTONIC;
		int fd = (int)perf_event_open(&a, 0, c, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			continue; /* CPU offline */
		void *ring = MAP_FAILED;
		size_t len = 0;
		for (size_t pages = RING_PAGES_BUSY; pages >= 2 && ring == MAP_FAILED; pages /= 2) {
			len = (1 + pages) * s->page_size;
			ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		}
		if (ring == MAP_FAILED) {
			int e = errno;
			close(fd);
			return xb_fail("cannot map a per-CPU sample ring: %s", strerror(e));
		}
		s->cpus[s->ncpus++] = (struct xb_cpu_ring){ .cpu = c, .fd = fd, .ring = ring, .ring_size = len,
							     .data_size = len - s->page_size };
	}
	if (!s->ncpus)
		return xb_fail("no CPU to sample on");
	return 0;
}

int xb_sampler_open(struct xb_sampler *s, pid_t pid, const struct xb_sampler_opts *o)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->o = *o;
	s->page_size = (size_t)sysconf(_SC_PAGESIZE);
	/* thread events stop FD_HEADROOM short of the soft limit (the tool
	 * raised it to the hard limit first) */
	struct rlimit rl;
	s->fd_ceiling = UINT64_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		s->fd_ceiling = rl.rlim_cur > 2 * FD_HEADROOM ? rl.rlim_cur - FD_HEADROOM : rl.rlim_cur / 2;
	if (s->o.stack_bytes > 65528)
		return xb_fail("--user-stack %u is too large: the kernel copies at most 65528 bytes",
			       s->o.stack_bytes);
	s->o.stack_bytes &= ~7u;
	if (s->o.bpf && s->o.include_kernel)
		return xb_fail("kernel stacks cannot be sampled with BPF capture (its events exclude the kernel)");
	/* Hardware cycles where a PMU exists; a software CPU clock where it
	 * does not (most cloud VMs). */
	int e = s->o.force_software ? -ENOENT : try_event(s, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles");
	if (e < 0 && e != -EACCES && e != -EPERM)
		e = try_event(s, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "cpu-clock");
	if (e == -EACCES || e == -EPERM)
		return perf_perm_error(s, pid);
	if (e == -ESRCH)
		return xb_fail("process %d exited", (int)pid);
	if (e < 0)
		return xb_fail("perf_event_open failed on process %d: %s", (int)pid, strerror(-e));
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return xb_fail("epoll_create1: %m");
	if (s->o.percpu_kinds && !s->o.bpf && open_cpu_rings(s) < 0)
		return -1;
	s->scratch_size = 65536 + 4096;
	s->scratch = malloc(s->scratch_size + 8);
	if (!s->scratch)
		return xb_fail("out of memory");
	return xb_sampler_scan_threads(s, true);
}

int xb_sampler_enable(struct xb_sampler *s)
{
	s->enabled = true;
	size_t failed = 0;
	for (size_t i = 0; i < s->nthreads; i++) {
		struct xb_thread *t = &s->threads[i];
		if (t->dead || !t->open)
			continue;
		if (t->fd >= 0 && ioctl(t->fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
			failed++;
		for (size_t k = 0; t->cpu_fds && k < s->ncpus; k++)
			if (ioctl(t->cpu_fds[k], PERF_EVENT_IOC_ENABLE, 0) < 0) {
				failed++;
				break;
			}
	}
	if (failed && failed == s->nlive)
		return xb_fail("PERF_EVENT_IOC_ENABLE failed on every thread: %m");
	return 0;
}

void xb_sampler_disable(struct xb_sampler *s)
{
	s->enabled = false;
	for (size_t i = 0; i < s->nthreads; i++) {
		struct xb_thread *t = &s->threads[i];
		if (t->dead || !t->open)
			continue;
		if (t->fd >= 0)
			ioctl(t->fd, PERF_EVENT_IOC_DISABLE, 0);
		for (size_t k = 0; t->cpu_fds && k < s->ncpus; k++)
			ioctl(t->cpu_fds[k], PERF_EVENT_IOC_DISABLE, 0);
	}
}

void xb_sampler_close(struct xb_sampler *s)
{
	for (size_t i = 0; i < s->nthreads; i++)
		forget_thread(s, &s->threads[i]);
	for (size_t k = 0; k < s->ncpus; k++) {
		munmap(s->cpus[k].ring, s->cpus[k].ring_size);
		close(s->cpus[k].fd);
	}
	free(s->cpus);
	free(s->threads);
	free(s->scratch);
	if (s->epfd > 0)
		close(s->epfd);
	if (s->reserve_fd1 > 0)
		close(s->reserve_fd1 - 1);
	memset(s, 0, sizeof(*s));
}

/* The live threads' tids, for the scan (open addressing). */
static int32_t *live_set(const struct xb_sampler *s, size_t *capp)
{
	size_t cap = 64;
	while (cap < s->nthreads * 2)
		cap *= 2;
	int32_t *m = malloc(cap * sizeof(*m));
	if (!m)
		return NULL;
	for (size_t i = 0; i < cap; i++)
		m[i] = 0;
	for (size_t i = 0; i < s->nthreads; i++) {
		if (s->threads[i].dead)
			continue;
		size_t h = ((uint32_t)s->threads[i].tid * 2654435761u) & (cap - 1);
		while (m[h])
			h = (h + 1) & (cap - 1);
		m[h] = s->threads[i].tid;
	}
	*capp = cap;
	return m;
}

static bool in_set(const int32_t *m, size_t cap, pid_t tid)
{
	for (size_t h = ((uint32_t)tid * 2654435761u) & (cap - 1); m[h]; h = (h + 1) & (cap - 1))
		if (m[h] == tid)
			return true;
	return false;
}

/* Threads with per-CPU events whose tid is not among LISTED exited. */
static void forget_unlisted(struct xb_sampler *s, const int32_t *listed, size_t n)
{
	size_t cap = 64;
	while (cap < n * 2)
		cap *= 2;
	int32_t *m = calloc(cap, sizeof(*m));
	if (!m)
		return; /* next time */
	for (size_t i = 0; i < n; i++) {
		size_t h = ((uint32_t)listed[i] * 2654435761u) & (cap - 1);
		while (m[h])
			h = (h + 1) & (cap - 1);
		m[h] = listed[i];
	}
	for (size_t i = 0; i < s->nthreads; i++) {
		struct xb_thread *t = &s->threads[i];
		if (!t->dead && t->cpu_fds && !in_set(m, cap, t->tid))
			thread_gone(s, t);
	}
	free(m);
}

int xb_sampler_scan_threads(struct xb_sampler *s, bool force)
{
	uint64_t now = xb_now_ns();
	if (!force && now - s->last_scan_ns < RESCAN_NS)
		return 0;
	s->last_scan_ns = now;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->pid);
	if (s->reserve_fd1 == 0) /* given up at the last scan, or never had */
		s->reserve_fd1 = open("/dev/null", O_RDONLY | O_CLOEXEC) + 1;
	DIR *d = opendir(path);
	if (!d && (errno == EMFILE || errno == ENFILE) && s->reserve_fd1 > 0) {
		/* every fd taken (thread events): the reserve lists them */
		close(s->reserve_fd1 - 1);
		s->reserve_fd1 = 0;
		d = opendir(path);
	}
	if (!d) {
		int err = errno;
		if (err == EMFILE || err == ENFILE) {
			/* not even the reserve: new threads cannot be seen;
			 * say so (the unsampled report) rather than nothing */
			s->unsampled = s->unsampled ? s->unsampled : 1;
			s->unsampled_errno = err;
			return xb_fail("cannot list the threads of process %d: %s", (int)s->pid, strerror(err));
		}
		return xb_fail("process %d exited", (int)s->pid);
	}
	size_t setcap;
	int32_t *known = live_set(s, &setcap);
	if (!known) {
		closedir(d);
		return xb_fail("out of memory");
	}
	/* Threads with per-CPU events hang up no fd of their own (their
	 * events share a CPU's ring): those not listed any more exited. */
	int32_t *listed = NULL;
	size_t nlisted = 0, listed_cap = 0;
	struct dirent *de;
	int opened = 0;
	size_t unsampled = 0;
	int why = 0;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid > 0 && s->ncpus && xb_grow((void **)&listed, &listed_cap, nlisted + 1, sizeof(*listed)) == 0)
			listed[nlisted++] = tid;
		if (tid <= 0 || in_set(known, setcap, tid))
			continue; /* tids are reused: only live threads count */
		int r = open_thread(s, tid);
		if (r == 0) {
			opened++;
		} else if (r == -ECANCELED) {
			free(known);
			free(listed);
			closedir(d);
			return -1; /* the attach callback failed */
		} else if (r == -EACCES || r == -EPERM) {
			/* perf events refused (perf_event_paranoid, no
			 * capability), or the ring's locked memory
			 * (perf_event_mlock_kb, RLIMIT_MEMLOCK): an error when
			 * no thread could be opened, else this thread goes
			 * unsampled (reported) */
			if (s->nthreads == 0 || s->nlive == 0) {
				free(known);
				free(listed);
				closedir(d);
				return perf_perm_error(s, tid);
			}
			unsampled++;
			why = -r;
		} else if (r != -ESRCH && r != -ENOENT) {
			/* EMFILE, ENFILE, ENOMEM, ...: this thread goes unsampled
			 * (reported); ESRCH: it exited meanwhile, fine. */
			unsampled++;
			why = -r;
		}
	}
	free(known);
	closedir(d);
	if (s->ncpus)
		forget_unlisted(s, listed, nlisted);
	free(listed);
	s->unsampled = unsampled;
	if (unsampled)
		s->unsampled_errno = why;
	if (s->nlive == 0)
		return xb_fail("no threads of process %d could be sampled%s%s", (int)s->pid,
			       why ? ": " : "", why ? strerror(why) : "");
	return opened;
}

const char *xb_sampler_unsampled_fix(const struct xb_sampler *s)
{
	switch (s->unsampled_errno) {
	case EMFILE:
		return "out of file descriptors (one per thread): raise the hard limit (ulimit -Hn as root, "
		       "or LimitNOFILE= for a service)";
	case ENFILE:
		return "the system is out of file descriptors (fs.file-max)";
	case ENOSPC:
		return "more threads than BPF capture's thread map holds (sized from the file descriptor limit: "
		       "raise it with ulimit -n, or use --capture perf)";
	case EPERM:
	case EACCES:
	case ENOMEM:
		return "out of locked memory for the sample rings: raise kernel.perf_event_mlock_kb or "
		       "RLIMIT_MEMLOCK (ulimit -l)";
	default:
		return s->unsampled_errno ? strerror(s->unsampled_errno) : "unknown";
	}
}

int xb_sampler_parse(const uint8_t *p, size_t len, bool callchain, struct xb_sample *out)
{
	const uint8_t *end = p + len;
#define TAKE(dst, n)                                   \
	do {                                           \
		if ((size_t)(end - p) < (n))           \
			return -1;                     \
		memcpy((dst), p, (n));                 \
		p += (n);                              \
	} while (0)
	memset(out, 0, sizeof(*out));
	out->cpu = -1;
	uint32_t pidtid[2];
	TAKE(&out->ip, 8);
	TAKE(pidtid, 8);
	out->tid = (pid_t)pidtid[1];
	TAKE(&out->time_ns, 8);
	uint32_t cpu_res[2]; /* PERF_SAMPLE_CPU: { u32 cpu, res; } */
	TAKE(cpu_res, 8);
	out->cpu = (int)cpu_res[0];
	if (callchain) {
		uint64_t nr;
		TAKE(&nr, 8);
		if (nr > (uint64_t)(end - p) / 8)
			return -1;
		for (uint64_t i = 0; i < nr; i++) {
			uint64_t ip;
			TAKE(&ip, 8);
			if (ip >= PERF_CONTEXT_MAX)
				continue; /* context markers */
			if (out->nkips < XB_MAX_KFRAMES)
				out->kips[out->nkips++] = ip;
		}
	}
	uint64_t abi;
	TAKE(&abi, 8);
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		out->user = true;
		for (int r = 0; r < XB_PREG_COUNT; r++) {
			if (!(REGS_MASK & ((uint64_t)1 << r)))
				continue;
			TAKE(&out->regs[r], 8);
		}
	}
	uint64_t size;
	TAKE(&size, 8);
	if (size) {
		if (size > (size_t)(end - p) || (size_t)(end - p) - size < 8)
			return -1;
		const uint8_t *data = p;
		p += size;
		uint64_t dyn;
		TAKE(&dyn, 8);
		out->stack = data;
		out->stack_size = dyn < size ? dyn : size;
		if (out->stack_size && out->user) {
			out->regions[0] = (struct xb_region){ out->regs[XB_PREG_SP], out->stack_size, data };
			out->nregions = 1;
		}
	}
	return 0;
#undef TAKE
}

int xb_ring_drain(void *ring_meta, const uint8_t *data, uint64_t size, uint8_t *scratch, size_t scratch_size,
		  bool callchain, xb_sample_cb cb, void *arg, struct xb_ring_counts *c)
{
	struct perf_event_mmap_page *meta = ring_meta;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	int n = 0;
	if (head - tail > size / 2)
		c->half_full = true;
	while (tail < head) {
		struct perf_event_header hdr;
		for (size_t i = 0; i < sizeof(hdr); i++)
			((uint8_t *)&hdr)[i] = data[(tail + i) & (size - 1)];
		if (hdr.size < sizeof(hdr) || tail + hdr.size > head)
			break;
		if (hdr.size > scratch_size) {
			tail += hdr.size;
			continue;
		}
		uint64_t off = tail & (size - 1);
		const uint8_t *rec = data + off; /* parsed in place unless it wraps */
		if (off + hdr.size > size) {
			size_t first = (size_t)(size - off);
			memcpy(scratch, data + off, first);
			memcpy(scratch + first, data, hdr.size - first);
			rec = scratch;
		}
		const uint8_t *body = rec + sizeof(hdr);
		size_t blen = hdr.size - sizeof(hdr);
		switch (hdr.type) {
		case PERF_RECORD_SAMPLE: {
			struct xb_sample smp;
			c->received++;
			if (xb_sampler_parse(body, blen, callchain, &smp) == 0) {
				smp.thread = -1;
				cb(&smp, arg);
				n++;
			}
			break;
		}
		case PERF_RECORD_LOST: {
			uint64_t lost[2];
			if (blen >= 16) {
				memcpy(lost, body, 16);
				c->lost += lost[1];
			}
			c->lost_seen = true;
			break;
		}
		case PERF_RECORD_THROTTLE:
			c->throttled++;
			break;
		case PERF_RECORD_UNTHROTTLE:
			c->unthrottled++;
			break;
		default:
			break;
		}
		tail += hdr.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

struct thread_drain {
	struct xb_sampler *s;
	struct xb_thread *t;
	xb_sample_cb cb;
	void *arg;
};

static void thread_sample(const struct xb_sample *smp, void *arg)
{
	struct thread_drain *d = arg;
	struct xb_sample c = *smp;
	c.thread = (int)(d->t - d->s->threads);
	d->t->samples++;
	d->cb(&c, d->arg);
}

/* Drain one thread's ring; returns samples delivered. */
static int drain(struct xb_sampler *s, struct xb_thread *t, xb_sample_cb cb, void *arg)
{
	if (!t->ring)
		return 0; /* per-CPU events: a reader on each CPU drains */
	struct xb_ring_counts c = { 0 };
	struct thread_drain d = { s, t, cb, arg };
	int n = xb_ring_drain(t->ring, (uint8_t *)t->ring + s->page_size, t->data_size, s->scratch,
			      s->scratch_size, s->o.include_kernel, thread_sample, &d, &c);
	s->received += c.received;
	s->lost += c.lost;
	s->throttled += c.throttled;
	s->unthrottled += c.unthrottled;
	if ((c.half_full || c.lost_seen) && t->data_size < RING_PAGES_BUSY * s->page_size)
		t->grow = true;
	return n;
}

uint64_t xb_sampler_lost(const struct xb_sampler *s)
{
	uint64_t n = s->lost;
	for (size_t k = 0; k < s->ncpus; k++)
		n += __atomic_load_n(&s->cpus[k].lost, __ATOMIC_RELAXED);
	return n;
}

uint64_t xb_sampler_throttled(const struct xb_sampler *s)
{
	uint64_t n = s->throttled;
	for (size_t k = 0; k < s->ncpus; k++)
		n += __atomic_load_n(&s->cpus[k].throttled, __ATOMIC_RELAXED);
	return n;
}

/* A thread given a small ring (not a scheduler) turned out to be busy: a
 * NIF library's worker thread, a busy driver thread.  Its ring filled past
 * half between two drains or the kernel lost samples of it.  A ring cannot
 * grow, so its event is replaced by one with a scheduler-sized ring: the
 * old one is drained and closed first (the thread goes unsampled for the
 * microseconds in between, rather than sampled twice).  Once per thread. */
static void grow_ring(struct xb_sampler *s, size_t i, xb_sample_cb cb, void *arg)
{
	struct xb_thread *t = &s->threads[i];
	t->grow = false;
	if (t->grown || s->o.bpf)
		return; /* BPF: samples do not go through this ring */
	t->grown = true;
	drain(s, t, cb, arg);
	forget_thread(s, t);
	int fd;
	void *ring;
	size_t len;
	if (open_event(s, t->tid, RING_PAGES_BUSY, i, &fd, &ring, &len) < 0) {
		t->dead = true; /* exited meanwhile (or no memory: it stays unsampled) */
		if (s->o.detach)
			s->o.detach(s->o.attach_arg, t->tid);
		return;
	}
	s->nlive++;
	s->generation++;
	t->open = true;
	t->fd = fd;
	t->ring = ring;
	t->ring_size = len;
	t->data_size = len - s->page_size;
	s->rings_grown++;
	if (s->o.attach && s->o.attach(s->o.attach_arg, fd, t) < 0) {
		xb_debug("thread %d: %s\n", (int)t->tid, xb_err());
		thread_gone(s, t);
	}
}

int xb_sampler_poll(struct xb_sampler *s, int timeout_ms, xb_sample_cb cb, void *arg,
		    bool *all_gone)
{
	struct epoll_event ev[64];
	*all_gone = false;
	int r = epoll_wait(s->epfd, ev, 64, timeout_ms);
	if (r < 0 && errno != EINTR)
		return xb_fail("epoll_wait: %m");
	int n = 0;
	for (int k = 0; k < r; k++) {
		size_t i = (size_t)ev[k].data.u64;
		if (i >= s->nthreads || s->threads[i].dead)
			continue;
		struct xb_thread *t = &s->threads[i];
		n += drain(s, t, cb, arg);
		if (ev[k].events & (EPOLLHUP | EPOLLERR)) {
			/* The thread exited: its samples were drained above. */
			thread_gone(s, t);
		}
	}
	/* Every timeout's worth of time, drain every ring, whether or not it
	 * reached its wakeup threshold: busy rings must not keep quiet ones
	 * waiting (their samples would go stale). */
	uint64_t now = xb_now_ns();
	if (r == 0 || now - s->last_full_drain_ns >= (uint64_t)timeout_ms * 1000000ull) {
		s->last_full_drain_ns = now;
		for (size_t i = 0; i < s->nthreads; i++)
			if (!s->threads[i].dead)
				n += drain(s, &s->threads[i], cb, arg);
	}
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].grow && !s->threads[i].dead)
			grow_ring(s, i, cb, arg);
	*all_gone = s->nlive == 0;
	return n;
}

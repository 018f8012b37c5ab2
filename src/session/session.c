/* session.c - attach, sample, resolve, hand to the sinks. */
#define _GNU_SOURCE
#include "xb/session.h"
#include "xb/bpf_capture.h"
#include "xb/prompt.h"
#include "xb/common.h"
#include "xb/tasks.h"

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ---- skid histogram ---- */

static size_t skid_bucket(uint64_t us)
{
	if (us < 8)
		return (size_t)us;
	unsigned lg = 63u - (unsigned)__builtin_clzll(us); /* >= 3 */
	size_t b = (size_t)(lg - 2) * 8 + (size_t)((us >> (lg - 3)) & 7);
	return b < XB_SKID_BUCKETS ? b : XB_SKID_BUCKETS - 1;
}

/* Largest value of bucket B. */
static uint64_t skid_bucket_top(size_t b)
{
	if (b < 8)
		return b;
	unsigned lg = (unsigned)(b / 8) + 2;
	uint64_t sub = b % 8;
	return ((8 + sub + 1) << (lg - 3)) - 1;
}

void xb_skid_add(struct xb_skid *h, uint64_t us)
{
	h->n++;
	if (us > h->max_us)
		h->max_us = us;
	h->bucket[skid_bucket(us)]++;
}

uint64_t xb_skid_percentile(const struct xb_skid *h, double p)
{
	if (!h->n)
		return 0;
	uint64_t rank = (uint64_t)((p / 100.0) * (double)(h->n - 1) + 0.5) + 1, seen = 0;
	for (size_t b = 0; b < XB_SKID_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen >= rank) {
			uint64_t top = skid_bucket_top(b);
			return top < h->max_us ? top : h->max_us;
		}
	}
	return h->max_us;
}

/* ---- attach and start ---- */

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
	return (double)xb_now_ns() / 1e9;
}

int xb_session_attach(struct xb_session *s, pid_t pid, const struct xb_attach_opts *ao)
{
	memset(s, 0, sizeof(*s));
	s->cpu_before_s = cpu_s();
	int rc = xb_vm_attach_with(&s->vm, pid, ao);
	s->attached = true; /* detach frees what attach took, even on failure */
	return rc;
}

static char thread_kind(const void *vm, const char *comm, int *no)
{
	return xb_vm_thread_kind(vm, comm, no);
}

/* The drain loop must get the CPU soon after samples arrive even when the
 * machine is saturated (that is when production boxes are profiled), or
 * the live reads come late and stacks move on: SCHED_FIFO at the lowest
 * real-time priority, as `perf record --realtime` offers.  It sleeps in
 * epoll between drains.  A real-time thread that computes keeps a VM
 * thread off its CPU for as long as it computes (the no-pause test saw
 * 50 ms once per run: libdwfl loading a module's unwind tables at the
 * first sample), so the loop holds SCHED_FIFO only for bursts of at most
 * RT_BURST_NS per drain: past that, and around work that is not draining
 * (code map rebuilds, module refreshes, the reports), it runs at nice -10
 * like any other process (rt_lower), and takes SCHED_FIFO again when it
 * next sleeps (rt_raise).  Without CAP_SYS_NICE, nice -10; else as is. */
#define RT_BURST_NS (2ull * 1000 * 1000)

static void raise_priority(struct xb_session *s)
{
	s->priority_name = "normal";
	if (!s->o.realtime) {
		s->priority_name = "normal (--no-realtime)";
		return;
	}
	if (setpriority(PRIO_PROCESS, 0, -10) == 0)
		s->priority_name = "nice -10 (no CAP_SYS_NICE for SCHED_FIFO)";
	struct sched_param sp = { .sched_priority = 1 };
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0) {
		s->priority_name = "SCHED_FIFO 1 (bursts of 2 ms, then nice -10)";
		s->rt_ok = s->rt_on = true;
	}
}

/* Leave SCHED_FIFO (keeping nice -10) until the loop next sleeps. */
static void rt_lower(struct xb_session *s)
{
	if (!s->rt_on)
		return;
	struct sched_param sp = { .sched_priority = 0 };
	if (sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp) == 0)
		s->rt_on = false;
}

static void rt_raise(struct xb_session *s)
{
	s->burst_start_ns = 0;
	if (!s->rt_ok || s->rt_on)
		return;
	struct sched_param sp = { .sched_priority = 1 };
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0)
		s->rt_on = true;
}

/* Called as the loop works: past RT_BURST_NS since it woke, lower. */
static void rt_check(struct xb_session *s)
{
	if (!s->rt_on)
		return;
	uint64_t now = xb_now_ns();
	if (!s->burst_start_ns)
		s->burst_start_ns = now;
	else if (now - s->burst_start_ns > RT_BURST_NS) {
		rt_lower(s);
		s->rt_lowered++;
	}
}

/* The address of thread T's scheduler's current_process (0 for other
 * threads), for the BPF program to read at the moment of a sample; on a
 * dirty scheduler with XB_BPF_SLOT_DIRTY set (bpf_record.h). */
static uint64_t current_process_slot(struct xb_session *s, const struct xb_thread *t)
{
	uint64_t slot = xb_vm_current_process_slot(&s->vm, t->kind, t->sched_no);
	return slot && t->kind != 's' ? slot | XB_BPF_SLOT_DIRTY : slot;
}

static int attach_thread(void *arg, int fd, const struct xb_thread *t)
{
	struct xb_session *s = arg;
	if (s->bpf) /* XB_BPF_FULL (-2): the thread goes unsampled, counted */
		return xb_bpf_attach(s->bpf, fd, t->tid, current_process_slot(s, t));
	if (s->prompt && t->cpu_fds)
		xb_prompt_set_slot(s->prompt, t->tid, current_process_slot(s, t));
	return 0;
}

static void detach_thread(void *arg, pid_t tid)
{
	struct xb_session *s = arg;
	if (s->bpf)
		xb_bpf_detach_thread(s->bpf, tid);
	if (s->prompt)
		xb_prompt_set_slot(s->prompt, tid, 0);
}

/* What is copied at the moment of a sample (by the BPF program, or the
 * perf path's readers): -1 with xb_err when the release table lacks it. */
static int capture_cfg(struct xb_session *s, const struct xb_session_opts *o, struct xb_bpf_cfg *out)
{
	struct xb_vm *vm = &s->vm;
	/* The process struct up to the last field the stack walk reads
	 * (erlstack.c read_proc), not all of it. */
	static const enum xb_field proc_fields[] = { XB_F_PROC_ID, XB_F_PROC_REG, XB_F_PROC_HTOP,
						     XB_F_PROC_STOP, XB_F_PROC_HEAP, XB_F_PROC_HEND,
						     XB_F_PROC_FCALLS, XB_F_PROC_I, XB_F_PROC_CURRENT };
	int64_t hi = 0;
	for (size_t i = 0; i < XB_ARRAY_SIZE(proc_fields); i++)
		if (xb_off(vm, proc_fields[i]) + 8 > hi)
			hi = xb_off(vm, proc_fields[i]) + 8;
	/* and what read_proc_extra reads with it (--by, --schedulers): reds
	 * and u.initial, up to its arity */
	int64_t extra[] = { xb_off(vm, XB_F_PROC_REDS),
			    xb_off(vm, XB_F_PROC_INITIAL) >= 0 && xb_off(vm, XB_F_MFA_ARITY) >= 0
				    ? xb_off(vm, XB_F_PROC_INITIAL) + xb_off(vm, XB_F_MFA_ARITY) : -1 };
	for (size_t i = 0; i < XB_ARRAY_SIZE(extra); i++)
		if (extra[i] >= 0 && extra[i] + 8 > hi)
			hi = extra[i] + 8;
	int64_t size = xb_off(vm, XB_F_PROC_SIZE);
	if (size > 0 && hi > size)
		hi = size;
	if (hi <= 0 || hi > 1024 || xb_off(vm, XB_F_PROC_HEAP) < 0 || xb_off(vm, XB_F_PROC_HEND) < 0 ||
	    xb_off(vm, XB_F_PROC_STOP) < 0)
		return xb_fail("the release table lacks the process fields BPF capture copies");
	bool emu = vm->flavor == XB_FLAVOR_EMU;
	*out = (struct xb_bpf_cfg){
		.proc_size = (uint32_t)hi,
		.off_heap = (int32_t)xb_off(vm, XB_F_PROC_HEAP),
		.off_hend = (int32_t)xb_off(vm, XB_F_PROC_HEND),
		.off_stop = (int32_t)xb_off(vm, XB_F_PROC_STOP),
		.off_htop = (int32_t)xb_off(vm, XB_F_PROC_HTOP),
		.ustack_max = o->user_stack,
		.estack_max = XB_BPF_ESTACK_BYTES,
		.estack_margin = XB_BPF_ESTACK_MARGIN,
		.pm_lo = emu ? vm->sym.process_main : 0,
		.pm_hi = emu && vm->sym.process_main ? vm->sym.process_main + vm->sym.process_main_size : 0,
		.E_reg = emu ? s->es.regs.E : -1,
		.E_alt_reg = emu ? s->es.regs.E : s->es.regs.E_saved,
	};
	return 0;
}

/* The VM's thread count now (/proc/PID/status Threads:), 0 if unknown. */
static unsigned long vm_threads(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *t = xb_slurp(path, NULL);
	const char *l = t ? strstr(t, "\nThreads:") : NULL;
	unsigned long n = l ? strtoul(l + 9, NULL, 10) : 0;
	free(t);
	return n;
}

/* Load the BPF capture program for this VM; -1 with xb_err saying why not.
 * Its thread map has room for as many threads as the fd limit allows: a
 * VM that has more already is sampled on the perf path (which counts the
 * threads it cannot open instead). */
static int open_bpf(struct xb_session *s, const struct xb_session_opts *o)
{
	struct xb_bpf_cfg cfg;
	if (o->include_kernel)
		return xb_fail("--include-kernel samples kernel frames, which only the perf path records");
	if (capture_cfg(s, o, &cfg) < 0)
		return -1;
	if (xb_bpf_open(&s->bpf, &cfg) < 0)
		return -1;
	unsigned long n = vm_threads(s->vm.pid);
	if (n > xb_bpf_max_threads(s->bpf)) {
		uint32_t max = xb_bpf_max_threads(s->bpf);
		xb_bpf_close(s->bpf);
		s->bpf = NULL;
		return xb_fail("the VM has %lu threads, more than BPF capture's thread map holds (%u, from the "
			       "file descriptor limit): raise it (ulimit -n) or use --capture perf", n, max);
	}
	return 0;
}

/* The perf path reads at the moment of the sample (prompt.h) when it may:
 * SCHED_FIFO allowed and not declined (--no-realtime), no --wakeup asked
 * for, and the copy configured as BPF's would be.  Else NULL-ed with
 * s->prompt_msg saying why, and the stacks are read live later. */
static bool want_prompt(struct xb_session *s, const struct xb_session_opts *o, struct xb_bpf_conf *conf)
{
	struct xb_bpf_cfg cfg;
	const char *why = NULL;
	if (o->perf_read_later)
		why = "--perf-read later";
	else if (!o->realtime)
		why = "--no-realtime";
	else if (o->wakeup_given)
		why = "--wakeup";
	else if (xb_prompt_usable() < 0 || capture_cfg(s, o, &cfg) < 0 ||
		 xb_bpf_make_conf(&cfg, 0, conf) < 0)
		why = xb_err();
	if (why)
		snprintf(s->prompt_msg, sizeof(s->prompt_msg), "stacks read live on a timer (%s)", why);
	return !why;
}

static int start(struct xb_session *s, const struct xb_session_opts *o);

int xb_session_start(struct xb_session *s, const struct xb_session_opts *o)
{
	int rc = start(s, o);
	/* The VM exiting while we start ends with one line that says so
	 * (a dying process's threads take a moment to be gone). */
	if (rc < 0 && s->vm.mem.pidfd >= 0 && !xb_interrupted)
		poll(&(struct pollfd){ .fd = s->vm.mem.pidfd, .events = POLLIN }, 1, 50);
	if (rc < 0 && !xb_remote_alive(&s->vm.mem)) {
		s->vm_exited = true;
		return xb_fail("the VM (PID %d) exited before sampling started", (int)s->vm.pid);
	}
	if (rc < 0 && xb_interrupted)
		return xb_fail("interrupted before sampling started");
	return rc;
}

static int start(struct xb_session *s, const struct xb_session_opts *o)
{
	s->o = *o;
	if (!xb_layout_take_codemap(&s->vm, &s->cm) && xb_codemap_build(&s->vm, &s->cm, XB_CM_FOLD_PROLOGUE) < 0)
		return xb_fail("cannot read the VM's code tables: %s", xb_err());
	xb_estate_init(&s->es, &s->vm, &s->cm, o->max_depth);
	s->es.want_identity = o->want_identity;
	s->es.keep_old_maps = o->keep_old_maps;
	if (o->force_reg[0] >= 0)
		s->es.regs.c_p = o->force_reg[0];
	if (o->force_reg[1] >= 0)
		s->es.regs.E = o->force_reg[1];
	if (o->force_reg[2] >= 0)
		s->es.regs.I = o->force_reg[2];
	s->started = true;
	if (xb_unwinder_init(&s->uw, &s->vm.mem, &s->vm.syms, s->vm.beam->mod, s->vm.pid, xb_estate_is_erlang_pc,
			     &s->es, o->max_depth) < 0)
		return -1;
	xb_profile_init(&s->prof);
	xb_frames_init(&s->fr, &s->vm, &s->cm, &s->prof, o->include_kernel);
	/* How often the rings are drained.  The interpreter's Erlang stack
	 * is read live, so the delay from sample to read (skid) decides how
	 * many stacks moved meanwhile: 2 ms.  The JIT's is in the sample's
	 * own stack copy and only deep stacks are read live: 5 ms, which
	 * halves the sampler's wakeups (most of its CPU per sample, bench/)
	 * and stays well inside the 10 ms skid bound. */
	s->drain_ms = s->vm.flavor == XB_FLAVOR_JIT && !o->keep_old_maps ? 5 : 2;
	/* Capture: BPF where the kernel allows it (the whole state a stack
	 * walk needs, copied at the moment of the sample), else perf (the
	 * registers and user stack; the process and its stack read live a
	 * moment later). */
	s->capture_name = "perf";
	s->capture_why = "--capture perf";
	if (o->capture != XB_CAPTURE_PERF) {
		if (open_bpf(s, o) == 0) {
			s->capture_name = "bpf";
			s->capture_why = NULL;
		} else if (o->capture == XB_CAPTURE_BPF) {
			return xb_fail("--capture bpf: %s", xb_err());
		} else {
			snprintf(s->capture_msg, sizeof(s->capture_msg), "BPF not used: %s", xb_err());
			s->capture_why = s->capture_msg;
		}
	}
	/* How samples are read: the rings are drained on a timer (every 2 ms
	 * from an interpreter, 5 ms from a JIT, 10 ms with BPF capture,
	 * whose state is already captured), not woken per sample.  Woken per
	 * sample, the perf path would read a process's stack sooner, but the
	 * sampler would preempt the sampled thread right after each of its
	 * samples (sample_bench's predecessor: 5 % -> 2 % throughput loss
	 * when the timer replaced per-sample wakeups; a 75/25 split once
	 * measured 64/36 woken per sample, though bench/drain_bench.py saw no
	 * such shift on a saturated machine), and reading sooner does not give
	 * a broker's stacks their callers (drain_bench: callers unknown 0.9x).
	 * --wakeup N asks for it anyway. */
	unsigned wakeup = o->wakeup_given ? o->wakeup : 0;
	/* The perf path: read each sample's process at the moment of the
	 * sample where we may (prompt.h), else live a drain interval later. */
	struct xb_bpf_conf pconf;
	bool prompt = false;
	if (!s->bpf) {
		if (o->include_kernel)
			snprintf(s->prompt_msg, sizeof(s->prompt_msg), "stacks read live on a timer (%s)",
				 "--include-kernel");
		else
			prompt = want_prompt(s, o, &pconf);
	}
	if (o->drain_given)
		s->drain_ms = o->drain_ms; /* --drain-ms */
	else if (o->drain_ms)
		s->drain_ms = o->drain_ms; /* --schedulers: live reads, and looks at
					    * blocked schedulers, within ~1 ms */
	else if (s->bpf || prompt)
		s->drain_ms = 10;
	s->wakeup = wakeup;
	/* Per-CPU events on the CPUs the VM may run on. */
	cpu_set_t vm_cpus;
	bool have_cpus = sched_getaffinity(s->vm.pid, sizeof(vm_cpus), &vm_cpus) == 0;
	struct xb_sampler_opts so = { .freq = o->freq, .period = o->period, .stack_bytes = o->user_stack,
				      .include_kernel = o->include_kernel, .force_software = o->software_event,
				      .wakeup = wakeup, .thread_kind = thread_kind, .thread_kind_arg = &s->vm,
				      .bpf = s->bpf != NULL, .attach = s->bpf || prompt ? attach_thread : NULL,
				      .detach = detach_thread, .attach_arg = s,
				      .max_threads = s->bpf ? xb_bpf_max_threads(s->bpf) : 0,
				      .percpu_kinds = prompt ? "sci" : NULL,
				      .percpu_cpus = have_cpus ? &vm_cpus : NULL };
	if (xb_sampler_open(&s->smp, s->vm.pid, &so) < 0)
		return -1;
	if (prompt && xb_prompt_start(&s->prompt, &s->smp, s->vm.pid, &pconf) < 0) {
		/* Readers could not start: per-thread events, read live. */
		snprintf(s->prompt_msg, sizeof(s->prompt_msg), "stacks read live on a timer (%s)", xb_err());
		xb_sampler_close(&s->smp);
		so.percpu_kinds = NULL;
		so.attach = NULL;
		prompt = false;
		s->drain_ms = o->drain_given || o->drain_ms ? s->drain_ms
			      : s->vm.flavor == XB_FLAVOR_JIT && !o->keep_old_maps ? 5 : 2;
		if (xb_sampler_open(&s->smp, s->vm.pid, &so) < 0)
			return -1;
	}
	if (s->prompt) {
		for (size_t i = 0; i < s->smp.nthreads; i++)
			if (!s->smp.threads[i].dead && s->smp.threads[i].cpu_fds)
				attach_thread(s, -1, &s->smp.threads[i]);
		snprintf(s->prompt_msg, sizeof(s->prompt_msg),
			 "reads at the moment of the sample: %zu SCHED_FIFO readers, one per CPU",
			 s->smp.ncpus);
	}
	if (!s->bpf) { /* capture_why: "--capture perf" or "BPF not used: ..." */
		char tmp[sizeof(s->capture_msg)];
		snprintf(tmp, sizeof(tmp), "%s; %s", s->capture_why, s->prompt_msg);
		memcpy(s->capture_msg, tmp, sizeof(tmp));
		s->capture_why = s->capture_msg;
	}
	s->events_opened_ns = xb_now_ns();
	if (s->bpf && epoll_ctl(s->smp.epfd, EPOLL_CTL_ADD, xb_bpf_fd(s->bpf),
				&(struct epoll_event){ .events = EPOLLIN, .data.u64 = UINT64_MAX }) < 0)
		return xb_fail("epoll_ctl: %s", strerror(errno));
	/* What libdwfl loads lazily at a module's first unwind or name
	 * (unwind tables, symbol tables), loaded now at normal priority
	 * rather than in the first drain. */
	xb_unwinder_prewarm(&s->uw);
	raise_priority(s);
	return 0;
}

void xb_session_add_sink(struct xb_session *s, struct xb_sink *k)
{
	if (s->nsinks < XB_ARRAY_SIZE(s->sinks))
		s->sinks[s->nsinks++] = k;
}

/* ---- one sample ---- */

static void on_sample(const struct xb_sample *smp, void *arg);

/* The sampler's index of thread TID (BPF records carry the tid only):
 * an open-addressing map, rebuilt when the sampler has new threads. */
static int thread_index(struct xb_session *s, pid_t tid)
{
	if (!s->tidmap || s->tidmap_n != s->smp.generation) {
		size_t cap = 64;
		while (cap < s->smp.nthreads * 2)
			cap *= 2;
		int32_t *m = malloc(cap * sizeof(*m));
		if (!m)
			return -1;
		for (size_t i = 0; i < cap; i++)
			m[i] = -1;
		for (size_t i = 0; i < s->smp.nthreads; i++) {
			if (s->smp.threads[i].dead)
				continue;
			size_t h = ((uint32_t)s->smp.threads[i].tid * 2654435761u) & (cap - 1);
			while (m[h] >= 0)
				h = (h + 1) & (cap - 1);
			m[h] = (int32_t)i;
		}
		free(s->tidmap);
		s->tidmap = m;
		s->tidmap_cap = cap;
		s->tidmap_n = s->smp.generation;
	}
	for (size_t h = ((uint32_t)tid * 2654435761u) & (s->tidmap_cap - 1);; h = (h + 1) & (s->tidmap_cap - 1)) {
		if (s->tidmap[h] < 0)
			return -1;
		if (s->smp.threads[s->tidmap[h]].tid == tid)
			return s->tidmap[h];
	}
}

static void on_bpf_sample(const struct xb_sample *smp, void *arg)
{
	struct xb_session *s = arg;
	struct xb_sample c = *smp;
	c.thread = thread_index(s, smp->tid);
	on_sample(&c, s);
}

static void on_sample(const struct xb_sample *smp, void *arg)
{
	struct xb_session *s = arg;
	struct xb_session_stats *st = &s->st;
	if (xb_interrupted)
		return; /* ^C: the loop ends after this drain; walks would stop short */
	st->received++;
	/* New code seen by an earlier sample: rebuild the map now, before
	 * this sample takes pointers into it (rate-limited). */
	rt_check(s);
	if (s->es.refresh_wanted) {
		rt_lower(s); /* tens of ms on a big system */
		xb_estate_refresh_code(&s->es, false);
	}
	if (!s->first_ns)
		s->first_ns = smp->time_ns;
	s->last_ns = smp->time_ns;
	if (!smp->user || smp->thread < 0 || (size_t)smp->thread >= s->smp.nthreads) {
		st->no_regs++;
		return;
	}
	const struct xb_thread *t = &s->smp.threads[smp->thread];
	struct xb_unwind uw;
	xb_unwind_sample(&s->uw, smp, &uw);
	if (s->uw.modules_changed != s->fr.modules_seen) {
		/* A module reported since: pcs cached as "[unknown]" may have
		 * a name now. */
		s->fr.modules_seen = s->uw.modules_changed;
		xb_frames_flush(&s->fr);
	}
	if (uw.stop == XB_UW_TRUNCATED) {
		st->truncated_unwind++;
		return;
	}
	struct xb_estack *es = &s->tmp_es;
	/* Reads of the VM's memory that the sample captured are answered
	 * from the capture (exact); the rest are read live. */
	xb_remote_set_overlay(&s->vm.mem, smp->regions, smp->nregions);
	xb_erlang_stack(&s->es, smp, &uw, t->kind, t->sched_no, es);
	xb_remote_set_overlay(&s->vm.mem, NULL, 0);
	st->depth_limited += uw.stop == XB_UW_DEPTH_LIMIT;
	if (es->status == XB_ES_BAD) {
		st->bad++;
		xb_debug("drop (tid %d ip %llx): %s\n", (int)smp->tid, (unsigned long long)smp->ip, es->why);
		if (xb_verbose >= 2) {
			char name[512], tag[300];
			for (unsigned k = 0; k < uw.n; k++) {
				xb_frames_native_name(&s->fr, uw.pcs[k], uw.activation[k], name, sizeof(name), tag,
						      sizeof(tag));
				xb_debug("    #%u %s %s\n", k, name, tag);
			}
			const struct xb_code *h = xb_codemap_find(&s->cm, uw.erlang_pc - !uw.erlang_pc_exact);
			xb_debug("    JIT/Erlang frame: %s at 0x%llx (regs valid 0x%x)\n", h ? h->name : "?", (unsigned long long)uw.erlang_pc, uw.regs_valid);
		}
		return;
	}
	if (es->status == XB_ES_STALE) {
		xb_debug("stale (tid %d ip %llx): %s\n", (int)smp->tid, (unsigned long long)smp->ip, es->why);
		st->stale++;
		return;
	}
	if (es->status == XB_ES_OK && es->live_read && es->read_ns) {
		uint64_t skid = es->read_ns > smp->time_ns ? es->read_ns - smp->time_ns : 0;
		xb_skid_add(&st->skid, skid / 1000);
		if ((double)skid > s->o.max_skid_ms * 1e6) {
			/* Read too late to trust what was read live: keep what
			 * the sample itself proves (its native frames and the
			 * exact Erlang frames) and mark the rest unknown. */
			es->n = es->nexact;
			es->truncated = false;
			es->partial = true;
			es->partial_cause = XB_PARTIAL_STALE;
			es->pid[0] = es->regname[0] = 0; /* identity was read late too */
			s->es.partial[XB_PARTIAL_STALE]++;
			st->downgraded_stale++;
		}
	} else if (es->status == XB_ES_OK || es->status == XB_ES_NO_PROCESS) {
		st->no_live_read += !es->live_read;
	}
	if (smp->capture_faults)
		st->capture_faults++;
	if (es->partial && xb_verbose >= 2)
		xb_debug("partial (tid %d ip %llx): %s\n", (int)smp->tid, (unsigned long long)smp->ip,
			 es->why ? es->why : "stack moved or process switched out");
	st->unresolved_frames += es->unresolved;
	st->truncated_erlang += es->truncated;
	st->processed++;

	uint32_t ids[XB_MAX_FRAMES], nnative;
	uint32_t n = xb_frames_ids(&s->fr, smp, &uw, es, ids, &nnative);
	/* --by: the group is the outermost frame (xb_frames_ids leaves a
	 * slot free: it keeps room for two marks and writes one). */
	if (s->o.by != XB_BY_NONE && n < XB_MAX_FRAMES && !s->o.sinks_only)
		ids[n++] = xb_by_group(s->o.by, &s->prof, &s->vm, smp, t, es);
	if (!s->o.sinks_only)
		xb_profile_add(&s->prof, ids, n, nnative);
	struct xb_rsample rs = { smp, t, &uw, es, ids, n, nnative };
	for (size_t i = 0; i < s->nsinks; i++)
		if (s->sinks[i]->ops->add)
			s->sinks[i]->ops->add(s->sinks[i], s, &rs);
}

/* ---- the loop ---- */

/* The sinks' started (STOPPED false) or stopped hooks. */
static void sinks_window(struct xb_session *s, bool stopped)
{
	for (size_t i = 0; i < s->nsinks; i++) {
		void (*hook)(struct xb_sink *, struct xb_session *) =
			stopped ? s->sinks[i]->ops->stopped : s->sinks[i]->ops->started;
		if (hook)
			hook(s->sinks[i], s);
	}
}

/* Threads we cannot sample (out of fds, locked memory): said once, with
 * how to fix it, when it first happens. */
static void report_unsampled(struct xb_session *s)
{
	if (!s->smp.unsampled || s->smp.unsampled_reported)
		return;
	s->smp.unsampled_reported = true;
	s->smp.unsampled_said = s->smp.unsampled;
	xb_warn(stderr, "%zu of the VM's threads cannot be sampled (%zu are): %s",
		s->smp.unsampled, s->smp.nlive, xb_sampler_unsampled_fix(&s->smp));
}

static bool sinks_done(struct xb_session *s)
{
	bool any = false;
	for (size_t i = 0; i < s->nsinks; i++) {
		if (!s->sinks[i]->ops->done)
			continue;
		if (!s->sinks[i]->ops->done(s->sinks[i], s))
			return false;
		any = true;
	}
	return any;
}

/* One call's worth of BPF records: the loop must come back to its checks
 * (the end of -d, ^C, the VM's exit, the live view's tick) even when the
 * program writes records faster than they are processed, as on a saturated
 * machine with a costly stack to walk (the hostile 64 GiB-stack fixture
 * under the soak: the run did not end in 60 s).  What is left in the ring
 * when the run ends is counted (xb_bpf_stats.unread) and reported. */
#define BPF_CONSUME_BUDGET_NS (20ull * 1000 * 1000)

int xb_session_run(struct xb_session *s, double seconds, volatile sig_atomic_t *stop)
{
	int rc = 0;
	s->start_s = now_s();
	s->start_unix_ns = xb_realtime_ns();
	report_unsampled(s);
	double cpu0 = cpu_s(), last_module_check = s->start_s, last_tick = s->start_s;
	s->cpu_before_s = cpu0;
	if (xb_sampler_enable(&s->smp) < 0)
		return -1;
	xb_debug("sampling starts %.1f ms after the events were opened\n",
		 (double)(xb_now_ns() - s->events_opened_ns) / 1e6);
	sinks_window(s, false);
	for (;;) {
		bool gone = false;
		rt_raise(s);
		if (xb_sampler_poll(&s->smp, s->wakeup ? 50 : (int)s->drain_ms, on_sample, s, &gone) < 0) {
			rc = -1;
			break;
		}
		if (s->bpf && xb_bpf_consume(s->bpf, on_bpf_sample, s, BPF_CONSUME_BUDGET_NS) < 0) {
			rc = -1;
			break;
		}
		if (s->prompt)
			xb_prompt_consume(s->prompt, on_bpf_sample, s);
		if (stop && *stop)
			break;
		if (gone || !xb_vm_alive(&s->vm)) {
			s->vm_exited = true;
			break;
		}
		double now = now_s();
		if (seconds > 0 && now - s->start_s >= seconds)
			break;
		if (sinks_done(s))
			break;
		for (size_t i = 0; i < s->nsinks; i++)
			if (s->sinks[i]->ops->poll)
				s->sinks[i]->ops->poll(s->sinks[i], s);
		/* A library unloaded and another mapped at its address shows
		 * no unknown pc: look for it every 250 ms, so its samples are
		 * not named from the old file for longer than that. */
		if (now - last_module_check >= 0.25) {
			last_module_check = now;
			rt_lower(s);
			xb_unwinder_refresh_modules(&s->uw);
		}
		if (now - last_tick >= 0.1) {
			last_tick = now;
			for (size_t i = 0; i < s->nsinks; i++)
				if (s->sinks[i]->ops->tick) {
					rt_lower(s); /* the live view renders */
					s->sinks[i]->ops->tick(s->sinks[i], s);
				}
		}
		rt_check(s);
		if (xb_sampler_scan_threads(&s->smp, false) < 0 && !xb_vm_alive(&s->vm)) {
			s->vm_exited = true;
			break;
		}
		report_unsampled(s);
	}
	s->elapsed_s = now_s() - s->start_s;
	if (rc == 0 && !(stop && *stop) && !s->vm_exited) {
		/* The run is over: stop the events and process what they took
		 * before it ended (up to one drain interval, on a busy machine
		 * more), so that a run's samples cover all of it; what a
		 * bounded last drain cannot process is counted as unread.  Not
		 * after ^C (it is honoured within 100 ms) nor when the VM is
		 * gone (its memory with it). */
		bool gone = false;
		s->drained_at_end = true;
		xb_sampler_disable(&s->smp);
		xb_sampler_poll(&s->smp, 0, on_sample, s, &gone);
		if (s->bpf)
			xb_bpf_consume(s->bpf, on_bpf_sample, s, 5 * BPF_CONSUME_BUDGET_NS);
		if (s->prompt)
			xb_prompt_consume(s->prompt, on_bpf_sample, s);
	}
	rt_lower(s); /* what follows is reporting, not draining */
	s->cpu_sampling_s = cpu_s() - cpu0;
	sinks_window(s, true);
	return rc;
}

/* ---- reports ---- */

/* Samples the kernel could not deliver: perf's lost records, and with BPF
 * capture the records its ring had no room for. */
static uint64_t lost_samples(const struct xb_session *s)
{
	struct xb_bpf_stats b = { 0 };
	struct xb_prompt_stats p;
	if (s->bpf)
		xb_bpf_stats(s->bpf, &b);
	xb_prompt_stats(s->prompt, &p);
	return xb_sampler_lost(&s->smp) + b.ring_full + p.queue_full;
}

void xb_session_report_stats(const struct xb_session *s, FILE *f)
{
	const struct xb_session_stats *st = &s->st;
	uint64_t lost = lost_samples(s);
	const uint64_t *pc = s->es.partial;
	uint64_t partial = pc[XB_PARTIAL_HEAP_MOVED] + pc[XB_PARTIAL_SWITCHED] + pc[XB_PARTIAL_UNREADABLE] +
			   pc[XB_PARTIAL_STALE];
	if (xb_verbose && s->es.roles_seen)
		xb_note(f, "register roles (c_p in %s, from %s): a process in %llu of %llu samples "
			   "that read it",
			s->es.regs.c_p >= 0 ? xb_preg_name(s->es.regs.c_p) : "the scheduler's data",
			s->vm.lay.origin ? s->vm.lay.origin : "?", (unsigned long long)s->es.roles_ok,
			(unsigned long long)s->es.roles_seen);
	/* The roles are the release table's (or the beam's DWARF): a VM whose
	 * code keeps c_p elsewhere gives no process through them. */
	if (s->es.roles_seen >= 200 && s->es.roles_ok * 2 < s->es.roles_seen)
		xb_warn(f, "the register that should hold the current process held one in "
			   "only %llu of %llu samples: this VM's register roles differ from %s's; its stacks are "
			   "cut to their innermost function (a layout from a build of this release with debug "
			   "info: --layout FILE)",
			(unsigned long long)s->es.roles_ok, (unsigned long long)s->es.roles_seen,
			s->vm.lay.origin ? s->vm.lay.origin : "the table");
	if (xb_verbose) {
		xb_say(f, "cpu: %.3f s before sampling, %.3f s while sampling = %.1f us per "
			   "processed sample",
			s->cpu_before_s, s->cpu_sampling_s,
			st->processed ? 1e6 * s->cpu_sampling_s / (double)st->processed : 0.0);
		xb_say(f, "%.2f s; received %llu, processed %llu; dropped: truncated unwind %llu, "
			   "failed validation %llu, process moved on %llu, too stale %llu, no registers %llu, "
			   "malformed %llu; "
			   "lost %llu, throttled %llu; rings enlarged %llu; unresolved stack words %llu; "
			   "code map refreshes %llu; "
			   "stack copy exhausted %llu; native stacks cut at the depth limit %llu; "
			   "innermost Erlang function only %llu (heap moved %llu, process switched out %llu, "
			   "unreadable %llu, read too late %llu); "
			   "no live read %llu; capture %s (faults %llu); drain loop %s, %llu bursts cut short; "
			   "module changes since attaching %llu; threads: %llu opened, %zu live, %zu slots, "
			   "%zu unsampled",
			s->elapsed_s, (unsigned long long)st->received, (unsigned long long)st->processed,
			(unsigned long long)st->truncated_unwind, (unsigned long long)st->bad,
			(unsigned long long)st->stale, (unsigned long long)st->too_stale,
			(unsigned long long)st->no_regs, (unsigned long long)st->malformed,
			(unsigned long long)lost, (unsigned long long)xb_sampler_throttled(&s->smp),
			(unsigned long long)s->smp.rings_grown, (unsigned long long)st->unresolved_frames,
			(unsigned long long)s->es.codemap_refreshes, (unsigned long long)s->uw.stack_misses,
			(unsigned long long)st->depth_limited, (unsigned long long)partial,
			(unsigned long long)pc[XB_PARTIAL_HEAP_MOVED], (unsigned long long)pc[XB_PARTIAL_SWITCHED],
			(unsigned long long)pc[XB_PARTIAL_UNREADABLE], (unsigned long long)pc[XB_PARTIAL_STALE],
			(unsigned long long)st->no_live_read, s->capture_name,
			(unsigned long long)st->capture_faults, s->priority_name,
			(unsigned long long)s->rt_lowered,
			(unsigned long long)s->uw.modules_changed, (unsigned long long)s->smp.opened, s->smp.nlive,
			s->smp.nthreads, s->smp.unsampled);
		if (s->prompt) {
			struct xb_prompt_stats p;
			xb_prompt_stats(s->prompt, &p);
			xb_say(f, "reads at the moment of the sample: %u readers, %llu samples, "
				   "%.1f us and %.2f reads each; %llu lost (the "
				   "queue to the drain loop was full); scheduler table of %llu, %llu had no room",
				p.readers, (unsigned long long)p.received,
				p.received ? (double)p.read_ns / 1e3 / (double)p.received : 0.0,
				p.received ? (double)p.syscalls / (double)p.received : 0.0,
				(unsigned long long)p.queue_full, (unsigned long long)p.slots,
				(unsigned long long)p.slot_full);
		}
	}
	if (s->prompt) {
		struct xb_prompt_stats p;
		xb_prompt_stats(s->prompt, &p);
		if (p.slot_full)
			xb_note(f, "%llu threads named as schedulers found no room in the "
				   "readers' table (%llu entries): their processes were read live, a moment after "
				   "each sample",
				(unsigned long long)p.slot_full, (unsigned long long)p.slots);
	}
	if (st->processed && partial * 10 > st->processed)
		xb_note(f, "%.0f%% of the samples name only their innermost Erlang "
			   "function (shown under '%s'): their process garbage collected, was switched "
			   "out or could not be read before its stack could be",
			100.0 * (double)partial / (double)st->processed, XB_CALLERS_UNKNOWN);
	if (lost && !xb_verbose)
		xb_warn(f, "the kernel lost %llu samples: the ring buffers filled between "
			   "drains (lower -F or --user-stack, or a shorter --drain-ms)",
			(unsigned long long)lost);
	struct xb_bpf_stats bs = { 0 };
	/* Samples left in the BPF ring: after the last drain, the drain loop
	 * could not keep up; when the VM exited, nothing is left to read
	 * them against (a note, not advice to lower -F: CI saw that advice
	 * on a VM killed during --pstack); after ^C they are left on purpose
	 * (it is honoured within 100 ms), and after an error the error says
	 * why the run ended. */
	if (s->bpf && xb_bpf_stats(s->bpf, &bs) == 0 && bs.unread) {
		if (s->drained_at_end)
			xb_warn(f, "%llu samples were still queued when the run ended: "
				   "processing them (%.0f us each) could not keep up with the sampling (lower -F)",
				(unsigned long long)bs.unread,
				st->processed ? 1e6 * s->cpu_sampling_s / (double)st->processed : 0.0);
		else if (s->vm_exited)
			xb_note(f, "%llu samples taken just before the VM exited were not "
				   "processed (its memory went with it)",
				(unsigned long long)bs.unread);
	}
	/* threads the VM made after the warning (one line when it first
	 * happened) that could not be sampled either */
	if (s->smp.unsampled_reported && s->smp.unsampled > s->smp.unsampled_said)
		xb_warn(f, "by the end, %zu of the VM's threads could not be sampled "
			   "(%zu were)", s->smp.unsampled, s->smp.nlive);
}

void xb_session_report_skid(const struct xb_session *s, FILE *f)
{
	const struct xb_session_stats *st = &s->st;
	const struct xb_skid *h = &st->skid;
	fprintf(f, "skid (sample -> VM memory read, us): p50 %llu  p90 %llu  p99 %llu  max %llu  "
		   "(%llu samples); discarded as too stale (> %.1f ms): %llu\n",
		(unsigned long long)xb_skid_percentile(h, 50), (unsigned long long)xb_skid_percentile(h, 90),
		(unsigned long long)xb_skid_percentile(h, 99), (unsigned long long)h->max_us,
		(unsigned long long)h->n, s->o.max_skid_ms, (unsigned long long)(st->stale + st->too_stale));
	fprintf(f, "capture %s: %llu of %llu processed samples needed no live read; %llu read live "
		   "later than %.1f ms kept only the frames the sample proves\n",
		s->capture_name, (unsigned long long)st->no_live_read, (unsigned long long)st->processed,
		(unsigned long long)st->downgraded_stale, s->o.max_skid_ms);
}

void xb_session_close(struct xb_session *s)
{
	for (size_t i = 0; i < s->nsinks; i++)
		if (s->sinks[i]->ops->free)
			s->sinks[i]->ops->free(s->sinks[i]);
	s->nsinks = 0;
	if (s->started) {
		xb_prompt_stop(s->prompt); /* its readers drain the sampler's rings */
		s->prompt = NULL;
		xb_sampler_close(&s->smp);
		if (s->bpf)
			xb_bpf_close(s->bpf);
		s->bpf = NULL;
		free(s->tidmap);
		s->tidmap = NULL;
		xb_frames_free(&s->fr);
		xb_profile_free(&s->prof);
		xb_codemap_free(&s->cm);
		xb_estate_free(&s->es);
		s->started = false;
	}
	if (s->attached) {
		xb_vm_detach(&s->vm);
		s->attached = false;
	}
}

bool xb_session_blocked_call(struct xb_session *s, const struct xb_thread *t, struct xb_unwind *uw,
			     struct xb_estack *es)
{
	uint64_t c_p, c_p2, sp, pc, sp2, pc2;
	struct xb_call_id id, id2;
	if (t->kind != 's' || t->sched_no <= 0 || xb_blocked_call_id(&s->es, t->sched_no, &c_p, &id) < 0 ||
	    !xb_task_blocked_at(s->vm.pid, t->tid, &sp, &pc))
		return false;
	xb_unwind_blocked(&s->uw, t->tid, sp, pc, uw);
	xb_erlang_stack_blocked(&s->es, uw, t->sched_no, es);
	return es->status == XB_ES_OK && es->c_p == c_p && es->call.have && xb_call_id_same(&es->call, &id) &&
	       xb_task_blocked_at(s->vm.pid, t->tid, &sp2, &pc2) && sp2 == sp && pc2 == pc &&
	       xb_blocked_call_id(&s->es, t->sched_no, &c_p2, &id2) == 0 && c_p2 == c_p && xb_call_id_same(&id2, &id);
}


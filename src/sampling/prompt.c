/* prompt.c - reads at the moment of the sample on the perf path: a reader
 * per CPU, pinned there at SCHED_FIFO, woken by each sample of that CPU's
 * ring, copies what capture.bpf.c would copy before the sampled thread
 * runs on (see prompt.h for why it does not run on). */
#define _GNU_SOURCE
#include "xb/prompt.h"
#include "xb/bpf_capture.h"
#include "xb/common.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The readers' priority: above the drain loop's SCHED_FIFO 1 (session.c),
 * which must never delay a reader (the lowest priority that is). */
#define READER_PRIO 2
/* Per reader: the records waiting for the main thread, which drains every
 * 10 ms (a record is at most ~130 KiB, typically 17 KiB: a 16 KiB user
 * stack copy; ~10 of them per CPU per drain at 997 Hz).  64 MiB in all,
 * at most 8 MiB and at least 1 MiB per CPU (a power of two): 8 MiB hold
 * half a second of a CPU's samples, 1 MiB 60 ms (a machine of 64 CPUs). */
#define QUEUE_TOTAL (64ull << 20)
#define QUEUE_MAX (8ull << 20)
#define QUEUE_MIN (1ull << 20)
/* Threads with a current_process slot (schedulers): a table of at least
 * SLOTS_MIN entries, twice as many as the fd limit allows such threads
 * (each has an event per CPU) up to SLOTS_MAX.  A thread is kept within
 * SLOT_PROBES entries of its hash. */
#define SLOTS_MIN 16384u
#define SLOTS_MAX (1u << 20)
/* Entries looked at from a tid's home: a lookup (a reader's, at every
 * sample) costs at most this many, even with the table full. */
#define SLOT_PROBES 256u
#define PAGE 4096ull

/* ---- the copy (mirrors capture.bpf.c; keep the two in step) ---------- */

size_t xb_prompt_record_max(const struct xb_bpf_conf *c)
{
	size_t p = c->proc_size < XB_BPF_PROC_MAX ? c->proc_size : XB_BPF_PROC_MAX;
	size_t u = c->ustack_max < XB_BPF_USTACK_MAX ? c->ustack_max : XB_BPF_USTACK_MAX;
	size_t e = c->estack_max < XB_BPF_ESTACK_MAX ? c->estack_max : XB_BPF_ESTACK_MAX;
	return sizeof(struct xb_bpf_rec) + p + u + e;
}

static uint64_t field(const uint8_t *proc, size_t len, int32_t off)
{
	uint64_t v = 0;
	if (off >= 0 && (size_t)off + 8 <= len)
		memcpy(&v, proc + off, 8);
	return v;
}

/* Copy [lo, hi) into DST keeping the contiguous run that contains E, as
 * copy_tail does: an unreadable page entirely below E is margin the
 * process never touched (restart after it), one at or above E ends the
 * run.  Returns the bytes kept; *first: where they start. */
static size_t copy_tail(xb_prompt_read_fn read, void *arg, uint64_t lo, uint64_t hi, uint64_t E, uint8_t *dst,
			uint64_t *first, bool *margin_fault, bool *cut)
{
	uint64_t a = lo;
	*first = lo;
	for (int i = 0; i < 17 && a < hi; i++) {
		size_t n = read(arg, a, dst + (a - *first), (size_t)(hi - a));
		a += n;
		if (a >= hi)
			break;
		uint64_t page_end = (a & ~(PAGE - 1)) + PAGE; /* the page a cannot be read */
		if (page_end <= E) {
			*margin_fault = true;
			/* keep what follows at the start of DST */
			*first = a = page_end;
		} else {
			*cut = true;
			break;
		}
	}
	return a > E ? (size_t)(a - *first) : 0;
}

size_t xb_prompt_capture(const struct xb_bpf_conf *c, const struct xb_sample *smp, uint64_t slot,
			 xb_prompt_read_fn read, void *arg, uint8_t *out, size_t cap)
{
	if (cap < xb_prompt_record_max(c))
		return 0;
	struct xb_bpf_rec r;
	memset(&r, 0, sizeof(r));
	uint8_t *data = out + sizeof(r);
	r.magic = XB_BPF_MAGIC;
	r.version = XB_BPF_VERSION;
	r.hdr_size = sizeof(r);
	r.tid = (uint32_t)smp->tid;
	r.cpu = smp->cpu >= 0 ? (uint32_t)smp->cpu : 0;
	r.time_ns = smp->time_ns;
	uint32_t flags = 0, faults = 0;
	uint64_t proc_len = 0, ul = 0, el = 0;
	if (!smp->user) {
		flags |= XB_BPF_F_KERNEL_REGS;
		goto out;
	}
	memcpy(r.regs, smp->regs, sizeof(r.regs));
	uint64_t rsp = smp->regs[XB_PREG_SP];
	r.ustack_addr = rsp;
	uint64_t c_p = 0, heap = 0, hend = 0, stop = 0;
	bool have_proc = false, dirty = (slot & XB_BPF_SLOT_DIRTY) != 0;
	slot &= ~7ull;
	r.slot = slot;
	if (slot) {
		if (read(arg, slot, &c_p, 8) != 8) {
			c_p = 0;
			flags |= XB_BPF_F_SLOT_FAULT;
			faults++;
		}
		r.c_p = c_p;
	} else {
		flags |= XB_BPF_F_NO_THREAD;
	}
	if (c_p && c_p % 8 == 0) {
		size_t ps = c->proc_size < XB_BPF_PROC_MAX ? c->proc_size : XB_BPF_PROC_MAX;
		if (ps && read(arg, c_p, data, ps) == ps) {
			proc_len = ps;
			r.proc_addr = c_p;
			heap = field(data, ps, c->off_heap);
			hend = field(data, ps, c->off_hend);
			stop = field(data, ps, c->off_stop);
			r.heap = heap;
			r.hend = hend;
			r.stop = stop;
			have_proc = heap && heap % 8 == 0 && hend % 8 == 0 && heap < hend &&
				    hend - heap <= (1ull << 36);
			if (!have_proc)
				flags |= XB_BPF_F_PROC_BAD;
		} else if (ps) {
			flags |= XB_BPF_F_PROC_FAULT;
			faults++;
		}
	}
	uint8_t *ust = data + proc_len;
	uint64_t umax = c->ustack_max < XB_BPF_USTACK_MAX ? c->ustack_max : XB_BPF_USTACK_MAX;
	uint64_t have = smp->stack && smp->stack_size ? smp->stack_size : 0; /* perf's copy from rsp */
	if (have_proc && rsp >= heap && rsp <= hend) {
		/* JIT, running Erlang code: [rsp, hend) is the whole stack;
		 * perf copied it from rsp on, the rest is read now. */
		flags |= XB_BPF_F_RSP_IN_HEAP;
		uint64_t want = hend - rsp;
		if (want > umax) {
			want = umax;
			flags |= XB_BPF_F_USTACK_CAPPED;
		}
		ul = have < want ? have : want;
		memcpy(ust, smp->stack, ul);
		if (ul < want)
			ul += read(arg, rsp + ul, ust + ul, want - ul);
		if (ul < want) {
			flags |= XB_BPF_F_USTACK_CUT;
			faults++;
		}
		goto out;
	}
	ul = have < umax ? have : umax;
	memcpy(ust, smp->stack, ul);
	if (!have_proc)
		goto out;

	/* The Erlang stack's tail: where, as the BPF program's (bpf_record.h). */
	uint8_t *est = ust + ul;
	int e_ok = c->E_reg >= 0 && c->E_reg < XB_BPF_NREGS,
	    alt_ok = !dirty && c->E_alt_reg >= 0 && c->E_alt_reg < XB_BPF_NREGS;
	uint64_t emax = c->estack_max < XB_BPF_ESTACK_MAX ? c->estack_max : XB_BPF_ESTACK_MAX;
	uint64_t E, lo, hi, first;
	bool mf = false, cut = false;
	xb_bpf_tail_window(smp->regs[XB_PREG_IP], c->pm_lo, c->pm_hi, e_ok ? smp->regs[c->E_reg] : 0, e_ok,
			   alt_ok ? smp->regs[c->E_alt_reg] : 0, alt_ok, heap, hend, stop,
			   field(data, proc_len, c->off_htop), c->estack_margin, emax, &E, &lo, &hi, &flags);
	r.E = E;
	if (flags & XB_BPF_F_STOP_MOVED) {
		el = copy_tail(read, arg, lo, hi, E, est, &first, &mf, &cut);
		r.estack_addr = first;
		goto out;
	}
	el = copy_tail(read, arg, lo, hi, E, est, &first, &mf, &cut);
	r.estack_addr = first;
	if (mf)
		flags |= XB_BPF_F_MARGIN_FAULT;
	if (cut) {
		flags |= XB_BPF_F_ESTACK_CUT;
		faults++;
	}
out:
	r.proc_len = (uint32_t)proc_len;
	r.ustack_len = (uint32_t)ul;
	r.estack_len = (uint32_t)el;
	r.flags = flags;
	r.faults = faults;
	r.total_len = (uint32_t)(sizeof(r) + proc_len + ul + el);
	memcpy(out, &r, sizeof(r));
	return r.total_len;
}

/* ---- readers ----------------------------------------------------------- */

/* A single-producer single-consumer queue of records: [u32 len][u32 0]
 * then len bytes, padded to 8; a len of PAD skips to the buffer's start. */
#define PAD 0xffffffffu

struct reader {
	struct xb_prompt *p;
	struct xb_cpu_ring *ring;
	pthread_t thread;
	bool started;
	/* its CPU's ring and the stop eventfd; made by xb_prompt_start, not
	 * the reader: a reader that could not make it (out of fds: a VM
	 * growing threads took them before the reader ran) read nothing
	 * for the whole run and said nothing */
	int ep;
	uint8_t *scratch; /* perf record reassembly */
	uint8_t *q;
	uint64_t head, tail; /* written by the reader, by the main thread */
	/* counted by the reader, read by the main thread */
	uint64_t received, records, queue_full, read_ns;
	/* the main thread's: the record at tail, parsed (xb_prompt_consume) */
	struct xb_sample cur;
	uint64_t cur_end;    /* tail past it */
	bool have;
};

struct xb_prompt {
	pid_t pid;
	uint64_t qbytes; /* each reader's queue */
	struct xb_bpf_conf conf;
	size_t rec_max;
	struct reader *r;
	size_t nr;
	int stop_fd;
	struct prompt_slot { int32_t tid; uint64_t slot; } *slots;
	size_t nslots;      /* a power of 2 */
	uint64_t slot_full; /* threads not given a slot: the table was full */
	uint64_t malformed, syscalls;
};

int xb_prompt_usable(void)
{
	/* The same test the readers will pass: a thread may take SCHED_FIFO. */
	int pol = sched_getscheduler(0);
	struct sched_param old;
	if (pol < 0 || sched_getparam(0, &old) < 0)
		return xb_fail("sched_getscheduler: %m");
	struct sched_param sp = { .sched_priority = READER_PRIO };
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		return xb_fail("SCHED_FIFO is not allowed (%m): needs CAP_SYS_NICE or an RLIMIT_RTPRIO of %d",
			       READER_PRIO);
	sched_setscheduler(0, pol, &old);
	return 0;
}

static size_t slot_hash(const struct xb_prompt *p, pid_t tid)
{
	return ((uint32_t)tid * 2654435761u) & (p->nslots - 1);
}

/* (Only the main thread writes; the readers look up.)  An entry whose
 * slot is 0 (its thread gone) is taken again by a new thread; a thread
 * that finds no room is counted, and its samples carry no process (read
 * live later). */
void xb_prompt_set_slot(struct xb_prompt *p, pid_t tid, uint64_t slot)
{
	if (!p || tid <= 0)
		return;
	size_t mask = p->nslots - 1, reuse = SIZE_MAX;
	for (size_t i = 0, h = slot_hash(p, tid); i < SLOT_PROBES; i++, h = (h + 1) & mask) {
		int32_t t = __atomic_load_n(&p->slots[h].tid, __ATOMIC_ACQUIRE);
		if (t == tid) {
			__atomic_store_n(&p->slots[h].slot, slot, __ATOMIC_RELEASE);
			return;
		}
		if (t != 0 && reuse == SIZE_MAX && !__atomic_load_n(&p->slots[h].slot, __ATOMIC_ACQUIRE))
			reuse = h;
		if (t == 0) {
			if (!slot)
				return; /* nothing to say of it */
			if (reuse == SIZE_MAX)
				reuse = h;
			break;
		}
	}
	if (!slot)
		return;
	if (reuse == SIZE_MAX) {
		p->slot_full++;
		return;
	}
	/* a reader that looks up the old tid meanwhile finds 0 or this
	 * slot; the old thread has exited and takes no samples */
	__atomic_store_n(&p->slots[reuse].slot, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&p->slots[reuse].tid, (int32_t)tid, __ATOMIC_RELEASE);
	__atomic_store_n(&p->slots[reuse].slot, slot, __ATOMIC_RELEASE);
}

static uint64_t get_slot(struct xb_prompt *p, pid_t tid)
{
	size_t mask = p->nslots - 1;
	for (size_t i = 0, h = slot_hash(p, tid); i < SLOT_PROBES; i++, h = (h + 1) & mask) {
		int32_t t = __atomic_load_n(&p->slots[h].tid, __ATOMIC_ACQUIRE);
		if (t == tid)
			return __atomic_load_n(&p->slots[h].slot, __ATOMIC_ACQUIRE);
		if (t == 0)
			return 0;
	}
	return 0;
}

static size_t remote_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct xb_prompt *p = arg;
	/* One remote piece per page: a read stops at the first page that
	 * cannot be read, and says how far it got. */
	struct iovec local = { buf, len }, remote[24];
	size_t n = 0;
	for (uint64_t a = addr; a < addr + len && n < 24; n++) {
		uint64_t end = (a & ~(PAGE - 1)) + PAGE;
		if (end > addr + len)
			end = addr + len;
		remote[n] = (struct iovec){ (void *)(uintptr_t)a, (size_t)(end - a) };
		a = end;
	}
	__atomic_fetch_add(&p->syscalls, 1, __ATOMIC_RELAXED);
	ssize_t k = process_vm_readv(p->pid, &local, 1, remote, (unsigned long)n, 0);
	return k > 0 ? (size_t)k : 0;
}

static uint8_t *queue_reserve(struct reader *r, size_t need)
{
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	size_t total = 8 + ((need + 7) & ~(size_t)7);
	size_t off = (size_t)(r->head & (r->p->qbytes - 1));
	size_t pad = off + total > r->p->qbytes ? r->p->qbytes - off : 0;
	if (r->head + pad + total - tail > r->p->qbytes)
		return NULL;
	if (pad) {
		uint32_t m = PAD;
		memcpy(r->q + off, &m, 4);
		__atomic_store_n(&r->head, r->head + pad, __ATOMIC_RELEASE);
		off = 0;
	}
	return r->q + off + 8;
}

static void queue_commit(struct reader *r, size_t len)
{
	size_t off = (size_t)(r->head & (r->p->qbytes - 1));
	uint32_t l[2] = { (uint32_t)len, 0 };
	memcpy(r->q + off, l, 8);
	__atomic_store_n(&r->head, r->head + 8 + ((len + 7) & ~(size_t)7), __ATOMIC_RELEASE);
}

static void on_perf_sample(const struct xb_sample *smp, void *arg)
{
	struct reader *r = arg;
	struct xb_prompt *p = r->p;
	uint64_t t0 = xb_now_ns();
	__atomic_fetch_add(&r->received, 1, __ATOMIC_RELAXED);
	uint8_t *dst = queue_reserve(r, p->rec_max);
	if (!dst) {
		__atomic_fetch_add(&r->queue_full, 1, __ATOMIC_RELAXED);
		return;
	}
	size_t len = xb_prompt_capture(&p->conf, smp, get_slot(p, smp->tid), remote_read, p, dst, p->rec_max);
	if (len) {
		((struct xb_bpf_rec *)(void *)dst)->pid = (uint32_t)p->pid;
		queue_commit(r, len);
		__atomic_fetch_add(&r->records, 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&r->read_ns, xb_now_ns() - t0, __ATOMIC_RELAXED);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the main thread's */
	/* pinned to its CPU at SCHED_FIFO by xb_prompt_start */
	long page = sysconf(_SC_PAGESIZE);
	const uint8_t *data = (const uint8_t *)r->ring->ring + page;
	for (;;) {
		struct epoll_event ev[2];
		int nev = epoll_wait(r->ep, ev, 2, -1);
		if (nev < 0 && errno != EINTR)
			break;
		bool stop = false;
		for (int i = 0; i < nev; i++)
			stop |= ev[i].data.u64 == 1;
		struct xb_ring_counts c = { 0 };
		xb_ring_drain(r->ring->ring, data, r->ring->data_size, r->scratch, 65536 + 4096, false,
			      on_perf_sample, r, &c);
		if (c.lost)
			__atomic_fetch_add(&r->ring->lost, c.lost, __ATOMIC_RELAXED);
		if (c.throttled)
			__atomic_fetch_add(&r->ring->throttled, c.throttled, __ATOMIC_RELAXED);
		if (stop)
			break;
	}
	return NULL;
}

int xb_prompt_start(struct xb_prompt **out, struct xb_sampler *smp, pid_t pid, const struct xb_bpf_conf *conf)
{
	*out = NULL;
	if (!smp->ncpus)
		return xb_fail("no per-CPU sample rings");
	struct xb_prompt *p = calloc(1, sizeof(*p));
	if (!p)
		return xb_fail("out of memory");
	p->pid = pid;
	p->conf = *conf;
	p->rec_max = xb_prompt_record_max(conf);
	p->stop_fd = eventfd(0, EFD_CLOEXEC);
	p->qbytes = QUEUE_MAX;
	while (p->qbytes > QUEUE_MIN && p->qbytes * smp->ncpus > QUEUE_TOTAL)
		p->qbytes /= 2;
	p->r = calloc(smp->ncpus, sizeof(*p->r));
	uint64_t want = smp->fd_ceiling / smp->ncpus * 2;
	p->nslots = SLOTS_MIN;
	while (p->nslots < want && p->nslots < SLOTS_MAX)
		p->nslots *= 2;
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	if (p->stop_fd < 0 || !p->r || !p->slots) {
		xb_prompt_stop(p);
		return xb_fail("out of memory (or fds) for the readers");
	}
	for (size_t k = 0; k < smp->ncpus; k++) {
		struct reader *r = &p->r[p->nr++];
		r->p = p;
		r->ring = &smp->cpus[k];
		r->ep = epoll_create1(EPOLL_CLOEXEC);
		if (r->ep < 0 ||
		    epoll_ctl(r->ep, EPOLL_CTL_ADD, r->ring->fd, &(struct epoll_event){ .events = EPOLLIN }) < 0 ||
		    epoll_ctl(r->ep, EPOLL_CTL_ADD, p->stop_fd,
			      &(struct epoll_event){ .events = EPOLLIN, .data.u64 = 1 }) < 0) {
			int e = errno;
			xb_prompt_stop(p);
			return xb_fail("cannot wait on the sample ring of CPU %d: %s", smp->cpus[k].cpu, strerror(e));
		}
		r->scratch = malloc(65536 + 4096 + 8);
		r->q = malloc(p->qbytes);
		if (!r->scratch || !r->q) {
			xb_prompt_stop(p);
			return xb_fail("out of memory for the readers");
		}
		pthread_attr_t at;
		pthread_attr_init(&at);
		cpu_set_t cs;
		CPU_ZERO(&cs);
		CPU_SET(r->ring->cpu, &cs);
		struct sched_param sp = { .sched_priority = READER_PRIO };
		pthread_attr_setaffinity_np(&at, sizeof(cs), &cs);
		pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&at, SCHED_FIFO);
		pthread_attr_setschedparam(&at, &sp);
		int e = pthread_create(&r->thread, &at, reader_main, r);
		pthread_attr_destroy(&at);
		if (e) {
			xb_prompt_stop(p);
			return xb_fail("cannot start a SCHED_FIFO reader on CPU %d: %s", smp->cpus[k].cpu,
				       strerror(e));
		}
		r->started = true;
	}
	*out = p;
	return 0;
}

/* Parse the record at R's tail into r->cur (skipping padding and, counted,
 * malformed records) up to HEAD; false when none is left. */
static bool next_record(struct xb_prompt *p, struct reader *r, uint64_t head)
{
	r->have = false;
	uint64_t tail = r->tail;
	while (tail < head) {
		size_t off = (size_t)(tail & (p->qbytes - 1));
		uint32_t len;
		memcpy(&len, r->q + off, 4);
		if (len == PAD) {
			tail += p->qbytes - off;
			continue;
		}
		if (len > p->rec_max) { /* cannot happen: the reader wrote it */
			tail = head;
			break;
		}
		uint64_t end = tail + 8 + ((len + 7) & ~(uint64_t)7);
		if (xb_bpf_parse(r->q + off + 8, len, &r->cur) == 0) {
			r->cur.bpf = false;
			r->cur_end = end;
			r->have = true;
			break;
		}
		p->malformed++;
		tail = end;
	}
	/* give room back as we go: the reader may be waiting for it */
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	return r->have;
}

/* Every queue's records, merged in time order: a thread that moved
 * between CPUs has its samples in two queues, and what is downstream
 * (the long calls, the scheduler views) takes a thread's samples in the
 * order they were taken (longcalls.h).  A linear pick among the CPUs'
 * queues; each record is delivered, then its room given back. */
int xb_prompt_consume(struct xb_prompt *p, xb_sample_cb cb, void *arg)
{
	int n = 0;
	uint64_t heads[p->nr ? p->nr : 1];
	for (size_t k = 0; k < p->nr; k++) {
		heads[k] = __atomic_load_n(&p->r[k].head, __ATOMIC_ACQUIRE);
		next_record(p, &p->r[k], heads[k]);
	}
	for (;;) {
		struct reader *best = NULL;
		size_t bk = 0;
		for (size_t k = 0; k < p->nr; k++)
			if (p->r[k].have && (!best || p->r[k].cur.time_ns < best->cur.time_ns)) {
				best = &p->r[k];
				bk = k;
			}
		if (!best)
			break;
		cb(&best->cur, arg);
		n++;
		best->tail = best->cur_end;
		next_record(p, best, heads[bk]);
	}
	return n;
}

void xb_prompt_stats(const struct xb_prompt *p, struct xb_prompt_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!p)
		return;
	st->readers = (unsigned)p->nr;
	st->slots = p->nslots;
	st->slot_full = p->slot_full;
	st->malformed = p->malformed;
	st->syscalls = __atomic_load_n(&p->syscalls, __ATOMIC_RELAXED);
	for (size_t k = 0; k < p->nr; k++) {
		const struct reader *r = &p->r[k];
		st->received += __atomic_load_n(&r->received, __ATOMIC_RELAXED);
		st->records += __atomic_load_n(&r->records, __ATOMIC_RELAXED);
		st->queue_full += __atomic_load_n(&r->queue_full, __ATOMIC_RELAXED);
		st->read_ns += __atomic_load_n(&r->read_ns, __ATOMIC_RELAXED);
	}
}

void xb_prompt_stop(struct xb_prompt *p)
{
	if (!p)
		return;
	if (p->stop_fd >= 0) {
		uint64_t one = 1;
		if (write(p->stop_fd, &one, sizeof(one)) < 0) {
			/* cannot happen with an eventfd below its maximum */
		}
	}
	for (size_t k = 0; k < p->nr; k++) {
		if (p->r[k].started)
			pthread_join(p->r[k].thread, NULL);
		if (p->r[k].ep >= 0)
			close(p->r[k].ep);
		free(p->r[k].scratch);
		free(p->r[k].q);
	}
	free(p->r);
	free(p->slots);
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	free(p);
}

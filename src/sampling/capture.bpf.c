// SPDX-License-Identifier: MIT OR GPL-2.0
/* capture.bpf.c - copies, at the moment of a sample, what the user-space
 * stack walk of an Erlang VM thread needs: registers, user stack, the
 * process the scheduler runs and the top of that process's Erlang stack.
 * Reads made later from user space see a process that has moved on (skid);
 * these are exact.
 *
 * A BPF_PROG_TYPE_PERF_EVENT program, attached (PERF_EVENT_IOC_SET_BPF) to
 * per-thread cpu-clock events opened with exclude_kernel=1, so ctx->regs
 * are the user registers.  It writes one record (include/xb/bpf_record.h)
 * per sample into a BPF ring buffer and returns 0: the perf event writes
 * no sample of its own (LOST/THROTTLE records still go to the perf ring).
 *
 * What is copied (see bpf_record.h for the record and the configuration):
 *
 *  - c_p = *slot, slot being this thread's ErtsSchedulerData.current_process
 *    (erts/emulator/beam/erl_process.h; 0 for threads that are not
 *    schedulers), then conf.proc_size bytes of struct process at c_p;
 *    heap, hend and stop are taken from that copy.
 *  - the user stack: when rsp lies in [heap, hend] the thread is running
 *    Erlang code in the JIT, whose Erlang stack is the native stack
 *    (jit/x86/beam_asm.hpp: E is rsp), and [rsp, hend) is all of it:
 *    that range, at most ustack_max bytes, and nothing else.  Otherwise
 *    ustack_max bytes from rsp, stopping cleanly at the end of the mapping
 *    (as PERF_SAMPLE_STACK_USER does).
 *  - otherwise the tail of the Erlang stack, which lives at the end of the
 *    heap area: [max(heap, E - estack_margin), hend), at most estack_max
 *    bytes of it from the low end (the part nearest E).  E is
 *    conf.E_reg's register while IP is in the interpreter's process_main
 *    (beam_emu.c keeps E in a register there: exact), else c_p->stop
 *    (stored by SWAPOUT / emit_enter_runtime<Update::eStack> before C code
 *    is called, and at a context switch), or conf.E_alt_reg's register
 *    when it lies lower in the same stack (the JIT keeps E in rbp,
 *    E_saved, across C calls that do not store it, and c_p->stop is
 *    then stale).  Such an E may be stale, but the stack never reaches
 *    below c_p->htop (stale too, it only lags behind the real heap top),
 *    so when [htop, hend) fits in estack_max it is taken whole.
 *
 * Reads are made in chunks that never cross a page boundary: a
 * bpf_probe_read_user of a range that crosses into an unmapped or
 * non-resident page fails as a whole (no page faults in this context).
 * The user stack keeps what was read up to the first failure (the end of
 * the stack mapping).  The Erlang-stack tail keeps the contiguous run that
 * contains E: a failed page entirely below E's page is margin the process
 * never touched (the free space between htop and E of a fresh heap), so
 * the run restarts after it; a failed page at or above E ends the run
 * there.  The part nearest E is the one that changes fastest, so it is
 * the part a later live read would most likely get wrong; the outer
 * frames near hend, if lost, are the ones a live read still finds.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <stdbool.h>

#include "xb/bpf_record.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* perf register numbers (enum xb_preg in include/xb/release.h) */
enum { P_AX, P_BX, P_CX, P_DX, P_SI, P_DI, P_BP, P_SP, P_IP, P_FLAGS, P_CS, P_SS,
       P_DS, P_ES, P_FS, P_GS, P_R8, P_R9, P_R10, P_R11, P_R12, P_R13, P_R14, P_R15 };

/* Sanity bound on a heap (erlstack.c MAX_HEAP_BYTES). */
#define MAX_HEAP_BYTES (1ull << 36)
/* 65528 bytes from an address that is not page aligned span 17 pages. */
#define MAX_CHUNKS 17
#define DATA_MAX (XB_BPF_PROC_MAX + XB_BPF_USTACK_MAX + XB_BPF_ESTACK_MAX)

struct xb_bpf_thread {
	__u64 cur_proc_slot;
};

/* Sized by user space before loading (bpf_capture.c threads_entries: from
 * the fd limit, one fd per thread's event). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct xb_bpf_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xb_bpf_conf);
} conf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* user space may resize before loading */
} ring SEC(".maps");

/* The record is built here, then copied into the ring with its exact size
 * (a ring reservation must have a size known at verification time; one
 * reserved at the largest size, written in place, would save that copy,
 * but the copy loops then cannot be global functions, and inlined they
 * take the verifier 0.5 to over 1 million instructions).  A
 * per-CPU array value may not exceed 32 KiB, so: a plain array with one
 * entry per possible CPU (user space sets max_entries), indexed by the CPU
 * we run on.  Perf-event programs do not nest on a CPU (bpf_prog_active),
 * so nothing else writes to this CPU's entry meanwhile.  The page of slack
 * lets the verifier accept a chunk of up to a page at any offset up to
 * DATA_MAX. */
struct scratch {
	struct xb_bpf_rec r;
	__u8 data[DATA_MAX + XB_BPF_PAGE];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XB_BPF_C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);
	if (v)
		*v += 1;
}

/* Hide a value from clang's range analysis, so the bound checks that
 * follow stay in the code where the verifier needs them. */
#define OPAQUE(x) asm volatile("" : "+r"(x))

/* The copy loops are global functions: the verifier checks each once,
 * on its own, and its callers see only a return value they must bound
 * themselves.  Inlined, every way out of one loop would be explored
 * through every iteration of the next (over a million instructions).
 * They find this CPU's scratch buffer themselves (global functions take
 * scalars and context pointers). */
static __always_inline struct scratch *my_scratch(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&scratch, &cpu);
}

/* Copy [addr, addr + len) to data[off...] in chunks that do not cross a
 * page boundary; stop at the first chunk that fails.  Bytes copied. */
__attribute__((noinline)) __u64 copy_up(__u64 off, __u64 addr, __u64 len)
{
	struct scratch *s = my_scratch();
	__u64 done = 0;
	if (!s || len == 0)
		return 0;
	for (int i = 0; i < MAX_CHUNKS; i++) {
		__u64 a = addr + done;
		__u64 n = XB_BPF_PAGE - (a & (XB_BPF_PAGE - 1));
		/* The last chunk says so itself: the verifier cannot relate
		 * done to len, and would otherwise go round once more after
		 * every chunk (twice the paths per round). */
		bool last = n >= len - done;
		if (last)
			n = len - done;
		__u64 o = off + done;
		OPAQUE(o);
		OPAQUE(n);
		if (o > DATA_MAX || n > XB_BPF_PAGE)
			break;
		if (bpf_probe_read_user(&s->data[o], (__u32)n, (const void *)a))
			break;
		done += n;
		if (last)
			break;
	}
	return done;
}

/* copy_tail's result, packed (a global function returns one scalar). */
#define TAIL_LEN(v) ((v) & 0x1ffff)                /* bytes kept */
#define TAIL_SKIP(v) (((v) >> 17) & 0x1ffff)       /* from lo to the first kept */
#define TAIL_MARGIN_FAULT(v) (((v) >> 34) & 1)
#define TAIL_CUT(v) (((v) >> 35) & 1)

/* Copy the Erlang-stack tail [lo, hend) to data[off...], keeping the
 * contiguous run that contains E (see the top of the file). */
__attribute__((noinline)) __u64 copy_tail(__u64 off, __u64 lo, __u64 hend, __u64 E)
{
	struct scratch *s = my_scratch();
	__u64 first = lo, a = lo, margin_fault = 0, cut = 0;
	if (!s)
		return 0;
	for (int i = 0; i < MAX_CHUNKS && a < hend; i++) {
		__u64 n = XB_BPF_PAGE - (a & (XB_BPF_PAGE - 1));
		bool last = n >= hend - a; /* as in copy_up */
		if (last)
			n = hend - a;
		__u64 o = off + (a - first);
		OPAQUE(o);
		OPAQUE(n);
		if (o > DATA_MAX || n > XB_BPF_PAGE)
			break;
		if (bpf_probe_read_user(&s->data[o], (__u32)n, (const void *)a)) {
			if (a + n <= E) {
				/* below E: margin never touched; restart */
				margin_fault = 1;
				first = a + n;
			} else {
				cut = 1;
				break;
			}
		}
		a += n;
		if (last)
			break;
	}
	/* A run that ends at or below E holds nothing of the stack. */
	__u64 len = a > E ? a - first : 0;
	return (len & 0x1ffff) | ((first - lo) & 0x1ffff) << 17 | margin_fault << 34 | cut << 35;
}

/* Register number I (perf numbering) of the record, 0 for none. */
static __always_inline __u64 reg(struct xb_bpf_rec *r, __s32 i)
{
	__u64 k = (__u64)(__s64)i;
	OPAQUE(k);
	if (k >= XB_BPF_NREGS)
		return 0;
	return r->regs[k];
}

/* A u64 at byte offset OFF of the process copy (0 when outside it). */
static __always_inline __u64 field(struct scratch *s, __s32 off, __u64 len)
{
	__u64 o = (__u64)(__s64)off;
	if (off < 0 || o + 8 > len)
		return 0;
	OPAQUE(o);
	if (o > XB_BPF_PROC_MAX - 8)
		return 0;
	return *(__u64 *)&s->data[o];
}

SEC("perf_event")
int xb_capture(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	count(XB_BPF_C_RUNS);
	struct xb_bpf_conf *c = bpf_map_lookup_elem(&conf, &zero);
	if (!c || c->ustack_max == 0) {
		count(XB_BPF_C_NO_CONF);
		return 0;
	}
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *s = bpf_map_lookup_elem(&scratch, &cpu);
	if (!s)
		return 0;
	struct xb_bpf_rec *r = &s->r;
	__builtin_memset(r, 0, sizeof(*r));
	/* Thread ids as the reader sees them in /proc: in its PID namespace
	 * when the thread lives there too, else the initial namespace's
	 * (the reader then runs there, or sees no such thread anyway). */
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = (__u32)(pid_tgid >> 32);
	if (c->pidns_ino) {
		struct bpf_pidns_info ns = {};
		if (bpf_get_ns_current_pid_tgid(c->pidns_dev, c->pidns_ino, &ns, sizeof(ns)) == 0) {
			tid = ns.pid;
			tgid = ns.tgid;
		}
	}
	r->magic = XB_BPF_MAGIC;
	r->version = XB_BPF_VERSION;
	r->hdr_size = sizeof(*r);
	r->tid = tid;
	r->pid = tgid;
	r->cpu = cpu;
	r->time_ns = bpf_ktime_get_ns();

	/* struct pt_regs (asm/ptrace.h) in perf's numbering (perf_regs.h);
	 * DS, ES, FS, GS are not kept in pt_regs on x86-64: 0. */
	const struct pt_regs *pr = &ctx->regs;
	r->regs[P_AX] = pr->rax;
	r->regs[P_BX] = pr->rbx;
	r->regs[P_CX] = pr->rcx;
	r->regs[P_DX] = pr->rdx;
	r->regs[P_SI] = pr->rsi;
	r->regs[P_DI] = pr->rdi;
	r->regs[P_BP] = pr->rbp;
	r->regs[P_SP] = pr->rsp;
	r->regs[P_IP] = pr->rip;
	r->regs[P_FLAGS] = pr->eflags;
	r->regs[P_CS] = pr->cs;
	r->regs[P_SS] = pr->ss;
	r->regs[P_R8] = pr->r8;
	r->regs[P_R9] = pr->r9;
	r->regs[P_R10] = pr->r10;
	r->regs[P_R11] = pr->r11;
	r->regs[P_R12] = pr->r12;
	r->regs[P_R13] = pr->r13;
	r->regs[P_R14] = pr->r14;
	r->regs[P_R15] = pr->r15;

	__u32 flags = 0, faults = 0;
	__u64 proc_len = 0, ul = 0, el = 0;
	__u64 rsp = pr->rsp;
	r->ustack_addr = rsp;
	if ((pr->cs & 3) != 3) {
		flags |= XB_BPF_F_KERNEL_REGS; /* not user registers: see exclude_kernel */
		goto out;
	}

	struct xb_bpf_thread *t = bpf_map_lookup_elem(&threads, &tid);
	__u64 slot = t ? t->cur_proc_slot : 0;
	int dirty = (slot & XB_BPF_SLOT_DIRTY) != 0;
	slot &= ~7ull;
	if (!t)
		flags |= XB_BPF_F_NO_THREAD;
	__u64 c_p = 0, heap = 0, hend = 0, stop = 0;
	bool have_proc = false;
	r->slot = slot;
	if (slot) {
		if (bpf_probe_read_user(&c_p, sizeof(c_p), (const void *)slot)) {
			flags |= XB_BPF_F_SLOT_FAULT;
			faults++;
		}
		r->c_p = c_p;
	}
	if (c_p && c_p % 8 == 0) {
		__u64 ps = c->proc_size;
		OPAQUE(ps);
		if (ps > XB_BPF_PROC_MAX)
			ps = XB_BPF_PROC_MAX;
		if (ps && bpf_probe_read_user(s->data, (__u32)ps, (const void *)c_p) == 0) {
			proc_len = ps;
			r->proc_addr = c_p;
			heap = field(s, c->off_heap, ps);
			hend = field(s, c->off_hend, ps);
			stop = field(s, c->off_stop, ps);
			r->heap = heap;
			r->hend = hend;
			r->stop = stop;
			have_proc = heap && heap % 8 == 0 && hend % 8 == 0 && heap < hend &&
				    hend - heap <= MAX_HEAP_BYTES;
			if (!have_proc)
				flags |= XB_BPF_F_PROC_BAD;
		} else if (ps) {
			flags |= XB_BPF_F_PROC_FAULT;
			faults++;
		}
	}

	__u64 umax = c->ustack_max;
	if (umax > XB_BPF_USTACK_MAX)
		umax = XB_BPF_USTACK_MAX;
	if (have_proc && rsp >= heap && rsp <= hend) {
		/* JIT, running Erlang code: [rsp, hend) is the whole stack. */
		flags |= XB_BPF_F_RSP_IN_HEAP;
		__u64 want = hend - rsp;
		if (want > umax) {
			want = umax;
			flags |= XB_BPF_F_USTACK_CAPPED;
		}
		ul = copy_up(proc_len, rsp, want);
		if (ul < want) {
			flags |= XB_BPF_F_USTACK_CUT;
			faults++;
		}
		goto out;
	}
	ul = copy_up(proc_len, rsp, umax);
	if (!have_proc)
		goto out;

	/* The Erlang stack's tail: where, as xb_bpf_tail_window (bpf_record.h,
	 * shared with the perf path's readers) says. */
	__s32 er = c->E_reg, ar = c->E_alt_reg;
	int e_ok = er >= 0 && er < XB_BPF_NREGS, alt_ok = !dirty && ar >= 0 && ar < XB_BPF_NREGS;
	__u64 emax = c->estack_max;
	if (emax > XB_BPF_ESTACK_MAX)
		emax = XB_BPF_ESTACK_MAX;
	__u64 E = 0, lo = 0, hi = 0;
	xb_bpf_tail_window(pr->rip, c->pm_lo, c->pm_hi, e_ok ? reg(r, er) : 0, e_ok, alt_ok ? reg(r, ar) : 0, alt_ok,
			   heap, hend, stop, field(s, c->off_htop, proc_len), c->estack_margin, emax, &E, &lo, &hi,
			   &flags);
	r->E = E;
	if (flags & XB_BPF_F_STOP_MOVED) {
		/* the whole stack, as it was, is at stop (the walk ends at
		 * beam_normal_exit) */
		OPAQUE(ul);
		if (ul > XB_BPF_USTACK_MAX)
			goto out;
		__u64 mv = copy_tail(proc_len + ul, lo, hi, E);
		el = TAIL_LEN(mv);
		r->estack_addr = lo + TAIL_SKIP(mv);
		goto out;
	}
	OPAQUE(ul); /* copy_up's result: bound it again */
	if (ul > XB_BPF_USTACK_MAX)
		goto out;
	__u64 v = copy_tail(proc_len + ul, lo, hi, E);
	el = TAIL_LEN(v);
	r->estack_addr = lo + TAIL_SKIP(v);
	/* A page never touched below E is no loss: a flag, not a fault. */
	if (TAIL_MARGIN_FAULT(v))
		flags |= XB_BPF_F_MARGIN_FAULT;
	if (TAIL_CUT(v)) {
		flags |= XB_BPF_F_ESTACK_CUT;
		faults++;
	}

out:
	OPAQUE(proc_len);
	OPAQUE(ul);
	OPAQUE(el);
	if (proc_len > XB_BPF_PROC_MAX || ul > XB_BPF_USTACK_MAX || el > XB_BPF_ESTACK_MAX)
		return 0;
	r->proc_len = (__u32)proc_len;
	r->ustack_len = (__u32)ul;
	r->estack_len = (__u32)el;
	r->flags = flags;
	r->faults = faults;
	__u64 total = sizeof(*r) + proc_len + ul + el;
	r->total_len = (__u32)total;
	/* Wake the reader only when the ring fills up: it drains on its own
	 * timer, and a wakeup from the sampled CPU drags it there (see the
	 * wakeup note in sampler.c). */
	__u64 wflags = 0;
	if (c->wakeup_bytes)
		wflags = bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA) + total >= c->wakeup_bytes
				 ? BPF_RB_FORCE_WAKEUP
				 : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&ring, s, total, wflags))
		count(XB_BPF_C_RING_FULL);
	else
		count(XB_BPF_C_RECORDS);
	return 0;
}

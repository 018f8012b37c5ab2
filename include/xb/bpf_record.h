/* bpf_record.h - what the BPF capture program (src/sampling/capture.bpf.c)
 * writes into its ring buffer per sample, and its configuration.  Shared by
 * the BPF program (compiled with clang -target bpf) and user space
 * (src/sampling/bpf_capture.c), so: fixed-width types only, every field
 * naturally aligned, sizes pinned by static assertions, no pointers.
 *
 * One record per sample:
 *
 *   struct xb_bpf_rec   (hdr_size bytes)
 *   proc_len bytes      the process struct at c_p
 *   ustack_len bytes    the user stack from regs[SP]
 *   estack_len bytes    the tail of the Erlang stack, [estack_addr, +len)
 *
 * back to back, no padding between them (the lengths need not be multiples
 * of 8).  The record is total_len bytes.  A reader must check every length
 * against what it received: the data comes from another process's memory
 * and the header from a program that may be of another version. */
#ifndef XB_BPF_RECORD_H
#define XB_BPF_RECORD_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 xb_u8;
typedef __u16 xb_u16;
typedef __u32 xb_u32;
typedef __s32 xb_s32;
typedef __u64 xb_u64;
#else
#include <stdint.h>
typedef uint8_t xb_u8;
typedef uint16_t xb_u16;
typedef uint32_t xb_u32;
typedef int32_t xb_s32;
typedef uint64_t xb_u64;
#endif

#define XB_BPF_MAGIC 0x31524258u /* "XBR1" read as a little-endian u32 */
#define XB_BPF_VERSION 1
#define XB_BPF_NREGS 24 /* enum xb_preg (release.h): AX..GS, R8..R15 */

/* Upper bounds the program is verified against (the configuration may ask
 * for less, never more). */
#define XB_BPF_PROC_MAX 1024     /* struct process is 776 bytes on OTP 25 */
#define XB_BPF_USTACK_MAX 65528  /* what PERF_SAMPLE_STACK_USER allows */
#define XB_BPF_ESTACK_MAX 65528
#define XB_BPF_PAGE 4096         /* copy granule: x86-64 base pages */

/* The low bit of a thread's current_process slot as the tool hands it to
 * the BPF program and the perf path's readers (slots are 8-aligned): the
 * thread is a dirty scheduler.  There E is never in the alternative
 * register: the process's state was saved when it was scheduled there
 * (c_p->stop is exact), and no JIT code called the C code that runs, so
 * rbp is the C code's (otp27-jit: a heap pointer in rbp during a dirty
 * collection was taken for E, and the copy held heap data, not the stack). */
#define XB_BPF_SLOT_DIRTY 1ull

/* flags */
#define XB_BPF_F_KERNEL_REGS (1u << 0)   /* ctx regs were not user mode: nothing else captured */
#define XB_BPF_F_NO_THREAD (1u << 1)     /* tid not in the thread map (treated as no slot) */
#define XB_BPF_F_SLOT_FAULT (1u << 2)    /* the current_process slot could not be read */
#define XB_BPF_F_PROC_FAULT (1u << 3)    /* the process struct could not be read */
#define XB_BPF_F_PROC_BAD (1u << 4)      /* heap/hend failed validation: no tail, no heap test */
#define XB_BPF_F_RSP_IN_HEAP (1u << 5)   /* rsp in [heap, hend]: ustack is [rsp, hend) (JIT Erlang code) */
#define XB_BPF_F_USTACK_CAPPED (1u << 6) /* ...and hend - rsp exceeded ustack_max */
#define XB_BPF_F_E_FROM_REG (1u << 7)    /* E taken from cfg.E_reg (IP in process_main, value in [heap, hend]) */
#define XB_BPF_F_E_FROM_ALT (1u << 8)    /* E taken from cfg.E_alt_reg (below c_p->stop) */
#define XB_BPF_F_E_FROM_STOP (1u << 9)   /* E taken from c_p->stop (none of the three: E unknown, tail = bottom of the stack area) */
#define XB_BPF_F_ESTACK_CAPPED (1u << 10) /* hend - (E - margin) exceeded estack_max: the low end kept */
#define XB_BPF_F_MARGIN_FAULT (1u << 11) /* a page below E's could not be read (never touched: harmless) */
#define XB_BPF_F_ESTACK_CUT (1u << 12)   /* a page at or above E's could not be read: the tail ends there */
#define XB_BPF_F_USTACK_CUT (1u << 13)   /* rsp in heap and [rsp, hend) could not all be read */
#define XB_BPF_F_TAIL_FROM_HTOP (1u << 14) /* E not exact: the tail starts at c_p->htop (all of [htop, hend) fit) */
#define XB_BPF_F_STOP_MOVED (1u << 15) /* c_p->stop outside [heap, hend]: a GC moved the stack
					* (erl_gc.c sets p->stop before the new heap's bounds);
					* the tail is [stop, stop + estack_max), the moved stack */
#define XB_BPF_NFLAGS 16

struct xb_bpf_rec {
	xb_u32 magic;     /* XB_BPF_MAGIC */
	xb_u16 version;   /* XB_BPF_VERSION */
	xb_u16 hdr_size;  /* sizeof(struct xb_bpf_rec): data starts here */
	xb_u32 total_len; /* hdr_size + proc_len + ustack_len + estack_len */
	xb_u32 tid;       /* thread id as the reader sees it (xb_bpf_conf.pidns_*) */
	xb_u32 pid;       /* thread group id, likewise */
	xb_u32 cpu;       /* bpf_get_smp_processor_id() */
	xb_u32 flags;     /* XB_BPF_F_* */
	xb_u32 faults;    /* reads that failed where data was expected */
	xb_u64 time_ns;   /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	xb_u64 regs[XB_BPF_NREGS]; /* user registers, perf numbering (DS..GS: 0) */
	xb_u64 slot;      /* address of ErtsSchedulerData.current_process, 0 = none */
	xb_u64 c_p;       /* the value read there (valid when slot && !SLOT_FAULT) */
	xb_u64 heap, hend, stop; /* from the process copy (0 when none) */
	xb_u64 E;         /* the E the tail was cut around (0 when no tail) */
	xb_u64 proc_addr;   /* == c_p when proc_len != 0 */
	xb_u64 ustack_addr; /* == regs[SP] */
	xb_u64 estack_addr;
	xb_u32 proc_len, ustack_len, estack_len;
	xb_u32 reserved;
};

_Static_assert(sizeof(struct xb_bpf_rec) == 320, "xb_bpf_rec layout");

/* The program's configuration: one entry of an array map, written by user
 * space before sampling (and whenever it changes).  Offsets are bytes into
 * struct process (erts/emulator/beam/erl_process.h); registers are perf
 * register numbers (enum xb_preg), -1 for none. */
struct xb_bpf_conf {
	xb_u32 proc_size;      /* bytes of struct process to copy (<= XB_BPF_PROC_MAX) */
	xb_s32 off_heap, off_hend, off_stop, off_htop; /* off_htop -1: none */
	xb_u32 ustack_max;     /* <= XB_BPF_USTACK_MAX */
	xb_u32 estack_max;     /* <= XB_BPF_ESTACK_MAX */
	xb_u32 estack_margin;  /* bytes below E also copied (E may be stale) */
	xb_s32 E_reg;          /* holds E while IP is in [pm_lo, pm_hi) */
	xb_s32 E_alt_reg;      /* may hold E outside it (JIT: rbp, E_saved) */
	xb_u32 wakeup_bytes;   /* wake the reader only when this much is unread */
	xb_u32 reserved;
	xb_u64 pm_lo, pm_hi;   /* the interpreter's process_main */
	/* The reader's PID namespace (stat of /proc/self/ns/pid): threads
	 * in it are named by their ids there, as the reader sees them in
	 * /proc; others by their initial-namespace ids.  0: always those. */
	xb_u64 pidns_dev, pidns_ino;
};

_Static_assert(sizeof(struct xb_bpf_conf) == 80, "xb_bpf_conf layout");

/* Counters the program keeps (per-CPU array, summed by user space). */
enum xb_bpf_counter {
	XB_BPF_C_RUNS,        /* program invocations */
	XB_BPF_C_RECORDS,     /* records written */
	XB_BPF_C_RING_FULL,   /* records lost: ring buffer full */
	XB_BPF_C_NO_CONF,     /* config not set: nothing captured */
	XB_BPF_C_COUNT
};

/* Where the tail of the Erlang stack is, for a copy made at the moment of a
 * sample: shared by the BPF program (capture.bpf.c) and the perf path's
 * readers (prompt.c), so that both copy the same memory.  Pure arithmetic
 * on the sample's registers and the process struct's fields (a BPF
 * program can call it: no loops, no memory access).
 *
 * E is the process's Erlang stack pointer: the exact register while IP is
 * in the interpreter's process_main (E_VAL, E_OK: cfg.E_reg there), else
 * the lower of c_p->stop and the alternative register (ALT_VAL, ALT_OK:
 * the JIT keeps E in rbp, E_saved, across C calls that do not store it,
 * and c_p->stop is then stale), each only when it lies in [heap, hend].
 * The lower one: a window that starts below the true E still holds the
 * stack above it when it all fits; one that starts above it never does.
 * The window is [E - margin, hend), at most EMAX bytes from its low end
 * (the part nearest E, which changes fastest); an E that may be stale is
 * bounded below by c_p->htop (stale too, but the heap top only grows until
 * a garbage collection, and the stack never reaches below it), so when all
 * of [htop, hend) fits it is taken whole.  When c_p->stop lies outside
 * [heap, hend] a garbage collection is moving this very process (erl_gc.c
 * do_minor/do_major copy the stack to the end of the new heap and set
 * p->stop there before switching p->heap and p->hend): the stack as it
 * was is at stop, and the window is [stop, stop + EMAX).
 * Sets *E, *LO, *HI and ORs XB_BPF_F_E_FROM_*, _STOP_MOVED,
 * _TAIL_FROM_HTOP and _ESTACK_CAPPED into *FLAGS. */
static inline __attribute__((always_inline)) void
xb_bpf_tail_window(xb_u64 ip, xb_u64 pm_lo, xb_u64 pm_hi, xb_u64 e_val, int e_ok, xb_u64 alt_val, int alt_ok,
		   xb_u64 heap, xb_u64 hend, xb_u64 stop, xb_u64 htop, xb_u64 margin, xb_u64 emax, xb_u64 *E_out,
		   xb_u64 *lo_out, xb_u64 *hi_out, xb_u32 *flags)
{
	xb_u64 E = 0;
	xb_u32 f = 0;
	if (e_ok && ip >= pm_lo && ip < pm_hi && e_val % 8 == 0 && e_val >= heap && e_val <= hend) {
		E = e_val;
		f |= XB_BPF_F_E_FROM_REG;
	}
	if (!E && stop % 8 == 0 && stop >= heap && stop <= hend) {
		E = stop;
		f |= XB_BPF_F_E_FROM_STOP;
	}
	if (!(f & XB_BPF_F_E_FROM_REG) && alt_ok && alt_val % 8 == 0 && alt_val >= heap && alt_val < hend &&
	    (!E || alt_val < E)) {
		E = alt_val;
		f = (f & ~XB_BPF_F_E_FROM_STOP) | XB_BPF_F_E_FROM_ALT;
	}
	if (!(f & XB_BPF_F_E_FROM_REG) && stop && stop % 8 == 0 && (stop < heap || stop > hend)) {
		*E_out = stop;
		*lo_out = stop;
		*hi_out = stop + emax;
		*flags |= (f & ~(XB_BPF_F_E_FROM_STOP | XB_BPF_F_E_FROM_ALT)) | XB_BPF_F_STOP_MOVED;
		return;
	}
	if (!E) {
		/* Nothing says where E is: the bottom of the stack area. */
		E = hend;
		margin = emax;
	}
	xb_u64 lo = E > heap + margin ? E - margin : heap;
	if (!(f & XB_BPF_F_E_FROM_REG) && htop && htop % 8 == 0 && htop >= heap && htop < lo &&
	    hend - htop <= emax) {
		lo = htop;
		f |= XB_BPF_F_TAIL_FROM_HTOP;
	}
	lo &= ~7ull; /* heap is 8-aligned, so still >= heap */
	xb_u64 hi = hend;
	if (hi - lo > emax) {
		hi = lo + emax;
		f |= XB_BPF_F_ESTACK_CAPPED;
	}
	*E_out = E;
	*lo_out = lo;
	*hi_out = hi;
	*flags |= f;
}

#endif

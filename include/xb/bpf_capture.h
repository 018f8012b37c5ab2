/* bpf_capture.h - the BPF capture path: a BPF program attached to each
 * thread's sampling event copies, at the moment of the sample, the
 * registers, the user stack, the process the scheduler runs and the tail
 * of that process's Erlang stack (src/sampling/capture.bpf.c), so the
 * stack walk needs no live reads of the VM (no skid).
 *
 * Use:
 *   struct xb_bpf *b;
 *   if (xb_bpf_open(&b, &cfg) < 0) ... xb_err() says why (privileges, old
 *                                       kernel, verifier) and the fix
 *   for each thread's perf event (cpu-clock, exclude_kernel=1, see
 *   xb_sampler_opts.bpf):  xb_bpf_attach(b, fd, tid, slot)
 *   loop: wait on xb_bpf_fd(b) (epoll) with a timeout of the drain
 *         interval, then xb_bpf_consume(b, cb, arg)
 *   xb_bpf_close(b)
 *
 * The program wakes xb_bpf_fd only when half the ring is unread, like the
 * perf rings (sampler.c): readers drain on their own timer.
 *
 * Integration notes:
 *  - The events: xb_sampler_opts.bpf = true (sample_type TID|TIME, no
 *    registers or stack asked of perf, exclude_kernel = 1: the program
 *    reads ctx->regs, which are the user registers only then; a record
 *    with XB_BPF_F_KERNEL_REGS carries nothing else) and opts.attach
 *    calling xb_bpf_attach with the thread's slot (xb_vm_sched_data /
 *    xb_vm_dirty_sched_data + XB_F_SCHED_CURRENT_PROCESS; 0 for others).
 *    The perf rings then get LOST/THROTTLE records only; records the BPF
 *    ring had no room for are xb_bpf_stats.ring_full: add them to "lost".
 *  - A sample's regions answer reads of the target at sample time: the
 *    slot (so current_process needs no live read), the process struct
 *    (proc_size may be cut to the highest field read + 8: 480 bytes on
 *    OTP 25) and the stack.  In the JIT with rsp in [heap, hend] the user
 *    stack IS the Erlang stack; in C code E comes from unwinding (rbp) or
 *    c_p->stop as today, and the tail region holds [E, hend) when the
 *    record's flags show no ESTACK_CUT/ESTACK_CAPPED (else read the rest
 *    live).
 *  - Memory: the ring (ring_bytes, 4 MiB by default) and a ~136 KiB record
 *    buffer per possible CPU, both kernel memory.
 *  - libbpf's print callback is replaced while loading (and restored).
 *
 * Privileges: CAP_BPF and CAP_PERFMON (or root).  Linux >= 5.8 (BPF ring
 * buffer); tested on 6.18.  Thread ids (the thread map's keys, records'
 * tid) are those of the caller's PID namespace when the VM runs in it,
 * else the initial namespace's: right for a tool in the VM's container or
 * on the host, not for a tool in a container above a nested VM. */
#ifndef XB_BPF_CAPTURE_H
#define XB_BPF_CAPTURE_H

#include "xb/bpf_record.h"
#include "xb/sampler.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct xb_bpf;

struct xb_bpf_cfg {
	uint32_t proc_size;               /* bytes of struct process (XB_F_PROC_SIZE), <= 1024 */
	int32_t off_heap, off_hend, off_stop; /* XB_F_PROC_HEAP, _HEND, _STOP */
	int32_t off_htop;       /* XB_F_PROC_HTOP, or -1 (then a stale E is only helped by the margin) */
	uint32_t ustack_max;    /* user stack bytes per sample (0: 16384), <= 65528 */
	uint32_t estack_max;    /* Erlang-stack tail bytes (0: 16384), <= 65528 */
	uint32_t estack_margin; /* bytes below E copied too (E may be stale); 2048 is good; <= estack_max / 2 */
	uint64_t pm_lo, pm_hi;  /* interpreter: process_main's range; JIT: 0, 0 */
	int32_t E_reg;          /* interpreter: E's register (xb_regroles.E), else -1 */
	int32_t E_alt_reg;      /* JIT: E_saved (rbp); interpreter: E's register too (it is
				 * callee-saved, and C helpers called without SWAPOUT leave
				 * c_p->stop stale); else -1 */
	uint32_t ring_bytes;    /* ring buffer size, a power of 2 >= 64 KiB (0: 4 MiB) */
};

/* The program's configuration from CFG (checked: -1 with xb_err()); the
 * reader is woken when RING_BYTES / 2 are unread.  Also what the perf
 * path's readers copy (prompt.h). */
int xb_bpf_make_conf(const struct xb_bpf_cfg *c, uint32_t ring_bytes, struct xb_bpf_conf *k);
/* Load the program.  -1 with xb_err() saying why BPF cannot be used and
 * naming the fix. */
int xb_bpf_open(struct xb_bpf **out, const struct xb_bpf_cfg *cfg);
/* Name of XB_BPF_F_* flag bit I ("rsp_in_heap", ...), NULL past the last. */
const char *xb_bpf_flag_name(unsigned i);
/* Change the configuration while sampling (e.g. after re-reading the VM). */
int xb_bpf_configure(struct xb_bpf *b, const struct xb_bpf_cfg *cfg);
/* Capture samples of PERF_FD's thread TID: its thread-map entry
 * (CUR_PROC_SLOT: the address of that scheduler's
 * ErtsSchedulerData.current_process, 0 for other threads), then
 * PERF_EVENT_IOC_SET_BPF.  An event can carry one program only. */
int xb_bpf_attach(struct xb_bpf *b, int perf_fd, pid_t tid, uint64_t cur_proc_slot);
/* xb_bpf_attach's return when the threads map is full (the thread is not
 * sampled; xb_err says so). */
#define XB_BPF_FULL (-2)
/* The most threads the map holds: sized at xb_bpf_open from the fd limit
 * (one fd per thread's event), between 16,384 and XB_BPF_MAX_THREADS. */
#define XB_BPF_MAX_THREADS (1u << 18)
uint32_t xb_bpf_max_threads(const struct xb_bpf *b);
/* Forget TID (it exited; tids are reused).  Its event detaches on close. */
void xb_bpf_detach_thread(struct xb_bpf *b, pid_t tid);
/* The ring buffer's epoll-able fd (readable when the ring is half full). */
int xb_bpf_fd(const struct xb_bpf *b);
/* Deliver the records in the ring to cb; returns the samples delivered
 * (malformed records are counted in xb_bpf_stats.malformed), or -1.  The
 * sample's pointers (stack, regions) point into the ring: valid only
 * during the callback.  BUDGET_NS > 0 stops after that much time (checked
 * after each record; the rest stay in the ring for the next call):
 * libbpf's consume reads until the ring is empty, so a consumer slower
 * than the program (a costly sample on a saturated machine) would never
 * return, and the run would not end at its -d or on ^C.  0: until empty. */
int xb_bpf_consume(struct xb_bpf *b, void (*cb)(const struct xb_sample *s, void *arg), void *arg,
		   uint64_t budget_ns);
void xb_bpf_close(struct xb_bpf *b);

struct xb_bpf_stats {
	uint64_t runs;       /* program invocations */
	uint64_t records;    /* records written */
	uint64_t ring_full;  /* records lost: the ring was full */
	uint64_t no_conf;    /* runs before a configuration was set */
	uint64_t delivered, malformed; /* by xb_bpf_consume */
	uint64_t unread;     /* written and still in the ring (not consumed by the end) */
	uint64_t run_ns, run_cnt; /* the kernel's run-time statistics (0 unless enabled) */
	uint64_t verified_insns;  /* instructions the verifier went through (complexity) */
	/* Delivered records with each XB_BPF_F_* flag (bit i -> flags[i]):
	 * how E was found, tails cut or capped, faults (for -v). */
	uint64_t flags[XB_BPF_NFLAGS];
};
/* Turn on the kernel's run-time statistics of BPF programs (as
 * kernel.bpf_stats_enabled=1 does, while this handle lives). */
int xb_bpf_enable_stats(struct xb_bpf *b);
int xb_bpf_stats(struct xb_bpf *b, struct xb_bpf_stats *st);

/* Decode one record (pure; exposed for unit tests and fuzzing).  Fills
 * OUT: tid, cpu, time_ns, ip (= regs[IP]), user, regs, stack/stack_size
 * (the user-stack copy) and regions: the user stack at regs[SP], the
 * 8-byte current_process slot (its value: c_p), the process struct at
 * c_p, the Erlang-stack tail, in that order, each only when present.
 * thread is -1 (the caller's to set).  -1 on a malformed or short record. */
int xb_bpf_parse(const void *rec, size_t len, struct xb_sample *out);

#endif

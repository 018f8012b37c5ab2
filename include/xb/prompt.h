/* prompt.h - reads at the moment of the sample on the perf path: the
 * user-space twin of the BPF capture program (capture.bpf.c).
 *
 * The schedulers' perf events are opened per CPU and write into one ring
 * per CPU (xb_sampler_opts.percpu_kinds), which wakes at every sample.  A
 * reader thread pinned to that CPU at SCHED_FIFO waits on it.  The kernel
 * takes a sample in an interrupt on the sampled thread's CPU and wakes
 * the reader there; a real-time thread woken on a CPU preempts the
 * ordinary thread running on it when the interrupt returns, before that
 * thread executes another instruction.  So the reader sees the VM exactly
 * as the sample did -- the scheduler's current process, its struct and
 * its Erlang stack -- and copies them with process_vm_readv(2) into a
 * record of the BPF program's layout (bpf_record.h).  The session then
 * walks that record as it walks a BPF one, with no live read later.
 *
 * What it costs the VM: the sampled thread waits on its CPU while the
 * reader copies (three process_vm_readv calls and a context switch each
 * way per sample; bench/capture_bench.py measures it).  The VM is never
 * stopped: other threads go on, and the thread itself resumes as soon as
 * the copy is made, as after the kernel's own sampling interrupt.
 *
 * Needs SCHED_FIFO (CAP_SYS_NICE, or root, or RLIMIT_RTPRIO): without it
 * the reader would not run before the sampled thread, and the session
 * falls back to reading live on its timer (xb_prompt_usable says why).
 *
 * Threads: the readers never touch the sampler's thread table (the main
 * thread may reallocate it); they find a thread's current_process slot
 * in a table of their own (xb_prompt_set_slot), and hand records to the
 * main thread through one single-producer single-consumer queue each. */
#ifndef XB_PROMPT_H
#define XB_PROMPT_H

#include "xb/bpf_record.h"
#include "xb/sampler.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct xb_prompt;

/* Can this process run readers at SCHED_FIFO?  0, or -1 with xb_err()
 * saying what is missing. */
int xb_prompt_usable(void);

/* Start a reader on each of SMP's per-CPU rings (the sampler must have
 * been opened with percpu_kinds) for process PID, copying what CONF
 * describes (as the BPF program would).  Before xb_sampler_enable. */
int xb_prompt_start(struct xb_prompt **out, struct xb_sampler *smp, pid_t pid, const struct xb_bpf_conf *conf);
/* Thread TID's scheduler's current_process slot (0: not a scheduler). */
void xb_prompt_set_slot(struct xb_prompt *p, pid_t tid, uint64_t slot);
/* Deliver every record the readers made (each as xb_bpf_parse decodes
 * it; pointers valid during the callback); returns the samples delivered. */
int xb_prompt_consume(struct xb_prompt *p, xb_sample_cb cb, void *arg);
/* Stop and join the readers, free everything. */
void xb_prompt_stop(struct xb_prompt *p);

struct xb_prompt_stats {
	unsigned readers;
	uint64_t received;   /* samples the readers took from the rings */
	uint64_t records;    /* records handed over */
	uint64_t queue_full; /* samples lost: the main thread had not taken the records before */
	uint64_t malformed;  /* records that failed to decode */
	uint64_t read_ns;    /* time spent reading and copying, all readers */
	uint64_t syscalls;   /* process_vm_readv calls */
	uint64_t slots;      /* the table of schedulers' current_process slots */
	uint64_t slot_full;  /* threads it had no room for (their processes read live) */
};
void xb_prompt_stats(const struct xb_prompt *p, struct xb_prompt_stats *st);

/* The copy itself (pure given READ; exposed for unit tests): what the
 * BPF program would write for sample SMP of a thread whose
 * current_process slot is SLOT (0: none), into OUT (at most CAP bytes,
 * which must hold the record's largest size).  READ(arg, addr, buf, len)
 * returns how many bytes it could read from addr on (0..len: it stops at
 * the first byte it cannot read).  Returns the record's length, 0 when
 * OUT is too small. */
typedef size_t (*xb_prompt_read_fn)(void *arg, uint64_t addr, void *buf, size_t len);
size_t xb_prompt_capture(const struct xb_bpf_conf *c, const struct xb_sample *smp, uint64_t slot,
			 xb_prompt_read_fn read, void *arg, uint8_t *out, size_t cap);
/* The largest record xb_prompt_capture writes for CONF. */
size_t xb_prompt_record_max(const struct xb_bpf_conf *c);

#endif

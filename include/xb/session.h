/* session.h - one sampling session: attach to a VM, open the sampler,
 * unwinder, Erlang-stack state and code map, run the loop, and hand each
 * resolved sample to the sinks.  The sample flows one way:
 *   sampler -> unwind -> erlstack (process, Erlang stack) -> frames -> sinks.
 * A tool parses its options, opens a session, adds the sinks of its mode
 * and runs it. */
#ifndef XB_SESSION_H
#define XB_SESSION_H

#include "xb/by.h"
#include "xb/codemap.h"
#include "xb/erlstack.h"
#include "xb/frames.h"
#include "xb/profile.h"
#include "xb/sampler.h"
#include "xb/sink.h"
#include "xb/unwind.h"
#include "xb/vm.h"

#include <signal.h>

enum xb_capture { XB_CAPTURE_AUTO, XB_CAPTURE_BPF, XB_CAPTURE_PERF };

/* BPF capture: how much of a process's Erlang stack is copied with each
 * sample (from E - margin towards the stack's bottom at hend): deeper
 * stacks have their outer frames read live, which -v counts.  16 KiB holds
 * 2,000 frames of the usual two words, far more than the workloads seen
 * (a broker's stacks are a few hundred bytes); the margin covers an E that
 * may be stale (c_p->stop, in C code that did not store it). */
#define XB_BPF_ESTACK_BYTES 16384
#define XB_BPF_ESTACK_MARGIN 2048

struct xb_session_opts {
	unsigned freq;          /* Hz per thread (when period == 0) */
	uint64_t period;        /* events between samples, 0 = use freq */
	unsigned user_stack;    /* bytes of user stack copied per sample */
	bool include_kernel, software_event;
	unsigned wakeup;        /* samples per wakeup, 0 = drain on a timer */
	bool wakeup_given;      /* else 0: a timer */
	unsigned max_depth;     /* frames kept, native and Erlang each */
	double max_skid_ms;     /* live reads later than this: only the proven part is kept */
	int force_reg[3];       /* c_p, E, I overrides, or -1 */
	bool want_identity;     /* read pid and registered name of every process */
	bool keep_old_maps;     /* frames of earlier samples stay valid until the end */
	enum xb_capture capture;
	bool realtime;          /* run the drain loop at SCHED_FIFO priority when allowed */
	bool perf_read_later;   /* perf path: read the process live later, not at the sample (prompt.h) */
	enum xb_by by;          /* --by: every stack gets its group as outermost frame */
	unsigned drain_ms;      /* drain interval (0: the default, 2 or 5 ms) */
	bool drain_given;       /* --drain-ms: also with BPF capture */
	bool sinks_only;        /* the samples go to the sinks only, not to the
				 * profile, which holds what a sink adds (--wall) */
};

/* Skid (sample -> last live read) as a histogram: memory does not grow
 * with the run.  Buckets: 8 per power of two of microseconds. */
#define XB_SKID_BUCKETS (64 * 8)
struct xb_skid {
	uint64_t n, max_us;
	uint64_t bucket[XB_SKID_BUCKETS];
};
void xb_skid_add(struct xb_skid *h, uint64_t us);
/* The P-th percentile (0..100), in microseconds (upper bound of its bucket, at most max). */
uint64_t xb_skid_percentile(const struct xb_skid *h, double p);

struct xb_session_stats {
	uint64_t received, processed;
	/* dropped, by reason: their sum is received - processed */
	uint64_t no_regs, truncated_unwind, bad, stale, too_stale, malformed;
	uint64_t depth_limited, unresolved_frames, truncated_erlang;
	uint64_t no_live_read;          /* processed samples that needed no live read */
	uint64_t downgraded_stale;      /* live reads too late: kept the proven frames only */
	uint64_t capture_faults;        /* BPF: samples with reads the program could not make */
	struct xb_skid skid;            /* samples that read live */
};

struct xb_session {
	struct xb_session_opts o;
	struct xb_vm vm;
	bool attached, started;
	uint64_t events_opened_ns; /* setup after this delays sampling (-vv) */
	struct xb_codemap cm;
	struct xb_estate es;
	struct xb_unwinder uw;
	struct xb_sampler smp;
	struct xb_profile prof;     /* every resolved sample's stack, by frame ids */
	struct xb_frames fr;
	struct xb_session_stats st;
	struct xb_sink *sinks[8];
	size_t nsinks;
	const char *capture_name;   /* "perf" or "bpf" */
	const char *capture_why;    /* why not bpf, when perf */
	char capture_msg[400];
	struct xb_bpf *bpf;         /* the BPF capture path, when in use */
	struct xb_prompt *prompt;   /* perf path: readers at the sample (prompt.h), when in use */
	char prompt_msg[200];       /* why the perf path reads live later instead */
	unsigned wakeup;            /* in use: samples per wakeup, 0 = timer */
	int32_t *tidmap;            /* tid -> sampler thread index (BPF records) */
	size_t tidmap_cap;
	uint64_t tidmap_n;          /* the sampler's generation it was built at */
	const char *priority_name;  /* what the drain loop runs at */
	bool rt_ok, rt_on;          /* SCHED_FIFO allowed; held now */
	uint64_t burst_start_ns;    /* when the loop last woke at SCHED_FIFO */
	uint64_t rt_lowered;        /* bursts cut short (session.c, RT_BURST_NS) */
	unsigned drain_ms;
	uint64_t first_ns, last_ns; /* first and last sample times */
	uint64_t start_unix_ns;
	double start_s, elapsed_s, cpu_before_s, cpu_sampling_s;
	bool vm_exited;
	bool drained_at_end;        /* the run's end drained what the events took (not after ^C or exit) */
	struct xb_estack tmp_es;
};

/* Attach to the VM (read-only).  Enough for --check and the perf map. */
int xb_session_attach(struct xb_session *s, pid_t pid, const struct xb_attach_opts *ao);
/* Build the code map, Erlang-stack state, unwinder and sampler. */
int xb_session_start(struct xb_session *s, const struct xb_session_opts *o);
void xb_session_add_sink(struct xb_session *s, struct xb_sink *k);
/* Sample until SECONDS have passed (0: no limit), *STOP is set, every sink
 * is done, or the VM exits (s->vm_exited).  0, or -1 with xb_err. */
int xb_session_run(struct xb_session *s, double seconds, volatile sig_atomic_t *stop);
/* The -v statistics line and notes (stderr). */
void xb_session_report_stats(const struct xb_session *s, FILE *f);
/* --skid-summary. */
void xb_session_report_skid(const struct xb_session *s, FILE *f);
/* Normal scheduler thread T, not on a CPU: is it blocked off the CPU in a
 * NIF or BIF called by its current process (a sleep, blocking I/O, a
 * lock)?  Then *UW (its native stack, unwound from the system call it
 * waits in) and *ES (the process and its Erlang stack,
 * xb_erlang_stack_blocked), read while it stayed blocked at the same
 * place in the same call (the same current process, c_p->fcalls and
 * c_p->reds before and after: another call to the same NIF would block
 * at the same place), and true.  A scheduler waiting for work (no current
 * process) costs one read. */
bool xb_session_blocked_call(struct xb_session *s, const struct xb_thread *t, struct xb_unwind *uw,
			     struct xb_estack *es);
/* Frees everything, sinks included. */
void xb_session_close(struct xb_session *s);

#endif

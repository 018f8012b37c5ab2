/* common.h - error reporting and small helpers shared by every stage.
 *
 * Convention: functions that can fail return a negative value (or NULL)
 * and leave a one-line, user-facing message in a thread-local buffer,
 * readable with xb_err().  Nothing that reads the target VM aborts. */
#ifndef XB_COMMON_H
#define XB_COMMON_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#define XB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Brent's cycle detection over a chain of remote pointers (signal queues,
 * heap fragments, monitor lists, the JIT registration chain): a chain that
 * loops (corruption, or a hostile process) is seen within twice its length,
 * not at a bound of millions of nodes.  Start with the chain's first node,
 * then pass every later node to xb_cycle_seen. */
struct xb_cycle {
	uint64_t tortoise, power, lam;
};

static inline void xb_cycle_init(struct xb_cycle *c, uint64_t first)
{
	*c = (struct xb_cycle){ first, 1, 0 };
}

static inline bool xb_cycle_seen(struct xb_cycle *c, uint64_t x)
{
	if (x == c->tortoise)
		return true;
	if (++c->lam == c->power) {
		c->tortoise = x;
		c->power *= 2;
		c->lam = 0;
	}
	return false;
}

#if defined(__GNUC__)
#define XB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define XB_PRINTF(f, a)
#endif

/* Set the current error message (printf-style).  Returns -1 so callers can
 * write `return xb_fail("...")`. */
int xb_fail(const char *fmt, ...) XB_PRINTF(1, 2);
const char *xb_err(void);
/* IN as one line of text a terminal shows as is: control characters
 * (C0, DEL, C1) and invalid UTF-8 bytes become "\xHH".  Into OUT (CAP
 * bytes, NUL included; cut at a whole character); returns the length.
 * xb_fail applies it to every message. */
size_t xb_sanitize(const char *in, char *out, size_t cap);

/* Verbosity for diagnostics on stderr (-v). */
extern int xb_verbose;
void xb_debug(const char *fmt, ...) XB_PRINTF(1, 2);

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC, the clock perf uses for
 * sample times when use_clockid is set). */
uint64_t xb_now_ns(void);
/* Wall-clock time in nanoseconds since the epoch (CLOCK_REALTIME). */
uint64_t xb_realtime_ns(void);

/* Read a whole (small) file into a malloc'd NUL-terminated buffer; NULL
 * (errno EFBIG) beyond XB_SLURP_MAX bytes.  Not for files the target
 * names: those go through xb_safe_open (xb/safefile.h). */
#define XB_SLURP_MAX (64u << 20)
char *xb_slurp(const char *path, size_t *len);
/* The same for at most MAX bytes (else EFBIG); a file that cannot be
 * opened is reported (xb_fail) too. */
char *xb_slurp_max(const char *path, size_t max, size_t *len);
/* All of FD (up to MAX bytes, else EFBIG), NUL-terminated; WHAT names it
 * in the error (xb_fail). */
char *xb_read_fd(int fd, size_t max, size_t *len, const char *what);

/* ---- budgets ----
 * Everything the target's memory sizes (how many atoms, modules, JIT
 * registrations, how deep a stack) is read within a fixed budget; going
 * over one is an event, counted here, never a hang or an allocation the
 * target chose.  -v prints the first of each kind as it happens; the
 * tools report the counts at the end (xb_overruns_report). */
enum xb_overrun {
	XB_OVR_ATOM_CACHE,      /* atom cache full: further atoms read each time */
	XB_OVR_CODEMAP_ENTRIES, /* code map rebuild stopped at its entry budget */
	XB_OVR_CODEMAP_BYTES,   /* code map rebuild stopped at its byte budget */
	XB_OVR_JIT_CYCLE,       /* JIT registration chain loops */
	XB_OVR_JIT_CHAIN,       /* JIT registration chain longer than allowed */
	XB_OVR_LINES,           /* --lines: line records over budget */
	XB_OVR_STACK_BYTES,     /* one sample's live stack walk hit its byte cap */
	XB_OVR_DISCOVERY,       /* discovery of unnamed globals gave up (effort) */
	XB_OVR_CODEMAP_KEPT,    /* --pstack: too many code map versions kept */
	XB_OVR_MAPS,            /* the target's mappings past XB_MAPS_MAX_LINES */
	XB_OVR_COUNT
};
extern uint64_t xb_overruns[XB_OVR_COUNT];
void xb_overrun(enum xb_overrun what, const char *fmt, ...) XB_PRINTF(2, 3);
/* One line on F from any layer, with the program's name:
 * "PROG: note: ..." (what the reader should know; not a failure),
 * "PROG: warning: ..." (an answer is weaker than it looks, and why),
 * "PROG: ..." (statistics, -v).  FMT without the final newline. */
void xb_note(FILE *f, const char *fmt, ...) XB_PRINTF(2, 3);
void xb_warn(FILE *f, const char *fmt, ...) XB_PRINTF(2, 3);
void xb_say(FILE *f, const char *fmt, ...) XB_PRINTF(2, 3);

/* One line "PROG: note: ..." on F naming the budgets that were reached
 * (nothing when none was); returns how many kinds. */
int xb_overruns_report(FILE *f, const char *prog);

/* Set by the tools' SIGINT/SIGTERM handlers: long loops over the
 * target's data (code map rebuilds, discovery, stack walks) stop soon
 * after (well within 100 ms). */
extern volatile sig_atomic_t xb_interrupted;

/* The tools' SIGINT and SIGTERM (xb_catch_signals, as the tool starts):
 * until xb_signals_graceful() -- called once an output is open and what
 * is gathered is worth writing -- a signal ends the tool at once with one
 * line, "PROG: interrupted; nothing written", exit 130 (no file exists
 * yet); from then on it sets xb_stop_requested (the tool ends its run and
 * writes what it has) and xb_interrupted. */
extern volatile sig_atomic_t xb_stop_requested;
void xb_catch_signals(const char *prog);
void xb_signals_graceful(void);
/* Print "PROG: <xb_err()>" on stderr: the tool has failed and said so.
 * A signal while it tears down (freeing, closing, a sanitizer's leak
 * scan at exit) then ends it at once with CODE and no second line: the
 * one line said is the outcome, and "interrupted; nothing written" after
 * it would contradict it (the exit status too). */
void xb_report_failure(const char *prog, int code);

/* Parse a decimal PID; returns -1 (with message) on anything else. */
int xb_parse_pid(const char *s, int *pid);

/* Growable array helper. */
int xb_grow(void **v, size_t *cap, size_t need, size_t elem);
/* The same for an array indexed by something (a thread's index) whose
 * elements must start zeroed: the new ones are. */
int xb_grow_zeroed(void **v, size_t *cap, size_t need, size_t elem);

#endif

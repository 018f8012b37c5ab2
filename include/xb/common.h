/* common.h - error reporting and small helpers shared by every stage.
 *
 * Convention: functions that can fail return a negative value (or NULL)
 * and leave a one-line, user-facing message in a thread-local buffer,
 * readable with xb_err().  Nothing that reads the target VM aborts. */
#ifndef XB_COMMON_H
#define XB_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define XB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define XB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define XB_PRINTF(f, a)
#endif

/* Set the current error message (printf-style).  Returns -1 so callers can
 * write `return xb_fail("...")`. */
int xb_fail(const char *fmt, ...) XB_PRINTF(1, 2);
const char *xb_err(void);

/* Verbosity for diagnostics on stderr (-v). */
extern int xb_verbose;
void xb_debug(const char *fmt, ...) XB_PRINTF(1, 2);

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC, the clock perf uses for
 * sample times when use_clockid is set). */
uint64_t xb_now_ns(void);
/* Wall-clock time in nanoseconds since the epoch (CLOCK_REALTIME). */
uint64_t xb_realtime_ns(void);

/* Read a whole (small) file into a malloc'd NUL-terminated buffer. */
char *xb_slurp(const char *path, size_t *len);

/* Parse a decimal PID; returns -1 (with message) on anything else. */
int xb_parse_pid(const char *s, int *pid);

/* Growable array helper. */
int xb_grow(void **v, size_t *cap, size_t need, size_t elem);

#endif

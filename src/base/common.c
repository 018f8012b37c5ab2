/* common.c - error buffer, debug printing, small utilities. */
#define _GNU_SOURCE
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static __thread char errbuf[1024];
int xb_verbose;
volatile sig_atomic_t xb_interrupted;
volatile sig_atomic_t xb_stop_requested;
uint64_t xb_overruns[XB_OVR_COUNT];

static char signal_msg[96];
static size_t signal_msg_len;
static volatile sig_atomic_t signals_graceful;
static volatile sig_atomic_t failure_code; /* xb_report_failure: said, with this exit status */

static void on_signal(int sig)
{
	(void)sig;
	if (failure_code)
		_exit(failure_code);
	if (!signals_graceful) {
		ssize_t w = write(STDERR_FILENO, signal_msg, signal_msg_len);
		(void)w;
		_exit(130);
	}
	xb_stop_requested = 1;
	xb_interrupted = 1; /* long reads of the VM's tables stop too */
}

void xb_catch_signals(const char *prog)
{
	int n = snprintf(signal_msg, sizeof(signal_msg), "%s: interrupted; nothing written\n", prog);
	signal_msg_len = n < 0 ? 0 : (size_t)n < sizeof(signal_msg) ? (size_t)n : sizeof(signal_msg) - 1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

void xb_signals_graceful(void)
{
	signals_graceful = 1;
}

void xb_report_failure(const char *prog, int code)
{
	/* A signal while the line is written waits for it (blocked), then
	 * finds the outcome said: the line, exit CODE, nothing else. */
	sigset_t both, old;
	sigemptyset(&both);
	sigaddset(&both, SIGINT);
	sigaddset(&both, SIGTERM);
	sigprocmask(SIG_BLOCK, &both, &old);
	fprintf(stderr, "%s: %s\n", prog, xb_err());
	failure_code = code > 0 ? code : 1;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static const char *const overrun_names[XB_OVR_COUNT] = {
	[XB_OVR_ATOM_CACHE] = "atom cache full",
	[XB_OVR_CODEMAP_ENTRIES] = "code map entries",
	[XB_OVR_CODEMAP_BYTES] = "code map bytes",
	[XB_OVR_JIT_CYCLE] = "JIT chain loops",
	[XB_OVR_JIT_CHAIN] = "JIT chain length",
	[XB_OVR_LINES] = "line records",
	[XB_OVR_STACK_BYTES] = "stack walk bytes",
	[XB_OVR_DISCOVERY] = "discovery effort",
	[XB_OVR_CODEMAP_KEPT] = "code map versions kept",
	[XB_OVR_MAPS] = "mappings past the cap",
};

void xb_overrun(enum xb_overrun what, const char *fmt, ...)
{
	if (what >= XB_OVR_COUNT)
		return;
	if (xb_overruns[what]++ == 0 && xb_verbose) {
		char raw[512], line[600];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(raw, sizeof(raw), fmt, ap);
		va_end(ap);
		xb_sanitize(raw, line, sizeof(line));
		fprintf(stderr, "limit: %s: %s\n", overrun_names[what], line);
	}
}

static void say(FILE *f, const char *kind, const char *fmt, va_list ap)
{
	char line[2048];
	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(f, "%s: %s%s\n", program_invocation_short_name, kind, line);
}

void xb_note(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(f, "note: ", fmt, ap);
	va_end(ap);
}

void xb_warn(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(f, "warning: ", fmt, ap);
	va_end(ap);
}

void xb_say(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(f, "", fmt, ap);
	va_end(ap);
}

int xb_overruns_report(FILE *f, const char *prog)
{
	char buf[512];
	size_t used = 0;
	int kinds = 0;
	for (int i = 0; i < XB_OVR_COUNT && used < sizeof(buf); i++) {
		if (!xb_overruns[i])
			continue;
		used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s %llu", kinds ? ", " : "",
					 overrun_names[i], (unsigned long long)xb_overruns[i]);
		kinds++;
	}
	if (kinds)
		fprintf(f, "%s: note: the VM's data went over %d of our limits (%s); what was within them "
			   "is shown (-v says where)\n", prog, kinds, buf);
	return kinds;
}

/* Length of the valid UTF-8 sequence at S (N bytes left) that is not a
 * C1 control (U+0080..U+009F), or 0. */
static size_t utf8_ok(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		need = 2, lo = c == 0xc2 ? 0xa0 : 0x80; /* C2 80..9F: C1 controls */
	else if (c >= 0xe0 && c <= 0xef)
		need = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++)
		if (i == 1 ? (s[i] < lo || s[i] > hi) : (s[i] < 0x80 || s[i] > 0xbf))
			return 0;
	return need;
}

size_t xb_sanitize(const char *in, char *out, size_t cap)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = strlen(in), used = 0;
	if (!cap)
		return 0;
	for (size_t i = 0; i < n;) {
		size_t k = s[i] >= 0x20 && s[i] < 0x7f ? 1 : s[i] >= 0x80 ? utf8_ok(s + i, n - i) : 0;
		if (k) {
			if (used + k >= cap)
				break;
			memcpy(out + used, s + i, k);
			used += k;
			i += k;
			continue;
		}
		if (used + 4 >= cap)
			break;
		used += (size_t)snprintf(out + used, cap - used, "\\x%02x", s[i]);
		i++;
	}
	out[used] = 0;
	return used;
}

int xb_fail(const char *fmt, ...)
{
	char raw[sizeof(errbuf)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* Messages name things the target controls (paths, names): one
	 * line, nothing a terminal would act on. */
	xb_sanitize(raw, errbuf, sizeof(errbuf));
	return -1;
}

const char *xb_err(void)
{
	return errbuf[0] ? errbuf : "unknown error";
}

void xb_debug(const char *fmt, ...)
{
	va_list ap;
	if (xb_verbose < 2)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

uint64_t xb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t xb_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

char *xb_read_fd(int fd, size_t max, size_t *lenp, const char *what)
{
	size_t cap = 4096 < max + 1 ? 4096 : max + 1, len = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		xb_fail("out of memory");
		return NULL;
	}
	for (;;) {
		if (len == cap) {
			if (cap > max) {
				free(buf);
				errno = EFBIG;
				xb_fail("%s: larger than %zu bytes (refused)", what, max);
				return NULL;
			}
			size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *nb = realloc(buf, ncap + 1);
			if (!nb) {
				free(buf);
				xb_fail("out of memory");
				return NULL;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			errno = e;
			xb_fail("%s: %s", what, strerror(e));
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	if (lenp)
		*lenp = len;
	return buf;
}

/* Kernel files (/proc) and our own inputs: never blocks on a FIFO, never
 * takes a terminal, stops at MAX bytes (EFBIG).  SAY: a file that cannot
 * be opened is an error message too (xb_slurp stays quiet: a thread's
 * /proc files vanish as it exits). */
static char *slurp(const char *path, size_t max, size_t *lenp, bool say)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (say)
			xb_fail("cannot read %s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	char *b = xb_read_fd(fd, max, lenp, path);
	int e = errno;
	close(fd);
	errno = e;
	return b;
}

char *xb_slurp(const char *path, size_t *lenp)
{
	return slurp(path, XB_SLURP_MAX, lenp, false);
}

char *xb_slurp_max(const char *path, size_t max, size_t *lenp)
{
	return slurp(path, max, lenp, true);
}

int xb_parse_pid(const char *s, int *pid)
{
	char *end;
	if (!s || !*s)
		return xb_fail("missing PID: pass the OS process id of a running BEAM (e.g. from `pgrep beam.smp`)");
	if (*s < '0' || *s > '9')
		return xb_fail("'%s' is not a PID: pass the numeric OS process id of a running BEAM", s);
	errno = 0;
	long v = strtol(s, &end, 10);
	if (*end || errno || v <= 0 || v > INT_MAX)
		return xb_fail("'%s' is not a PID: pass the numeric OS process id of a running BEAM", s);
	*pid = (int)v;
	return 0;
}

int xb_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	if (elem == 0 || need > SIZE_MAX / 2 / elem)
		return xb_fail("out of memory (%zu elements of %zu bytes)", need, elem);
	size_t nc = *cap ? *cap : 16;
	while (nc < need)
		nc *= 2;
	void *nv = realloc(*v, nc * elem);
	if (!nv)
		return xb_fail("out of memory");
	*v = nv;
	*cap = nc;
	return 0;
}

int xb_grow_zeroed(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t old = *cap;
	if (xb_grow(v, cap, need, elem) < 0)
		return -1;
	memset((char *)*v + old * elem, 0, (*cap - old) * elem);
	return 0;
}

/* common.c - error buffer, debug printing, small utilities. */
#define _GNU_SOURCE
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static __thread char errbuf[1024];
int xb_verbose;

int xb_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
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

char *xb_slurp(const char *path, size_t *lenp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return NULL;
	}
	for (;;) {
		if (len == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				close(fd);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			close(fd);
			errno = e;
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	if (lenp)
		*lenp = len;
	return buf;
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

/* procmaps.c - parser for /proc/PID/maps (proc(5)).
 *
 * Linear in the text: each line is parsed within its own bounds (up to its
 * newline), never with a function that looks at the rest of the text (a
 * sscanf on a pointer into the whole file made glibc strlen the rest at
 * every line: 64k mappings took 3 s).  The target chooses how many
 * mappings it has: past XB_MAPS_MAX_LINES (or XB_MAPS_MAX_BYTES of text)
 * the rest is left out and the maps are marked truncated. */
#define _GNU_SOURCE
#include "xb/procmaps.h"
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Hex digits at *P (before E), at most 16: the value, P moved past them.
 * -1 when there is none or too many. */
static int hex(const char **p, const char *e, unsigned long long *v)
{
	unsigned long long x = 0;
	const char *s = *p;
	int n = 0;
	for (; s < e; s++, n++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		if (n == 16)
			return -1;
		x = x << 4 | d;
	}
	if (n == 0)
		return -1;
	*v = x;
	*p = s;
	return 0;
}

static int dec(const char **p, const char *e, unsigned long long *v)
{
	unsigned long long x = 0;
	const char *s = *p;
	for (; s < e && *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (x > (~0ull - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	if (s == *p)
		return -1;
	*v = x;
	*p = s;
	return 0;
}

static int expect(const char **p, const char *e, char c)
{
	if (*p >= e || **p != c)
		return -1;
	(*p)++;
	return 0;
}

/* One line, [LINE, E) (no newline):
 * "start-end perms offset major:minor inode [path]". */
static int parse_line(const char *line, const char *e, struct xb_map *m)
{
	unsigned long long start, end, off, inode, dmaj, dmin;
	const char *p = line;
	if (hex(&p, e, &start) < 0 || expect(&p, e, '-') < 0 || hex(&p, e, &end) < 0 ||
	    expect(&p, e, ' ') < 0 || end < start)
		return -1;
	if (e - p < 5 || p[4] != ' ')
		return -1;
	const char *perms = p;
	for (int i = 0; i < 4; i++)
		if (perms[i] == ' ' || perms[i] == '\t' || perms[i] == '\0')
			return -1;
	p += 5;
	if (hex(&p, e, &off) < 0 || expect(&p, e, ' ') < 0 || hex(&p, e, &dmaj) < 0 ||
	    expect(&p, e, ':') < 0 || hex(&p, e, &dmin) < 0 || expect(&p, e, ' ') < 0 ||
	    dec(&p, e, &inode) < 0 || dmaj > 0xffffffffull || dmin > 0xffffffffull)
		return -1;
	if (p < e && *p != ' ' && *p != '\t')
		return -1;
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	m->start = start;
	m->end = end;
	m->offset = off;
	m->inode = inode;
	m->dev_major = (unsigned)dmaj;
	m->dev_minor = (unsigned)dmin;
	m->readable = perms[0] == 'r';
	m->writable = perms[1] == 'w';
	m->executable = perms[2] == 'x';
	m->shared = perms[3] == 's';
	m->path = strndup(p, (size_t)(e - p));
	return m->path ? 0 : -1;
}

int xb_maps_parse_n(const char *text, size_t len, struct xb_maps *out)
{
	size_t cap = 0;
	out->v = NULL;
	out->n = 0;
	out->truncated = false;
	const char *end = text + len;
	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *e = nl ? nl : end;
		if (e == line) {
			line++;
			continue;
		}
		if (out->n == XB_MAPS_MAX_LINES) {
			out->truncated = true;
			break;
		}
		if (xb_grow((void **)&out->v, &cap, out->n + 1, sizeof(*out->v)) < 0)
			goto fail;
		if (parse_line(line, e, &out->v[out->n]) < 0) {
			int shown = e - line < 60 ? (int)(e - line) : 60;
			xb_fail("malformed maps line: %.*s", shown, line);
			goto fail;
		}
		out->n++;
		line = nl ? nl + 1 : end;
	}
	return 0;
fail:
	xb_maps_free(out);
	return -1;
}

int xb_maps_parse(const char *text, struct xb_maps *out)
{
	return xb_maps_parse_n(text, strlen(text), out);
}

char *xb_maps_text(pid_t pid, size_t *lenp, bool *truncated)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		xb_fail("cannot read %s: %m", path);
		return NULL;
	}
	size_t cap = 1 << 16, len = 0;
	char *text = malloc(cap + 1);
	*truncated = false;
	while (text) {
		if (len == cap) {
			if (cap >= XB_MAPS_MAX_BYTES) {
				/* keep the whole lines read */
				char *nl = memrchr(text, '\n', len);
				len = nl ? (size_t)(nl - text) + 1 : 0;
				*truncated = true;
				break;
			}
			cap = cap * 2 > XB_MAPS_MAX_BYTES ? XB_MAPS_MAX_BYTES : cap * 2;
			char *t = realloc(text, cap + 1);
			if (!t) {
				free(text);
				text = NULL;
				break;
			}
			text = t;
		}
		ssize_t k = read(fd, text + len, cap - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			xb_fail("cannot read %s: %m", path);
			free(text);
			close(fd);
			return NULL;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	if (!text) {
		xb_fail("cannot read %s: out of memory", path);
		return NULL;
	}
	text[len] = 0;
	*lenp = len;
	return text;
}

int xb_maps_read(pid_t pid, struct xb_maps *out)
{
	size_t len;
	bool truncated;
	char *text = xb_maps_text(pid, &len, &truncated);
	if (!text)
		return -1;
	int r = xb_maps_parse_n(text, len, out);
	free(text);
	if (r == 0 && truncated)
		out->truncated = true;
	return r;
}

void xb_maps_free(struct xb_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
	m->truncated = false;
}

const struct xb_map *xb_maps_find(const struct xb_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

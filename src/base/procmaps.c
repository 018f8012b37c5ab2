/* procmaps.c - parser for /proc/PID/maps (proc(5)). */
#define _GNU_SOURCE
#include "xb/procmaps.h"
#include "xb/common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_line(const char *line, struct xb_map *m)
{
	unsigned long long start, end, off, inode;
	char perms[8];
	unsigned dmaj, dmin;
	int pos = 0;
	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu%n", &start, &end, perms, &off,
		   &dmaj, &dmin, &inode, &pos) < 7 || end < start || strlen(perms) != 4)
		return -1;
	const char *p = line + pos;
	while (*p == ' ' || *p == '\t')
		p++;
	size_t len = strcspn(p, "\n");
	m->start = start;
	m->end = end;
	m->offset = off;
	m->inode = inode;
	m->dev_major = dmaj;
	m->dev_minor = dmin;
	m->readable = perms[0] == 'r';
	m->writable = perms[1] == 'w';
	m->executable = perms[2] == 'x';
	m->shared = perms[3] == 's';
	m->path = strndup(p, len);
	return m->path ? 0 : -1;
}

int xb_maps_parse(const char *text, struct xb_maps *out)
{
	size_t cap = 0;
	out->v = NULL;
	out->n = 0;
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		if (nl == line) {
			line++;
			continue;
		}
		if (xb_grow((void **)&out->v, &cap, out->n + 1, sizeof(*out->v)) < 0)
			goto fail;
		if (parse_line(line, &out->v[out->n]) < 0) {
			xb_fail("malformed maps line: %.60s", line);
			goto fail;
		}
		out->n++;
		line = nl ? nl + 1 : NULL;
	}
	return 0;
fail:
	xb_maps_free(out);
	return -1;
}

int xb_maps_read(pid_t pid, struct xb_maps *out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	char *text = xb_slurp(path, NULL);
	if (!text)
		return xb_fail("cannot read %s: %m", path);
	int r = xb_maps_parse(text, out);
	free(text);
	return r;
}

void xb_maps_free(struct xb_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
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

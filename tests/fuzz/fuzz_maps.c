/* fuzz_maps.c - libFuzzer target: /proc/PID/maps text (xb_maps_parse_n),
 * which the target shapes (its mappings, the names of the files it maps).
 * What is accepted must be what the kernel's format says, line by line:
 * printed back in that format and parsed again it gives the same maps; no
 * more than XB_MAPS_MAX_LINES; no path holds a newline; on sorted,
 * disjoint maps xb_maps_find finds each mapping at its start and end - 1.
 * The input is not NUL-terminated: the parser must stay within its length. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/procmaps.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void same(const struct xb_map *a, const struct xb_map *b)
{
	if (a->start != b->start || a->end != b->end || a->offset != b->offset || a->inode != b->inode ||
	    a->dev_major != b->dev_major || a->dev_minor != b->dev_minor || a->readable != b->readable ||
	    a->writable != b->writable || a->executable != b->executable || a->shared != b->shared ||
	    strcmp(a->path, b->path) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly SIZE bytes: ASan sees a read past them */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	struct xb_maps m;
	if (xb_maps_parse_n(text, size, &m) < 0) {
		if (m.n || m.v)
			__builtin_trap(); /* a failure leaves nothing behind */
		free(text);
		return 0;
	}
	if (m.n > XB_MAPS_MAX_LINES)
		__builtin_trap();
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	bool sorted = true;
	for (size_t i = 0; i < m.n; i++) {
		const struct xb_map *p = &m.v[i];
		if (p->end < p->start || strchr(p->path, '\n'))
			__builtin_trap();
		if (i && p->start < m.v[i - 1].end)
			sorted = false;
		if (f)
			fprintf(f, "%llx-%llx %c%c%c%c %08llx %02x:%02x %llu %s\n", (unsigned long long)p->start,
				(unsigned long long)p->end, p->readable ? 'r' : '-', p->writable ? 'w' : '-',
				p->executable ? 'x' : '-', p->shared ? 's' : 'p', (unsigned long long)p->offset,
				p->dev_major, p->dev_minor, (unsigned long long)p->inode, p->path);
	}
	if (f && fclose(f) == 0) {
		struct xb_maps again;
		/* (a path that ends in spaces or tabs is printed with them,
		 * and kept: the parser strips only those before it) */
		if (xb_maps_parse_n(out, outlen, &again) < 0 || again.n != m.n)
			__builtin_trap();
		for (size_t i = 0; i < m.n; i++)
			same(&m.v[i], &again.v[i]);
		xb_maps_free(&again);
	}
	free(out);
	if (sorted)
		for (size_t i = 0; i < m.n; i++) {
			const struct xb_map *p = &m.v[i];
			if (p->end > p->start &&
			    (xb_maps_find(&m, p->start) != p || xb_maps_find(&m, p->end - 1) != p))
				__builtin_trap();
		}
	xb_maps_free(&m);
	free(text);
	return 0;
}

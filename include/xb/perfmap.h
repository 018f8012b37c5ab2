/* perfmap.h - atomic, symlink-safe perf map output. */
#ifndef XB_PERFMAP_H
#define XB_PERFMAP_H

#include "xb/codemap.h"

#include <stdio.h>

int xb_perfmap_write_file(const struct xb_codemap *cm, const char *path);

/* A perf map file ("START SIZE NAME" per line, hex; the VM's own '$'
 * prefix dropped; later lines win) as a code map.  0, or -1. */
int xb_perfmap_read(const char *path, struct xb_codemap *cm);

/* --symbolize: copy `perf script` output from IN to OUT, naming every
 * address (ip field) perf left "[unknown]" (or bare, -F ip) that CM
 * names: samples and callchain lines alike (src/output/symbolize.c). */
struct xb_symbolize_stats {
	uint64_t lines, unknown, named;
};
/* perf prints callchain addresses in a file's mapping relative to the file
 * ("398d80 [unknown] (/memfd:vmem (deleted))"): BASE + that is the address
 * (BASE = mapping start - file offset). */
struct xb_reloc {
	const char *path;
	uint64_t base;
};
int xb_symbolize(FILE *in, FILE *out, const struct xb_codemap *cm, const struct xb_reloc *rel,
		 size_t nrel, struct xb_symbolize_stats *st);

#endif

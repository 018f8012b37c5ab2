/* perfmap.h - atomic, symlink-safe perf map output. */
#ifndef XB_PERFMAP_H
#define XB_PERFMAP_H

#include "xb/codemap.h"

#include <stdio.h>

int xb_perfmap_write_file(const struct xb_codemap *cm, const char *path);

/* Perf map text: "START SIZE NAME\n" per entry, addresses in hex.  The
 * format has no escaping (perf takes the rest of the line as the name),
 * and a name comes from the VM's memory: an atom may hold any character,
 * a newline too, which would start a line of its own.  So a name is
 * written as the other outputs show it (xb_perfmap_escape): a control
 * character (C0, DEL, C1) as \n, \t, \r or \xHH (\u0080.. for C1),
 * invalid UTF-8 as U+FFFD.  Names without such characters (all real
 * Erlang code in practice) are written unchanged. */
int xb_perfmap_print(const struct xb_codemap *cm, FILE *f);
/* NAME as a perf map name into BUF (LEN bytes, NUL included; cut at a
 * whole character); returns the length.  Never a control character. */
size_t xb_perfmap_escape(const char *name, char *buf, size_t len);
/* Parse perf map text from F (NAME for messages) into CM, as
 * xb_perfmap_read does. */
int xb_perfmap_parse(FILE *f, const char *name, struct xb_codemap *cm);

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

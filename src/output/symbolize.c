/* symbolize.c - erlang-write-perf-map --symbolize: name the JIT addresses
 * in `perf script` output.
 *
 * Without VM flags the JIT's code is dual-mapped from a memfd and perf
 * names none of it ("7f3d30197d88 [unknown] (/memfd:vmem (deleted))"), in
 * samples and callchains alike.  `perf script` prints the absolute address
 * (its ip field), so a filter can name it from the VM's code map without a
 * restart.  Every line is copied; only an address followed by "[unknown]"
 * (or by nothing: `-F ip`) that the map names gets the name in place. */
#define _GNU_SOURCE
#include "xb/perfmap.h"
#include "xb/common.h"
#include "xb/writers.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char UNKNOWN[] = "[unknown]";

/* Hex digits at P, as perf prints ip fields (%16lx, no 0x; callchain
 * addresses relative to a file can be short).  Only one followed by
 * "[unknown]" or by the end of the line is ever looked up, and only one
 * the code map names is changed.  Returns the length, 0 if not one. */
static size_t hex_addr(const char *p, uint64_t *v)
{
	size_t n = 0;
	uint64_t x = 0;
	while (isxdigit((unsigned char)p[n]) && n < 16) {
		char c = (char)tolower((unsigned char)p[n]);
		x = x * 16 + (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
		n++;
	}
	if (n < 1 || isxdigit((unsigned char)p[n]) || isalnum((unsigned char)p[n]) || p[n] == ':' ||
	    p[n] == '.')
		return 0;
	*v = x;
	return n;
}

/* The address of a callchain entry: perf prints the ip of an unnamed
 * frame in a file-backed mapping relative to that file ("398d80 [unknown]
 * (/memfd:vmem (deleted))"), while a sample's own ip field is absolute.
 * A relative address is made absolute with the mapping of the file named
 * after it. */
static const struct xb_code *find(const struct xb_codemap *cm, uint64_t addr, const char *rest,
				  const struct xb_reloc *rel, size_t nrel)
{
	const struct xb_code *c = xb_codemap_find(cm, addr);
	if (c)
		return c;
	for (size_t i = 0; i < nrel; i++) {
		const char *p = strstr(rest, rel[i].path);
		if (p && p > rest && p[-1] == '(' && p[strlen(rel[i].path)] == ')')
			return xb_codemap_find(cm, rel[i].base + addr);
	}
	return NULL;
}

int xb_symbolize(FILE *in, FILE *out, const struct xb_codemap *cm, const struct xb_reloc *rel,
		 size_t nrel, struct xb_symbolize_stats *st)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	memset(st, 0, sizeof(*st));
	while ((len = getline(&line, &cap, in)) > 0) {
		size_t i = 0, L = (size_t)len;
		while (i < L) {
			uint64_t addr;
			size_t n;
			if ((i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t') &&
			    (n = hex_addr(line + i, &addr))) {
				const char *after = line + i + n;
				bool unk = strncmp(after, " [unknown]", sizeof(UNKNOWN)) == 0;
				bool bare = *after == '\n' || *after == 0;
				fwrite(line + i, 1, n, out);
				i += n;
				if (!unk && !bare)
					continue;
				st->unknown++;
				const struct xb_code *c = find(cm, addr, after, rel, nrel);
				if (!c)
					continue;
				char clean[1200];
				fprintf(out, " %s", xb_text_clean(c->name, false, clean, sizeof(clean)));
				st->named++;
				if (unk)
					i += sizeof(UNKNOWN); /* the space and "[unknown]" */
				continue;
			}
			fputc(line[i], out);
			i++;
		}
		st->lines++;
	}
	free(line);
	if (ferror(in))
		return xb_fail("reading standard input: %s", strerror(errno ? errno : EIO));
	return ferror(out) ? xb_fail("write error: %s", strerror(errno ? errno : EIO)) : 0;
}

int xb_perfmap_read(const char *path, struct xb_codemap *cm)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return xb_fail("cannot open %s: %m", path);
	int rc = xb_perfmap_parse(f, path, cm);
	fclose(f);
	return rc;
}

int xb_perfmap_parse(FILE *f, const char *path, struct xb_codemap *cm)
{
	memset(cm, 0, sizeof(*cm));
	char *line = NULL;
	size_t cap = 0, ln = 0;
	ssize_t len;
	int rc = 0;
	while ((len = getline(&line, &cap, f)) > 0) {
		ln++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!len)
			continue;
		char *end;
		errno = 0;
		uint64_t start = strtoull(line, &end, 16), size;
		if (errno || end == line || *end != ' ') {
			rc = xb_fail("%s:%zu: not a perf map line (START SIZE NAME)", path, ln);
			break;
		}
		char *s2 = end + 1;
		size = strtoull(s2, &end, 16);
		if (errno || end == s2 || *end != ' ' || start + size < start) {
			rc = xb_fail("%s:%zu: not a perf map line (START SIZE NAME)", path, ln);
			break;
		}
		const char *name = end + 1;
		if (*name == '$') /* the VM's own map marks its names so */
			name++;
		/* later lines win, as in a map the VM appends to */
		if (xb_codemap_add(cm, start, start + size, name, strlen(name), (uint32_t)(UINT32_MAX - ln)) < 0) {
			rc = -1;
			break;
		}
	}
	free(line);
	if (rc < 0) {
		xb_codemap_free(cm);
		return rc;
	}
	xb_codemap_finish(cm);
	return 0;
}

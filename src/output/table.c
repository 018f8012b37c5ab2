/* table.c - the flat table (default and --blame rows). */
#define _GNU_SOURCE
#include "xb/writers.h"
#include "xb/output_util.h"

#include <string.h>

const char *xb_text_clean(const char *name, bool folded, char *buf, size_t len)
{
	xb_display_name_buf(name, buf, len);
	if (folded)
		for (char *c = buf; (c = strchr(c, ';')); c++)
			*c = ':'; /* ';' separates frames there */
	return buf;
}

void xb_write_processed(FILE *f, uint64_t processed, uint64_t received)
{
	fprintf(f, "processed %llu/%llu samples (%.1f%%)\n", (unsigned long long)processed,
		(unsigned long long)received, received ? 100.0 * (double)processed / (double)received : 0.0);
}

void xb_write_rows(FILE *f, const struct xb_profile *p, const struct xb_row *rows, size_t n,
		   size_t top, uint64_t denom)
{
	size_t w = 20;
	char name[1024], tag[320], text[1400];
	for (size_t i = 0; i < n && i < top; i++) {
		size_t l = strlen(xb_fname_text(&p->names[rows[i].id], text, sizeof(text)));
		if (l > w)
			w = l < 100 ? l : 100;
	}
	for (size_t i = 0; i < n && i < top; i++) {
		const struct xb_fname *fn = &p->names[rows[i].id];
		fprintf(f, "%8llu  %-*s  %6.2f%%  %s\n", (unsigned long long)rows[i].count, (int)w,
			xb_text_clean(xb_fname_text(fn, text, sizeof(text)), false, name, sizeof(name)),
			denom ? 100.0 * (double)rows[i].count / (double)denom : 0.0,
			xb_text_clean(fn->tag, false, tag, sizeof(tag)));
	}
}

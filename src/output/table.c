/* table.c - the flat table (default and --blame rows). */
#define _GNU_SOURCE
#include "xb/writers.h"
#include "xb/common.h"
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

void xb_write_wall_states(FILE *f, const struct xb_profile *p, const char *prefix)
{
	static const char *const states[] = { "[running]",   "[runnable]",           "[waiting]",
					      "[suspended]", "[garbage collecting]", "[exiting]" };
	uint64_t c[XB_ARRAY_SIZE(states)] = { 0 }, all = 0;
	bool any = false;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *st = &p->stacks[i];
		uint32_t n = st->n;
		if (n && p->names[st->ids[n - 1]].kind == XB_FK_GROUP)
			n--;
		all += st->count;
		if (!n || p->names[st->ids[n - 1]].kind != XB_FK_MARK)
			continue;
		for (size_t k = 0; k < XB_ARRAY_SIZE(states); k++)
			if (strcmp(p->names[st->ids[n - 1]].name, states[k]) == 0) {
				c[k] += st->count;
				any = true;
			}
	}
	if (!any || !all)
		return;
	fprintf(f, "%sstates:", prefix);
	bool first = true;
	for (size_t k = 0; k < XB_ARRAY_SIZE(states); k++)
		if (c[k]) {
			/* "[garbage collecting]" -> "garbage collecting" */
			fprintf(f, "%s %.*s %.2f%%", first ? "" : ",", (int)strlen(states[k]) - 2, states[k] + 1,
				100.0 * (double)c[k] / (double)all);
			first = false;
		}
	fputc('\n', f);
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

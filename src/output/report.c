/* report.c - the table, folded stacks, percentiles. */
#define _GNU_SOURCE
#include "xb/report.h"

#include <stdlib.h>
#include <string.h>

void xb_report_processed(FILE *f, uint64_t processed, uint64_t received)
{
	fprintf(f, "processed %llu/%llu samples (%.1f%%)\n", (unsigned long long)processed,
		(unsigned long long)received, received ? 100.0 * (double)processed / (double)received : 0.0);
}

void xb_report_rows(FILE *f, const struct xb_profile *p, const struct xb_row *rows, size_t n,
		    size_t top, uint64_t denom)
{
	size_t w = 20;
	for (size_t i = 0; i < n && i < top; i++) {
		size_t l = strlen(p->names[rows[i].id].name);
		if (l > w)
			w = l < 100 ? l : 100;
	}
	for (size_t i = 0; i < n && i < top; i++) {
		const struct xb_fname *fn = &p->names[rows[i].id];
		fprintf(f, "%8llu  %-*s  %6.2f%%  %s\n", (unsigned long long)rows[i].count, (int)w,
			fn->name, denom ? 100.0 * (double)rows[i].count / (double)denom : 0.0, fn->tag);
	}
}

int xb_report_folded(FILE *f, const struct xb_profile *p)
{
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		if (!s->n)
			continue;
		for (uint32_t k = s->n; k-- > 0;) {
			const char *name = p->names[s->ids[k]].name;
			/* ';' separates frames and the last ' ' the count:
			 * keep names from containing the former. */
			for (const char *c = name; *c; c++)
				fputc(*c == ';' ? ':' : *c, f);
			if (k)
				fputc(';', f);
		}
		fprintf(f, " %llu\n", (unsigned long long)s->count);
	}
	return ferror(f) ? -1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

uint64_t xb_percentile(uint64_t *v, size_t n, double pct)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t k = (size_t)((pct / 100.0) * (double)(n - 1) + 0.5);
	return v[k < n ? k : n - 1];
}

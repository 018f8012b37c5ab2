/* kallsyms.c - kernel function names (/proc/kallsyms). */
#define _GNU_SOURCE
#include "xb/kallsyms.h"
#include "xb/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_ksym(const void *a, const void *b)
{
	const struct xb_ksym *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

void xb_kallsyms_load(struct xb_kallsyms *k)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	size_t cap = 0;
	char line[512];
	k->v = NULL;
	k->n = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char t, name[256];
		if (sscanf(line, "%llx %c %255s", &a, &t, name) != 3 || !a)
			continue;
		if (t != 't' && t != 'T')
			continue;
		if (xb_grow((void **)&k->v, &cap, k->n + 1, sizeof(*k->v)) < 0)
			break;
		if (!(k->v[k->n].name = strdup(name)))
			break;
		k->v[k->n++].addr = a;
	}
	fclose(f);
	if (k->n)
		qsort(k->v, k->n, sizeof(*k->v), cmp_ksym);
}

const char *xb_kallsyms_name(const struct xb_kallsyms *k, uint64_t a)
{
	size_t lo = 0, hi = k->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (k->v[mid].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? k->v[lo - 1].name : "[unknown]";
}

void xb_kallsyms_free(struct xb_kallsyms *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].name);
	free(k->v);
	k->v = NULL;
	k->n = 0;
}

/* profile.c - interned frame names and stack counts. */
#define _GNU_SOURCE
#include "xb/profile.h"
#include "xb/common.h"

#include <stdio.h>

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const void *d, size_t n, uint64_t h)
{
	const uint8_t *p = d;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

void xb_profile_init(struct xb_profile *p)
{
	memset(p, 0, sizeof(*p));
}

void xb_profile_free(struct xb_profile *p)
{
	for (size_t i = 0; i < p->nnames; i++) {
		free(p->names[i].name);
		free(p->names[i].tag);
		free(p->names[i].file);
	}
	for (size_t i = 0; i < p->nstacks; i++)
		free(p->stacks[i].ids);
	free(p->names);
	free(p->nametab);
	free(p->stacks);
	free(p->stacktab);
	memset(p, 0, sizeof(*p));
}

static uint64_t name_hash(const char *name, const char *tag)
{
	uint64_t h = hash_bytes(name, strlen(name), 0xcbf29ce484222325ull);
	return hash_bytes(tag, strlen(tag) + 1, h);
}

static int rehash_names(struct xb_profile *p)
{
	size_t cap = p->nametab_cap ? p->nametab_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; i < p->nnames; i++) {
		size_t j = name_hash(p->names[i].name, p->names[i].tag) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(p->nametab);
	p->nametab = t;
	p->nametab_cap = cap;
	return 0;
}

uint32_t xb_profile_intern(struct xb_profile *p, const char *name, const char *tag,
			   enum xb_frame_kind kind)
{
	if ((p->nnames + 1) * 2 > p->nametab_cap && rehash_names(p) < 0)
		return 0;
	size_t j = name_hash(name, tag) & (p->nametab_cap - 1);
	while (p->nametab[j]) {
		struct xb_fname *f = &p->names[p->nametab[j] - 1];
		if (strcmp(f->name, name) == 0 && strcmp(f->tag, tag) == 0)
			return p->nametab[j] - 1;
		j = (j + 1) & (p->nametab_cap - 1);
	}
	if (xb_grow((void **)&p->names, &p->namecap, p->nnames + 1, sizeof(*p->names)) < 0)
		return 0;
	struct xb_fname *f = &p->names[p->nnames];
	f->name = strdup(name);
	f->tag = strdup(tag);
	f->kind = kind;
	f->file = NULL;
	f->line = 0;
	p->nametab[j] = (uint32_t)p->nnames + 1;
	return (uint32_t)p->nnames++;
}

static int rehash_stacks(struct xb_profile *p)
{
	size_t cap = p->stacktab_cap ? p->stacktab_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; i < p->nstacks; i++) {
		size_t j = p->stacks[i].hash & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(p->stacktab);
	p->stacktab = t;
	p->stacktab_cap = cap;
	return 0;
}

int xb_profile_add(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative)
{
	p->total++;
	if ((p->nstacks + 1) * 2 > p->stacktab_cap && rehash_stacks(p) < 0)
		return -1;
	uint64_t h = hash_bytes(ids, n * sizeof(*ids), 0xcbf29ce484222325ull ^ nnative);
	size_t j = h & (p->stacktab_cap - 1);
	while (p->stacktab[j]) {
		struct xb_stack *s = &p->stacks[p->stacktab[j] - 1];
		if (s->hash == h && s->n == n && s->nnative == nnative &&
		    memcmp(s->ids, ids, n * sizeof(*ids)) == 0) {
			s->count++;
			return 0;
		}
		j = (j + 1) & (p->stacktab_cap - 1);
	}
	if (xb_grow((void **)&p->stacks, &p->stackcap, p->nstacks + 1, sizeof(*p->stacks)) < 0)
		return -1;
	struct xb_stack *s = &p->stacks[p->nstacks];
	s->ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!s->ids)
		return -1;
	memcpy(s->ids, ids, n * sizeof(*ids));
	s->n = n;
	s->nnative = nnative;
	s->count = 1;
	s->hash = h;
	p->stacktab[j] = (uint32_t)p->nstacks + 1;
	p->nstacks++;
	return 0;
}

static const struct xb_profile *sort_ctx;
static int cmp_rows(const void *a, const void *b)
{
	const struct xb_row *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(sort_ctx->names[x->id].name, sort_ctx->names[y->id].name);
}

static size_t collect(const struct xb_profile *p, uint64_t *per, struct xb_row **rows)
{
	size_t n = 0;
	for (size_t i = 0; i < p->nnames; i++)
		n += per[i] != 0;
	*rows = calloc(n ? n : 1, sizeof(**rows));
	if (!*rows)
		return 0;
	size_t k = 0;
	for (size_t i = 0; i < p->nnames; i++)
		if (per[i])
			(*rows)[k++] = (struct xb_row){ (uint32_t)i, per[i] };
	sort_ctx = p;
	qsort(*rows, k, sizeof(**rows), cmp_rows);
	return k;
}

size_t xb_profile_flat(const struct xb_profile *p, enum xb_flat_mode mode, struct xb_row **rows,
		       uint64_t *counted)
{
	uint64_t *per = calloc(p->nnames ? p->nnames : 1, sizeof(*per));
	*rows = NULL;
	*counted = 0;
	if (!per)
		return 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		if (s->n == 0)
			continue;
		uint32_t id;
		if (mode == XB_FLAT_LEAF) {
			id = s->ids[0];
		} else {
			if (s->nnative >= s->n || p->names[s->ids[s->nnative]].kind == XB_FK_MARK)
				continue; /* no Erlang frame */
			id = s->ids[s->nnative];
		}
		per[id] += s->count;
		*counted += s->count;
	}
	size_t n = collect(p, per, rows);
	free(per);
	return n;
}

/* Native functions reached through a JIT fragment whose only job is to
 * call them: on a stripped OTP 29 beam the C function has no name left,
 * but the fragment (named by the JIT itself) still marks the spot. */
static const struct {
	const char *fn, *fragment;
} jit_aliases[] = {
	{ "erts_garbage_collect", "global::garbage_collect" }, /* beam_asm_global.cpp */
};

bool xb_blame_match(const char *fn, const char *sym)
{
	size_t n = strlen(fn);
	for (size_t i = 0; i < XB_ARRAY_SIZE(jit_aliases); i++)
		if (strcmp(fn, jit_aliases[i].fn) == 0 && strcmp(sym, jit_aliases[i].fragment) == 0)
			return true;
	if (strcmp(fn, sym) == 0)
		return true;
	if (strncmp(fn, sym, n) == 0 && sym[n] == '_' && sym[n + 1])
		return true;
	if (strpbrk(fn, "*?["))
		return fnmatch(fn, sym, 0) == 0;
	return false;
}

size_t xb_profile_blame(struct xb_profile *p, const char *fn, struct xb_row **rows,
			uint64_t *matched, uint64_t *no_erlang)
{
	size_t nnames = p->nnames;
	*rows = NULL;
	*matched = *no_erlang = 0;
	bool *hit = calloc(nnames ? nnames : 1, sizeof(*hit));
	if (!hit)
		return 0;
	for (size_t i = 0; i < nnames; i++)
		hit[i] = (p->names[i].kind == XB_FK_NATIVE || p->names[i].kind == XB_FK_JIT) &&
			 xb_blame_match(fn, p->names[i].name);
	/* Samples with no Erlang frame to name get a row that says why, so
	 * that the rows account for every matching sample: the mark at
	 * their root ("[callers unknown]": Erlang code called it but its
	 * stack could not be read; "[dirty: process unknown]", ...), else
	 * "[no Erlang code above]" (a thread not running Erlang code). */
	uint32_t none = xb_profile_intern(p, XB_NO_ERLANG, XB_MARK_TAG, XB_FK_MARK);
	uint64_t *per = calloc(p->nnames ? p->nnames : 1, sizeof(*per));
	if (!per) {
		free(hit);
		return 0;
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		bool found = false;
		for (uint32_t k = 0; k < s->nnative && !found; k++)
			found = s->ids[k] < nnames && hit[s->ids[k]];
		if (!found)
			continue;
		*matched += s->count;
		uint32_t row = none;
		if (s->nnative < s->n && p->names[s->ids[s->nnative]].kind != XB_FK_MARK)
			row = s->ids[s->nnative];
		else if (s->n && p->names[s->ids[s->n - 1]].kind == XB_FK_MARK)
			row = s->ids[s->n - 1];
		if (row == none || p->names[row].kind == XB_FK_MARK)
			*no_erlang += s->count;
		per[row] += s->count;
	}
	size_t n = collect(p, per, rows);
	free(per);
	free(hit);
	return n;
}

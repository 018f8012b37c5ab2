/* profile.c - interned frame names and stack counts. */
#define _GNU_SOURCE
#include "xb/profile.h"
#include "xb/common.h"
#include "xb/names.h"

#include <stdio.h>

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t hash_bytes(const void *d, size_t n, uint64_t h)
{
	const uint8_t *p = d;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The tables index by a hash's low bits.  FNV-1a's low bits depend on
 * the low bits alone, so names chosen by the target (its functions, its
 * processes' names under --by) can be made to share them, and a table of
 * 65,536 such names was one probe chain: each intern a walk of all of
 * them, seconds of CPU per sample.  A seed drawn at start (not known to
 * the target) and a finalizer that mixes the high bits down make that
 * choice impossible to make in advance. */
static uint64_t hash_seed(void)
{
	static uint64_t seed;
	uint64_t s = __atomic_load_n(&seed, __ATOMIC_RELAXED);
	if (!s) {
		if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
		}
		s |= 1; /* (0: not drawn yet) */
		uint64_t zero = 0;
		if (!__atomic_compare_exchange_n(&seed, &zero, s, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			s = zero; /* another thread drew first: its seed */
	}
	return s;
}

static uint64_t mix(uint64_t h) /* MurmurHash3's fmix64 */
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
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

uint64_t xb_text_hash(const char *s)
{
	return mix(hash_bytes(s, strlen(s), 0xcbf29ce484222325ull ^ hash_seed()));
}

static uint64_t name_hash(const char *name, const char *tag, uint32_t line)
{
	uint64_t h = hash_bytes(name, strlen(name), 0xcbf29ce484222325ull ^ hash_seed());
	h = hash_bytes(tag, strlen(tag) + 1, h);
	return mix(line ? hash_bytes(&line, sizeof(line), h) : h);
}

static int rehash_names(struct xb_profile *p)
{
	size_t cap = p->nametab_cap ? p->nametab_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; i < p->nnames; i++) {
		size_t j = name_hash(p->names[i].name, p->names[i].tag, p->names[i].line) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(p->nametab);
	p->nametab = t;
	p->nametab_cap = cap;
	return 0;
}

size_t xb_profile_longest_probe(const struct xb_profile *p)
{
	size_t worst = 0;
	for (size_t j = 0; j < p->nametab_cap; j++) {
		if (!p->nametab[j])
			continue;
		const struct xb_fname *f = &p->names[p->nametab[j] - 1];
		size_t home = name_hash(f->name, f->tag, f->line) & (p->nametab_cap - 1);
		size_t d = (j - home) & (p->nametab_cap - 1);
		if (d > worst)
			worst = d;
	}
	return worst;
}

uint32_t xb_profile_intern(struct xb_profile *p, const char *name, const char *tag,
			   enum xb_frame_kind kind)
{
	return xb_profile_intern_at(p, name, tag, kind, NULL, 0);
}

static bool same_file(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

uint32_t xb_profile_intern_at(struct xb_profile *p, const char *name, const char *tag,
			      enum xb_frame_kind kind, const char *file, uint32_t line)
{
	if (!file)
		line = 0;
	if ((p->nnames + 1) * 2 > p->nametab_cap && rehash_names(p) < 0)
		return 0;
	size_t j = name_hash(name, tag, line) & (p->nametab_cap - 1);
	while (p->nametab[j]) {
		struct xb_fname *f = &p->names[p->nametab[j] - 1];
		/* Without a line, the file is an attribute of the frame (its
		 * module's source file, for pprof and speedscope), not part of
		 * its identity: a function is one frame whether or not its
		 * file could be read each time; the first file known is kept. */
		if (strcmp(f->name, name) == 0 && strcmp(f->tag, tag) == 0 && f->line == line &&
		    (line == 0 || same_file(f->file, file))) {
			if (line == 0 && !f->file && file)
				f->file = strdup(file);
			return p->nametab[j] - 1;
		}
		j = (j + 1) & (p->nametab_cap - 1);
	}
	if (xb_grow((void **)&p->names, &p->namecap, p->nnames + 1, sizeof(*p->names)) < 0)
		return 0;
	struct xb_fname *f = &p->names[p->nnames];
	f->name = strdup(name);
	f->tag = strdup(tag);
	f->kind = kind;
	f->file = file ? strdup(file) : NULL;
	f->line = line;
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
	return xb_profile_add_n(p, ids, n, nnative, 1);
}

int xb_profile_add_n(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative, uint64_t count)
{
	p->total += count;
	if ((p->nstacks + 1) * 2 > p->stacktab_cap && rehash_stacks(p) < 0)
		return -1;
	uint64_t h = mix(hash_bytes(ids, n * sizeof(*ids), 0xcbf29ce484222325ull ^ hash_seed() ^ nnative));
	size_t j = h & (p->stacktab_cap - 1);
	while (p->stacktab[j]) {
		struct xb_stack *s = &p->stacks[p->stacktab[j] - 1];
		if (s->hash == h && s->n == n && s->nnative == nnative &&
		    memcmp(s->ids, ids, n * sizeof(*ids)) == 0) {
			s->count += count;
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
	s->count = count;
	s->hash = h;
	p->stacktab[j] = (uint32_t)p->nstacks + 1;
	p->nstacks++;
	return 0;
}

const char *xb_fname_text(const struct xb_fname *f, char *buf, size_t len)
{
	if (!f->file || !f->line) /* (a file without a line: the module's, not shown) */
		return f->name;
	snprintf(buf, len, "%s (%s:%u)", f->name, f->file, (unsigned)f->line);
	return buf;
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

bool xb_flat_row(const struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative,
		 enum xb_flat_mode mode, uint32_t *row)
{
	if (n == 0)
		return false;
	if (mode == XB_FLAT_LEAF) {
		*row = ids[0];
		return true;
	}
	if (nnative >= n || p->names[ids[nnative]].kind == XB_FK_MARK)
		return false; /* no Erlang frame */
	*row = ids[nnative];
	return true;
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
		uint32_t id;
		if (!xb_flat_row(p, s->ids, s->n, s->nnative, mode, &id))
			continue;
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

static bool match_plain(const char *fn, const char *sym)
{
	size_t n = strlen(fn);
	for (size_t i = 0; i < XB_ARRAY_SIZE(jit_aliases); i++)
		if (strcmp(fn, jit_aliases[i].fn) == 0 && strcmp(sym, jit_aliases[i].fragment) == 0)
			return true;
	if (strcmp(fn, sym) == 0)
		return true;
	if (strncmp(fn, sym, n) == 0 && sym[n] == '_' && sym[n + 1] && !strchr(sym, '/'))
		return true; /* C names only: copy_struct -> copy_struct_x */
	/* An Erlang function without its arity: every arity ("m:f" matches
	 * "m:f/2"). */
	if (strncmp(fn, sym, n) == 0 && sym[n] == '/' && sym[n + 1] && !strchr(fn, '/') &&
	    strspn(sym + n + 1, "0123456789") == strlen(sym + n + 1))
		return true;
	if (strpbrk(fn, "*?["))
		return fnmatch(fn, sym, 0) == 0;
	return false;
}

bool xb_blame_match(const char *fn, const char *sym)
{
	if (match_plain(fn, sym))
		return true;
	/* Elixir modules in either spelling, on either side: frames are
	 * named Foo.bar/1 (or 'Elixir.Foo':bar/1 with --erlang-names). */
	if (xb_is_elixir_name(fn) || xb_is_elixir_name(sym)) {
		char a[1200], b[1200];
		const char *ef = xb_elixir_name(fn, a, sizeof(a)), *es = xb_elixir_name(sym, b, sizeof(b));
		if ((ef != fn || es != sym) && match_plain(ef, es))
			return true;
	}
	return false;
}

/* Levenshtein distance of A[0..la) and B[0..lb), both under 128. */
static unsigned edits(const char *a, size_t la, const char *b, size_t lb)
{
	unsigned row[128];
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* NAME into L by SCORE (ties: the shorter first), XB_NCLOSE kept. */
static void close_insert(struct xb_close_list *l, const char *name, unsigned score)
{
	for (int k = 0; k < l->n; k++)
		if (strcmp(l->name[k], name) == 0)
			return;
	int at = l->n;
	while (at > 0 && (score < l->score[at - 1] ||
			  (score == l->score[at - 1] && strlen(name) < strlen(l->name[at - 1]))))
		at--;
	if (at >= XB_NCLOSE)
		return;
	int last = l->n < XB_NCLOSE ? l->n : XB_NCLOSE - 1;
	memmove(&l->name[at + 1], &l->name[at], (size_t)(last - at) * sizeof(l->name[0]));
	memmove(&l->score[at + 1], &l->score[at], (size_t)(last - at) * sizeof(l->score[0]));
	snprintf(l->name[at], sizeof(l->name[at]), "%s", name);
	l->score[at] = score;
	if (l->n < XB_NCLOSE)
		l->n++;
}

void xb_close_offer(struct xb_close *c, const char *fn, const char *name)
{
	size_t lf = strlen(fn), ln = strlen(name);
	if (lf < 4 || lf >= 128 || ln >= sizeof(c->edits.name[0]))
		return;
	size_t lcp = 0;
	while (fn[lcp] && fn[lcp] == name[lcp])
		lcp++;
	if (lcp >= 4)
		close_insert(&c->prefix, name, (unsigned)(128 - lcp));
	/* "m:f" against "m:f/2" (and Elixir's Foo.bar/2): without the arity */
	const char *slash = strrchr(name, '/');
	if (!strchr(fn, '/') && slash && slash[1] && strspn(slash + 1, "0123456789") == strlen(slash + 1))
		ln = (size_t)(slash - name);
	unsigned limit = lf / 3 > 1 ? (unsigned)(lf / 3) : 1;
	size_t gap = ln > lf ? ln - lf : lf - ln;
	unsigned score = gap <= limit ? edits(fn, lf, name, ln) : limit + 1;
	if (ln > lf) { /* FN's start: one more than what it takes */
		unsigned pre = edits(fn, lf, name, lf) + 1;
		if (pre < score)
			score = pre;
	}
	if (score <= limit)
		close_insert(&c->edits, name, score);
}

void xb_close_text(const struct xb_close *c, char *buf, size_t len)
{
	size_t used = 0;
	int shown = 0;
	if (len)
		buf[0] = 0;
	const struct xb_close_list *lists[] = { &c->edits, &c->prefix };
	for (int li = 0; li < 2; li++)
		for (int k = 0; k < lists[li]->n && shown < XB_NCLOSE && used < len; k++) {
			bool dup = false;
			for (int j = 0; li == 1 && j < c->edits.n; j++)
				dup = dup || strcmp(c->edits.name[j], lists[li]->name[k]) == 0;
			if (dup)
				continue;
			used += (size_t)snprintf(buf + used, len - used, "%s%s", shown ? ", " : "", lists[li]->name[k]);
			shown++;
		}
}

bool xb_blame_kind(enum xb_frame_kind k)
{
	return k == XB_FK_NATIVE || k == XB_FK_JIT || k == XB_FK_ERLANG;
}

bool xb_blame_at(const struct xb_profile *p, const bool *hit, size_t nhit, const uint32_t *ids,
		 uint32_t k, uint32_t nnative)
{
	if (ids[k] >= nhit || !hit[ids[k]])
		return false;
	/* native code in the native part, Erlang code in the Erlang part */
	return p->names[ids[k]].kind == XB_FK_ERLANG ? k >= nnative : k < nnative;
}

bool xb_blame_row(const struct xb_profile *p, const bool *hit, size_t nhit, const uint32_t *ids,
		  uint32_t n, uint32_t nnative, uint32_t none, uint32_t *row)
{
	uint32_t at = UINT32_MAX;
	for (uint32_t k = 0; k < n && at == UINT32_MAX; k++)
		if (xb_blame_at(p, hit, nhit, ids, k, nnative))
			at = k;
	if (at == UINT32_MAX)
		return false;
	*row = none;
	if (at < nnative) {
		/* native code: the innermost Erlang frame, the code it ran for */
		if (nnative < n && p->names[ids[nnative]].kind != XB_FK_MARK) {
			*row = ids[nnative];
			return true;
		}
	} else if (at + 1 < n && p->names[ids[at + 1]].kind == XB_FK_ERLANG) {
		*row = ids[at + 1]; /* an Erlang function: its caller */
		return true;
	}
	if (n && p->names[ids[n - 1]].kind == XB_FK_MARK)
		*row = ids[n - 1];
	return true;
}

bool *xb_blame_hits(const struct xb_profile *p, const char *fn)
{
	bool *hit = calloc(p->nnames ? p->nnames : 1, sizeof(*hit));
	for (size_t i = 0; hit && i < p->nnames; i++)
		hit[i] = xb_blame_kind(p->names[i].kind) && xb_blame_match(fn, p->names[i].name);
	return hit;
}

size_t xb_profile_blame(struct xb_profile *p, const char *fn, struct xb_row **rows,
			uint64_t *matched, uint64_t *no_erlang)
{
	size_t nnames = p->nnames;
	*rows = NULL;
	*matched = *no_erlang = 0;
	bool *hit = xb_blame_hits(p, fn);
	if (!hit)
		return 0;
	/* Samples with no Erlang frame to name get a row that says why, so
	 * that the rows account for every matching sample: the mark at
	 * their root ("[callers unknown]": Erlang code called it but its
	 * stack could not be read; "[truncated]": the native stack was cut
	 * at the depth limit before any Erlang frame), else "[no Erlang
	 * code above]" (a thread not running Erlang code for a process: the
	 * scheduler's own GC of a process it is about to run, a dirty
	 * scheduler between jobs, a thread that is not a scheduler). */
	uint32_t none = xb_profile_intern(p, XB_NO_ERLANG, XB_MARK_TAG, XB_FK_MARK);
	uint64_t *per = calloc(p->nnames ? p->nnames : 1, sizeof(*per));
	if (!per) {
		free(hit);
		return 0;
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		uint32_t row;
		if (!xb_blame_row(p, hit, nnames, s->ids, s->n, s->nnative, none, &row))
			continue;
		*matched += s->count;
		if (row == none || p->names[row].kind == XB_FK_MARK)
			*no_erlang += s->count;
		per[row] += s->count;
	}
	size_t n = collect(p, per, rows);
	free(per);
	free(hit);
	return n;
}

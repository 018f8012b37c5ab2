/* prove.c - every struct offset in use, proven on the live VM's data, and
 * searched for where the offset we started from does not hold.
 *
 * The objects are the VM's own: the processes in its process table, its
 * scheduler data arrays, its atoms, its code tables.  Each field in use has
 * an invariant its live values must satisfy (a pid term that equals its
 * table slot; heap <= htop < stop <= hend; a `current` that points at an
 * MFA of two atoms and an arity; ...).  An invariant gives per object
 * evidence for the offset (EV_OK), against it (EV_BAD), or none (EV_NA:
 * e.g. a NULL pointer).  See layout.h for what PROVEN, CONSISTENT and
 * FAILED mean.
 *
 * Discovery: an inserted or removed member moves a whole run of fields by
 * the same amount.  For a struct whose fields fail, every shift D in
 * [-MAX_SHIFT, MAX_SHIFT] is scored for every field with its whole struct
 * moved by D (so that the invariants relating it to its neighbours see
 * them moved too); the best sequence of shifts over the fields in member
 * order, changing shift as few times as the evidence allows (a Viterbi
 * path), gives the candidate layout, which is then proven like any other.
 * Nothing depends on knowing which release the VM is.
 *
 * Every read of the target is bounded (MAX_OBJECTS processes, a read
 * budget for pointer checks) and counted; a hostile VM can make a proof
 * fail, not loop. */
#define _GNU_SOURCE
#include "xb/layout.h"
#include "xb/proctab.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/term.h"
#include "xb/vm.h"

#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#define MAX_OBJECTS 1024       /* processes looked at */
#define FIRST_OBJECTS 256      /* ... the first slots always (the system's own processes) */
#define MAX_PROC_WINDOW 16384  /* bytes of one process read (dwarf_layout.c's bound) */
#define MAX_SHIFT 256          /* bytes discovery moves a field by, each way */
#define SHIFT_STEP 8
#define NSHIFT (2 * MAX_SHIFT / SHIFT_STEP + 1)
#define MAX_DEREF_READS 40000  /* pointer checks of one proof (cached) */
#define TALLY_DEREFS 128       /* ... of one field's check */
#define MAX_REREADS 16         /* counterexamples of one field's check read again */
#define DEREF_CACHE 8192       /* entries, power of two */
#define MAX_SCHED_ENTRIES 1024 /* scheduler data entries read, all kinds */
#define MAX_ATOMS_CHECKED 16 /* a few reads each: --dump of 10k processes stays in its budget */

enum ev { EV_NA = 0, EV_OK = 1, EV_BAD = 2 };

/* A set of live objects of one struct, copied out once: every invariant
 * is then evaluated in our memory, whatever the offsets tried. */
struct objset {
	size_t n, win;     /* objects, bytes of each */
	uint64_t *addr;    /* where each lives in the VM */
	uint32_t *tag;     /* process: table slot; scheduler: kind << 16 | index */
	uint8_t *bytes;    /* n * win */
};

struct deref {
	uint64_t addr;
	uint8_t ok;
	uint8_t b[64];
};

struct pv {
	struct xb_vm *vm;
	struct xb_layout *lay;
	const int64_t *origin; /* offsets before discovery (the source's) */
	/* the process table */
	uint64_t ptab_tab, ptab_invalid;
	uint32_t ptab_max;
	uint32_t nlive;        /* live slots seen */
	uint64_t *live_ptrs;   /* sorted, for "is a process" */
	size_t nlive_ptrs;
	struct objset ptab;   /* erts_proc itself: one object */
	struct objset procs;
	struct objset sched;
	int nsched[3];         /* threads of each kind */
	/* code: module ranges [start, end), sorted */
	uint64_t *code_lo, *code_hi;
	size_t ncode;
	bool jit;
	bool ranges_ok;
	char ranges_why[96];
	/* pointer checks */
	struct deref *cache;
	uint64_t deref_reads;
	bool out_of_reads;
	/* reads through pointers by one field's check (tally): bounded, so
	 * that 10,000 processes with a link each cost TALLY_DEREFS reads, not
	 * 10,000; past the bound an object gives no evidence */
	uint32_t tally_derefs;
	bool in_tally, tally_over;
	const struct objset *cur; /* the set the evaluating invariant reads */
};

struct fcheck {
	enum xb_field f;
	enum ev (*fn)(struct pv *pv, size_t i, const int64_t *off, int64_t at);
	uint32_t min_ok; /* objects with evidence for it before it is PROVEN */
	const char *inv;
	/* Strict: a field every live VM gives evidence for fails with fewer
	 * than min_ok objects for it, or fewer than DISTINCT different values
	 * among them (a neighbour that is 0 everywhere, or the same constant,
	 * is not it); otherwise too little evidence leaves it CONSISTENT. */
	uint8_t strict, distinct;
	/* a count that differs from object to object (reds): at least four
	 * values among sixteen objects (a bit set or a constant beside it has
	 * fewer) */
	uint8_t spread;
	/* a count or pointer most objects leave 0: the same non-zero value in
	 * eight or more objects may be a constant beside it (a default size):
	 * CONSISTENT, not PROVEN */
	uint8_t no_constant;
};

struct tally {
	uint32_t ok, bad, seen;
	uint64_t vals[64]; /* distinct values with evidence for it (up to 64) */
	uint32_t nvals;
	size_t first_bad; /* object of the first counterexample */
	uint64_t bad_value;
};

/* ------------------------------------------------------------------ */
/* reading objects */

static bool in_win(const struct objset *os, int64_t at, size_t n)
{
	return at >= 0 && (uint64_t)at + n <= os->win;
}

static uint64_t get(const struct objset *os, size_t i, int64_t at, size_t n)
{
	uint64_t v = 0;
	if (in_win(os, at, n))
		memcpy(&v, os->bytes + i * os->win + at, n);
	return v;
}

static uint64_t g64(struct pv *pv, size_t i, int64_t at) { return get(pv->cur, i, at, 8); }
static uint32_t g32(struct pv *pv, size_t i, int64_t at) { return (uint32_t)get(pv->cur, i, at, 4); }

static void objset_free(struct objset *os)
{
	free(os->addr);
	free(os->tag);
	free(os->bytes);
	memset(os, 0, sizeof(*os));
}

static int objset_alloc(struct objset *os, size_t n, size_t win)
{
	os->addr = calloc(n ? n : 1, 8);
	os->tag = calloc(n ? n : 1, 4);
	os->bytes = calloc(n ? n : 1, win);
	os->n = 0;
	os->win = win;
	if (!os->addr || !os->tag || !os->bytes) {
		objset_free(os);
		return xb_fail("out of memory");
	}
	return 0;
}

/* A pointer that could point at data of the VM: aligned, inside a
 * readable mapping (no read). */
static bool ptr_ok(struct pv *pv, uint64_t p)
{
	return p && p % 8 == 0 && xb_remote_readable(&pv->vm->mem, p, 8);
}

/* LEN (<= 40) bytes at P, through a cache; NULL when unreadable or the
 * proof's read budget is spent. */
static const uint8_t *deref(struct pv *pv, uint64_t p, size_t len)
{
	if (!ptr_ok(pv, p) || len > sizeof(pv->cache[0].b))
		return NULL;
	size_t h = (size_t)((p >> 3) * 0x9E3779B97F4A7C15ull >> 40) & (DEREF_CACHE - 1);
	struct deref *d = &pv->cache[h];
	if (d->addr == p)
		return d->ok ? d->b : NULL;
	if (pv->deref_reads >= MAX_DEREF_READS || xb_interrupted) {
		pv->out_of_reads = true;
		return NULL;
	}
	if (pv->in_tally && pv->tally_derefs >= TALLY_DEREFS) {
		pv->tally_over = true;
		return NULL;
	}
	pv->deref_reads++;
	pv->tally_derefs++;
	d->addr = p;
	d->ok = xb_read(&pv->vm->mem, p, d->b, sizeof(d->b)) == 0;
	if (!d->ok) /* near the end of a mapping: the bytes asked for */
		d->ok = xb_read(&pv->vm->mem, p, d->b, len) == 0;
	return d->ok ? d->b : NULL;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* The VM's offsets swapped for OFF while a reader that takes them from
 * the VM (the code map, the atom reader) runs on them. */
static void swap_off(struct xb_vm *vm, int64_t *saved, const int64_t *off)
{
	memcpy(saved, vm->off, sizeof(int64_t) * XB_F_COUNT);
	memcpy(vm->off, off, sizeof(int64_t) * XB_F_COUNT);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static bool is_process(struct pv *pv, uint64_t p)
{
	return p && pv->live_ptrs && pv->nlive_ptrs && bsearch(&p, pv->live_ptrs, pv->nlive_ptrs, 8, cmp_u64) != NULL;
}

static bool in_code(struct pv *pv, uint64_t a)
{
	size_t lo = 0, hi = pv->ncode;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pv->code_hi[mid] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < pv->ncode && pv->code_lo[lo] <= a)
		return true;
	if (pv->jit) { /* JIT code outside module ranges: shared fragments */
		const struct xb_map *m = xb_maps_find(&pv->vm->mem.maps, a);
		return m && m->executable && (m->path[0] == 0 || strncmp(m->path, "/memfd:", 7) == 0);
	}
	return false;
}

/* An ErtsCodeMFA at P (code_ix.h): module and function atoms, arity <= 255. */
static bool mfa_at(struct pv *pv, uint64_t p, const int64_t *off)
{
	int64_t m = off[XB_F_MFA_MODULE], f = off[XB_F_MFA_FUNCTION], a = off[XB_F_MFA_ARITY];
	if (m < 0 || f < 0 || a < 0 || m > 24 || f > 24 || a > 24)
		return false;
	const uint8_t *b = deref(pv, p, 32);
	if (!b)
		return false;
	uint64_t mv, fv, av;
	memcpy(&mv, b + m, 8);
	memcpy(&fv, b + f, 8);
	memcpy(&av, b + a, 8);
	return xb_is_atom(mv) && xb_is_atom(fv) && av <= 255;
}

/* ------------------------------------------------------------------ */
/* evaluating one invariant over a set */

/* One more object with evidence for the field, holding V. */
static void tally_ok(struct tally *t, uint64_t v)
{
	t->ok++;
	for (uint32_t k = 0; k < t->nvals; k++)
		if (t->vals[k] == v)
			return;
	if (t->nvals < 64)
		t->vals[t->nvals++] = v;
}

static void tally(struct pv *pv, const struct objset *os, const struct fcheck *c, const int64_t *off,
		  int64_t at, struct tally *t)
{
	memset(t, 0, sizeof(*t));
	const struct objset *saved = pv->cur;
	pv->cur = os;
	unsigned sz = xb_field_specs[c->f].size ? xb_field_specs[c->f].size : 8;
	if (!in_win(os, at, sz)) {
		t->bad = (uint32_t)os->n + 1;
		pv->cur = saved;
		return;
	}
	pv->tally_derefs = 0;
	pv->in_tally = true;
	size_t badix[MAX_REREADS];
	for (size_t i = 0; i < os->n; i++) {
		pv->tally_over = false;
		enum ev e = c->fn(pv, i, off, at);
		if (pv->tally_over) /* past the reads this check may make */
			continue;
		if (e == EV_BAD && t->bad < MAX_REREADS)
			badix[t->bad] = i;
		t->seen++;
		if (e == EV_OK) {
			tally_ok(t, get(os, i, at, sz));
		}
		else if (e == EV_BAD) {
			if (!t->bad) {
				t->first_bad = i;
				t->bad_value = get(os, i, at, sz);
			}
			t->bad++;
		}
	}
	/* A few counterexamples among many objects read again, a moment
	 * later: an object caught changing (a process collecting garbage, a
	 * scheduler switching processes) reads consistent then, or is gone;
	 * at a wrong offset it is still a counterexample (and a search's
	 * wrong candidates, with many, are not read again). */
	if (t->bad && t->bad <= MAX_REREADS && t->bad * 4 <= t->seen && !xb_interrupted) {
		size_t nb = t->bad;
		sleep_ms(1);
		for (size_t k = 0; k < nb; k++) {
			size_t i = badix[k];
			pv->tally_over = false;
			enum ev e = xb_read(&pv->vm->mem, os->addr[i], os->bytes + i * os->win, os->win) == 0
					    ? c->fn(pv, i, off, at)
					    : EV_NA;
			if (e == EV_BAD && !pv->tally_over)
				continue;
			t->bad--;
			if (e == EV_OK && !pv->tally_over)
				tally_ok(t, get(os, i, at, sz));
		}
	}
	pv->in_tally = false;
	pv->cur = saved;
}

/* Objects of a live VM change while we read them (a running process's
 * htop, a process exiting): a few counterexamples are noise, many are not. */
static uint32_t tolerance(size_t n)
{
	return 2 + (uint32_t)(n / 50);
}

static enum xb_lproof verdict(const struct tally *t, const struct fcheck *c, size_t n)
{
	if (t->bad > tolerance(n) || (t->bad > 1 && t->ok < 4 * t->bad))
		return XB_LP_FAILED;
	if (c->strict && (t->ok < c->min_ok || t->nvals < c->distinct))
		return XB_LP_FAILED;
	/* A count that differs from process to process: fewer than four
	 * values among sixteen objects or more is a flag word or a constant
	 * beside it.  No more than that: where the processes are a thousand
	 * workers spawned alike, a real count holds few values (and the
	 * table's slot order is not the order of the pids: ptab.c spreads
	 * them over cache lines).  A count most leave 0 (no_constant): the
	 * same value everywhere leaves it CONSISTENT. */
	if (c->spread && t->ok >= 16 && t->nvals < 4)
		return XB_LP_FAILED;
	if (c->no_constant && t->ok >= 8 && t->nvals == 1)
		return XB_LP_CONSISTENT;
	return t->ok >= (c->min_ok ? c->min_ok : 1) ? XB_LP_PROVEN : XB_LP_CONSISTENT;
}

static void record(struct pv *pv, const struct objset *os, const struct fcheck *c, const struct tally *t,
		   enum xb_lproof p)
{
	struct xb_fstate *s = &pv->lay->f[c->f];
	s->ok = t->ok;
	s->bad = t->bad;
	s->seen = t->seen;
	s->inv = c->inv;
	s->proof = (uint8_t)p;
	s->note[0] = 0;
	if (t->bad)
		snprintf(s->note, sizeof(s->note), "%u of %u against it, e.g. 0x%llx at 0x%llx", t->bad, t->seen,
			 (unsigned long long)t->bad_value, (unsigned long long)os->addr[t->first_bad]);
	else if (p == XB_LP_FAILED)
		snprintf(s->note, sizeof(s->note), "%u of %u objects for it (%u values): too few", t->ok, t->seen,
			 t->nvals);
}

/* Offsets with every field of CHECKS moved by D from ORIGIN. */
static void shifted(const int64_t *origin, const int64_t *cur, const struct fcheck *checks, size_t n, int64_t d,
		    int64_t *out)
{
	memcpy(out, cur, sizeof(int64_t) * XB_F_COUNT);
	for (size_t k = 0; k < n; k++)
		if (origin[checks[k].f] >= 0)
			out[checks[k].f] = origin[checks[k].f] + d;
}

static int cmp_check_origin(const void *a, const void *b, void *arg)
{
	const int64_t *o = arg;
	int64_t x = o[((const struct fcheck *)a)->f], y = o[((const struct fcheck *)b)->f];
	return x < y ? -1 : x > y;
}

/* A field's score for one shift: evidence for it, minus a lot for
 * evidence against (a shift the data contradicts is never chosen). */
static long score(const struct tally *t, const struct fcheck *c, size_t n)
{
	if (verdict(t, c, n) == XB_LP_FAILED)
		return -1000000;
	/* A weak invariant (NULL or a pointer, a small count) holds at many
	 * offsets, and more objects may satisfy it at a wrong one: it only
	 * breaks ties; strict ones place the runs. */
	long cap = c->strict ? 64 : 1;
	return (long)(t->ok < (uint32_t)cap ? t->ok : (uint32_t)cap) - 8 * (long)t->bad;
}

/* Discovery over one struct: the Viterbi path over its fields (in member
 * order) through shifts, scored as above, a change of shift costing
 * CHANGE.  Writes the offsets found into OFF.  Returns how many moved. */
#define CHANGE 24
static unsigned search_struct(struct pv *pv, const struct objset *os, const struct fcheck *checks0, size_t n,
			      int64_t *off)
{
	if (n == 0 || os->n == 0)
		return 0;
	struct fcheck *c = malloc(n * sizeof(*c));
	long(*sc)[NSHIFT] = calloc(n, sizeof(*sc));
	int(*from)[NSHIFT] = calloc(n, sizeof(*from));
	long(*best)[NSHIFT] = calloc(n, sizeof(*best));
	int64_t *tmp = malloc(sizeof(int64_t) * XB_F_COUNT);
	unsigned moved = 0;
	if (!c || !sc || !from || !best || !tmp)
		goto out;
	memcpy(c, checks0, n * sizeof(*c));
	qsort_r(c, n, sizeof(*c), cmp_check_origin, (void *)pv->origin);
	for (int s = 0; s < NSHIFT && !xb_interrupted; s++) {
		int64_t d = (int64_t)s * SHIFT_STEP - MAX_SHIFT;
		shifted(pv->origin, off, c, n, d, tmp);
		for (size_t k = 0; k < n; k++) {
			struct tally t;
			if (pv->origin[c[k].f] < 0) {
				sc[k][s] = 0;
				continue;
			}
			tally(pv, os, &c[k], tmp, tmp[c[k].f], &t);
			sc[k][s] = score(&t, &c[k], os->n);
		}
	}
	/* Viterbi: best[k][s] = sc[k][s] + max over s' (best[k-1][s'] - CHANGE*(s != s')) */
	int zero = MAX_SHIFT / SHIFT_STEP;
	for (int s = 0; s < NSHIFT; s++)
		best[0][s] = sc[0][s] - (s != zero); /* ties: no shift */
	/* Members keep their order (an insertion or a removal moves runs,
	 * never swaps fields): field k's offset stays past field k-1's. */
	for (size_t k = 1; k < n; k++)
		for (int s = 0; s < NSHIFT; s++) {
			int64_t ok_ = pv->origin[c[k].f], op = pv->origin[c[k - 1].f];
			long b = -2000000000L;
			int f = s;
			for (int p = 0; p < NSHIFT; p++) {
				int64_t here = ok_ + (int64_t)s * SHIFT_STEP, prev = op + (int64_t)p * SHIFT_STEP;
				if (ok_ >= 0 && op >= 0 && (ok_ > op ? here <= prev : here < prev))
					continue;
				long v = best[k - 1][p] - (p != s ? CHANGE : 0);
				if (v > b) {
					b = v;
					f = p;
				}
			}
			best[k][s] = b + sc[k][s];
			from[k][s] = f;
		}
	int s = zero;
	for (int p = 0; p < NSHIFT; p++)
		if (best[n - 1][p] > best[n - 1][s])
			s = p;
	for (size_t k = n; k-- > 0;) {
		int64_t d = (int64_t)s * SHIFT_STEP - MAX_SHIFT;
		if (pv->origin[c[k].f] >= 0 && off[c[k].f] != pv->origin[c[k].f] + d) {
			off[c[k].f] = pv->origin[c[k].f] + d;
			moved++;
		}
		if (k)
			s = from[k][s];
	}
out:
	free(c);
	free(sc);
	free(from);
	free(best);
	free(tmp);
	return moved;
}

/* One field alone, the others where they are: the shift of the
 * strongest evidence for it.  For a field whose neighbours in the run
 * above did not move with it.  Returns whether it moved. */
/* Would F at AT keep its place among the fields of its struct (those
 * with the same type) as OFF has them, by their order at the source? */
static bool keeps_order(struct pv *pv, enum xb_field f, int64_t at, const int64_t *off)
{
	for (int g = 0; g < XB_F_COUNT; g++) {
		if (g == (int)f || pv->origin[g] < 0 || off[g] < 0 || !xb_field_specs[g].size ||
		    strcmp(xb_field_specs[g].type, xb_field_specs[f].type) != 0)
			continue;
		if (pv->origin[g] < pv->origin[f] && off[g] >= at)
			return false;
		if (pv->origin[g] > pv->origin[f] && off[g] <= at)
			return false;
	}
	return true;
}

static bool search_field(struct pv *pv, const struct objset *os, const struct fcheck *c, int64_t *off,
			 const int64_t *shifts, size_t nshifts, bool weak)
{
	int64_t o = pv->origin[c->f];
	if (o < 0)
		return false;
	long bs = -2000000;
	int64_t bo = off[c->f];
	for (size_t k = 0; k < nshifts && !xb_interrupted; k++) {
		int64_t d = shifts[k];
		if (!keeps_order(pv, c->f, o + d, off))
			continue;
		struct tally t;
		tally(pv, os, c, off, o + d, &t);
		long s = score(&t, c, os->n) - (d != 0);
		enum xb_lproof v = verdict(&t, c, os->n);
		if ((v == XB_LP_PROVEN || (weak && v == XB_LP_CONSISTENT)) && s > bs) {
			bs = s;
			bo = o + d;
		}
	}
	if (bo == off[c->f])
		return false;
	off[c->f] = bo;
	return true;
}

/* Prove the fields of CHECKS on OS with OFF; CONSISTENT ones must sit
 * between proven ones that moved (from ORIGIN) as much as they did.
 * Returns the number FAILED. */
static int prove_struct(struct pv *pv, const struct objset *os, const struct fcheck *checks, size_t n,
			const int64_t *off)
{
	int failed = 0;
	for (size_t k = 0; k < n; k++) {
		struct tally t;
		enum xb_field f = checks[k].f;
		if (off[f] < 0) {
			pv->lay->f[f].proof = XB_LP_UNCHECKED;
			continue;
		}
		tally(pv, os, &checks[k], off, off[f], &t);
		record(pv, os, &checks[k], &t, verdict(&t, &checks[k], os->n));
	}
	/* bracketing */
	for (size_t k = 0; k < n; k++) {
		enum xb_field f = checks[k].f;
		struct xb_fstate *s = &pv->lay->f[f];
		if (s->proof != XB_LP_CONSISTENT)
			continue;
		int64_t my = off[f] - pv->origin[f];
		enum xb_field below = XB_F_COUNT, above = XB_F_COUNT;
		for (size_t j = 0; j < n; j++) {
			enum xb_field g = checks[j].f;
			if (g == f || pv->lay->f[g].proof != XB_LP_PROVEN || pv->origin[g] < 0)
				continue;
			if (pv->origin[g] < pv->origin[f] && (below == XB_F_COUNT || pv->origin[g] > pv->origin[below]))
				below = g;
			if (pv->origin[g] > pv->origin[f] && (above == XB_F_COUNT || pv->origin[g] < pv->origin[above]))
				above = g;
		}
		bool okb = below == XB_F_COUNT || off[below] - pv->origin[below] == my;
		bool oka = above == XB_F_COUNT || off[above] - pv->origin[above] == my;
		if ((below == XB_F_COUNT && above == XB_F_COUNT) || !okb || !oka) {
			s->proof = XB_LP_FAILED;
			snprintf(s->note, sizeof(s->note), "no live evidence, and %s",
				 below == XB_F_COUNT && above == XB_F_COUNT ? "no proven field beside it"
									 : "the proven fields beside it moved differently");
		} else {
			snprintf(s->note, sizeof(s->note), "no live evidence; between %s and %s",
				 below == XB_F_COUNT ? "the start" : xb_field_specs[below].member,
				 above == XB_F_COUNT ? "the end" : xb_field_specs[above].member);
		}
	}
	for (size_t k = 0; k < n; k++)
		failed += pv->lay->f[checks[k].f].proof == XB_LP_FAILED;
	return failed;
}

/* Prove a struct; with DISCOVER, search it where it fails and prove the
 * result.  OFF is changed only when every field then holds. */
static int prove_or_find(struct pv *pv, const struct objset *os, const struct fcheck *checks, size_t n,
			 int64_t *off, bool discover)
{
	int failed = prove_struct(pv, os, checks, n, off);
	if (!failed || !discover || pv->lay->mutating)
		return failed;
	int64_t *cand = malloc(sizeof(int64_t) * XB_F_COUNT);
	if (!cand)
		return failed;
	memcpy(cand, off, sizeof(int64_t) * XB_F_COUNT);
	search_struct(pv, os, checks, n, cand);
	for (int round = 0; round < 2; round++) {
		/* A field the common shifts left failing, alone, at one of the
		 * shifts the proven fields show (a field moves with some run
		 * of its neighbours; a weak invariant anywhere else could hold
		 * by chance). */
		struct xb_layout saved = *pv->lay;
		int f2 = prove_struct(pv, os, checks, n, cand);
		int64_t shifts[64];
		size_t ns = 0;
		shifts[ns++] = 0;
		for (size_t k = 0; k < n && ns < 64; k++) {
			enum xb_field f = checks[k].f;
			int64_t d = cand[f] - pv->origin[f];
			bool have = false;
			for (size_t j = 0; j < ns; j++)
				have |= shifts[j] == d;
			if (!have && pv->lay->f[f].proof == XB_LP_PROVEN && pv->origin[f] >= 0 && checks[k].strict)
				shifts[ns++] = d;
		}
		*pv->lay = saved;
		if (!f2)
			break;
		for (size_t k = 0; k < n; k++) {
			struct tally t;
			tally(pv, os, &checks[k], cand, cand[checks[k].f], &t);
			if (verdict(&t, &checks[k], os->n) != XB_LP_FAILED)
				continue;
			if (checks[k].strict) {
				search_field(pv, os, &checks[k], cand, shifts, ns, false);
				continue;
			}
			/* a weak one at a run's edge: the shift of the field
			 * before it or after it */
			int64_t nb[2] = { 0, 0 };
			size_t nn = 0;
			enum xb_field f = checks[k].f, lo = XB_F_COUNT, hi = XB_F_COUNT;
			for (size_t j = 0; j < n; j++) {
				enum xb_field g = checks[j].f;
				if (g == f || pv->origin[g] < 0)
					continue;
				if (pv->origin[g] < pv->origin[f] && (lo == XB_F_COUNT || pv->origin[g] > pv->origin[lo]))
					lo = g;
				if (pv->origin[g] > pv->origin[f] && (hi == XB_F_COUNT || pv->origin[g] < pv->origin[hi]))
					hi = g;
			}
			if (lo != XB_F_COUNT)
				nb[nn++] = cand[lo] - pv->origin[lo];
			if (hi != XB_F_COUNT)
				nb[nn++] = cand[hi] - pv->origin[hi];
			search_field(pv, os, &checks[k], cand, nb, nn, true);
		}
	}
	int f3 = prove_struct(pv, os, checks, n, cand);
	if (xb_verbose >= 2)
		for (size_t k = 0; k < n; k++) {
			enum xb_field f = checks[k].f;
			fprintf(stderr, "layout: discovery: %-40s %5lld -> %5lld  %s %s\n", xb_field_name(f),
				(long long)off[f], (long long)cand[f], xb_lproof_name((enum xb_lproof)pv->lay->f[f].proof),
				pv->lay->f[f].note);
		}
	/* Each field that holds where discovery put it takes that offset;
	 * one that holds nowhere keeps its source's, and fails (what needs
	 * it is switched off). */
	(void)f3;
	unsigned moved = 0;
	for (size_t k = 0; k < n; k++) {
		enum xb_field f = checks[k].f;
		uint8_t p = pv->lay->f[f].proof;
		if (cand[f] != off[f] && (p == XB_LP_PROVEN || p == XB_LP_CONSISTENT)) {
			off[f] = cand[f];
			pv->lay->f[f].src = XB_LSRC_DISCOVERED;
			moved++;
		}
	}
	pv->lay->discovered += moved;
	free(cand);
	return prove_struct(pv, os, checks, n, off);
}

/* ------------------------------------------------------------------ */
/* the process table: erl_ptab.h ErtsPTab, erts_proc */

/* The slot a pid names (erl_ptab.h erts_ptab_id2pix): from OTP 27 the
 * pid's data holds the slot interleaved ("pixdata"), masked by
 * r.o.pix_mask; before, the slot is the high half of the term. */
static bool pid_to_slot(struct pv *pv, const int64_t *off, uint64_t pid, uint32_t *slot)
{
	if (!xb_is_pid(pid))
		return false;
	if (!pv->vm->pid_pixdata) {
		*slot = (uint32_t)(pid >> 32);
		return true;
	}
	if (!in_win(&pv->ptab, off[XB_F_PTAB_PIX_MASK], 4))
		return false;
	uint64_t mask = get(&pv->ptab, 0, off[XB_F_PTAB_PIX_MASK], 4);
	if (!mask || (mask & (mask + 1)))
		return false; /* (1 << bits) - 1 */
	*slot = (uint32_t)((pid >> 4) & mask);
	return true;
}

/* A group of fields proven together by one invariant over the whole
 * structure they describe (a table of atoms, the code tables): all
 * PROVEN, or all FAILED with the reason. */
struct gcheck {
	const enum xb_field *fields;
	size_t n;
	const char *inv;
};

static int prove_group(struct pv *pv, const struct gcheck *g, const int64_t *off, bool ok, const char *why)
{
	return xb_layout_mark(pv->vm, off, g->fields, g->n, ok, g->inv, why);
}

/* ------------------------------------------------------------------ */
/* atoms: index.h IndexTable (erts_atom_table), atom.h Atom */

/* Atom IX's text with the offsets OFF, read through the cache-less
 * path (a proof must not fill the tools' atom cache with guesses). */
static int atom_text(struct pv *pv, const int64_t *off, uint64_t ix, char *buf, size_t len)
{
	struct xb_vm *vm = pv->vm;
	int64_t saved[XB_F_COUNT];
	swap_off(vm, saved, off);
	size_t l;
	int rc = xb_vm_atom_raw(vm, (ix << 6) | 0x0b, buf, len, &l);
	memcpy(vm->off, saved, sizeof(saved));
	return rc;
}

static const enum xb_field atom_fields[] = { XB_F_INDEXTAB_ENTRIES, XB_F_INDEXTAB_SEG_TABLE, XB_F_ATOM_LEN,
					     XB_F_ATOM_NAME, XB_F_ATOM_BIN, XB_F_HEAPBITS_DATA,
					     XB_F_SUBBITS_BASE_FLAGS, XB_F_SUBBITS_START };

/* The first atoms are fixed (atom.names, in order); the count is the
 * table's: the last atom reads back, one past it does not exist. */
static int prove_atoms(struct pv *pv, const int64_t *off)
{
	struct gcheck g = { atom_fields, XB_ARRAY_SIZE(atom_fields),
			    "atoms 0..4 are false, true, '_', 'nonode@nohost', '$end_of_table' (atom.names); "
			    "every atom below the count reads back as text" };
	static const char *const first[] = { "false", "true", "_", "nonode@nohost", "$end_of_table" };
	char why[96] = "", t[1100];
	bool ok = pv->vm->sym.atom_table != 0;
	if (!ok)
		snprintf(why, sizeof(why), "the atom table (erts_atom_table) was not found");
	for (size_t i = 0; ok && i < XB_ARRAY_SIZE(first); i++)
		if (atom_text(pv, off, i, t, sizeof(t)) < 0 || strcmp(t, first[i]) != 0) {
			snprintf(why, sizeof(why), "atom %zu is not '%s'", i, first[i]);
			ok = false;
		}
	uint32_t entries = 0;
	if (ok && (off[XB_F_INDEXTAB_ENTRIES] < 0 ||
		   xb_read_u32(&pv->vm->mem, pv->vm->sym.atom_table + (uint64_t)off[XB_F_INDEXTAB_ENTRIES],
			       &entries) < 0 ||
		   entries < 256 || entries > (1u << 26))) {
		snprintf(why, sizeof(why), "implausible atom count %u", entries);
		ok = false;
	}
	/* Spread over the table, up to the last: all text, no NUL. */
	int bad = 0;
	for (uint32_t k = 0; ok && k < MAX_ATOMS_CHECKED && !xb_interrupted; k++) {
		uint64_t ix = k + 1 == MAX_ATOMS_CHECKED ? entries - 1 : (uint64_t)k * entries / MAX_ATOMS_CHECKED;
		/* the last atom must read (a count off by one page is the
		 * table's size: its last slot holds none) */
		if (atom_text(pv, off, ix, t, sizeof(t)) < 0 && (++bad > 2 || k + 1 == MAX_ATOMS_CHECKED)) {
			snprintf(why, sizeof(why), "atom %llu does not read back: %s", (unsigned long long)ix, xb_err());
			ok = false;
		}
	}
	/* The count is the count, not the table's size beside it (index.h:
	 * size >= entries, in whole pages): the last atom, entries - 1, read
	 * back above.  One past it proves nothing: index.c fills a page's
	 * slots as atoms come, and a new page is not zeroed. */
	return prove_group(pv, &g, off, ok, why);
}

/* ------------------------------------------------------------------ */
/* the process table and the processes in it */

#define PTAB_WINDOW 512 /* erl_ptab.h ErtsPTab: 320 bytes in OTP 25..29 */

static int read_ptab(struct pv *pv)
{
	struct xb_vm *vm = pv->vm;
	if (!vm->sym.proc_tab)
		return xb_fail("the process table (erts_proc) was not found");
	if (objset_alloc(&pv->ptab, 1, PTAB_WINDOW) < 0)
		return -1;
	if (xb_read(&vm->mem, vm->sym.proc_tab, pv->ptab.bytes, PTAB_WINDOW) < 0) {
		objset_free(&pv->ptab);
		return -1;
	}
	pv->ptab.addr[0] = vm->sym.proc_tab;
	pv->ptab.n = 1;
	return 0;
}

/* The slot array with OFF's tab, max and invalid_element: every slot of
 * the first (up to) 64 Ki an empty one or a process.  Collects the live
 * ones' addresses (slot order) when LIVE is not NULL. */
#define SLOTS_READ 65536
static bool slots_ok(struct pv *pv, const int64_t *off, char *why, size_t wlen, uint64_t **live, uint32_t **lslot,
		     size_t *nlive)
{
	const struct objset *p = &pv->ptab;
	if (!in_win(p, off[XB_F_PTAB_TAB], 8) || !in_win(p, off[XB_F_PTAB_MAX], 4) ||
	    !in_win(p, off[XB_F_PTAB_INVALID_ELEMENT], 8)) {
		snprintf(why, wlen, "offsets outside erts_proc");
		return false;
	}
	uint64_t tab = get(p, 0, off[XB_F_PTAB_TAB], 8), inv = get(p, 0, off[XB_F_PTAB_INVALID_ELEMENT], 8);
	uint32_t max = (uint32_t)get(p, 0, off[XB_F_PTAB_MAX], 4);
	/* erl_ptab.c erts_ptab_init_table: max is a power of two (the
	 * process limit rounded up), at least 1024 (erl_process.c) */
	if (max < 1024 || max > (1u << 27) || (max & (max - 1))) {
		snprintf(why, wlen, "max %u is not a power of two in 1024..2^27", max);
		return false;
	}
	if (!ptr_ok(pv, tab) || !xb_remote_readable(&pv->vm->mem, tab, (size_t)max * 8) || !ptr_ok(pv, inv)) {
		snprintf(why, wlen, "tab 0x%llx (%u slots) or invalid_element 0x%llx not readable",
			 (unsigned long long)tab, max, (unsigned long long)inv);
		return false;
	}
	uint32_t n = max < SLOTS_READ ? max : SLOTS_READ;
	uint64_t *s = malloc((size_t)n * 8);
	if (!s || xb_read(&pv->vm->mem, tab, s, (size_t)n * 8) < 0) {
		free(s);
		snprintf(why, wlen, "the slots are not readable");
		return false;
	}
	uint32_t empty = 0, procs = 0, bad = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (s[i] == inv || s[i] == 0)
			empty++;
		else if (ptr_ok(pv, s[i]))
			procs++;
		else
			bad++;
	}
	bool ok = bad == 0 && procs > 0 && empty > 0;
	if (!ok)
		snprintf(why, wlen, "%u of %u slots are neither invalid_element nor a process (%u processes)", bad, n,
			 procs);
	if (ok && live) {
		*live = malloc((size_t)procs * 8);
		*lslot = malloc((size_t)procs * 4);
		*nlive = 0;
		for (uint32_t i = 0; *live && *lslot && i < n; i++)
			if (s[i] != inv && s[i] != 0) {
				(*live)[*nlive] = s[i];
				(*lslot)[(*nlive)++] = i;
			}
	}
	free(s);
	return ok;
}

static const enum xb_field ptab_fields[] = { XB_F_PTAB_TAB, XB_F_PTAB_MAX, XB_F_PTAB_INVALID_ELEMENT };

/* Up to MAX_OBJECTS processes: the first FIRST_OBJECTS live slots (the
 * system's own processes: registered, with grown heaps, long lived),
 * then spread evenly over the rest.  WIN bytes of each. */
static int read_procs(struct pv *pv, const uint64_t *live, const uint32_t *lslot, size_t nlive, size_t win)
{
	objset_free(&pv->procs);
	size_t take = nlive < MAX_OBJECTS ? nlive : MAX_OBJECTS;
	if (objset_alloc(&pv->procs, take, win) < 0)
		return -1;
	struct xb_readreq *q = calloc(take ? take : 1, sizeof(*q));
	if (!q)
		return xb_fail("out of memory");
	for (size_t k = 0; k < take; k++) {
		size_t i = k < FIRST_OBJECTS || nlive <= MAX_OBJECTS
				   ? k
				   : FIRST_OBJECTS + (k - FIRST_OBJECTS) * (nlive - FIRST_OBJECTS) / (take - FIRST_OBJECTS);
		pv->procs.addr[k] = live[i];
		pv->procs.tag[k] = lslot[i];
		q[k] = (struct xb_readreq){ live[i], pv->procs.bytes + k * win, win, false };
	}
	xb_read_many(&pv->vm->mem, q, take);
	/* a process freed meanwhile (its memory unmapped): left out */
	size_t n = 0;
	for (size_t k = 0; k < take; k++) {
		if (!q[k].ok)
			continue;
		if (n != k) {
			pv->procs.addr[n] = pv->procs.addr[k];
			pv->procs.tag[n] = pv->procs.tag[k];
			memmove(pv->procs.bytes + n * win, pv->procs.bytes + k * win, win);
		}
		n++;
	}
	pv->procs.n = n;
	free(q);
	free(pv->live_ptrs);
	pv->live_ptrs = malloc((nlive ? nlive : 1) * 8);
	if (!pv->live_ptrs)
		return xb_fail("out of memory");
	memcpy(pv->live_ptrs, live, nlive * 8);
	qsort(pv->live_ptrs, nlive, 8, cmp_u64);
	pv->nlive_ptrs = nlive;
	return 0;
}

/* common.id: a pid term naming the slot the process sits in. */
static enum ev ev_pid(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	uint32_t slot;
	if (!pid_to_slot(pv, off, v, &slot))
		return EV_BAD;
	return slot == pv->cur->tag[i] ? EV_OK : EV_BAD;
}

static const struct fcheck pid_check[] = {
	{ XB_F_PROC_ID, ev_pid, 3, "a pid term whose table index is the slot the process is in", 1, 3 },
};

/* erl_ptab.c erts_ptab_init_table: pix_mask = (1 << bits) - 1 = max - 1;
 * cl_mask = (1 << cli_shift) - 1; cli_mask = (1 << cl_shift) - 1;
 * cl_shift + cli_shift = bits. */
static const enum xb_field pix_fields[] = { XB_F_PTAB_PIX_MASK, XB_F_PTAB_PIX_CL_MASK, XB_F_PTAB_PIX_CL_SHIFT,
					    XB_F_PTAB_PIX_CLI_MASK, XB_F_PTAB_PIX_CLI_SHIFT };

static bool pix_ok(struct pv *pv, const int64_t *off, char *why, size_t wlen)
{
	uint64_t v[5];
	for (int k = 0; k < 5; k++) {
		if (!in_win(&pv->ptab, off[pix_fields[k]], 4)) {
			snprintf(why, wlen, "offsets outside erts_proc");
			return false;
		}
		v[k] = get(&pv->ptab, 0, off[pix_fields[k]], 4);
	}
	uint32_t max = (uint32_t)get(&pv->ptab, 0, off[XB_F_PTAB_MAX], 4);
	unsigned bits = 0;
	while (bits < 32 && (1ull << bits) < max)
		bits++;
	bool ok = v[0] + 1 == max && v[2] < 32 && v[4] < 32 && v[2] + v[4] == bits && v[1] == (1ull << v[4]) - 1 &&
		  v[3] == (1ull << v[2]) - 1;
	if (!ok)
		snprintf(why, wlen, "pix_mask %llu, cl_mask %llu, cl_shift %llu, cli_mask %llu, cli_shift %llu do not "
				    "describe %u slots", (unsigned long long)v[0], (unsigned long long)v[1],
			 (unsigned long long)v[2], (unsigned long long)v[3], (unsigned long long)v[4], max);
	return ok;
}

/* r.o.element_size = sizeof(Process): a few hundred bytes to a few KiB,
 * and no two processes closer together than that.  The count
 * (vola.tile.count) is the number of live slots, give or take the
 * processes spawned or gone while the slots were read. */
static int prove_ptab(struct pv *pv, int64_t *off, bool discover, uint64_t **live, uint32_t **lslot,
		      size_t *nlive)
{
	char why[160] = "";
	struct gcheck g = { ptab_fields, XB_ARRAY_SIZE(ptab_fields),
			    "max is a power of two; every slot of tab is invalid_element or a process" };
	bool ok = read_ptab(pv) == 0;
	if (!ok)
		snprintf(why, sizeof(why), "%s", xb_err());
	ok = ok && slots_ok(pv, off, why, sizeof(why), live, lslot, nlive);
	if (!ok && discover && pv->ptab.n && !pv->lay->mutating) {
		/* The read-only part moves as one (erl_ptab.h: the list and
		 * volatile parts before it are cache-line padded unions). */
		int64_t *cand = malloc(sizeof(int64_t) * XB_F_COUNT);
		for (int64_t d = -128; cand && d <= 128 && !ok; d += 8) {
			memcpy(cand, off, sizeof(int64_t) * XB_F_COUNT);
			for (int f = XB_F_PTAB_TAB; f <= XB_F_PTAB_PIX_CLI_SHIFT; f++)
				if (pv->origin[f] >= 0)
					cand[f] = pv->origin[f] + d;
			for (enum xb_field f = XB_F_PTAB_FREE_ID_DATA; f <= XB_F_PTAB_FREE_ID_DATA; f++)
				if (pv->origin[f] >= 0)
					cand[f] = pv->origin[f] + d;
			char w2[160];
			if (d && slots_ok(pv, cand, w2, sizeof(w2), live, lslot, nlive)) {
				for (int f = 0; f < XB_F_COUNT; f++)
					if (cand[f] != off[f]) {
						pv->lay->f[f].src = XB_LSRC_DISCOVERED;
						pv->lay->discovered++;
					}
				memcpy(off, cand, sizeof(int64_t) * XB_F_COUNT);
				ok = true;
			}
		}
		free(cand);
	}
	int failed = prove_group(pv, &g, off, ok, why);
	if (!ok)
		return failed;
	pv->ptab_max = (uint32_t)get(&pv->ptab, 0, off[XB_F_PTAB_MAX], 4);
	if (!pv->vm->pid_pixdata) {
		for (size_t k = 0; k < XB_ARRAY_SIZE(pix_fields); k++)
			if (off[pix_fields[k]] >= 0)
				pv->lay->f[pix_fields[k]].proof = XB_LP_UNUSED;
	} else {
		struct gcheck gp = { pix_fields, XB_ARRAY_SIZE(pix_fields),
				     "pix_mask + 1 is max; the cache-line masks and shifts split its bits" };
		bool pok = pix_ok(pv, off, why, sizeof(why));
		failed += prove_group(pv, &gp, off, pok, why);
	}
	return failed;
}

/* ------------------------------------------------------------------ */
/* struct process (erl_process.h) */

static uint64_t fld(struct pv *pv, size_t i, const int64_t *off, enum xb_field f)
{
	return off[f] >= 0 ? get(pv->cur, i, off[f], 8) : 0;
}

static bool heap_triple(struct pv *pv, size_t i, const int64_t *off)
{
	uint64_t heap = fld(pv, i, off, XB_F_PROC_HEAP), hend = fld(pv, i, off, XB_F_PROC_HEND),
		 sz = fld(pv, i, off, XB_F_PROC_HEAP_SZ);
	return heap && heap % 8 == 0 && hend > heap && hend % 8 == 0 && hend - heap < (1ull << 40) &&
	       (off[XB_F_PROC_HEAP_SZ] < 0 || (hend - heap) / 8 == sz) && xb_remote_readable(&pv->vm->mem, heap, 8);
}

/* heap, hend, heap_sz: hend - heap = heap_sz words (erl_gc.c keeps them so) */
/* A process running or collecting garbage (its state, if the offset of
 * the state is known): its heap pointers change while they are read, so
 * what does not hold there is no counterexample. */
static bool busy(struct pv *pv, size_t i, const int64_t *off)
{
	return off[XB_F_PROC_STATE] >= 0 && in_win(pv->cur, off[XB_F_PROC_STATE], 4) &&
	       xb_proc_state_busy((uint32_t)get(pv->cur, i, off[XB_F_PROC_STATE], 4));
}

static enum ev ev_heap(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)at;
	return heap_triple(pv, i, off) ? EV_OK : busy(pv, i, off) ? EV_NA : EV_BAD;
}

static enum ev ev_htop(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	if (!heap_triple(pv, i, off))
		return EV_NA;
	uint64_t v = g64(pv, i, at), heap = fld(pv, i, off, XB_F_PROC_HEAP), hend = fld(pv, i, off, XB_F_PROC_HEND);
	uint64_t stop = off[XB_F_PROC_STOP] >= 0 ? fld(pv, i, off, XB_F_PROC_STOP) : hend;
	return v % 8 == 0 && heap <= v && v < stop && stop <= hend ? EV_OK : busy(pv, i, off) ? EV_NA : EV_BAD;
}

static enum ev ev_stop(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	if (!heap_triple(pv, i, off))
		return EV_NA;
	uint64_t v = g64(pv, i, at), heap = fld(pv, i, off, XB_F_PROC_HEAP), hend = fld(pv, i, off, XB_F_PROC_HEND);
	uint64_t htop = off[XB_F_PROC_HTOP] >= 0 ? fld(pv, i, off, XB_F_PROC_HTOP) : heap;
	return v % 8 == 0 && heap <= htop && htop < v && v <= hend ? EV_OK : busy(pv, i, off) ? EV_NA : EV_BAD;
}

/* high_water: heap <= high_water <= htop */
static enum ev ev_high_water(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	if (!heap_triple(pv, i, off))
		return EV_NA;
	uint64_t v = g64(pv, i, at), heap = fld(pv, i, off, XB_F_PROC_HEAP);
	uint64_t htop = off[XB_F_PROC_HTOP] >= 0 ? fld(pv, i, off, XB_F_PROC_HTOP) : fld(pv, i, off, XB_F_PROC_HEND);
	if (v % 8 || v < heap || v > htop)
		return EV_BAD;
	return v > heap ? EV_OK : EV_NA;
}

/* A Sint counting down from CONTEXT_REDS (erl_vm.h: 4000) by the
 * reductions a process used while scheduled in; stored when it is
 * scheduled out (erl_process.c).  Negative while saving calls.  Its
 * neighbours are 0 (frame_pointer, freason) or terms (fvalue: NIL). */
static enum ev ev_fcalls(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	/* from OTP 27 only the low 32 bits are the count (r14d), the rest
	 * flags (release.h struct xb_regroles) */
	uint64_t w = g64(pv, i, at);
	int64_t v = (int32_t)(uint32_t)w;
	if (v == 0)
		return EV_NA;
	if (v < -8000 || v > 8000 || ptr_ok(pv, w))
		return EV_BAD;
	/* the neighbours are terms (fvalue: NIL, an atom), pointers and
	 * freason's few codes; a process used a few of its 4000 */
	if ((v & 0x3f) == 0x3b || (v & 0xf) == 0xf)
		return EV_NA;
	return v > 1000 ? EV_OK : EV_NA;
}

/* reds: reductions since the process started (a count, not a term);
 * the system's own processes have run thousands (its neighbours:
 * catches, flags, suspend counts, are small) */
static enum ev ev_reds(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = g64(pv, i, at);
	if (v >= (1ull << 48) || ptr_ok(pv, v))
		return EV_BAD;
	return v > 100 && (v & 0xf) != 0x3 /* not a pid: group_leader */ ? EV_OK : EV_NA;
}

static enum ev ev_code(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	return in_code(pv, v) ? EV_OK : EV_BAD;
}

static enum ev ev_current(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	return mfa_at(pv, v, off) ? EV_OK : EV_BAD;
}

/* u.initial: the MFA inline */
static enum ev ev_initial(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	int64_t m = off[XB_F_MFA_MODULE], f = off[XB_F_MFA_FUNCTION], a = off[XB_F_MFA_ARITY];
	if (m < 0 || f < 0 || a < 0)
		return EV_NA;
	uint64_t mv = g64(pv, i, at + m), fv = g64(pv, i, at + f), av = g64(pv, i, at + a);
	return xb_is_atom(mv) && xb_is_atom(fv) && av <= 255 ? EV_OK : EV_BAD;
}

/* common.u.alive.reg: NULL, or a RegProc (register.h) naming it */
static enum ev ev_reg(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	int64_t n = off[XB_F_REGPROC_NAME], p = off[XB_F_REGPROC_P];
	if (n < 0 || n > 32 || p > 32)
		return EV_BAD;
	const uint8_t *b = deref(pv, v, 40);
	if (!b)
		return EV_BAD;
	uint64_t name, proc = pv->cur->addr[i];
	memcpy(&name, b + n, 8);
	if (p >= 0)
		memcpy(&proc, b + p, 8);
	return xb_is_atom(name) && proc == pv->cur->addr[i] ? EV_OK : EV_BAD;
}

/* A pid, or (for the group leader of a process another node spawned) a
 * boxed external pid; NIL for a parent that is not a process. */
static enum ev ev_pid_term(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = g64(pv, i, at);
	if (xb_is_pid(v))
		return EV_OK;
	return v == XB_NIL || (v & 3) == 2 ? EV_NA : EV_BAD;
}

/* Pointers to a pointer field of the process itself when the queue is
 * empty (erl_proc_sig_queue.h: last = &first), else into a message. */
static enum ev self_or_ptr(struct pv *pv, size_t i, int64_t at, int64_t target)
{
	uint64_t v = g64(pv, i, at), self = pv->cur->addr[i] + (uint64_t)target;
	if (target < 0)
		return EV_NA;
	if (v == self)
		return EV_OK;
	return ptr_ok(pv, v) ? EV_NA : EV_BAD;
}

static enum ev ev_sigq_last(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return self_or_ptr(pv, i, at, off[XB_F_PROC_SIGQ_FIRST]);
}

static enum ev ev_sigq_cont_last(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return self_or_ptr(pv, i, at, off[XB_F_PROC_SIGQ_CONT]);
}

static enum ev ev_siginq_last(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return self_or_ptr(pv, i, at, off[XB_F_PROC_SIGINQ_FIRST]);
}

/* A queue's first: NULL exactly when its last points back at it. */
static enum ev queue_first(struct pv *pv, size_t i, int64_t at, int64_t last)
{
	if (last < 0)
		return EV_NA;
	uint64_t v = g64(pv, i, at), l = g64(pv, i, last), self = pv->cur->addr[i] + (uint64_t)at;
	if (l == self)
		return v == 0 ? EV_OK : EV_BAD;
	return ptr_ok(pv, v) ? EV_OK : EV_BAD;
}

static enum ev ev_sigq_first(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return queue_first(pv, i, at, off[XB_F_PROC_SIGQ_LAST]);
}

static enum ev ev_sigq_cont(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return queue_first(pv, i, at, off[XB_F_PROC_SIGQ_CONT_LAST]);
}

static enum ev ev_siginq_first(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return queue_first(pv, i, at, off[XB_F_PROC_SIGINQ_LAST]);
}

/* A queue's length: 0 when it is empty (last = &first). */
static enum ev queue_len(struct pv *pv, size_t i, int64_t at, int64_t first, int64_t last)
{
	if (first < 0 || last < 0)
		return EV_NA;
	int64_t v = (int64_t)g64(pv, i, at);
	uint64_t l = g64(pv, i, last), self = pv->cur->addr[i] + (uint64_t)first;
	if (v < 0 || v > (1ll << 40))
		return EV_BAD;
	if (l == self)
		return v == 0 ? EV_NA : EV_BAD;
	return v > 0 ? EV_OK : EV_NA;
}

static enum ev ev_sigq_len(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return queue_len(pv, i, at, off[XB_F_PROC_SIGQ_FIRST], off[XB_F_PROC_SIGQ_LAST]);
}

static enum ev ev_siginq_len(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return queue_len(pv, i, at, off[XB_F_PROC_SIGINQ_FIRST], off[XB_F_PROC_SIGINQ_LAST]);
}

/* old_heap <= old_htop <= old_hend, all or none (erl_gc.c); evidence
 * from an old heap partly used (so that no two of them read the same) */
static enum ev ev_old(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)at;
	uint64_t h = fld(pv, i, off, XB_F_PROC_OLD_HEAP), t = fld(pv, i, off, XB_F_PROC_OLD_HTOP),
		 e = fld(pv, i, off, XB_F_PROC_OLD_HEND);
	if (!h && !t && !e)
		return EV_NA;
	if (h % 8 || t % 8 || e % 8 || !h || h > t || t > e || e - h > (1ull << 40) || !ptr_ok(pv, h))
		return EV_BAD;
	return t > h && e > t ? EV_OK : EV_NA;
}

/* arg_reg: the process's own def_arg_reg while its arity fits
 * (erl_process.c: p->arg_reg = p->def_arg_reg), else an array of its own */
static enum ev ev_arg_reg(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (off[XB_F_PROC_DEF_ARG_REG] < 0)
		return EV_NA;
	if (v == pv->cur->addr[i] + (uint64_t)off[XB_F_PROC_DEF_ARG_REG])
		return EV_OK;
	return ptr_ok(pv, v) ? EV_NA : EV_BAD;
}

static enum ev ev_def_arg_reg(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	if (off[XB_F_PROC_ARG_REG] < 0)
		return EV_NA;
	uint64_t v = fld(pv, i, off, XB_F_PROC_ARG_REG), self = pv->cur->addr[i];
	if (v == self + (uint64_t)at)
		return EV_OK;
	/* inside the process, but not here */
	if (v >= self && v < self + pv->cur->win)
		return EV_BAD;
	return ptr_ok(pv, v) ? EV_NA : EV_BAD;
}

/* arity: live argument registers (the byte read: OTP 27+ keeps a byte,
 * before a Uint).  The process's own def_arg_reg holds them while they
 * fit (erl_process.h: max_arg_reg, 6); beyond, arg_reg points elsewhere. */
static enum ev ev_arity(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = get(pv->cur, i, at, 1);
	if (off[XB_F_PROC_ARG_REG] < 0 || off[XB_F_PROC_DEF_ARG_REG] < 0)
		return EV_NA;
	uint64_t ar = fld(pv, i, off, XB_F_PROC_ARG_REG), own = pv->cur->addr[i] + (uint64_t)off[XB_F_PROC_DEF_ARG_REG];
	/* an arg_reg once grown stays (erl_process.c: max_arg_reg only
	 * grows), so a small arity says nothing about where it points */
	if (v > 255 || (v > 6 && ar == own))
		return EV_BAD;
	return v > 6 || (v && ar == own) ? EV_OK : EV_NA;
}

/* A pointer or NULL; evidence only from a pointer that reads. */
static enum ev ev_ptr_or_null(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	return ptr_ok(pv, v) ? EV_OK : EV_BAD;
}

/* NULL, or a heap fragment (erl_message.h ErlHeapFragment): used_size <=
 * alloc_size, a next that is NULL or another fragment. */
static enum ev ev_mbuf(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	int64_t nx = off[XB_F_HFRAG_NEXT], al = off[XB_F_HFRAG_ALLOC_SIZE], us = off[XB_F_HFRAG_USED_SIZE];
	if (nx < 0 || al < 0 || us < 0 || nx > 32 || al > 32 || us > 32)
		return EV_NA;
	const uint8_t *b = deref(pv, v, 40);
	if (!b)
		return EV_BAD;
	uint64_t next, a, u;
	memcpy(&next, b + nx, 8);
	memcpy(&a, b + al, 8);
	memcpy(&u, b + us, 8);
	return u <= a && a < (1ull << 36) && (!next || ptr_ok(pv, next)) ? EV_OK : EV_BAD;
}

/* mbuf_sz: 0 when there are no fragments (heap or message ones) */
static enum ev ev_mbuf_sz(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (v >= (1ull << 40))
		return EV_BAD;
	if (off[XB_F_PROC_MBUF] >= 0 && fld(pv, i, off, XB_F_PROC_MBUF))
		return v ? EV_OK : EV_BAD;
	return EV_NA;
}

/* state: ERTS_PSFLG_* bits (erl_process.h): the low six hold the
 * active, user and run-queue priorities (2 bits each; normal is 2), so a
 * process's state is never 0, and its active priority is its user one
 * unless it is being raised for a while. */
static enum ev ev_state(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint32_t v = g32(pv, i, at);
	if (v == 0 || (v >> 28))
		return EV_BAD;
	return (v & 3) == ((v >> 2) & 3) ? EV_OK : EV_NA;
}

/* Counts of words of off-heap data: below 2^31 (16 GiB), not terms,
 * not pointers. */
static enum ev ev_words(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = g64(pv, i, at);
	if (v >= (1ull << 31))
		return EV_BAD;
	return v ? EV_OK : EV_NA;
}

/* abandoned_heap: NULL, or the heap a process left for a larger one
 * mid-collection: not inside its current heap */
static enum ev ev_abandoned(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	uint64_t heap = fld(pv, i, off, XB_F_PROC_HEAP), hend = fld(pv, i, off, XB_F_PROC_HEND);
	if (v >= heap && v <= hend)
		return EV_BAD;
	return ptr_ok(pv, v) ? EV_OK : EV_BAD;
}

/* gen_gcs: minor collections since the last full sweep, below
 * max_gen_gcs (the next Uint16; erl_process.h) */
static enum ev ev_gen_gcs(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = get(pv->cur, i, at, 2), max = get(pv->cur, i, at + 2, 2);
	if (v > max || max == 0)
		return EV_BAD;
	return v ? EV_OK : EV_NA;
}

/* The type of a monitor or link node N (erl_monitor_link.h
 * ErtsMonLnkNode.type: ERTS_MON_TYPE_* 0..9, ERTS_LNK_TYPE_* above; OTP 29
 * keeps it in the low 5 bits of flags), read where a monitor's origin
 * node keeps it; -1 when unreadable. */
static int node_type(struct pv *pv, uint64_t n, const int64_t *off)
{
	int64_t ot = off[XB_F_MONDATA_ORIGIN_TYPE], of = off[XB_F_MONDATA_ORIGIN_FLAGS];
	const uint8_t *b = deref(pv, n, 64);
	uint16_t w;
	if (!b)
		return -1;
	if (ot >= 0 && ot + 2 <= 64) {
		memcpy(&w, b + ot, 2);
		return w;
	}
	if (of >= 0 && of + 2 <= 64) {
		memcpy(&w, b + of, 2);
		return w & 0x1f;
	}
	return -1;
}

/* links: NULL or a tree of link nodes; monitors and lt_monitors: of
 * monitor nodes (the kind a node says it is) */
static enum ev typed_tree(struct pv *pv, size_t i, const int64_t *off, int64_t at, bool links)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	if (!ptr_ok(pv, v))
		return EV_BAD;
	int t = node_type(pv, v, off);
	if (t < 0)
		return EV_NA;
	return (links ? t > 9 && t < 32 : t <= 9) ? EV_OK : EV_BAD;
}

static enum ev ev_links(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return typed_tree(pv, i, off, at, true);
}

static enum ev ev_monitors(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return typed_tree(pv, i, off, at, false);
}

/* ProcDict (erl_process_dict.h): NULL, or a dictionary whose arraySize
 * is a power of two... of at least INITIAL_SIZE (8) */
static enum ev ev_dictionary(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	int64_t as = off[XB_F_PROCDICT_ARRAY_SIZE];
	if (as < 0 || as > 32)
		return EV_NA;
	const uint8_t *b = deref(pv, v, 40);
	if (!b)
		return EV_BAD;
	uint32_t n; /* unsigned int arraySize */
	memcpy(&n, b + as, 4);
	return n >= 8 && n < (1u << 28) ? EV_OK : EV_BAD;
}

/* run_queue: an ErtsRunQueue* with flag bits in the low 3
 * (erl_process.h ERTS_RUNQ_FLGS_*...): the run queue of some scheduler */
static enum ev ev_proc_runq(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint64_t v = g64(pv, i, at) & ~(uint64_t)7;
	return ptr_ok(pv, v) ? EV_OK : EV_BAD;
}

static const struct fcheck proc_checks[] = {
	{ XB_F_PROC_HEAP, ev_heap, 5, "hend - heap = heap_sz words", 1, 3 },
	{ XB_F_PROC_HEND, ev_heap, 5, "hend - heap = heap_sz words", 1, 3 },
	{ XB_F_PROC_HEAP_SZ, ev_heap, 5, "hend - heap = heap_sz words", 1, 3 },
	{ XB_F_PROC_HTOP, ev_htop, 5, "heap <= htop < stop <= hend", 1, 3 },
	{ XB_F_PROC_STOP, ev_stop, 5, "heap <= htop < stop <= hend", 1, 3 },
	{ XB_F_PROC_HIGH_WATER, ev_high_water, 1, "heap <= high_water <= htop" },
	{ XB_F_PROC_FCALLS, ev_fcalls, 3, "reductions left: 1..4000 when scheduled out", 1, 3 },
	{ XB_F_PROC_REDS, ev_reds, 3, "a count below 2^48, not a term or pointer; thousands for some, a different "
				     "count for most", 1, 3, 1 },
	{ XB_F_PROC_I, ev_code, 5, "points into loaded code", 1, 3 },
	{ XB_F_PROC_CURRENT, ev_current, 3, "NULL or an MFA: module and function atoms, arity <= 255" },
	{ XB_F_PROC_INITIAL, ev_initial, 5, "an MFA inline: module and function atoms, arity <= 255", 1, 3 },
	{ XB_F_PROC_REG, ev_reg, 1, "NULL or a RegProc whose name is an atom and whose p is the process", 1, 1 },
	{ XB_F_PROC_GROUP_LEADER, ev_pid_term, 5, "a pid", 1, 1 },
	{ XB_F_PROC_PARENT, ev_pid_term, 3, "a pid or NIL", 1, 2 },
	{ XB_F_PROC_SIGQ_FIRST, ev_sigq_first, 3, "NULL exactly when sig_qs.last is &sig_qs.first", 1, 1 },
	{ XB_F_PROC_SIGQ_LAST, ev_sigq_last, 3, "&sig_qs.first when empty, else a message's next", 1, 3 },
	{ XB_F_PROC_SIGQ_CONT, ev_sigq_cont, 3, "NULL exactly when sig_qs.cont_last is &sig_qs.cont", 1, 1 },
	{ XB_F_PROC_SIGQ_CONT_LAST, ev_sigq_cont_last, 3, "&sig_qs.cont when empty", 1, 3 },
	{ XB_F_PROC_SIGQ_LEN, ev_sigq_len, 1, "0 when the queue is empty" },
	{ XB_F_PROC_SIGINQ_FIRST, ev_siginq_first, 3, "NULL exactly when sig_inq.last is &sig_inq.first", 1, 1 },
	{ XB_F_PROC_SIGINQ_LAST, ev_siginq_last, 3, "&sig_inq.first when empty", 1, 3 },
	{ XB_F_PROC_SIGINQ_LEN, ev_siginq_len, 1, "0 when the queue is empty" },
	{ XB_F_PROC_OLD_HEAP, ev_old, 1, "old_heap < old_htop < old_hend, or none", 1, 1 },
	{ XB_F_PROC_OLD_HTOP, ev_old, 1, "old_heap < old_htop < old_hend, or none", 1, 1 },
	{ XB_F_PROC_OLD_HEND, ev_old, 1, "old_heap < old_htop < old_hend, or none", 1, 1 },
	{ XB_F_PROC_ARG_REG, ev_arg_reg, 3, "the process's own def_arg_reg while its arity fits", 1, 3 },
	{ XB_F_PROC_DEF_ARG_REG, ev_def_arg_reg, 3, "what arg_reg points at while the arity fits", 1, 1 },
	{ XB_F_PROC_ARITY, ev_arity, 1, "<= 255; <= 6 while arg_reg is the process's own def_arg_reg",
	  .no_constant = 1 },
	{ XB_F_PROC_MBUF, ev_mbuf, 1, "NULL or a heap fragment (used_size <= alloc_size)" },
	{ XB_F_PROC_MBUF_SZ, ev_mbuf_sz, 1, "non-zero when there are heap fragments", .no_constant = 1 },
	{ XB_F_PROC_STATE, ev_state, 5, "ERTS_PSFLG_* bits, never 0: active priority = user priority", 1, 1 },
	{ XB_F_PROC_ABANDONED_HEAP, ev_abandoned, 1, "NULL or a heap other than the current one" },
	{ XB_F_PROC_OFF_HEAP_OVERHEAD, ev_words, 1, "words, below 2^31; not one constant", .no_constant = 1 },
	{ XB_F_PROC_BIN_OLD_VHEAP, ev_words, 1, "words, below 2^31; not one constant", .no_constant = 1 },
	{ XB_F_PROC_MONITORS, ev_monitors, 1, "NULL or a tree of monitor nodes" },
	{ XB_F_PROC_LINKS, ev_links, 3, "NULL or a tree of link nodes (a supervised process has one)", 1, 3 },
	{ XB_F_PROC_LT_MONITORS, ev_monitors, 1, "NULL or a list of monitor nodes" },
	{ XB_F_PROC_PSD, ev_ptr_or_null, 1, "NULL or process specific data" },
	{ XB_F_PROC_SIGINQ_BUFFERS, ev_ptr_or_null, 1, "NULL or the signal buffers" },
	{ XB_F_PROC_DICTIONARY, ev_dictionary, 3, "NULL or a ProcDict of at least 8 slots (proc_lib gives every "
						     "process it starts one)", 1, 1 },
	{ XB_F_PROC_GEN_GCS, ev_gen_gcs, 1, "below max_gen_gcs" },
	{ XB_F_PROC_RUN_QUEUE, ev_proc_runq, 3, "a run queue", 1, 1 },
};

/* The MFA fields (code_ix.h ErtsCodeMFA), proven on the processes'
 * inline u.initial: module and function atoms and a small arity read
 * with these offsets. */
static enum ev mfa_triple(struct pv *pv, size_t i, const int64_t *off, enum xb_field which, int64_t at)
{
	int64_t in = off[XB_F_PROC_INITIAL];
	int64_t m = which == XB_F_MFA_MODULE ? at : off[XB_F_MFA_MODULE];
	int64_t f = which == XB_F_MFA_FUNCTION ? at : off[XB_F_MFA_FUNCTION];
	int64_t a = which == XB_F_MFA_ARITY ? at : off[XB_F_MFA_ARITY];
	if (in < 0 || m < 0 || f < 0 || a < 0 || m > 32 || f > 32 || a > 32)
		return EV_BAD;
	uint64_t mv = g64(pv, i, in + m), fv = g64(pv, i, in + f), av = g64(pv, i, in + a);
	return xb_is_atom(mv) && xb_is_atom(fv) && av <= 255 && mv != fv ? EV_OK : EV_BAD;
}

static enum ev ev_mfa_m(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return mfa_triple(pv, i, off, XB_F_MFA_MODULE, at);
}

static enum ev ev_mfa_f(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return mfa_triple(pv, i, off, XB_F_MFA_FUNCTION, at);
}

static enum ev ev_mfa_a(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	return mfa_triple(pv, i, off, XB_F_MFA_ARITY, at);
}

static const struct fcheck mfa_checks[] = {
	{ XB_F_MFA_MODULE, ev_mfa_m, 3, "u.initial's module: an atom", 1, 0 },
	{ XB_F_MFA_FUNCTION, ev_mfa_f, 3, "u.initial's function: an atom", 1, 0 },
	{ XB_F_MFA_ARITY, ev_mfa_a, 3, "u.initial's arity: 0..255", 1, 0 },
};

/* RegProc (register.h), through the registered processes */
static enum ev ev_regproc(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)at;
	return off[XB_F_PROC_REG] < 0 ? EV_NA : ev_reg(pv, i, off, off[XB_F_PROC_REG]);
}

static const struct fcheck regproc_checks[] = {
	{ XB_F_REGPROC_NAME, ev_regproc, 1, "a registered process's RegProc: name an atom" },
	{ XB_F_REGPROC_P, ev_regproc, 1, "a registered process's RegProc: p is the process" },
};

/* ------------------------------------------------------------------ */
/* scheduler data (erl_process.h ErtsSchedulerData_, one
 * ErtsAlignedSchedulerData each, an array per kind) */

#define SCHED_WINDOW 1024
#define SCHED_ROUNDS 12 /* reads of the arrays, 1 ms apart: a running process seen */

static uint64_t sched_base(struct pv *pv, int kind)
{
	uint64_t p = kind == 0 ? pv->vm->sym.sched_data_ptr : kind == 1 ? pv->vm->sym.dirty_cpu_data_ptr
									 : pv->vm->sym.dirty_io_data_ptr, b = 0;
	if (!p || xb_read_u64(&pv->vm->mem, p, &b) < 0 || !ptr_ok(pv, b))
		return 0;
	return b;
}

/* Entry K of kind KIND (0 normal, 1 dirty CPU, 2 dirty I/O) numbers
 * itself K+1 in `no` (normal) or `dirty_no` (dirty: OTP 26+; before,
 * dirty ones used `no` too). */
static int numbered(uint64_t no, uint64_t dno, bool have_dno, int kind, size_t k)
{
	if (kind == 0)
		return no == k + 1;
	if (dno == k + 1 || no == k + 1)
		return 1;
	return !have_dno && no == 0 ? -1 : 0; /* says nothing */
}

/* The stride: the entries at base + k * stride are numbered 1, 2, ... */
static bool stride_ok(struct pv *pv, int64_t stride, const int64_t *off)
{
	int64_t ono = off[XB_F_SCHED_NO], odn = off[XB_F_SCHED_DIRTY_NO];
	if (stride < 256 || stride > (1 << 22) || stride % 64 || ono < 0 || ono + 8 > SCHED_WINDOW)
		return false;
	int checked = 0;
	for (int kind = 0; kind < 3; kind++) {
		uint64_t b = sched_base(pv, kind);
		int n = pv->nsched[kind] < 4 ? pv->nsched[kind] : 4;
		for (int k = 0; b && k < n; k++) {
			uint64_t no = 0, dno = 0;
			uint64_t e = b + (uint64_t)k * (uint64_t)stride;
			if (xb_read_u64(&pv->vm->mem, e + (uint64_t)ono, &no) < 0 ||
			    (odn >= 0 && xb_read_u64(&pv->vm->mem, e + (uint64_t)odn, &dno) < 0))
				return false;
			int r = numbered(no, dno, odn >= 0, kind, (size_t)k);
			if (!r)
				return false;
			checked += k > 0 && r > 0;
		}
	}
	return checked > 0;
}

static int read_sched(struct pv *pv, int64_t stride)
{
	objset_free(&pv->sched);
	size_t total = 0;
	for (int kind = 0; kind < 3; kind++)
		total += (size_t)pv->nsched[kind];
	if (total > MAX_SCHED_ENTRIES / SCHED_ROUNDS)
		total = MAX_SCHED_ENTRIES / SCHED_ROUNDS;
	if (objset_alloc(&pv->sched, total * SCHED_ROUNDS, SCHED_WINDOW) < 0)
		return -1;
	/* the entries read shared fairly among the kinds (+S 200 with 1024
	 * dirty I/O schedulers: some of each, not the first 85 normal ones) */
	int cap[3] = { 0, 0, 0 };
	for (size_t left = total, more = 1; left && more;) {
		more = 0;
		for (int kind = 0; kind < 3 && left; kind++)
			if (cap[kind] < pv->nsched[kind]) {
				cap[kind]++;
				left--;
				more = 1;
			}
	}
	struct xb_readreq *q = calloc(total ? total : 1, sizeof(*q));
	uint32_t *tag = calloc(total ? total : 1, sizeof(*tag));
	/* each round's entries in one batch of reads */
	for (int round = 0; q && tag && round < SCHED_ROUNDS && !xb_interrupted; round++) {
		size_t n = 0, base = pv->sched.n;
		for (int kind = 0; kind < 3; kind++) {
			uint64_t b = sched_base(pv, kind);
			for (int k = 0; b && k < cap[kind] && n < total; k++) {
				uint64_t e = b + (uint64_t)k * (uint64_t)stride;
				q[n] = (struct xb_readreq){ e, pv->sched.bytes + (base + n) * SCHED_WINDOW, SCHED_WINDOW,
							    false };
				tag[n++] = (uint32_t)kind << 16 | (uint32_t)k;
			}
		}
		xb_read_many(&pv->vm->mem, q, n);
		for (size_t j = 0; j < n; j++) {
			if (!q[j].ok)
				continue;
			size_t at = pv->sched.n++;
			if (at != base + j)
				memmove(pv->sched.bytes + at * SCHED_WINDOW, pv->sched.bytes + (base + j) * SCHED_WINDOW,
					SCHED_WINDOW);
			pv->sched.addr[at] = q[j].addr;
			pv->sched.tag[at] = tag[j];
		}
		if (round + 1 < SCHED_ROUNDS)
			sleep_ms(1);
	}
	free(q);
	free(tag);
	return 0;
}

static enum ev ev_sched_no(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint32_t kind = pv->cur->tag[i] >> 16, k = pv->cur->tag[i] & 0xffff;
	uint64_t v = g64(pv, i, at);
	if (kind == 0)
		return v == k + 1 ? EV_OK : EV_BAD;
	return v == 0 || v == k + 1 ? EV_NA : EV_BAD;
}

static enum ev ev_sched_dirty_no(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint32_t kind = pv->cur->tag[i] >> 16, k = pv->cur->tag[i] & 0xffff;
	uint64_t v = g64(pv, i, at);
	if (kind == 0)
		return v == 0 ? EV_NA : EV_BAD;
	return v == k + 1 ? EV_OK : EV_BAD;
}

static enum ev ev_sched_type(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)off;
	uint32_t kind = pv->cur->tag[i] >> 16;
	uint32_t v = g32(pv, i, at);
	if (v != kind)
		return EV_BAD;
	return kind ? EV_OK : EV_NA;
}

static enum ev ev_sched_current(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint64_t v = g64(pv, i, at);
	if (!v)
		return EV_NA;
	if (is_process(pv, v))
		return EV_OK;
	/* a process spawned since the table was read (or gone since): its
	 * first word still a pid term (erl_term.h _TAG_IMMED1_PID, 0x3) */
	int64_t id = off[XB_F_PROC_ID];
	const uint8_t *b = id >= 0 && id <= 56 ? deref(pv, v, (size_t)id + 8) : NULL;
	uint64_t term = 0;
	if (b)
		memcpy(&term, b + id, 8);
	if (b && (term & 0xf) == 0x3)
		return EV_NA;
	/* ... or freed since (its first word the link of its fix_alloc list):
	 * a block among the live processes' (within 256 KiB of one) */
	if (b && term && term % 8 == 0 && pv->nlive_ptrs) {
		size_t lo = 0, hi = pv->nlive_ptrs;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (pv->live_ptrs[mid] < v)
				lo = mid + 1;
			else
				hi = mid;
		}
		uint64_t d = UINT64_MAX;
		if (lo < pv->nlive_ptrs)
			d = pv->live_ptrs[lo] - v;
		if (lo > 0 && v - pv->live_ptrs[lo - 1] < d)
			d = v - pv->live_ptrs[lo - 1];
		if (d < (256u << 10))
			return EV_NA;
	}
	return EV_BAD;
}

/* run_queue: the scheduler's own run queue (ErtsRunQueue_.ix is its
 * number - 1, erl_process.c init_scheduler_data); a dirty scheduler's
 * is the shared dirty queue (ix -1 or -2 by kind... any pointer). */
static enum ev ev_sched_runq(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint32_t kind = pv->cur->tag[i] >> 16, k = pv->cur->tag[i] & 0xffff;
	uint64_t v = g64(pv, i, at);
	if (!ptr_ok(pv, v))
		return EV_BAD;
	if (kind != 0 || off[XB_F_RUNQ_IX] < 0 || off[XB_F_RUNQ_IX] > 4096)
		return EV_NA;
	uint32_t ix;
	if (pv->deref_reads++ >= MAX_DEREF_READS ||
	    xb_read_u32(&pv->vm->mem, v + (uint64_t)off[XB_F_RUNQ_IX], &ix) < 0)
		return EV_BAD;
	return (int32_t)ix == (int32_t)k ? EV_OK : EV_BAD;
}

static enum ev ev_runq_ix(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	(void)at;
	return off[XB_F_SCHED_RUN_QUEUE] < 0 ? EV_NA : ev_sched_runq(pv, i, off, off[XB_F_SCHED_RUN_QUEUE]);
}

/* ErtsRunQueue_.len: processes and ports queued, at most max_len (the
 * Sint32 before it, erl_process.h; erts_inc_runq_len raises it). */
static enum ev ev_runq_len(struct pv *pv, size_t i, const int64_t *off, int64_t at)
{
	uint32_t kind = pv->cur->tag[i] >> 16;
	if (kind != 0 || off[XB_F_SCHED_RUN_QUEUE] < 0 || at < 4)
		return EV_NA;
	uint64_t rq = fld(pv, i, off, XB_F_SCHED_RUN_QUEUE);
	uint32_t len, max;
	if (!ptr_ok(pv, rq) || xb_read_u32(&pv->vm->mem, rq + (uint64_t)at, &len) < 0 ||
	    xb_read_u32(&pv->vm->mem, rq + (uint64_t)at - 4, &max) < 0)
		return EV_BAD;
	if (len > max || max > (1u << 28))
		return EV_BAD;
	return len ? EV_OK : EV_NA;
}

static const struct fcheck sched_checks[] = {
	{ XB_F_SCHED_NO, ev_sched_no, 1, "scheduler N's data says N", 1, 1 },
	{ XB_F_SCHED_DIRTY_NO, ev_sched_dirty_no, 1, "dirty scheduler N's data says N; normal ones 0", 1, 2 },
	{ XB_F_SCHED_TYPE, ev_sched_type, 1, "0 normal, 1 dirty CPU, 2 dirty I/O, as the array", 1, 1 },
	{ XB_F_SCHED_CURRENT_PROCESS, ev_sched_current, 1, "NULL or a process of the process table" },
	{ XB_F_SCHED_RUN_QUEUE, ev_sched_runq, 1, "a run queue whose ix is the scheduler's number - 1", 1, 1 },
};

static const struct fcheck runq_checks[] = {
	{ XB_F_RUNQ_IX, ev_runq_ix, 1, "scheduler N's run queue has ix N - 1", 1, 1 },
	{ XB_F_RUNQ_LEN, ev_runq_len, 1, "0 <= len <= max_len" },
};

static int prove_sched(struct pv *pv, int64_t *off, bool discover)
{
	static const enum xb_field stride_f[] = { XB_F_SCHED_STRIDE };
	struct gcheck g = { stride_f, 1, "the entries at base + k * stride number themselves 1, 2, ..." };
	char why[160] = "";
	xb_vm_count_sched_threads(pv->vm, pv->nsched);
	if (!pv->vm->sym.sched_data_ptr) {
		snprintf(why, sizeof(why), "the scheduler data (erts_aligned_scheduler_data) was not found");
		prove_group(pv, &g, off, false, why);
		return 1;
	}
	bool ok = stride_ok(pv, off[XB_F_SCHED_STRIDE], off);
	if (!ok && discover && !pv->lay->mutating) {
		/* The numbering field and the stride together: the stride
		 * grows in whole cache lines (erl_process.h
		 * ErtsAlignedSchedulerData) as members are added. */
		int64_t *cand = malloc(sizeof(int64_t) * XB_F_COUNT);
		for (int64_t d = -MAX_SHIFT; cand && d <= MAX_SHIFT && !ok; d += SHIFT_STEP)
			for (int64_t s = -64; s <= 64 && !ok; s++) {
				memcpy(cand, off, sizeof(int64_t) * XB_F_COUNT);
				cand[XB_F_SCHED_NO] = pv->origin[XB_F_SCHED_NO] + d;
				if (pv->origin[XB_F_SCHED_DIRTY_NO] >= 0)
					cand[XB_F_SCHED_DIRTY_NO] = pv->origin[XB_F_SCHED_DIRTY_NO] + d;
				cand[XB_F_SCHED_STRIDE] = pv->origin[XB_F_SCHED_STRIDE] + s * 64;
				if (stride_ok(pv, cand[XB_F_SCHED_STRIDE], cand)) {
					ok = true;
					for (int f = 0; f < XB_F_COUNT; f++)
						if (cand[f] != off[f]) {
							pv->lay->f[f].src = XB_LSRC_DISCOVERED;
							pv->lay->discovered++;
						}
					memcpy(off, cand, sizeof(int64_t) * XB_F_COUNT);
				}
			}
		free(cand);
	}
	if (!ok)
		snprintf(why, sizeof(why), "no scheduler data entry at the stride %lld numbers itself",
			 (long long)off[XB_F_SCHED_STRIDE]);
	int failed = prove_group(pv, &g, off, ok, why);
	if (!ok || read_sched(pv, off[XB_F_SCHED_STRIDE]) < 0)
		return failed + 1;
	failed += prove_or_find(pv, &pv->sched, sched_checks, XB_ARRAY_SIZE(sched_checks), off, discover);
	failed += prove_struct(pv, &pv->sched, runq_checks, XB_ARRAY_SIZE(runq_checks), off);
	return failed;
}

/* ------------------------------------------------------------------ */
/* code: beam_ranges.c's ranges, beam_code.h code headers, the JIT's
 * registrations (jit/beam_jit_metadata.cpp) */

static const enum xb_field ranges_fields[] = { XB_F_RANGES_SIZE, XB_F_RANGES_MODULES, XB_F_RANGES_N,
					       XB_F_RANGE_SIZE, XB_F_RANGE_START, XB_F_RANGE_END };
static const enum xb_field emu_code_fields[] = { XB_F_CODEHDR_NUM_FUNCTIONS, XB_F_CODEHDR_FUNCTIONS,
						 XB_F_CODEINFO_MFA };
static const enum xb_field jit_code_fields[] = {
	XB_F_JITDESC_VERSION, XB_F_JITDESC_FIRST_ENTRY, XB_F_JITENTRY_NEXT, XB_F_JITENTRY_SYMFILE_ADDR,
	XB_F_JITENTRY_SYMFILE_SIZE, XB_F_DBGINFO_SIZE, XB_F_DBGINFO_PAYLOAD, XB_F_EMUINFO_FRAME_LAYOUT,
	XB_F_EMUINFO_NORMAL_EXIT, XB_F_MODINFO_BASE_ADDRESS, XB_F_MODINFO_RANGE_COUNT, XB_F_MODINFO_NAME_LENGTH,
	XB_F_MODINFO_NAME, XB_F_RANGEINFO_SIZE, XB_F_RANGEINFO_START, XB_F_RANGEINFO_END,
	XB_F_RANGEINFO_LINE_COUNT, XB_F_RANGEINFO_NAME_LENGTH, XB_F_RANGEINFO_NAME, XB_F_LINEINFO_SIZE,
	XB_F_LINEINFO_FILE_LENGTH, XB_F_LINEINFO_FILE,
};

/* "m:f/a" with both names non-empty and printable (or quoted), or one of
 * the JIT's other names ("M::codeHeader", "global::FRAGMENT"). */
static bool code_name_ok(const char *n)
{
	const char *colon = strchr(n, ':'), *slash = strrchr(n, '/');
	if (!colon || colon == n)
		return false;
	for (const char *p = n; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	if (colon[1] == ':')
		return colon[2] != 0;
	if (!slash || slash < colon + 2 || !slash[1])
		return false;
	for (const char *p = slash + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

static void read_ranges(struct pv *pv, const int64_t *off);

/* The ranges and the code map built with OFF: sorted, named as Erlang
 * functions are, the well-known ones among them. */
static bool code_ok(struct pv *pv, const int64_t *off, char *why, size_t wlen)
{
	struct xb_vm *vm = pv->vm;
	int64_t saved[XB_F_COUNT];
	swap_off(vm, saved, off);
	struct xb_codemap cm;
	bool ok = true;
	uint64_t over = xb_overruns[XB_OVR_CODEMAP_BYTES] + xb_overruns[XB_OVR_CODEMAP_ENTRIES];
	if (xb_codemap_build(vm, &cm, XB_CM_FOLD_PROLOGUE) < 0) {
		snprintf(why, wlen, "the code tables do not read: %s", xb_err());
		memcpy(vm->off, saved, sizeof(saved));
		return false;
	}
	memcpy(vm->off, saved, sizeof(saved));
	static const char *const known[] = { "lists:reverse/2", "erlang:apply/2", "init:boot/1",
					     "gen_server:loop/7", "proc_lib:init_p/5" };
	size_t names_bad = 0, hits = 0;
	for (size_t i = 0; i < cm.n; i++) {
		if (!code_name_ok(cm.v[i].name))
			names_bad++;
		for (size_t k = 0; k < XB_ARRAY_SIZE(known); k++)
			hits += strcmp(cm.v[i].name, known[k]) == 0;
	}
	/* a map that stopped at its budget (a VM that loaded code without
	 * end: the newest registrations first) need not name the well-known
	 * functions nor hold the emulator's record: its names are the
	 * evidence */
	bool partial = xb_overruns[XB_OVR_CODEMAP_BYTES] + xb_overruns[XB_OVR_CODEMAP_ENTRIES] != over;
	if (cm.n < 1000 || names_bad > cm.n / 100 || (hits < 3 && !partial)) {
		snprintf(why, wlen, "%zu entries, %zu not named as Erlang code, %zu of %zu well-known functions", cm.n,
			 names_bad, hits, XB_ARRAY_SIZE(known));
		ok = false;
	}
	if (ok && vm->flavor == XB_FLAVOR_JIT && !partial &&
	    (cm.frame_layout < 0 || cm.frame_layout > 1 || !xb_codemap_find(&cm, cm.normal_exit) || !cm.saw_global)) {
		snprintf(why, wlen, "the emulator record's frame layout %d or normal exit 0x%llx is not JIT code, or no "
				    "record names the shared code 'global'", cm.frame_layout, (unsigned long long)cm.normal_exit);
		ok = false;
	}
	/* every module's range (beam_ranges.c) holds code the map names */
	if (ok) {
		int64_t saved2[XB_F_COUNT];
		swap_off(vm, saved2, off);
		struct pv tmp = { .vm = vm, .jit = pv->jit };
		read_ranges(&tmp, off);
		memcpy(vm->off, saved2, sizeof(saved2));
		size_t empty = 0;
		for (size_t k = 0; k < tmp.ncode; k++) {
			const struct xb_code *c = xb_codemap_find(&cm, tmp.code_lo[k]);
			if (tmp.code_hi[k] <= tmp.code_lo[k] || (!c && !xb_codemap_find(&cm, tmp.code_lo[k] + 8)))
				empty++;
		}
		/* ... nor every module */
		pv->ranges_ok = tmp.ncode >= 10 && (partial || empty * 20 <= tmp.ncode);
		if (!pv->ranges_ok)
			snprintf(pv->ranges_why, sizeof(pv->ranges_why), "%zu of %zu module ranges hold no code the map "
									"names", empty, tmp.ncode);
		free(tmp.code_lo);
		free(tmp.code_hi);
	}
	if (ok && !pv->ncode) {
		pv->code_lo = malloc((cm.n ? cm.n : 1) * 8);
		pv->code_hi = malloc((cm.n ? cm.n : 1) * 8);
		for (size_t i = 0; pv->code_lo && pv->code_hi && i < cm.n; i++) {
			pv->code_lo[i] = cm.v[i].start;
			pv->code_hi[i] = cm.v[i].end;
			pv->ncode = i + 1;
		}
	}
	/* built with the offsets in use: kept for the session (a --dump of
	 * 10,000 processes reads the code tables once) */
	if (ok && !memcmp(off, saved, sizeof(saved))) {
		struct xb_codemap *keep = malloc(sizeof(*keep));
		if (keep) {
			*keep = cm;
			xb_layout_drop_codemap(vm);
			vm->proof_cm = keep;
			return ok;
		}
	}
	xb_codemap_free(&cm);
	return ok;
}

static int prove_code(struct pv *pv, const int64_t *off)
{
	char why[160] = "";
	int failed = 0;
	bool jit = pv->vm->flavor == XB_FLAVOR_JIT;
	bool ok = code_ok(pv, off, why, sizeof(why));
	/* the other flavour's tables are not read */
	const enum xb_field *other = jit ? emu_code_fields : jit_code_fields;
	size_t nother = jit ? XB_ARRAY_SIZE(emu_code_fields) : XB_ARRAY_SIZE(jit_code_fields);
	for (size_t k = 0; k < nother; k++)
		if (off[other[k]] >= 0)
			pv->lay->f[other[k]].proof = XB_LP_UNUSED;
	/* The JIT names code from its registrations; ErtsCodeMFA is read by
	 * the stack features (u.initial, current), which prove it on the
	 * processes.  The interpreter's code map reads it: proven with it. */
	static const enum xb_field mfa_f[] = { XB_F_MFA_MODULE, XB_F_MFA_FUNCTION, XB_F_MFA_ARITY };
	if (jit) {
		for (size_t k = 0; k < XB_ARRAY_SIZE(mfa_f); k++)
			if (off[mfa_f[k]] >= 0)
				pv->lay->f[mfa_f[k]].proof = XB_LP_UNUSED;
	} else {
		struct gcheck gm = { mfa_f, XB_ARRAY_SIZE(mfa_f), "the code map's function names" };
		failed += prove_group(pv, &gm, off, ok, why);
	}
	if (jit) {
		struct gcheck g = { jit_code_fields, XB_ARRAY_SIZE(jit_code_fields),
				    "the JIT's registrations parse into >= 1000 functions named m:f/a, "
				    "the well-known ones among them, the normal exit among them" };
		failed += prove_group(pv, &g, off, ok, why);
	} else {
		struct gcheck g = { emu_code_fields, XB_ARRAY_SIZE(emu_code_fields),
				    "the modules' function tables name >= 1000 functions m:f/a, "
				    "the well-known ones among them" };
		failed += prove_group(pv, &g, off, ok, why);
	}
	/* The ranges: the interpreter's map is built from them; the JIT
	 * reads them to tell when code was loaded. */
	int64_t saved[XB_F_COUNT];
	swap_off(pv->vm, saved, off);
	/* a load that switched the active code index while they were read:
	 * read again (three tries) */
	bool rok = false;
	for (int k = 0; k < 3 && !rok && pv->vm->sym.ranges && !xb_interrupted; k++) {
		if (k)
			sleep_ms(5);
		rok = xb_vm_ranges_plausible(pv->vm, pv->vm->sym.ranges);
	}
	memcpy(pv->vm->off, saved, sizeof(saved));
	rok = rok && ok && pv->ranges_ok;
	struct gcheck gr = { ranges_fields, XB_ARRAY_SIZE(ranges_fields),
			     "each code index's ranges are sorted, do not overlap, their counts fit, and each "
			     "holds code the map names" };
	if (jit && !pv->vm->sym.ranges) {
		/* a stripped JIT beam that does not name `r`: the JIT's code is
		 * named from its registrations; the ranges are not read */
		for (size_t k = 0; k < XB_ARRAY_SIZE(ranges_fields); k++)
			if (off[ranges_fields[k]] >= 0)
				pv->lay->f[ranges_fields[k]].proof = XB_LP_UNUSED;
		return failed;
	}
	failed += prove_group(pv, &gr, off, rok, !pv->vm->sym.ranges ? "beam_ranges.c's `r` was not found"
						 : pv->ranges_why[0] ? pv->ranges_why : "the ranges are not sorted or not plausible");
	if (jit && pv->vm->sym.normal_exit_ptr && off[XB_F_EMUINFO_NORMAL_EXIT] >= 0)
		pv->lay->f[XB_F_EMUINFO_NORMAL_EXIT].proof = XB_LP_UNUSED; /* the global is read */
	return failed;
}

/* ------------------------------------------------------------------ */

/* r.o.element_size (erl_ptab.c: sizeof(Process)) and struct process's
 * size: a few hundred bytes to 16 KiB, no two processes closer. */
static void prove_sizes(struct pv *pv, int64_t *off, uint64_t es, bool discover)
{
	uint64_t gap = UINT64_MAX;
	for (size_t i = 1; i < pv->nlive_ptrs; i++)
		if (pv->live_ptrs[i] - pv->live_ptrs[i - 1] < gap)
			gap = pv->live_ptrs[i] - pv->live_ptrs[i - 1];
	bool ok = es >= 256 && es <= MAX_PROC_WINDOW && es % 8 == 0 && gap >= es && pv->nlive_ptrs >= 2;
	char why[96];
	snprintf(why, sizeof(why), "element_size %llu, processes %llu bytes apart at the closest",
		 (unsigned long long)es, (unsigned long long)gap);
	static const enum xb_field ef[] = { XB_F_PTAB_ELEMENT_SIZE };
	struct gcheck g = { ef, 1, "256..16384, a multiple of 8, no two processes closer together" };
	prove_group(pv, &g, off, ok, why);
	static const enum xb_field pf[] = { XB_F_PROC_SIZE };
	struct gcheck gp = { pf, 1, "the process table's element_size" };
	/* sizeof(Process) is what the VM says it is */
	if (ok && discover && !pv->lay->mutating && off[XB_F_PROC_SIZE] > 0 && (uint64_t)off[XB_F_PROC_SIZE] != es) {
		off[XB_F_PROC_SIZE] = (int64_t)es;
		pv->lay->f[XB_F_PROC_SIZE].src = XB_LSRC_DISCOVERED;
		pv->lay->discovered++;
	}
	snprintf(why, sizeof(why), "element_size is %llu", (unsigned long long)es);
	prove_group(pv, &gp, off, ok && (uint64_t)off[XB_F_PROC_SIZE] == es, why);
}

/* vola.tile.count: the live slots, give or take the processes spawned
 * or gone while the slots were read; r.o.free_id_data: NULL or max
 * Uint32s (erl_ptab.c). */
static void prove_ptab_extra(struct pv *pv, const int64_t *off)
{
	char why[96];
	if (off[XB_F_PTAB_COUNT] >= 0) {
		uint32_t c = (uint32_t)get(&pv->ptab, 0, off[XB_F_PTAB_COUNT], 4);
		uint32_t n = (uint32_t)pv->nlive_ptrs;
		bool ok = pv->ptab_max <= SLOTS_READ && (c > n ? c - n : n - c) <= 2 + n / 20;
		if (pv->ptab_max > SLOTS_READ) /* only part of the slots read */
			ok = c >= n && c <= pv->ptab_max;
		snprintf(why, sizeof(why), "count %u, %u live slots", c, n);
		static const enum xb_field cf[] = { XB_F_PTAB_COUNT };
		struct gcheck g = { cf, 1, "the number of live slots" };
		prove_group(pv, &g, off, ok, why);
	}
	if (off[XB_F_PTAB_FREE_ID_DATA] >= 0) {
		uint64_t v = get(&pv->ptab, 0, off[XB_F_PTAB_FREE_ID_DATA], 8);
		bool ok = v == 0 || (ptr_ok(pv, v) && xb_remote_readable(&pv->vm->mem, v, (size_t)pv->ptab_max * 4));
		snprintf(why, sizeof(why), "0x%llx", (unsigned long long)v);
		static const enum xb_field ff[] = { XB_F_PTAB_FREE_ID_DATA };
		struct gcheck g = { ff, 1, "NULL or max Uint32s" };
		prove_group(pv, &g, off, ok, why);
	}
}

/* The checks of SET whose field NEEDS reads and the table has. */
static size_t pick(const struct fcheck *set, size_t n, unsigned needs, const int64_t *off, struct fcheck *out)
{
	size_t m = 0;
	for (size_t k = 0; k < n; k++)
		if ((xb_field_specs[set[k].f].needs & needs) && off[set[k].f] >= 0)
			out[m++] = set[k];
	return m;
}

static bool in_list(int only, const enum xb_field *l, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if ((int)l[k] == only)
			return true;
	return false;
}

static bool in_checks(int only, const struct fcheck *c, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if ((int)c[k].f == only)
			return true;
	return false;
}

/* The module ranges of beam_ranges.c's `r` (active code index), for
 * "points into code" without building the code map: the interpreter's
 * code lives in them; the JIT's in its executable mappings (in_code). */
static void read_ranges(struct pv *pv, const int64_t *off)
{
	struct xb_vm *vm = pv->vm;
	int64_t rsz = off[XB_F_RANGES_SIZE], rm = off[XB_F_RANGES_MODULES], rn = off[XB_F_RANGES_N],
		esz = off[XB_F_RANGE_SIZE], es = off[XB_F_RANGE_START], ee = off[XB_F_RANGE_END];
	uint32_t ix = 0;
	uint64_t mods, n;
	if (!vm->sym.ranges || rsz <= 0 || rm < 0 || rn < 0 || esz <= 0 || es < 0 || ee < 0 || esz > 64 ||
	    (vm->sym.active_code_ix && xb_read_u32(&vm->mem, vm->sym.active_code_ix, &ix) < 0) ||
	    ix >= (uint32_t)vm->num_code_ix)
		return;
	uint64_t base = vm->sym.ranges + (uint64_t)ix * (uint64_t)rsz;
	if (xb_read_u64(&vm->mem, base + (uint64_t)rm, &mods) < 0 || xb_read_u64(&vm->mem, base + (uint64_t)rn, &n) < 0 ||
	    n == 0 || n > (1u << 16))
		return;
	uint8_t *b = malloc((size_t)(n * (uint64_t)esz));
	pv->code_lo = malloc(n * 8);
	pv->code_hi = malloc(n * 8);
	if (b && pv->code_lo && pv->code_hi && xb_read(&vm->mem, mods, b, (size_t)(n * (uint64_t)esz)) == 0) {
		for (uint64_t k = 0; k < n; k++) {
			memcpy(&pv->code_lo[k], b + k * (uint64_t)esz + es, 8);
			memcpy(&pv->code_hi[k], b + k * (uint64_t)esz + ee, 8);
		}
		pv->ncode = (size_t)n;
	}
	free(b);
}

static unsigned prove_run(struct xb_vm *vm, unsigned needs, bool discover, int only);

/* -vv: what each proof took */
static uint64_t lap(uint64_t *t, const char *what)
{
	uint64_t now = xb_now_ns(), d = now - *t;
	if (xb_verbose >= 2 && what)
		fprintf(stderr, "layout: %s proven in %.1f ms\n", what, d / 1e6);
	*t = now;
	return d;
}

unsigned xb_layout_prove(struct xb_vm *vm, unsigned needs, bool discover)
{
	return prove_run(vm, needs, discover, -1);
}

unsigned xb_layout_prove_field(struct xb_vm *vm, unsigned needs, enum xb_field only)
{
	return prove_run(vm, needs, false, (int)only);
}

static unsigned prove_run(struct xb_vm *vm, unsigned needs, bool discover, int only)
{
	uint64_t t0 = xb_now_ns();
	needs = xb_layout_closure(needs);
	struct xb_layout *lay = &vm->lay;
	for (int f = 0; f < XB_F_COUNT; f++) {
		struct xb_fstate *s = &lay->f[f];
		s->proof = XB_LP_UNCHECKED;
		s->ok = s->bad = s->seen = 0;
		s->note[0] = 0;
	}
	int64_t *origin = malloc(sizeof(int64_t) * XB_F_COUNT);
	struct pv pv = { .vm = vm, .lay = lay, .origin = origin, .jit = vm->flavor == XB_FLAVOR_JIT };
	pv.cache = calloc(DEREF_CACHE, sizeof(*pv.cache));
	if (!origin || !pv.cache) {
		free(origin);
		free(pv.cache);
		return 0;
	}
	memcpy(origin, vm->off, sizeof(int64_t) * XB_F_COUNT);
	int64_t *off = vm->off;
	unsigned before = lay->discovered;
	uint64_t td = 0;

	/* ONLY >= 0: the mutation sweep moved that field alone; the walks
	 * that cannot read it are not run again (their fields stay as the
	 * sweep's first proof left them) */
	unsigned fneeds = only >= 0 ? xb_field_specs[only].needs : XB_NEED_ALL;
	if (only >= 0)
		for (int f = 0; f < XB_F_COUNT; f++)
			lay->f[f].proof = vm->lay_base_proof[f];
	bool every = only < 0;
	uint64_t tl = xb_now_ns();
	const char *lapname = only < 0 ? "" : NULL;
	if ((needs & XB_NEED_ATOMS) && (every || in_list(only, atom_fields, XB_ARRAY_SIZE(atom_fields))))
		prove_atoms(&pv, off);
	lap(&tl, lapname ? "atoms" : NULL);
	if ((needs & XB_NEED_CODE) &&
	    (every || in_list(only, ranges_fields, XB_ARRAY_SIZE(ranges_fields)) ||
	     in_list(only, emu_code_fields, XB_ARRAY_SIZE(emu_code_fields)) ||
	     in_list(only, jit_code_fields, XB_ARRAY_SIZE(jit_code_fields)) ||
	     in_checks(only, mfa_checks, XB_ARRAY_SIZE(mfa_checks))))
		prove_code(&pv, off);
	if (!pv.ncode)
		read_ranges(&pv, off);
	lap(&tl, lapname ? "code" : NULL);
	if (needs & (XB_NEED_PTAB | XB_NEED_STACK | XB_NEED_PROCS | XB_NEED_SCHED)) {
		uint64_t *live = NULL;
		uint32_t *lslot = NULL;
		size_t nlive = 0;
		prove_ptab(&pv, off, discover, &live, &lslot, &nlive);
		if (nlive && live && lslot) {
			uint64_t es = in_win(&pv.ptab, off[XB_F_PTAB_ELEMENT_SIZE], 8)
					      ? get(&pv.ptab, 0, off[XB_F_PTAB_ELEMENT_SIZE], 8)
					      : 0;
			size_t win = es >= 256 && es <= MAX_PROC_WINDOW ? (size_t)es
				     : off[XB_F_PROC_SIZE] > 0 && off[XB_F_PROC_SIZE] <= MAX_PROC_WINDOW
					     ? (size_t)off[XB_F_PROC_SIZE]
					     : 1024;
			if (read_procs(&pv, live, lslot, nlive, win) == 0) {
				prove_sizes(&pv, off, es, discover);
				prove_or_find(&pv, &pv.procs, pid_check, 1, off, discover);
				if (needs & XB_NEED_PROCS)
					prove_ptab_extra(&pv, off);
			}
		}
		free(live);
		free(lslot);
	}
	lap(&tl, lapname ? "process table" : NULL);
	if ((needs & (XB_NEED_STACK | XB_NEED_PROCS)) && pv.procs.n) {
		/* every field of the struct the table has, whatever is needed:
		 * each one's evidence places its neighbours */
		struct fcheck set[XB_ARRAY_SIZE(proc_checks)];
		size_t n = pick(proc_checks, XB_ARRAY_SIZE(proc_checks), needs | XB_NEED_PROCS | XB_NEED_STACK, off, set);
		uint64_t ts = xb_now_ns();
		prove_or_find(&pv, &pv.procs, set, n, off, discover);
		td += lay->discovered != before ? xb_now_ns() - ts : 0;
		prove_struct(&pv, &pv.procs, mfa_checks, XB_ARRAY_SIZE(mfa_checks), off);
		struct fcheck rset[XB_ARRAY_SIZE(regproc_checks)];
		size_t rn = pick(regproc_checks, XB_ARRAY_SIZE(regproc_checks), needs, off, rset);
		prove_struct(&pv, &pv.procs, rset, rn, off);
	}
	lap(&tl, lapname ? "processes" : NULL);
	if (needs & XB_NEED_SCHED) {
		unsigned b2 = lay->discovered;
		uint64_t ts = xb_now_ns();
		prove_sched(&pv, off, discover);
		td += lay->discovered != b2 ? xb_now_ns() - ts : 0;
	}
	lap(&tl, lapname ? "schedulers" : NULL);
	if ((needs & XB_NEED_PROCS) && (fneeds & XB_NEED_PROCS))
		xb_layout_prove_procs(vm, off);

	lap(&tl, lapname ? "process figures" : NULL);
	if ((needs & XB_NEED_LINES) && (fneeds & XB_NEED_LINES))
		xb_layout_prove_lines(vm, off);
	lap(&tl, lapname ? "lines" : NULL);
	if ((needs & XB_NEED_ALLOC) && (fneeds & XB_NEED_ALLOC || only == XB_F_PROC_SIZE))
		xb_layout_prove_alloc(vm, off);
	/* after the walks that only saw what objects exist, and the
	 * allocators' own proof: the sizes the VM's fix_alloc lists give */
	if ((needs & (XB_NEED_PROCS | XB_NEED_ALLOC)) && (fneeds & (XB_NEED_PROCS | XB_NEED_ALLOC)))
		xb_layout_prove_fix_sizes(vm, off, discover);
	lap(&tl, lapname ? "allocators" : NULL);
	if ((needs & XB_NEED_CONTENTS) &&
	    (fneeds & XB_NEED_CONTENTS || (only >= 0 && xb_field_specs[only].type[0] == 'e' &&
					   strncmp(xb_field_specs[only].type, "erl_heap_fragment", 17) == 0)))
		xb_layout_prove_contents(vm, off);
	lap(&tl, lapname ? "heap objects" : NULL);

	/* What each need reads, and whether all of it holds. */
	lay->needs_checked = needs;
	lay->needs_ok = 0;
	lay->failed[0] = 0;
	for (unsigned bit = 1; bit & XB_NEED_ALL; bit <<= 1) {
		if (!(needs & bit))
			continue;
		bool all = true;
		for (int f = 0; f < XB_F_COUNT && all; f++) {
			if (!(xb_field_specs[f].needs & bit) || off[f] < 0)
				continue;
			if (lay->f[f].proof != XB_LP_PROVEN && lay->f[f].proof != XB_LP_CONSISTENT &&
			    lay->f[f].proof != XB_LP_UNUSED) {
				all = false;
				if (!lay->failed[0])
					snprintf(lay->failed, sizeof(lay->failed), "%s (%s) %s%s%s",
						 xb_field_name((enum xb_field)f), xb_field_specs[f].source,
						 lay->f[f].proof == XB_LP_FAILED ? "failed: " : "was not checked",
						 lay->f[f].proof == XB_LP_FAILED ? (lay->f[f].inv ? lay->f[f].inv : "") : "",
						 lay->f[f].note[0] ? "" : "");
			}
		}
		if (all)
			lay->needs_ok |= bit;
	}
	/* a struct size or pid layout derived from the offsets */
	lay->discover_ns += td;
	lay->prove_ns = xb_now_ns() - t0;
	objset_free(&pv.ptab);
	objset_free(&pv.procs);
	objset_free(&pv.sched);
	free(pv.live_ptrs);
	free(pv.code_lo);
	free(pv.code_hi);
	free(pv.cache);
	free(origin);
	return lay->needs_ok;
}

/* ------------------------------------------------------------------ */
/* what the tools ask */

bool xb_layout_take_codemap(struct xb_vm *vm, struct xb_codemap *cm)
{
	if (!vm->proof_cm)
		return false;
	*cm = *(struct xb_codemap *)vm->proof_cm;
	free(vm->proof_cm);
	vm->proof_cm = NULL;
	return true;
}

void xb_layout_drop_codemap(struct xb_vm *vm)
{
	if (vm->proof_cm)
		xb_codemap_free(vm->proof_cm);
	free(vm->proof_cm);
	vm->proof_cm = NULL;
}

/* EXTROSPECT_LAYOUT_UNPROVEN=1: the table (or layout file) as given, no
 * offset searched for, and a feature goes on, once warned, where a field
 * it reads was not proven (-v says which).  For the hostile-input tests' fake VMs, whose
 * memory is built to break the readers, not to look like a live VM.
 * Ignored with file capabilities (secure_getenv). */
bool xb_layout_unproven_ok(void)
{
	const char *v = secure_getenv("EXTROSPECT_LAYOUT_UNPROVEN");
	return v && !strcmp(v, "1");
}

int xb_layout_require(struct xb_vm *vm, unsigned need, const char *what)
{
	need = xb_layout_closure(need);
	const struct xb_layout *lay = &vm->lay;
	if ((lay->needs_checked & need) != need)
		xb_layout_prove(vm, need | lay->needs_checked, false);
	if ((lay->needs_ok & need) == need)
		return 0;
	for (int f = 0; f < XB_F_COUNT; f++) {
		const struct xb_fstate *s = &lay->f[f];
		if (!(xb_field_specs[f].needs & need) || vm->off[f] < 0 || s->proof == XB_LP_PROVEN ||
		    s->proof == XB_LP_CONSISTENT || s->proof == XB_LP_UNUSED)
			continue;
		if (xb_layout_unproven_ok()) {
			static bool warned;
			if (!warned && xb_verbose)
				xb_note(stderr, "%s: this VM's %s was not proven (%s); going on as "
						"EXTROSPECT_LAYOUT_UNPROVEN=1 asks: what is read through it may be wrong",
					what, xb_field_name((enum xb_field)f),
					s->proof == XB_LP_FAILED && s->inv ? s->inv : "unchecked");
			warned = true;
			return 0;
		}
		return xb_fail("%s: this VM's %s (%s, offset %lld from %s%s%s) %s%s%s%s; no offset near it holds "
			       "either; give the tools a layout proven on a build of this release with debug info "
			       "(--layout FILE, written by erlang-sample --write-layout on that build)",
			       what, xb_field_name((enum xb_field)f), xb_field_specs[f].source,
			       (long long)vm->off[f], xb_lsrc_name((enum xb_lsrc)s->src),
			       lay->origin ? ", " : "", lay->origin ? lay->origin : "",
			       s->proof == XB_LP_FAILED ? "fails its proof: " : "was not proven",
			       s->proof == XB_LP_FAILED && s->inv ? s->inv : "", s->note[0] ? " (" : "",
			       s->note[0] ? s->note : "");
	}
	/* a field the table lacks, where the feature needs it */
	return xb_fail("%s: not supported on this VM (erts %s): the layout lacks what it reads", what, vm->erts);
}

int xb_layout_mutation_sweep(struct xb_vm *vm, unsigned needs, FILE *out)
{
	static const int deltas[] = { -16, -8, 8, 16 };
	int64_t good[XB_F_COUNT];
	memcpy(good, vm->off, sizeof(good));
	struct xb_layout saved = vm->lay;
	unsigned base = xb_layout_prove(vm, needs, false);
	unsigned want = xb_layout_closure(needs);
	if ((base & want) != want) {
		for (int f = 0; f < XB_F_COUNT; f++)
			if (vm->off[f] >= 0 && (xb_field_specs[f].needs & want & ~base) &&
			    vm->lay.f[f].proof != XB_LP_PROVEN && vm->lay.f[f].proof != XB_LP_CONSISTENT &&
			    vm->lay.f[f].proof != XB_LP_UNUSED)
				fprintf(out, "UNPROVEN %-42s %6lld  %s: %s\n", xb_field_name((enum xb_field)f),
					(long long)vm->off[f], xb_lproof_name((enum xb_lproof)vm->lay.f[f].proof),
					vm->lay.f[f].note);
		fprintf(out, "mutations: not run: the layout does not hold unmoved (%s)\n", vm->lay.failed);
		vm->lay = saved;
		return 1;
	}
	uint8_t proof0[XB_F_COUNT];
	for (int f = 0; f < XB_F_COUNT; f++)
		proof0[f] = vm->lay_base_proof[f] = vm->lay.f[f].proof;
	int missed = 0, fields = 0, moves = 0;
	uint64_t t0 = xb_now_ns();
	vm->lay.mutating = true;
	for (int f = 0; f < XB_F_COUNT && !xb_interrupted; f++) {
		if (good[f] < 0 || !(xb_field_specs[f].needs & xb_layout_closure(needs)) ||
		    (proof0[f] != XB_LP_PROVEN && proof0[f] != XB_LP_CONSISTENT))
			continue;
		if (0)
			continue;
		fields++;
		char miss[64] = "";
		int nmiss = 0;
		for (size_t k = 0; k < XB_ARRAY_SIZE(deltas); k++) {
			if (good[f] + deltas[k] < 0)
				continue;
			memcpy(vm->off, good, sizeof(good));
			vm->off[f] = good[f] + deltas[k];
			/* caught: some feature asked for no longer holds (the
			 * field's own proof, or one reading through it) */
			bool caught = (xb_layout_prove_field(vm, needs, (enum xb_field)f) & want) != want;
			moves++;
			if (!caught) {
				nmiss++;
				snprintf(miss + strlen(miss), sizeof(miss) - strlen(miss), " %+d", deltas[k]);
			}
		}
		missed += nmiss;
		fprintf(out, "%-6s %-44s %6lld  %s%s\n", nmiss ? "MISSED" : "caught", xb_field_name((enum xb_field)f),
			(long long)good[f], nmiss ? "not caught:" : "all four moves caught", miss);
	}
	memcpy(vm->off, good, sizeof(good));
	vm->lay = saved;
	fprintf(out, "mutations: %d fields, %d moves, %d not caught, %.1f s\n", fields, moves, missed,
		(xb_now_ns() - t0) / 1e9);
	return missed;
}

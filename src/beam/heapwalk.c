/* heapwalk.c - a process's heap, object by object; see
 * include/xb/heapwalk.h. */
#define _GNU_SOURCE
#include "xb/heapwalk.h"
#include "xb/common.h"
#include "xb/term.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN (1u << 18)           /* words per remote read: 2 MiB */
#define DEF_MAX_WORDS (16u << 20) /* 128 MiB */
#define DEF_CHUNK (64u << 10)    /* 512 KiB */
#define SYNC_OBJECTS 16          /* objects that must parse after a sync point */
#define MAX_FRAGS 100000
#define MAX_AREAS 4096

/* erl_term.h MAP_HEADER_TYPE (bits 6-7 of a map header), MAP_HEADER_VAL
 * (bits 16-31: a HAMT node's bitmap), the same in OTP 25-29 */
#define MAP_FLATMAP 0
#define MAP_HAMT_NODE_BITMAP 1
#define MAP_HAMT_HEAD_ARRAY 2
#define MAP_HAMT_HEAD_BITMAP 3
#define HAMT_HEAD_ARRAY_SZ 18 /* erl_map.h */
/* erl_term.h FUN_HEADER_ENV_SIZE_OFFS (OTP 27+; before, ErlFunThing.num_free) */
#define FUN_HEADER_ENV_SIZE_OFFS 16

enum kid {
	K_OTHER, K_LIST, K_TUPLE, K_REC, K_MAP, K_BIN_HEAP, K_BIN_REF, K_BIN_SUB, K_BIN_MATCH, K_BIG,
	K_FLOAT, K_FUN, K_FUN_REF, K_REF, K_EXT, K_NREC,
};

static const char *const kid_name[] = {
	[K_OTHER] = "other records (too many kinds)",
	[K_LIST] = "list (cons cells)",
	[K_TUPLE] = "tuple",
	[K_REC] = "tuple {...}",
	[K_MAP] = "map",
	[K_BIN_HEAP] = "binary (on the heap)",
	[K_BIN_REF] = "binary (off-heap reference)",
	[K_BIN_SUB] = "binary (sub-binary)",
	[K_BIN_MATCH] = "binary (match state)",
	[K_BIG] = "bignum",
	[K_FLOAT] = "float",
	[K_FUN] = "fun",
	[K_FUN_REF] = "fun reference",
	[K_REF] = "reference",
	[K_EXT] = "pid/port/reference (external)",
	[K_NREC] = "record (native)",
};

/* Reads of one area.  A whole walk reads WIN words at a time.  A
 * sampled walk must read about --max-words in all, not the heap: each
 * chunk sets LIM (its end) and its reads stop there; what lies past it
 * (the rest of an object that crosses the end, the objects that
 * synchronise a chunk) goes through a small tail window of its own, so
 * that it never evicts the chunk's words (a chunk read again for every
 * failed synchronisation would cost its size squared).  Each window
 * starts BACK words before the word asked for: an object that crosses a
 * window's end is read from its header again (walk_range, side_effects).
 * READ counts the words read. */
#define TAIL 64u
#define BACK 16u
struct reader {
	struct xb_vm *vm;
	uint64_t base, nwords, lim;
	uint64_t *buf, first, n, read;
	uint64_t tbuf[BACK + TAIL], tfirst, tn;
	bool err;
};

static void reader_reset(struct reader *r, uint64_t base, uint64_t nwords, uint64_t lim)
{
	r->base = base;
	r->nwords = nwords;
	r->lim = lim;
	r->first = r->n = r->tfirst = r->tn = 0;
	r->err = false;
}

static bool fill(struct reader *r, uint64_t *dst, uint64_t first, uint64_t n)
{
	/* ^C: no more reads (walk_once ends the walk on it, within one
	 * window's read) */
	if (xb_interrupted || xb_read(&r->vm->mem, r->base + first * 8, dst, n * 8) < 0) {
		r->err = true;
		return false;
	}
	r->read += n;
	return true;
}

static bool rd(struct reader *r, uint64_t i, uint64_t *w)
{
	if (i >= r->nwords)
		return false;
	if (i >= r->first && i < r->first + r->n) {
		*w = r->buf[i - r->first];
		return true;
	}
	if (i >= r->tfirst && i < r->tfirst + r->tn) {
		*w = r->tbuf[i - r->tfirst];
		return true;
	}
	uint64_t first = i > BACK ? i - BACK : 0;
	if (i >= r->lim) {
		uint64_t n = r->nwords - first < BACK + TAIL ? r->nwords - first : BACK + TAIL;
		if (!fill(r, r->tbuf, first, n))
			return false;
		r->tfirst = first;
		r->tn = n;
		*w = r->tbuf[i - first];
		return true;
	}
	uint64_t n = r->lim - first < WIN ? r->lim - first : WIN;
	if (!fill(r, r->buf, first, n))
		return false;
	r->first = first;
	r->n = n;
	*w = r->buf[i - first];
	return true;
}

struct keyset {
	uint64_t *addr;
	unsigned char *state; /* 1 registered by a map, 2 seen (counted as map) */
	size_t cap, n;
};

/* Fibonacci hashing takes the product's high bits: its low bits depend
 * on the key's low bits alone, and keys the target chooses (flatmap
 * keys are any term) that agree there would all share one probe run. */
static size_t ks_slot(uint64_t a, size_t cap)
{
	return (size_t)(((a >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(cap)));
}

static unsigned char *ks_find(struct keyset *k, uint64_t a, bool insert)
{
	if (insert && (k->n + 1) * 2 > k->cap) {
		size_t nc = k->cap ? k->cap * 2 : 1024;
		uint64_t *na = calloc(nc, 8);
		unsigned char *ns = calloc(nc, 1);
		if (!na || !ns) {
			free(na);
			free(ns);
			return NULL;
		}
		for (size_t i = 0; i < k->cap; i++) {
			if (!k->addr[i])
				continue;
			size_t j = ks_slot(k->addr[i], nc);
			while (na[j])
				j = (j + 1) & (nc - 1);
			na[j] = k->addr[i];
			ns[j] = k->state[i];
		}
		free(k->addr);
		free(k->state);
		k->addr = na;
		k->state = ns;
		k->cap = nc;
	}
	if (!k->cap)
		return NULL;
	size_t j = ks_slot(a, k->cap);
	while (k->addr[j]) {
		if (k->addr[j] == a)
			return &k->state[j];
		j = (j + 1) & (k->cap - 1);
	}
	if (!insert)
		return NULL;
	k->addr[j] = a;
	k->n++;
	return &k->state[j];
}

struct range {
	uint64_t lo, hi;
};

struct walk {
	struct xb_vm *vm;
	const signed char *subtag;
	struct xb_hw_kind kinds[XB_HW_MAX_KINDS];
	uint64_t key[XB_HW_MAX_KINDS];
	size_t nkinds;
	double cur[XB_HW_MAX_KINDS], cur_total, t2;
	unsigned nchunks;
	struct keyset keys;
	struct range *ranges;
	size_t nranges, capranges;
	uint64_t words, objects, unparsed, offheap;
	int64_t o_numfree, o_env, o_fmsize, o_fmkeys, o_pbsize;
};

static size_t kind_ix(struct walk *w, enum kid id, uint64_t atom)
{
	uint64_t key = ((uint64_t)id << 58) ^ (id == K_REC ? atom : 0);
	for (size_t i = 0; i < w->nkinds; i++)
		if (w->key[i] == key)
			return i;
	if (w->nkinds == 0) { /* slot 0: the overflow bucket */
		w->key[0] = (uint64_t)K_OTHER << 58;
		snprintf(w->kinds[0].name, sizeof(w->kinds[0].name), "%s", kid_name[K_OTHER]);
		w->nkinds = 1;
		if (key == w->key[0])
			return 0;
	}
	if (w->nkinds >= XB_HW_MAX_KINDS)
		return 0;
	size_t i = w->nkinds++;
	w->key[i] = key;
	if (id == K_REC) {
		const char *a = xb_vm_atom(w->vm, atom);
		snprintf(w->kinds[i].name, sizeof(w->kinds[i].name), "tuple {%s, ...}", a ? a : "?");
	} else {
		snprintf(w->kinds[i].name, sizeof(w->kinds[i].name), "%s", kid_name[id]);
	}
	return i;
}

static void count(struct walk *w, enum kid id, uint64_t atom, uint64_t words)
{
	size_t k = kind_ix(w, id, atom);
	w->kinds[k].words += words;
	w->kinds[k].objects++;
	w->cur[k] += (double)words;
	w->cur_total += (double)words;
	w->words += words;
	w->objects++;
}

static bool term_ok(struct walk *w, uint64_t t)
{
	switch (t & 3) {
	case 0:
		return false; /* a header (or a CP) where a term belongs */
	case 1:
	case 2:
		return (t & ~3ull) >= 4096 && xb_remote_readable(&w->vm->mem, t & ~3ull, 8);
	default:
		return true;
	}
}

/* The object at word I: its size in words and kind.  CHECK also demands
 * that what it holds looks like terms (used to find object boundaries
 * in the middle of a heap). */
static bool object(struct walk *w, struct reader *r, uint64_t i, bool check, uint64_t *ext, enum kid *id,
		   uint64_t *atom)
{
	uint64_t h, x;
	*atom = 0;
	if (!rd(r, i, &h))
		return false;
	if (h & 3) {
		*ext = 2;
		*id = K_LIST;
		if (!rd(r, i + 1, &x))
			return false;
		return !check || (term_ok(w, h) && term_ok(w, x));
	}
	int st = w->subtag[(h >> 2) & 0xf];
	uint64_t ar = h >> 6;
	switch (st) {
	case XB_ST_TUPLE:
		if (ar >= (1u << 24))
			return false;
		*ext = 1 + ar;
		*id = K_TUPLE;
		if (ar && rd(r, i + 1, &x) && xb_is_atom(x)) {
			*id = K_REC;
			*atom = x;
		}
		if (check)
			for (uint64_t k = 1; k <= ar && k <= 8; k++)
				if (!rd(r, i + k, &x) || !term_ok(w, x))
					return false;
		break;
	case XB_ST_RECORD:
		*ext = 1 + ar;
		*id = K_NREC;
		break;
	case XB_ST_MAP: {
		unsigned type = (unsigned)(h >> 6) & 3, bitmap = (unsigned)(h >> 16) & 0xffff;
		*id = K_MAP;
		if (type == MAP_FLATMAP) {
			uint64_t n, keys;
			if (w->o_fmsize < 0 || w->o_fmkeys < 0 || !rd(r, i + (uint64_t)w->o_fmsize / 8, &n) ||
			    !rd(r, i + (uint64_t)w->o_fmkeys / 8, &keys) || n > (1u << 24) || (keys & 3) != 2)
				return false;
			*ext = (uint64_t)w->o_fmkeys / 8 + 1 + n;
		} else if (type == MAP_HAMT_HEAD_ARRAY) {
			*ext = HAMT_HEAD_ARRAY_SZ;
		} else if (type == MAP_HAMT_HEAD_BITMAP) {
			*ext = 2 + (uint64_t)__builtin_popcount(bitmap);
		} else {
			*ext = 1 + (uint64_t)__builtin_popcount(bitmap);
		}
		break;
	}
	case XB_ST_FUN:
		if (w->o_env < 0)
			return false;
		if (w->o_numfree >= 0) {
			if (!rd(r, i + (uint64_t)w->o_numfree / 8, &x))
				return false;
			*ext = (uint64_t)w->o_env / 8 + ((x >> (8 * (w->o_numfree % 8))) & 0xff);
		} else {
			*ext = (uint64_t)w->o_env / 8 + ((h >> FUN_HEADER_ENV_SIZE_OFFS) & 0xff);
		}
		*id = K_FUN;
		break;
	case XB_ST_NONE:
		return false;
	default:
		if (check && ar > (1u << 20))
			return false;
		*ext = 1 + ar;
		switch (st) {
		case XB_ST_MATCHSTATE: *id = K_BIN_MATCH; break;
		case XB_ST_POS_BIG:
		case XB_ST_NEG_BIG: *id = K_BIG; break;
		case XB_ST_REF: *id = K_REF; break;
		case XB_ST_FLOAT: *id = K_FLOAT; if (check && ar != 1) return false; break;
		case XB_ST_REFC_BIN:
		case XB_ST_BIN_REF: *id = K_BIN_REF; break;
		case XB_ST_HEAP_BIN:
		case XB_ST_HEAP_BITS: *id = K_BIN_HEAP; if (check && ar > 10) return false; break;
		case XB_ST_SUB_BIN:
		case XB_ST_SUB_BITS: *id = K_BIN_SUB; break;
		case XB_ST_FUN_REF: *id = K_FUN_REF; break;
		default: *id = K_EXT; break;
		}
	}
	return *ext >= 1 && *ext <= r->nwords - i;
}

/* What account() needs besides the kind: map keys, ProcBin sizes. */
static void side_effects(struct walk *w, struct reader *r, uint64_t i, enum kid id, uint64_t h)
{
	uint64_t x;
	if (id == K_MAP && ((h >> 6) & 3) == MAP_FLATMAP && rd(r, i + (uint64_t)w->o_fmkeys / 8, &x)) {
		unsigned char *s = ks_find(&w->keys, x & ~3ull, true);
		if (s && !*s)
			*s = 1;
	}
	if (id == K_BIN_REF && w->o_pbsize >= 0 && w->subtag[(h >> 2) & 0xf] == XB_ST_REFC_BIN &&
	    rd(r, i + (uint64_t)w->o_pbsize / 8, &x) && x < (1ull << 48))
		w->offheap += x;
}

/* Walk objects from I while before END (the last one may end beyond).
 * Returns the position after the last object walked. */
static uint64_t walk_range(struct walk *w, struct reader *r, uint64_t i, uint64_t end, bool check)
{
	uint64_t start = i;
	while (i < end) {
		uint64_t ext, atom, h = 0;
		enum kid id;
		if (!object(w, r, i, check, &ext, &id, &atom))
			break;
		rd(r, i, &h);
		if (id == K_REC || id == K_TUPLE) {
			unsigned char *s = ks_find(&w->keys, r->base + i * 8, false);
			if (s && *s == 1) { /* a flatmap's keys, the map already seen */
				*s = 2;
				id = K_MAP;
			}
		}
		count(w, id, atom, ext);
		side_effects(w, r, i, id, h);
		i += ext;
	}
	if (i > start && xb_grow((void **)&w->ranges, &w->capranges, w->nranges + 1, sizeof(*w->ranges)) == 0)
		w->ranges[w->nranges++] = (struct range){ r->base + start * 8, r->base + i * 8 };
	return i;
}

static void chunk_end(struct walk *w)
{
	for (size_t k = 0; k < w->nkinds; k++) {
		w->kinds[k].s2 += w->cur[k] * w->cur[k];
		w->kinds[k].sx += w->cur[k] * w->cur_total;
		w->cur[k] = 0;
	}
	w->t2 += w->cur_total * w->cur_total;
	w->cur_total = 0;
	w->nchunks++;
}

static int by_lo(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Was address A walked?  RANGES sorted by lo, each hi replaced by the
 * largest hi up to it (ranges may overlap where an object crossed a
 * chunk's end). */
static bool walked_at(const struct range *v, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) { /* the first range with lo > a */
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && a < v[lo - 1].hi;
}

/* Keys tuples walked before the map that refers to them were counted as
 * tuples: move them to maps.  The target chooses how many keys there are
 * (up to a third of the words walked): each is found among the walked
 * ranges by a binary search, their headers read in batches, and ^C ends
 * the pass (the shares then count those keys as tuples). */
static void fix_keys(struct walk *w)
{
	enum { BATCH = 1024 };
	if (w->nranges > 1) {
		qsort(w->ranges, w->nranges, sizeof(*w->ranges), by_lo);
		for (size_t k = 1; k < w->nranges; k++)
			if (w->ranges[k].hi < w->ranges[k - 1].hi)
				w->ranges[k].hi = w->ranges[k - 1].hi;
	}
	struct xb_readreq q[BATCH];
	size_t slot[BATCH];
	uint64_t hw[BATCH][2];
	for (size_t j = 0; j < w->keys.cap && !xb_interrupted;) {
		size_t n = 0;
		for (; j < w->keys.cap && n < BATCH; j++) {
			uint64_t a = w->keys.addr[j];
			if (!a || w->keys.state[j] != 1 || !walked_at(w->ranges, w->nranges, a))
				continue;
			q[n] = (struct xb_readreq){ a, hw[n], 16, false };
			slot[n++] = j;
		}
		xb_read_many(&w->vm->mem, q, n);
		for (size_t i = 0; i < n; i++) {
			if (!q[i].ok || w->subtag[(hw[i][0] >> 2) & 0xf] != XB_ST_TUPLE)
				continue;
			uint64_t ar = hw[i][0] >> 6;
			if (!ar || ar >= (1u << 24))
				continue;
			size_t from = kind_ix(w, xb_is_atom(hw[i][1]) ? K_REC : K_TUPLE, hw[i][1]),
			       to = kind_ix(w, K_MAP, 0);
			if (w->kinds[from].words < 1 + ar || !w->kinds[from].objects)
				continue;
			w->kinds[from].words -= 1 + ar;
			w->kinds[from].objects--;
			w->kinds[to].words += 1 + ar;
			w->kinds[to].objects++;
			w->keys.state[slot[i]] = 2;
		}
	}
}

static int by_words(const void *a, const void *b)
{
	const struct xb_hw_kind *x = a, *y = b;
	return x->words < y->words ? 1 : x->words > y->words ? -1 : strcmp(x->name, y->name);
}

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

struct area {
	uint64_t start, words;
	const char *what;
};

/* Heap fragments beyond the MAX_AREAS walked. */
struct frags_left {
	uint64_t left, left_words;
	bool more; /* and more than MAX_FRAGS in all: the rest not counted */
};

static int collect_areas(struct xb_ptab *t, const struct xb_proc *p, struct area *a, size_t *na, uint64_t *total,
			 struct frags_left *fx)
{
	struct xb_vm *vm = t->vm;
	size_t n = 0;
	*total = 0;
	if (p->htop > p->heap && p->htop <= p->hend)
		a[n++] = (struct area){ p->heap, (p->htop - p->heap) / 8, "young heap" };
	if (p->old_heap && p->old_htop > p->old_heap)
		a[n++] = (struct area){ p->old_heap, (p->old_htop - p->old_heap) / 8, "old heap" };
	int64_t onext = vm->off[XB_F_HFRAG_NEXT], oused = vm->off[XB_F_HFRAG_USED_SIZE], omem = vm->off[XB_F_HFRAG_MEM];
	uint64_t f = p->mbuf;
	struct xb_cycle c;
	xb_cycle_init(&c, f);
	int k;
	for (k = 0; f && k < MAX_FRAGS && onext >= 0 && oused >= 0 && omem >= 0; k++) {
		uint64_t next, used;
		if (xb_read_u64(&vm->mem, f + (uint64_t)onext, &next) < 0 ||
		    xb_read_u64(&vm->mem, f + (uint64_t)oused, &used) < 0)
			return xb_fail("cannot read the heap fragments of %s", "the process");
		/* a fragment is a block of an allocator: more than
		 * XB_MAX_HEAP_WORDS is not one (and sums of such would wrap
		 * to a small total) */
		if (used > XB_MAX_HEAP_WORDS)
			return xb_fail("a heap fragment of %llu words: not one the VM keeps", (unsigned long long)used);
		if (used && n < MAX_AREAS) {
			a[n++] = (struct area){ f + (uint64_t)omem, used, "heap fragment" };
		} else if (used) {
			/* past MAX_AREAS: not walked, and then nothing is exact */
			fx->left++;
			fx->left_words += used;
		}
		f = next;
		/* a chain that comes back to a fragment would count its words
		 * again and again */
		if (f && xb_cycle_seen(&c, f))
			return xb_fail("the process's heap fragment chain loops: not one the VM keeps");
		if (xb_interrupted)
			return xb_fail("interrupted");
	}
	if (f && k == MAX_FRAGS)
		fx->more = true; /* the rest not even counted */
	for (size_t i = 0; i < n; i++)
		*total += a[i].words; /* each below 2^61 (a heap is a range of addresses), at most 4096 of them */
	*na = n;
	return 0;
}

static int walk_once(struct xb_ptab *t, uint32_t slot, const struct xb_hw_opts *o, struct xb_hw_result *res,
		     struct walk *w)
{
	struct xb_vm *vm = t->vm;
	struct area *areas = calloc(MAX_AREAS, sizeof(*areas));
	struct reader r = { .vm = vm, .buf = malloc(WIN * 8) };
	uint32_t *order = NULL;
	size_t na = 0;
	int rc = -1;
	if (!areas || !r.buf) {
		xb_fail("out of memory");
		goto out;
	}
	if (xb_proc_read(t, slot, 0, &res->proc) < 0)
		goto out;
	struct frags_left fx = { 0, 0, false };
	if (collect_areas(t, &res->proc, areas, &na, &res->words_total, &fx) < 0)
		goto out;
	uint64_t maxw = o->max_words ? o->max_words : DEF_MAX_WORDS;
	/* What a sampled walk may read in all, the search for object
	 * boundaries included: a heap where every word looks like a header
	 * and no run of SYNC_OBJECTS objects parses would make each chunk's
	 * search read SYNC_OBJECTS tail windows per word. */
	uint64_t budget = 2 * maxw;
	/* 256 chunks per read: strata small enough that a heap made of a
	 * few large uniform regions (what a copying GC leaves) is still
	 * estimated well */
	uint64_t cw = o->chunk_words ? o->chunk_words : maxw / 256;
	if (cw < 1024)
		cw = 1024;
	if (cw > DEF_CHUNK)
		cw = DEF_CHUNK;
	if (cw > maxw)
		cw = maxw;
	res->whole = res->words_total <= maxw;
	if (res->whole) {
		for (size_t k = 0; k < na; k++) {
			reader_reset(&r, areas[k].start, areas[k].words, areas[k].words);
			uint64_t end = walk_range(w, &r, 0, areas[k].words, false);
			if (xb_interrupted) {
				xb_fail("interrupted while the heap was read");
				goto out;
			}
			if (r.err) {
				xb_fail("the %s at 0x%llx became unreadable (it was freed: the process garbage "
					"collected)", areas[k].what, (unsigned long long)areas[k].start);
				goto out;
			}
			w->unparsed += areas[k].words - end;
		}
		chunk_end(w);
		size_t nfrag = 0;
		for (size_t k = 0; k < na; k++)
			nfrag += areas[k].what[0] == 'h';
		if (fx.left || fx.more) {
			/* not everything: shares of what was read, no claim of
			 * exactness (the total counts what was left) */
			res->whole = false;
			snprintf(res->method, sizeof(res->method),
				 "every word read of the young heap, old heap and first %zu heap fragments; "
				 "%llu%s more heap fragments (%llu words) not read: shares of what was read",
				 nfrag, (unsigned long long)fx.left, fx.more ? "+" : "",
				 (unsigned long long)fx.left_words);
		} else {
			snprintf(res->method, sizeof(res->method),
				 "every word read (young heap, old heap, %zu heap fragment%s): exact shares", nfrag,
				 nfrag == 1 ? "" : "s");
		}
	} else {
		uint64_t seed = o->seed ? o->seed : xb_now_ns();
		uint64_t nch = maxw / cw, stratum = res->words_total / nch;
		/* The strata in a random order: a walk the budget ends early
		 * has read a random subset of them, not the heap's start. */
		order = malloc(nch * sizeof(*order));
		if (!order) {
			xb_fail("out of memory");
			goto out;
		}
		for (uint64_t j = 0; j < nch; j++)
			order[j] = (uint32_t)j;
		for (uint64_t j = nch - 1; j > 0; j--) {
			uint64_t x = rng_next(&seed) % (j + 1);
			uint32_t tmp = order[j];
			order[j] = order[x];
			order[x] = tmp;
		}
		bool spent = false;
		uint64_t tried = 0;
		for (uint64_t jj = 0; jj < nch && !spent; jj++) {
			uint64_t j = order[jj];
			if (xb_interrupted) {
				xb_fail("interrupted while the heap was read");
				goto out;
			}
			if (r.read >= budget) {
				spent = true;
				break;
			}
			tried++;
			uint64_t g = j * stratum + (stratum > cw ? rng_next(&seed) % (stratum - cw) : 0);
			size_t k = 0;
			while (k < na && g >= areas[k].words) {
				g -= areas[k].words;
				k++;
			}
			if (k >= na)
				break;
			uint64_t end = g + cw < areas[k].words ? g + cw : areas[k].words, i = g;
			/* (the last chunk's words, and its error, are not this one's) */
			reader_reset(&r, areas[k].start, areas[k].words, end);
			/* synchronise: a header whose object and the next ones parse */
			bool synced = false;
			for (; i < end && !synced; i++) {
				uint64_t h, ext, atom, q;
				enum kid id;
				if (r.read >= budget) {
					spent = true;
					break;
				}
				if (!rd(&r, i, &h) || (h & 3))
					continue;
				q = i;
				int n = 0;
				while (n < SYNC_OBJECTS && q < areas[k].words && object(w, &r, q, true, &ext, &id, &atom)) {
					q += ext;
					n++;
				}
				synced = n == SYNC_OBJECTS || q == areas[k].words;
				if (synced)
					break;
			}
			if (!synced || r.err) {
				res->chunks_skipped++;
				r.err = false;
				continue;
			}
			walk_range(w, &r, i, end, true);
			chunk_end(w);
			res->chunks++;
		}
		if (spent && !res->chunks) {
			xb_fail("no object boundary found in the heap within the read budget (%llu words read, "
				"twice --max-words): not a heap the VM keeps", (unsigned long long)r.read);
			goto out;
		}
		int m = snprintf(res->method, sizeof(res->method),
				 "sampled (--max-words): %u chunks of %llu words at random places;\n"
				 "%llu words read; shares are estimates with a 95%% interval",
				 res->chunks, (unsigned long long)cw, (unsigned long long)r.read);
		if (spent && m > 0 && (size_t)m < sizeof(res->method))
			snprintf(res->method + m, sizeof(res->method) - (size_t)m,
				 ";\nthe read budget (twice --max-words) ran out finding object boundaries: "
				 "%llu of %llu chunks tried, %u without one",
				 (unsigned long long)tried, (unsigned long long)nch, res->chunks_skipped);
	}
	res->budget_spent = r.read >= budget;
	res->words_total += fx.left_words;
	/* The heap must not have moved while we read it. */
	struct xb_proc again;
	if (xb_proc_read(t, slot, 0, &again) < 0)
		goto out;
	if (again.heap != res->proc.heap || again.old_heap != res->proc.old_heap ||
	    again.old_htop != res->proc.old_htop || again.mbuf != res->proc.mbuf || again.pid != res->proc.pid) {
		xb_fail("changing: the process garbage collected while its heap was read");
		goto out;
	}
	rc = 0;
out:
	free(order);
	free(areas);
	free(r.buf);
	return rc;
}

static void walk_free(struct walk *w)
{
	free(w->keys.addr);
	free(w->keys.state);
	free(w->ranges);
}

int xb_heapwalk(struct xb_ptab *t, uint32_t slot, const struct xb_hw_opts *o, struct xb_hw_result *res)
{
	struct xb_vm *vm = t->vm;
	memset(res, 0, sizeof(*res));
	if (!vm->rel && !vm->table_from_dwarf)
		return xb_fail("no release table");
	const signed char *subtag = vm->rel ? vm->rel->subtag : xb_releases[0]->subtag;
	bool any = false;
	for (int i = 0; i < 16; i++)
		any |= subtag[i] != XB_ST_NONE;
	if (!any)
		return xb_fail("cannot decode heap objects on this VM: its release table (erts %s) has no "
			       "header subtags; regenerate it with scripts/gen-release-table", vm->erts);
	struct walk *w = NULL;
	int attempt;
	for (attempt = 0; attempt < 2; attempt++) {
		w = calloc(1, sizeof(*w));
		if (!w)
			return xb_fail("out of memory");
		w->vm = vm;
		w->subtag = subtag;
		w->o_numfree = vm->off[XB_F_FUNTHING_NUM_FREE];
		w->o_env = vm->off[XB_F_FUNTHING_ENV];
		w->o_fmsize = vm->off[XB_F_FLATMAP_SIZE];
		w->o_fmkeys = vm->off[XB_F_FLATMAP_KEYS];
		w->o_pbsize = vm->off[XB_F_PROCBIN_SIZE];
		memset(res, 0, sizeof(*res));
		if (walk_once(t, slot, o, res, w) == 0)
			break;
		if (strncmp(xb_err(), "changing", 8) != 0 && strstr(xb_err(), "garbage collected") == NULL) {
			walk_free(w);
			free(w);
			return -1;
		}
		walk_free(w);
		free(w);
		w = NULL;
	}
	if (!w)
		return xb_fail("changing: the process garbage collected during both reads of its heap; try again");
	res->reads = (unsigned)attempt + 1;
	fix_keys(w);
	res->words_read = w->words;
	res->words_unparsed = w->unparsed;
	res->objects = w->objects;
	res->offheap_bin_bytes = w->offheap;
	/* shares and intervals (ratio estimator over chunks) */
	double t1 = (double)w->words, n = (double)w->nchunks;
	double f = res->words_total ? t1 / (double)res->words_total : 1;
	res->kinds = calloc(w->nkinds ? w->nkinds : 1, sizeof(*res->kinds));
	if (!res->kinds) {
		walk_free(w);
		free(w);
		return xb_fail("out of memory");
	}
	for (size_t k = 0; k < w->nkinds; k++) {
		struct xb_hw_kind *K = &w->kinds[k];
		if (!K->words)
			continue;
		K->share = t1 > 0 ? (double)K->words / t1 : 0;
		K->ci95 = 0;
		if (!res->whole && n > 1 && t1 > 0) {
			double R = K->share, mean = t1 / n;
			double s2 = (K->s2 - 2 * R * K->sx + R * R * w->t2) / (n - 1);
			double var = (1 - f) * (s2 > 0 ? s2 : 0) / (n * mean * mean);
			K->ci95 = 1.96 * sqrt(var);
		}
		res->kinds[res->nkinds++] = *K;
	}
	if (res->nkinds)
		qsort(res->kinds, res->nkinds, sizeof(*res->kinds), by_words);
	walk_free(w);
	free(w);
	return 0;
}

void xb_heapwalk_free(struct xb_hw_result *r)
{
	free(r->kinds);
	r->kinds = NULL;
}

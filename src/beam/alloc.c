/* alloc.c - erts_alloc's allocators read from outside; see
 * include/xb/alloc.h for where every figure comes from. */
#define _GNU_SOURCE
#include "xb/alloc.h"
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* erl_alloc.h ErtsAlcStrat_t: ERTS_ALC_S_FIRSTFIT (aoff, aoffcbf,
 * aoffcaobf; the default of the alloc_util allocators), the same in OTP
 * 25-29. */
#define ALC_S_FIRSTFIT 4
/* erl_alloc_util.c ERTS_ALC_CPOOL_PTR_MRKS: mark bits in pool links */
#define CPOOL_PTR_MRKS 3u
/* Bounds on the work: carriers visited, pagemap pages read. */
#define MAX_CARRIERS 1000000
#define MAX_PAGEMAP_PAGES (64u << 20)
#define MAX_INSTANCES 1024

static int64_t o(const struct xb_vm *vm, enum xb_field f)
{
	return vm->off[f];
}

static uint64_t g64(const uint8_t *b, int64_t off)
{
	uint64_t v = 0;
	if (off >= 0)
		memcpy(&v, b + off, 8);
	return v;
}

static uint32_t g32(const uint8_t *b, int64_t off)
{
	uint32_t v = 0;
	if (off >= 0)
		memcpy(&v, b + off, 4);
	return v;
}

static const enum xb_field needed[] = {
	XB_F_ALCINFO_SIZE, XB_F_ALCINFO_ALLOC_UTIL, XB_F_ALCINFO_ENABLED, XB_F_ALCINFO_THR_SPEC,
	XB_F_ALCINFO_EXTRA, XB_F_ALCTS_SIZEOF, XB_F_ALCTS_ENABLED, XB_F_ALCTS_AIX, XB_F_ALCTS_SIZE,
	XB_F_ALCTS_ALLCTR, XB_F_ALLCTR_SIZEOF, XB_F_ALLCTR_NAME_PREFIX, XB_F_ALLCTR_ALLOC_NO,
	XB_F_ALLCTR_MBCS, XB_F_ALLCTR_SBCS, XB_F_CRRSTATS_SIZE, XB_F_CRRSTATS_CARRIERS,
	XB_F_CRRSTATS_MAX, XB_F_CRRSTATS_BLOCKS, XB_F_STATVAL_SIZEOF, XB_F_STATVAL_NO,
	XB_F_STATVAL_SIZE, XB_F_BLKSTATS_SIZEOF, XB_F_BLKSTATS_CURR,
};

/* ---- finding erts_allctrs_info (erl_alloc.c) ---- */

/* ERTS_ALC_A_COUNT: the BlockStats_t entries CarriersStats_t holds after
 * its blocks field (erl_alloc_util.h), or -1 when the offsets say none or
 * more than we keep. */
static int nblocktypes(const int64_t *off)
{
	int64_t bs = off[XB_F_BLKSTATS_SIZEOF];
	int64_t n = bs > 0 ? (off[XB_F_CRRSTATS_SIZE] - off[XB_F_CRRSTATS_BLOCKS]) / bs : 0;
	return n > 0 && n < XB_ALLOC_MAX_TYPES ? (int)n : -1;
}

/* Every field read from a copy of an Allctr_t (its size's bytes) inside
 * it, with as many block types as CarriersStats_t holds: the offsets may
 * come from the target's DWARF, each checked alone against its own
 * struct (xb_dwarf_validate); these are the sums and the arrays. */
bool xb_alloc_layout_ok(const int64_t *off)
{
	int64_t asz = off[XB_F_ALLCTR_SIZEOF], na = nblocktypes(off);
	if (asz <= 0 || na <= 0)
		return false;
	int64_t sv = off[XB_F_STATVAL_SIZEOF], cs = off[XB_F_CRRSTATS_SIZE];
	int64_t ncrr = sv > 0 ? (off[XB_F_CRRSTATS_MAX] - off[XB_F_CRRSTATS_CARRIERS]) / sv : 0;
	if (sv < 16 || off[XB_F_STATVAL_NO] + 8 > sv || off[XB_F_STATVAL_SIZE] + 8 > sv ||
	    off[XB_F_BLKSTATS_CURR] + sv > off[XB_F_BLKSTATS_SIZEOF] ||
	    off[XB_F_CRRSTATS_BLOCKS] + na * off[XB_F_BLKSTATS_SIZEOF] > cs ||
	    off[XB_F_CRRSTATS_MAX] < off[XB_F_CRRSTATS_CARRIERS] ||
	    off[XB_F_CRRSTATS_CARRIERS] + sv * (ncrr < 8 ? ncrr : 8) > cs ||
	    off[XB_F_ALLCTR_MBCS] + cs > asz || off[XB_F_ALLCTR_SBCS] + cs > asz)
		return false;
	static const enum xb_field words[] = {
		XB_F_ALLCTR_CPOOL_NO_CARRIERS, XB_F_ALLCTR_CPOOL_CARRIERS_SIZE, XB_F_ALLCTR_FIX,
		XB_F_ALLCTR_CPOOL_UTIL_LIMIT, XB_F_ALLCTR_ALLOC_NO, XB_F_ALLCTR_NAME_PREFIX, XB_F_ALLCTR_ALLOC_STRAT,
		XB_F_ALLCTR_MBC_HEADER_SIZE, XB_F_ALLCTR_MBC_LIST, XB_F_ALLCTR_SBC_LIST, XB_F_ALLCTR_CPOOL_SENTINEL,
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(words); i++)
		if (off[words[i]] + 8 > asz)
			return false;
	/* the pool's per-type arrays: na words each */
	return off[XB_F_ALLCTR_CPOOL_BLOCKS_SIZE] + 8 * na <= asz &&
	       off[XB_F_ALLCTR_CPOOL_NO_BLOCKS] + 8 * na <= asz;
}

/* Is the Allctr_t at A the allocator number NO? */
static bool allctr_is(struct xb_vm *vm, uint64_t a, uint32_t no)
{
	uint32_t v;
	return a && a % 8 == 0 && xb_read_u32(&vm->mem, a + (uint64_t)o(vm, XB_F_ALLCTR_ALLOC_NO), &v) == 0 &&
	       v == no;
}

/* Entries 1..NA of an ErtsAllocatorInfo_t array at BASE (bytes in B)
 * that prove themselves: flags 0/1, and the Allctr_t (directly, or
 * through its ErtsAllocatorThrSpec_t: aix, allctr[0]) numbered as its
 * index. */
static int info_array_score(struct xb_vm *vm, const uint8_t *b, size_t room, int na)
{
	int64_t es = o(vm, XB_F_ALCINFO_SIZE);
	int good = 0;
	if ((int64_t)room < es * (na + 1))
		return 0;
	for (int i = 1; i <= na; i++) {
		const uint8_t *e = b + es * i;
		uint32_t au = g32(e, o(vm, XB_F_ALCINFO_ALLOC_UTIL)), en = g32(e, o(vm, XB_F_ALCINFO_ENABLED)),
			 ts = g32(e, o(vm, XB_F_ALCINFO_THR_SPEC));
		uint64_t x = g64(e, o(vm, XB_F_ALCINFO_EXTRA));
		/* thr_spec holds the number of instances (erl_alloc.c
		 * set_au_allocator: ai->thr_spec = tspec->size) */
		if (au > 1 || en > 1 || ts > MAX_INSTANCES)
			return 0;
		if (!au || !en || !x)
			continue;
		if (ts) {
			uint32_t aix, size;
			uint64_t arr, a0;
			if (xb_read_u32(&vm->mem, x + (uint64_t)o(vm, XB_F_ALCTS_AIX), &aix) < 0 || aix != (uint32_t)i ||
			    xb_read_u32(&vm->mem, x + (uint64_t)o(vm, XB_F_ALCTS_SIZE), &size) < 0 || !size ||
			    size > MAX_INSTANCES ||
			    xb_read_u64(&vm->mem, x + (uint64_t)o(vm, XB_F_ALCTS_ALLCTR), &arr) < 0 ||
			    xb_read_u64(&vm->mem, arr, &a0) < 0 || !allctr_is(vm, a0, (uint32_t)i))
				return 0;
		} else if (!allctr_is(vm, x, (uint32_t)i)) {
			return 0;
		}
		good++;
	}
	return good;
}

/* Reads of the target the search may make: each candidate is checked by
 * following its pointers, and a hostile (or corrupt) data segment must
 * not turn that into a minute of reads (256 MiB of candidates that each
 * fail at their last entry).  A real stripped beam needs ~60 (OTP 29). */
#define MAX_INFO_READS 100000u

static uint64_t discover_info(struct xb_vm *vm, int na, bool *spent)
{
	struct xb_vm_data_region r[16];
	size_t nr = xb_vm_data_regions(vm, r, 16);
	uint64_t found = 0, reads0 = vm->mem.reads;
	*spent = false;
	int64_t es = o(vm, XB_F_ALCINFO_SIZE);
	for (size_t k = 0; k < nr && !found && !*spent && !xb_interrupted; k++) {
		for (size_t off = 0; off + (size_t)(es * (na + 1)) <= r[k].len && !found && !xb_interrupted;
		     off += 8) {
			if (vm->mem.reads - reads0 > MAX_INFO_READS) {
				xb_overrun(XB_OVR_DISCOVERY, "the allocator table's search stopped after %llu reads",
					   (unsigned long long)(vm->mem.reads - reads0));
				*spent = true;
				break;
			}
			/* entry 0 (ERTS_ALC_A_INVALID) is all zero */
			const uint8_t *b = r[k].buf + off;
			bool zero = true;
			for (int64_t i = 0; i < es && zero; i++)
				zero = b[i] == 0;
			if (!zero)
				continue;
			if (info_array_score(vm, b, r[k].len - off, na) >= 5)
				found = r[k].start + off;
		}
	}
	xb_vm_data_regions_free(r, nr);
	xb_debug("allocator table search: %s after %llu reads\n", found ? "found" : "nothing",
		 (unsigned long long)(vm->mem.reads - reads0));
	return found;
}

/* ---- one allocator instance ---- */

struct inst {
	uint64_t addr;
	uint8_t *buf; /* the Allctr_t */
};

static void add_stats(struct xb_vm *vm, struct xb_alloc_info *ai, struct xb_alloc_type *t, const uint8_t *a,
		      enum xb_field which, bool thr_spec)
{
	const uint8_t *cs = a + o(vm, which);
	int64_t sv = o(vm, XB_F_STATVAL_SIZEOF);
	int ncrr = (int)((o(vm, XB_F_CRRSTATS_MAX) - o(vm, XB_F_CRRSTATS_CARRIERS)) / sv);
	uint64_t cn = 0, cb = 0, bn = 0, bb = 0;
	for (int i = 0; i < ncrr && i < 8; i++) {
		const uint8_t *s = cs + o(vm, XB_F_CRRSTATS_CARRIERS) + sv * i;
		cn += g64(s, o(vm, XB_F_STATVAL_NO));
		cb += g64(s, o(vm, XB_F_STATVAL_SIZE));
	}
	for (int ix = 0; ix < ai->nblocktypes; ix++) {
		const uint8_t *s = cs + o(vm, XB_F_CRRSTATS_BLOCKS) + o(vm, XB_F_BLKSTATS_SIZEOF) * ix +
				   o(vm, XB_F_BLKSTATS_CURR);
		uint64_t sz = g64(s, o(vm, XB_F_STATVAL_SIZE));
		uint64_t no = g64(s, o(vm, XB_F_STATVAL_NO));
		bn += no;
		bb += sz;
		if (thr_spec) {
			ai->blocks_of[ix + 1] += sz; /* ERTS_ALC_A_MIN is 1 */
			ai->nblocks_of[ix + 1] += no;
		}
	}
	if (which == XB_F_ALLCTR_MBCS) {
		t->mbcs_carriers += cn;
		t->mbcs_carriers_bytes += cb;
		t->mbcs_blocks += bn;
		t->mbcs_blocks_bytes += bb;
	} else {
		t->sbcs_carriers += cn;
		t->sbcs_carriers_bytes += cb;
		t->sbcs_blocks += bn;
		t->sbcs_blocks_bytes += bb;
	}
}

static void add_pool(struct xb_vm *vm, struct xb_alloc_info *ai, struct xb_alloc_type *t, const uint8_t *a,
		     bool thr_spec)
{
	if (o(vm, XB_F_ALLCTR_CPOOL_CARRIERS_SIZE) < 0 || o(vm, XB_F_ALLCTR_CPOOL_BLOCKS_SIZE) < 0 ||
	    o(vm, XB_F_ALLCTR_CPOOL_NO_BLOCKS) < 0)
		return;
	t->pool_carriers += g64(a, o(vm, XB_F_ALLCTR_CPOOL_NO_CARRIERS));
	t->pool_carriers_bytes += g64(a, o(vm, XB_F_ALLCTR_CPOOL_CARRIERS_SIZE));
	for (int ix = 0; ix < ai->nblocktypes; ix++) {
		uint64_t sz = g64(a, o(vm, XB_F_ALLCTR_CPOOL_BLOCKS_SIZE) + 8 * ix);
		uint64_t no = g64(a, o(vm, XB_F_ALLCTR_CPOOL_NO_BLOCKS) + 8 * ix);
		t->pool_blocks_bytes += sz;
		t->pool_blocks += no;
		if (thr_spec) {
			ai->blocks_of[ix + 1] += sz;
			ai->nblocks_of[ix + 1] += no;
		}
	}
}

/* fix_alloc lists (erl_alloc_util.h ErtsAlcFixList_t, one array per
 * instance of the allocator that has them). */
static void add_fix(struct xb_vm *vm, struct xb_alloc_info *ai, const uint8_t *a)
{
	uint64_t fix = g64(a, o(vm, XB_F_ALLCTR_FIX));
	int64_t es = o(vm, XB_F_FIXLIST_SIZEOF);
	if (!fix || es <= 0 || es > 128 || o(vm, XB_F_FIXLIST_TYPE) < 0 || o(vm, XB_F_FIXLIST_TYPE_SIZE) < 0)
		return;
	bool cpool = o(vm, XB_F_ALLCTR_CPOOL_UTIL_LIMIT) >= 0 && g64(a, o(vm, XB_F_ALLCTR_CPOOL_UTIL_LIMIT)) != 0;
	/* every field read of an entry inside the entry (the offsets may
	 * come from the target's DWARF): else no fix-list figures */
	enum xb_field used_f[] = { XB_F_FIXLIST_TYPE, XB_F_FIXLIST_TYPE_SIZE,
				   cpool ? XB_F_FIXLIST_CPOOL_ALLOCATED : XB_F_FIXLIST_NOCPOOL_ALLOCATED,
				   cpool ? XB_F_FIXLIST_CPOOL_USED : XB_F_FIXLIST_NOCPOOL_USED };
	for (size_t i = 0; i < XB_ARRAY_SIZE(used_f); i++)
		if (o(vm, used_f[i]) + (i == 0 ? 4 : 8) > es)
			return;
	uint8_t buf[64 * 128];
	if (xb_read(&vm->mem, fix, buf, (size_t)(es * 64)) < 0) {
		/* the array may be shorter than 64 entries at the end of a
		 * mapping: read one by one */
		memset(buf, 0, sizeof(buf));
		for (int i = 0; i < 64; i++)
			if (xb_read(&vm->mem, fix + (uint64_t)(es * i), buf + es * i, (size_t)es) < 0)
				break;
	}
	/* Entry i's type is ERTS_ALC_N2T(N0 + i): its number N sits in 8
	 * bits at a shift we do not know (erl_alloc_types.h, generated);
	 * the shift at which the entries count up one by one the longest
	 * is it, and where the count stops is the end of the array. */
	int n = 0, shift = -1;
	for (int s = 0; s <= 24; s++) {
		int run = 1;
		uint32_t n0 = (g32(buf, o(vm, XB_F_FIXLIST_TYPE)) >> s) & 0xff;
		while (run < 64 && ((g32(buf + es * run, o(vm, XB_F_FIXLIST_TYPE)) >> s) & 0xff) == n0 + (uint32_t)run)
			run++;
		if (run > n) {
			n = run;
			shift = s;
		}
	}
	if (n < 4) /* erl_alloc.c has 15 fix types in OTP 25 */
		return;
	(void)shift;
	for (int k = 0; k < n; k++) {
		const uint8_t *e = buf + es * k;
		uint64_t tsz = g64(e, o(vm, XB_F_FIXLIST_TYPE_SIZE));
		uint64_t alloc = g64(e, o(vm, cpool ? XB_F_FIXLIST_CPOOL_ALLOCATED : XB_F_FIXLIST_NOCPOOL_ALLOCATED));
		uint64_t used = g64(e, o(vm, cpool ? XB_F_FIXLIST_CPOOL_USED : XB_F_FIXLIST_NOCPOOL_USED));
		if (tsz > (1u << 20) || (ai->fix_type_size[k] && ai->fix_type_size[k] != tsz)) {
			n = k;
			break;
		}
		/* With the carrier pool the counts are UWords that an
		 * instance freeing another's item takes below zero
		 * (erl_alloc_util.c fix_cpool_free: used-- in the freeing
		 * instance): only their sum over instances means anything,
		 * and it is summed modulo 2^64 as erts_alcu_current_size()
		 * does; xb_alloc_processes() checks the sums. */
		if (xb_verbose >= 2 && ((int64_t)alloc < 0 || (int64_t)used < 0))
			fprintf(stderr, "fix list %d of the instance at 0x%llx: allocated %lld, used %lld items (taken "
					"below zero by frees in other instances)\n", k, (unsigned long long)fix,
				(long long)alloc, (long long)used);
		ai->fix_type_size[k] = tsz;
		ai->fix_allocated[k] += tsz * alloc;
		ai->fix_used[k] += tsz * used;
	}
	if (n > ai->nfix)
		ai->nfix = n;
	if (n > 0)
		ai->fix_known = true;
}

/* ---- carrier walk ---- */

struct walk {
	struct xb_vm *vm;
	int pagemap; /* fd or -1 */
	long page;
	uint64_t pages_read;
	uint64_t visited;
	bool bounded;
	/* the current type's lists: one looped (its carriers not all
	 * counted once; the next types are still walked) */
	bool looped;
	int loops;
	/* pool sentinels already walked */
	uint64_t sentinels[XB_ALLOC_MAX_TYPES];
	int nsent;
};

static uint64_t resident_bytes(struct walk *w, uint64_t start, uint64_t len, bool *ok)
{
	/* a carrier of the user address space (below 2^47): a size that
	 * wraps or passes it is not one, and would wrap the budget's sum */
	if (w->pagemap < 0 || !len || len > (1ull << 47) || start >= (1ull << 47) || start + len > (1ull << 47)) {
		*ok = false;
		return 0;
	}
	uint64_t first = start / (uint64_t)w->page, last = (start + len - 1) / (uint64_t)w->page;
	uint64_t n = last - first + 1, res = 0;
	if (n > MAX_PAGEMAP_PAGES || w->pages_read + n > MAX_PAGEMAP_PAGES || xb_interrupted) {
		*ok = false;
		return 0;
	}
	w->pages_read += n;
	uint64_t buf[512];
	for (uint64_t p = first; p <= last;) {
		uint64_t k = last - p + 1 < 512 ? last - p + 1 : 512;
		ssize_t got = pread(w->pagemap, buf, k * 8, (off_t)(p * 8));
		if (got != (ssize_t)(k * 8)) {
			*ok = false;
			return 0;
		}
		for (uint64_t i = 0; i < k; i++)
			res += buf[i] >> 63; /* present */
		p += k;
	}
	res *= (uint64_t)w->page;
	/* partial first and last pages count in proportion */
	return res > len ? len : res;
}

/* One carrier: its size, the bytes of blocks in it, its largest free
 * block (aoff). */
static void visit(struct walk *w, struct xb_alloc_info *ai, struct xb_alloc_type *t, uint64_t c, bool sbc,
		  bool aoff, uint64_t hdr)
{
	struct xb_vm *vm = w->vm;
	uint64_t chdr, tbs = 0, big = 0;
	uint64_t unit = o(vm, XB_F_UNIT_SIZE) > 0 ? (uint64_t)o(vm, XB_F_UNIT_SIZE) : 8;
	w->visited++;
	if (xb_read_u64(&vm->mem, c + (uint64_t)o(vm, XB_F_CARRIER_CHDR), &chdr) < 0)
		return;
	uint64_t size = chdr & ~(unit - 1);
	if (sbc) {
		t->walked_sbcs++;
	} else {
		t->walked_mbcs++;
		if (o(vm, XB_F_CARRIER_CPOOL) >= 0 && o(vm, XB_F_CPOOLDATA_TOTAL_BLOCKS_SIZE) >= 0)
			xb_read_u64(&vm->mem,
				    c + (uint64_t)(o(vm, XB_F_CARRIER_CPOOL) + o(vm, XB_F_CPOOLDATA_TOTAL_BLOCKS_SIZE)),
				    &tbs);
		if (tbs + hdr <= size)
			t->free_bytes += size - hdr - tbs;
		if (aoff && o(vm, XB_F_AOFFCRR_BHDR) >= 0 &&
		    xb_read_u64(&vm->mem, c + (uint64_t)o(vm, XB_F_AOFFCRR_BHDR), &big) == 0 && big <= size) {
			if (big > t->largest_free)
				t->largest_free = big;
		}
	}
	bool ok = true;
	uint64_t r = resident_bytes(w, c, size, &ok);
	if (ok) {
		t->resident += r;
		/* an sbc holds one block: its size is the carrier's minus the
		 * header; count what is resident beyond the blocks */
		uint64_t blocks = sbc ? size : tbs;
		if (r > blocks)
			t->resident_free += r - blocks;
	} else {
		ai->resident_known = false;
	}
}

static void walk_list(struct walk *w, struct xb_alloc_info *ai, struct xb_alloc_type *t, uint64_t first,
		      bool sbc, bool aoff, uint64_t hdr)
{
	uint64_t c = first;
	struct xb_cycle cy;
	xb_cycle_init(&cy, first);
	while (c) {
		if (w->visited >= MAX_CARRIERS || xb_interrupted) {
			w->bounded = true;
			return;
		}
		visit(w, ai, t, c, sbc, aoff, hdr);
		uint64_t next;
		if (xb_read_u64(&w->vm->mem, c + (uint64_t)o(w->vm, XB_F_CARRIER_NEXT), &next) < 0)
			return;
		c = next;
		if (c && xb_cycle_seen(&cy, c)) {
			/* not a list the VM keeps: this type is not walked */
			w->looped = true;
			w->loops++;
			return;
		}
	}
}

/* The carrier pool of an allocator type: a ring of ErtsAlcCPoolData_t
 * through .next (with mark bits) from the sentinel. */
static void walk_pool(struct walk *w, struct xb_alloc_info *ai, struct xb_alloc_type *t, uint64_t sentinel,
		      bool aoff, uint64_t hdr)
{
	struct xb_vm *vm = w->vm;
	if (!sentinel || o(vm, XB_F_CPOOLDATA_NEXT) < 0 || o(vm, XB_F_CARRIER_CPOOL) < 0)
		return;
	for (int i = 0; i < w->nsent; i++)
		if (w->sentinels[i] == sentinel)
			return;
	if (w->nsent < XB_ALLOC_MAX_TYPES)
		w->sentinels[w->nsent++] = sentinel;
	uint64_t p = sentinel;
	struct xb_cycle cy;
	xb_cycle_init(&cy, sentinel);
	for (;;) {
		uint64_t next;
		if (xb_read_u64(&vm->mem, p + (uint64_t)o(vm, XB_F_CPOOLDATA_NEXT), &next) < 0)
			return;
		next &= ~(uint64_t)CPOOL_PTR_MRKS;
		if (!next || next == sentinel)
			return;
		/* a ring that does not come back to its sentinel */
		if (xb_cycle_seen(&cy, next)) {
			w->looped = true;
			w->loops++;
			return;
		}
		if (w->visited >= MAX_CARRIERS || xb_interrupted) {
			w->bounded = true;
			return;
		}
		visit(w, ai, t, next - (uint64_t)o(vm, XB_F_CARRIER_CPOOL), false, aoff, hdr);
		p = next;
	}
}

static struct xb_alloc_type *type_for(struct xb_alloc_info *ai, int no)
{
	for (size_t i = 0; i < ai->ntypes; i++)
		if (ai->type[i].alloc_no == no)
			return &ai->type[i];
	if (ai->ntypes >= XB_ALLOC_MAX_TYPES)
		return NULL;
	struct xb_alloc_type *t = &ai->type[ai->ntypes++];
	memset(t, 0, sizeof(*t));
	t->alloc_no = no;
	return t;
}

int xb_alloc_read(struct xb_vm *vm, struct xb_alloc_info *ai, unsigned flags)
{
	memset(ai, 0, sizeof(*ai));
	for (size_t i = 0; i < XB_ARRAY_SIZE(needed); i++)
		if (o(vm, needed[i]) == XB_NOFIELD)
			return xb_fail("cannot read the allocators of this VM (OTP %s, erts %s): the release "
				       "table has no %s (%s)", vm->otp[0] ? vm->otp : "?", vm->erts,
				       xb_field_name(needed[i]), xb_field_specs[needed[i]].source);
	int na = nblocktypes(vm->off);
	if (na < 0)
		return xb_fail("implausible CarriersStats_t layout in the release table");
	ai->nblocktypes = na;
	const char *how = "symbol";
	uint64_t info = xb_symbols_lookup(&vm->syms, vm->beam, "erts_allctrs_info", NULL);
	bool spent = false;
	if (!info) {
		info = discover_info(vm, na, &spent);
		how = "discovered";
	}
	if (!info && xb_interrupted)
		return xb_fail("interrupted");
	if (!info && spent)
		return xb_fail("cannot find the allocator table (erts_allctrs_info, erl_alloc.c): the search "
			       "of this beam's data gave up after %u reads (a real VM's takes under a hundred: "
			       "its memory is corrupt or made to mislead); install the VM's debug symbols",
			       MAX_INFO_READS);
	if (!info)
		return xb_fail("cannot find the allocator table (erts_allctrs_info, erl_alloc.c): this "
			       "beam.smp does not name it and no array in its data looks like it; "
			       "install the VM's debug symbols");
	int64_t es = o(vm, XB_F_ALCINFO_SIZE);
	uint8_t ibuf[XB_ALLOC_MAX_TYPES * 64];
	if (es > 64 || xb_read(&vm->mem, info, ibuf, (size_t)(es * (na + 1))) < 0)
		return xb_fail("cannot read erts_allctrs_info at 0x%llx: %s", (unsigned long long)info, xb_err());
	if (info_array_score(vm, ibuf, sizeof(ibuf), na) < 3)
		return xb_fail("erts_allctrs_info at 0x%llx (%s) does not look like the allocator table "
			       "(entries not numbered as their allocators)", (unsigned long long)info, how);
	size_t asz = (size_t)o(vm, XB_F_ALLCTR_SIZEOF);
	if (!xb_alloc_layout_ok(vm->off))
		return xb_fail("implausible Allctr_t layout for erts %s (a field past the struct's %zu bytes); "
			       "the release table or this beam's DWARF is wrong", vm->erts, asz);
	uint8_t *a = malloc(asz);
	if (!a)
		return xb_fail("out of memory");
	struct walk w = { .vm = vm, .pagemap = -1, .page = sysconf(_SC_PAGESIZE) };
	if (flags & XB_ALLOC_RESIDENT) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)vm->pid);
		w.pagemap = open(path, O_RDONLY | O_CLOEXEC);
	}
	ai->resident_known = w.pagemap >= 0;
	ai->walked = (flags & (XB_ALLOC_WALK | XB_ALLOC_RESIDENT)) != 0;
	for (int i = 1; i <= na; i++) {
		const uint8_t *e = ibuf + es * i;
		uint32_t au = g32(e, o(vm, XB_F_ALCINFO_ALLOC_UTIL)), en = g32(e, o(vm, XB_F_ALCINFO_ENABLED)),
			 ts = g32(e, o(vm, XB_F_ALCINFO_THR_SPEC));
		uint64_t x = g64(e, o(vm, XB_F_ALCINFO_EXTRA));
		if (!au || !en || !x)
			continue;
		uint64_t inst[MAX_INSTANCES];
		uint32_t ninst = 0;
		if (ts) {
			uint32_t size;
			uint64_t arr;
			if (xb_read_u32(&vm->mem, x + (uint64_t)o(vm, XB_F_ALCTS_SIZE), &size) < 0 || !size ||
			    size > MAX_INSTANCES ||
			    xb_read_u64(&vm->mem, x + (uint64_t)o(vm, XB_F_ALCTS_ALLCTR), &arr) < 0 ||
			    xb_read(&vm->mem, arr, inst, size * 8) < 0) {
				snprintf(ai->note, sizeof(ai->note), "allocator %d: instances unreadable", i);
				continue;
			}
			ninst = size;
		} else {
			inst[0] = x;
			ninst = 1;
		}
		struct xb_alloc_type *t = type_for(ai, i);
		if (!t)
			break;
		t->thr_spec = ts;
		w.looped = false;
		for (uint32_t k = 0; k < ninst; k++) {
			if (!inst[k])
				continue;
			if (xb_read(&vm->mem, inst[k], a, asz) < 0 || g32(a, o(vm, XB_F_ALLCTR_ALLOC_NO)) != (uint32_t)i) {
				snprintf(ai->note, sizeof(ai->note), "allocator %d instance %u unreadable", i, k);
				continue;
			}
			if (!t->instances++) {
				char prefix[24] = "";
				uint64_t np = g64(a, o(vm, XB_F_ALLCTR_NAME_PREFIX));
				if (np && xb_read(&vm->mem, np, prefix, sizeof(prefix) - 1) == 0) {
					prefix[sizeof(prefix) - 1] = 0;
					for (char *c = prefix; *c; c++)
						if (!((*c >= 'a' && *c <= 'z') || *c == '_')) {
							*c = 0;
							break;
						}
				}
				snprintf(t->name, sizeof(t->name), "%salloc", prefix[0] ? prefix : "unknown_");
				snprintf(ai->type_name[i], sizeof(ai->type_name[i]), "%s", t->name);
				t->strategy = o(vm, XB_F_ALLCTR_ALLOC_STRAT) >= 0 ? (int)g32(a, o(vm, XB_F_ALLCTR_ALLOC_STRAT)) : 0;
			}
			add_stats(vm, ai, t, a, XB_F_ALLCTR_MBCS, ts);
			add_stats(vm, ai, t, a, XB_F_ALLCTR_SBCS, ts);
			add_pool(vm, ai, t, a, ts);
			add_fix(vm, ai, a);
			if (ai->walked && o(vm, XB_F_ALLCTR_MBC_LIST) >= 0 && o(vm, XB_F_ALLCTR_SBC_LIST) >= 0 &&
			    o(vm, XB_F_CARRIER_NEXT) >= 0 && o(vm, XB_F_CARRIER_CHDR) >= 0) {
				bool aoff = g32(a, o(vm, XB_F_ALLCTR_ALLOC_STRAT)) == ALC_S_FIRSTFIT;
				uint64_t hdr = g64(a, o(vm, XB_F_ALLCTR_MBC_HEADER_SIZE));
				walk_list(&w, ai, t, g64(a, o(vm, XB_F_ALLCTR_MBC_LIST)), false, aoff, hdr);
				walk_list(&w, ai, t, g64(a, o(vm, XB_F_ALLCTR_SBC_LIST)), true, aoff, 0);
				if (g64(a, o(vm, XB_F_ALLCTR_CPOOL_UTIL_LIMIT)))
					walk_pool(&w, ai, t, g64(a, o(vm, XB_F_ALLCTR_CPOOL_SENTINEL)), aoff, hdr);
				t->largest_known = aoff;
			}
		}
		/* a loop's carriers were counted more than once before it was
		 * seen: what is resident in carriers is not known */
		if (w.looped)
			ai->resident_known = false;
		if (ai->walked)
			t->walked = !w.bounded && !w.looped && t->walked_mbcs == t->mbcs_carriers + t->pool_carriers &&
				    t->walked_sbcs == t->sbcs_carriers;
	}
	ai->carriers_walked = w.visited;
	if (w.bounded)
		snprintf(ai->note, sizeof(ai->note), "stopped after %llu carriers%s",
			 (unsigned long long)w.visited, xb_interrupted ? " (interrupted)" : "");
	else if (w.loops)
		snprintf(ai->note, sizeof(ai->note), "%d carrier list%s loop%s (those types not walked)", w.loops,
			 w.loops == 1 ? "" : "s", w.loops == 1 ? "s" : "");
	if (w.pagemap >= 0)
		close(w.pagemap);
	free(a);
	if (!ai->ntypes)
		return xb_fail("no alloc_util allocator is enabled in this VM (+Mea min?)");
	return 0;
}

/* Is fix list K of type NAME?  By the release table's order of the
 * FIXED_SIZE types (erl_alloc.types). */
static bool fix_is(const struct xb_vm *vm, int k, const char *name)
{
	const char *l = vm->rel ? vm->rel->fix_types : NULL;
	for (int i = 0; l && *l; i++) {
		size_t n = strcspn(l, ",");
		if (i == k)
			return strlen(name) == n && strncmp(l, name, n) == 0;
		l += n + (l[n] == ',');
	}
	return false;
}

static int fix_count(const struct xb_vm *vm)
{
	const char *l = vm->rel ? vm->rel->fix_types : NULL;
	int n = 0;
	for (; l && *l; n++)
		l += strcspn(l, ",") + (l[strcspn(l, ",")] == ',');
	return n;
}

void xb_alloc_processes(struct xb_vm *vm, const struct xb_alloc_info *ai, uint64_t ptab_bytes,
			struct xb_alloc_procs *out)
{
	/* erl_alloc.c erts_memory(): want.processes */
	memset(out, 0, sizeof(*out));
	int eheap_no = -1;
	for (size_t i = 0; i < ai->ntypes; i++)
		if (strcmp(ai->type[i].name, "eheap_alloc") == 0)
			eheap_no = ai->type[i].alloc_no;
	if (eheap_no > 0 && eheap_no < XB_ALLOC_MAX_TYPES) {
		out->eheap = ai->blocks_of[eheap_no];
		out->eheap_blocks = ai->nblocks_of[eheap_no];
	}
	if (xb_verbose >= 2)
		for (int k = 0; k < ai->nfix; k++)
			fprintf(stderr, "fix list %d: type size %llu, allocated %llu bytes, used %llu bytes\n", k,
				(unsigned long long)ai->fix_type_size[k], (unsigned long long)ai->fix_allocated[k],
				(unsigned long long)ai->fix_used[k]);
	/* The fix lists are the FIXED_SIZE types of erl_alloc.types in
	 * order; the ones erts_memory() adds to processes are checked
	 * against their sizes (erl_alloc.c fix_type_sizes[]). */
	static const struct {
		const char *name;
		enum xb_field size;
	} want[] = { { "PROC", XB_F_PROC_SIZE }, { "MONITOR", XB_F_MONDATAHEAP_SIZE }, { "LINK", XB_F_ILINK_SIZE },
		     { "MSG_REF", XB_F_MSGREF_SIZE }, { "LL_PTIMER", XB_F_TWTIMER_SIZE },
		     { "HL_PTIMER", XB_F_HLTIMER_SIZE }, { "BIF_TIMER", XB_F_BIFTIMER_SIZE } };
	bool ok = ai->fix_known && ai->nfix == fix_count(vm);
	/* the sums over instances (add_fix) are below 2^48 bytes, or they
	 * were not read whole (a count taken below zero, read alone) */
	for (int k = 0; ok && k < ai->nfix; k++)
		if (ai->fix_allocated[k] >> 48 || ai->fix_used[k] >> 48)
			ok = false;
	uint64_t pr = 0, pr_used = 0, other = 0, other_used = 0;
	for (int k = 0; ok && k < ai->nfix; k++)
		for (size_t w = 0; w < XB_ARRAY_SIZE(want); w++) {
			if (!fix_is(vm, k, want[w].name))
				continue;
			if (o(vm, want[w].size) > 0 && (int64_t)ai->fix_type_size[k] != o(vm, want[w].size)) {
				ok = false;
				break;
			}
			/* (used <= allocated, but the instances are read one
			 * after the other: an item may move meanwhile) */
			uint64_t used = ai->fix_used[k] <= ai->fix_allocated[k] ? ai->fix_used[k] : ai->fix_allocated[k];
			if (w == 0) {
				pr += ai->fix_allocated[k];
				pr_used += used;
			} else {
				other += ai->fix_allocated[k];
				other_used += used;
			}
		}
	if (ok) {
		out->procs = pr;
		out->procs_used = pr_used;
		out->fix_other = other;
		out->fix_other_used = other_used;
	}
	out->fix_known = ok;
	out->ptab = ptab_bytes;
	/* erts_bif_timer_memory_size() is 0 */
	out->total = out->eheap + ptab_bytes + out->procs + out->fix_other;
}

int xb_anon_rw_rss(pid_t pid, uint64_t *rss, uint64_t *size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return xb_fail("cannot read %s: %s", path, strerror(errno));
	char line[512];
	bool anon_rw = false;
	*rss = *size = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, kb;
		char perms[8], name[256];
		int n;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s%n", &a, &b, perms, &n) == 3) {
			name[0] = 0;
			sscanf(line + n, " %255[^\n]", name);
			/* private, writable, no file: the heap, mmap'ed carriers,
			 * thread stacks ([stack] included) */
			anon_rw = perms[1] == 'w' && perms[3] == 'p' && (name[0] == 0 || name[0] == '[');
			if (anon_rw)
				*size += b - a;
			continue;
		}
		if (anon_rw && sscanf(line, "Rss: %llu kB", &kb) == 1)
			*rss += kb * 1024;
	}
	fclose(f);
	return 0;
}

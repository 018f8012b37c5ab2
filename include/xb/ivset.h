/* ivset.h - a set of address ranges, merged: what the code map's walk of
 * the JIT registration chain uses to tell an older load of code that newer
 * registrations already name (codemap.c).
 *
 * Adding is O(log n) amortised plus a merge every XB_IVSET_PENDING
 * additions: a single sorted array costs a memmove of the whole per
 * insertion, quadratic in the registrations (a VM that loads modules at
 * rising addresses puts each new range first, the chain being newest
 * first; a hostile one may register hundreds of thousands). */
#ifndef XB_IVSET_H
#define XB_IVSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XB_IVSET_PENDING 1024

struct xb_ivset {
	uint64_t (*v)[2]; /* [start, end): sorted; two never touch */
	size_t n, cap;
	uint64_t (*p)[2]; /* added since v was last merged: as v, at most XB_IVSET_PENDING */
	size_t np, capp;
	uint64_t moved; /* ranges moved by additions and merges: the cost, for the tests */
};

/* Is [LO, HI) inside the union of the set's ranges (an empty range: when
 * LO is inside one, or at its end)?  An answer that took more than a few
 * steps between the two arrays merges the pending ranges in (a hostile
 * chain asking the same such range again and again pays once). */
bool xb_ivset_covers(struct xb_ivset *s, uint64_t lo, uint64_t hi);
/* Add [LO, HI) (LO <= HI); ranges that touch or overlap merge.  -1 (and
 * xb_err) when out of memory: the range may or may not be in the set. */
int xb_ivset_add(struct xb_ivset *s, uint64_t lo, uint64_t hi);
void xb_ivset_free(struct xb_ivset *s);

#endif

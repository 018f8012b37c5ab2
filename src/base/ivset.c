/* ivset.c - a set of address ranges, merged (see ivset.h). */
#include "xb/ivset.h"
#include "xb/common.h"

#include <stdlib.h>
#include <string.h>

/* The index of the first range of V (N of them) starting above ADDR. */
static size_t above(uint64_t (*v)[2], size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid][0] <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The end of the last range of V (N of them) starting at or below ADDR,
 * when that range reaches ADDR (ends at or after it); else false. */
static bool reach(uint64_t (*v)[2], size_t n, uint64_t addr, uint64_t *end)
{
	size_t lo = above(v, n, addr);
	bool found = lo && v[lo - 1][1] >= addr;
	*end = found ? v[lo - 1][1] : 0;
	return found;
}

static int merge_pending(struct xb_ivset *s);

#define COVERS_STEPS 8 /* steps past which the pending ranges are merged in */

/* Each step moves to the end of a range; the merged array's ranges do not
 * touch, so a step from one of them to the next goes through a pending
 * one: at most 2 * XB_IVSET_PENDING + 1 steps, and past COVERS_STEPS the
 * pending ones are merged in so that the next such question takes one. */
bool xb_ivset_covers(struct xb_ivset *s, uint64_t lo, uint64_t hi)
{
	int steps = 0;
	for (uint64_t cur = lo;; steps++) {
		uint64_t a, b;
		bool fa = reach(s->v, s->n, cur, &a), fb = reach(s->p, s->np, cur, &b);
		uint64_t e = a > b ? a : b;
		bool yes = (fa || fb) && e >= hi;
		if ((!fa && !fb) || e >= hi || e <= cur) {
			if (steps > COVERS_STEPS)
				merge_pending(s); /* (out of memory: stays pending, still right) */
			return yes;
		}
		cur = e;
	}
}

/* Insert [LO, HI) into the sorted, merged array *V (*N, *CAP), merging it
 * with those it reaches: one memmove. */
static int insert(uint64_t (**v)[2], size_t *n, size_t *cap, uint64_t *moved, uint64_t lo, uint64_t hi)
{
	size_t i = above(*v, *n, lo);
	if (i > 0 && (*v)[i - 1][1] >= lo) { /* the one before reaches LO */
		i--;
		lo = (*v)[i][0];
		if ((*v)[i][1] > hi)
			hi = (*v)[i][1];
	} else {
		if (xb_grow((void **)v, cap, *n + 1, sizeof(**v)) < 0)
			return -1;
		memmove(&(*v)[i + 1], &(*v)[i], (*n - i) * sizeof(**v));
		*moved += *n - i;
		(*n)++;
	}
	size_t j = i + 1; /* those after it that it now reaches */
	while (j < *n && (*v)[j][0] <= hi) {
		if ((*v)[j][1] > hi)
			hi = (*v)[j][1];
		j++;
	}
	if (j > i + 1) {
		memmove(&(*v)[i + 1], &(*v)[j], (*n - j) * sizeof(**v));
		*moved += *n - j;
	}
	*n -= j - i - 1;
	(*v)[i][0] = lo;
	(*v)[i][1] = hi;
	return 0;
}

int xb_ivset_add(struct xb_ivset *s, uint64_t lo, uint64_t hi)
{
	if (insert(&s->p, &s->np, &s->capp, &s->moved, lo, hi) < 0)
		return -1;
	if (s->np < XB_IVSET_PENDING)
		return 0;
	return merge_pending(s);
}

/* Merge the pending ranges in, in place: from the back into v grown to
 * hold both, then one pass that joins those that touch.  Out of memory:
 * -1, the pending ones stay pending (the set is whole). */
static int merge_pending(struct xb_ivset *s)
{
	if (!s->np)
		return 0;
	if (xb_grow((void **)&s->v, &s->cap, s->n + s->np, sizeof(*s->v)) < 0)
		return -1;
	size_t i = s->n, j = s->np, k = s->n + s->np;
	while (j > 0) {
		if (i > 0 && s->v[i - 1][0] > s->p[j - 1][0]) {
			s->v[k - 1][0] = s->v[i - 1][0];
			s->v[k - 1][1] = s->v[i - 1][1];
			i--;
		} else {
			s->v[k - 1][0] = s->p[j - 1][0];
			s->v[k - 1][1] = s->p[j - 1][1];
			j--;
		}
		k--;
	}
	size_t total = s->n + s->np, m = 0;
	for (size_t x = 0; x < total; x++) {
		if (m && s->v[m - 1][1] >= s->v[x][0]) {
			if (s->v[x][1] > s->v[m - 1][1])
				s->v[m - 1][1] = s->v[x][1];
		} else {
			s->v[m][0] = s->v[x][0];
			s->v[m][1] = s->v[x][1];
			m++;
		}
	}
	s->moved += 2 * total;
	s->n = m;
	s->np = 0;
	return 0;
}

void xb_ivset_free(struct xb_ivset *s)
{
	free(s->v);
	free(s->p);
	*s = (struct xb_ivset){ 0 };
}

/* blame_filter.c - --blame for stack formats: the whole stacks of the
 * samples that hold FN (xb_profile_blame's samples: a native function, or
 * an Erlang one). */
#define _GNU_SOURCE
#include "xb/profile.h"
#include "xb/common.h"

#include <stdlib.h>
#include <string.h>

/* DST's id for SRC's frame ID, interned with its kind, file and line. */
static int copy_frame(const struct xb_profile *src, uint32_t id, struct xb_profile *dst,
		      uint32_t *map)
{
	if (map[id])
		return 0;
	const struct xb_fname *f = &src->names[id];
	uint32_t nid = xb_profile_intern_at(dst, f->name, f->tag, f->kind, f->file, f->line);
	/* interning returns 0 on failure too: tell by the name. */
	if (nid >= dst->nnames || !dst->names[nid].name || !dst->names[nid].tag ||
	    strcmp(dst->names[nid].name, f->name) || strcmp(dst->names[nid].tag, f->tag))
		return -1;
	map[id] = nid + 1;
	return 0;
}

/* Add IDS to DST COUNT times over. */
static int add_counted(struct xb_profile *dst, const uint32_t *ids, uint32_t n, uint32_t nnative,
		       uint64_t count)
{
	size_t before = dst->nstacks;
	if (xb_profile_add(dst, ids, n, nnative) < 0)
		return -1;
	if (dst->nstacks > before) { /* a new stack: set its count */
		dst->stacks[before].count = count;
		dst->total += count - 1;
		return 0;
	}
	for (uint64_t k = 1; k < count; k++) /* not reached: SRC's stacks are distinct */
		if (xb_profile_add(dst, ids, n, nnative) < 0)
			return -1;
	return 0;
}

int xb_profile_filter_blame(const struct xb_profile *src, const char *fn, struct xb_profile *dst)
{
	xb_profile_init(dst);
	size_t nn = src->nnames ? src->nnames : 1;
	bool *hit = calloc(nn, sizeof(*hit));
	uint32_t *map = calloc(nn, sizeof(*map)); /* src id -> dst id + 1 */
	uint32_t *ids = NULL;
	size_t idcap = 0;
	int rc = -1;
	if (!hit || !map)
		goto out;
	for (size_t i = 0; i < src->nnames; i++)
		hit[i] = xb_blame_kind(src->names[i].kind) && xb_blame_match(fn, src->names[i].name);
	for (size_t i = 0; i < src->nstacks; i++) {
		const struct xb_stack *s = &src->stacks[i];
		bool found = false;
		for (uint32_t k = 0; k < s->n && !found; k++)
			found = xb_blame_at(src, hit, src->nnames, s->ids, k, s->nnative);
		if (!found)
			continue;
		if (xb_grow((void **)&ids, &idcap, s->n ? s->n : 1, sizeof(*ids)) < 0)
			goto out;
		for (uint32_t k = 0; k < s->n; k++) {
			if (copy_frame(src, s->ids[k], dst, map) < 0)
				goto out;
			ids[k] = map[s->ids[k]] - 1;
		}
		if (add_counted(dst, ids, s->n, s->nnative, s->count) < 0)
			goto out;
	}
	rc = 0;
out:
	free(hit);
	free(map);
	free(ids);
	if (rc < 0) {
		xb_profile_free(dst);
		return xb_fail("out of memory filtering the profile for --blame %s", fn);
	}
	return 0;
}

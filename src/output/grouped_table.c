/* grouped_table.c - the table under --by: one block per group (the
 * profile split by src/profile/by.c), each with the plain table's rows.
 *
 * A run --by process holds a group for every process it saw: millions on
 * a VM that spawns a process per request.  Splitting them all at once
 * cost a profile per group (8 KiB of tables and a copy of its frame
 * names each: gigabytes); so the groups are ranked first, from one pass
 * over the stacks, and only those shown (-t) are split, BATCH at a time. */
#define _GNU_SOURCE
#include "xb/by.h"
#include "xb/common.h"
#include "xb/writers.h"

#include <stdlib.h>
#include <string.h>

#define NO_GROUP XB_NO_GROUP
#define BATCH 1024

/* A group's rank: what its rows add up to (blame: its matching samples). */
struct ranked {
	uint32_t gid; /* group frame id, or NO_GROUP */
	uint64_t counted;
};

static const struct xb_profile *order_p;
static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->counted != y->counted)
		return x->counted > y->counted ? -1 : 1;
	if (x->gid == NO_GROUP || y->gid == NO_GROUP)
		return x->gid == NO_GROUP ? 1 : y->gid == NO_GROUP ? -1 : 0;
	return strcmp(order_p->names[x->gid].name, order_p->names[y->gid].name);
}

/* Each group's count as its own block would count it (the split's
 * profile: the stack without its group frame, through xb_flat_row or
 * xb_blame_row), the groups with any, ranked.  NULL when out of memory. */
static struct ranked *rank_groups(const struct xb_profile *p, bool only_erlang, const char *blame, size_t *nout)
{
	size_t nn = p->nnames ? p->nnames : 1;
	uint64_t *per = calloc(nn + 1, sizeof(*per)); /* [nn]: no group */
	bool *hit = blame ? xb_blame_hits(p, blame) : NULL;
	struct ranked *r = NULL;
	*nout = 0;
	if (!per || (blame && !hit))
		goto out;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		uint32_t gid = xb_by_group_of(p, s), n = s->n - (gid != NO_GROUP), row;
		uint32_t nnative = s->nnative < n ? s->nnative : n;
		bool counts = blame ? xb_blame_row(p, hit, p->nnames, s->ids, n, nnative, 0, &row)
				    : xb_flat_row(p, s->ids, n, nnative, only_erlang ? XB_FLAT_ERLANG : XB_FLAT_LEAF,
						  &row);
		if (counts)
			per[gid == NO_GROUP ? nn : gid] += s->count;
	}
	size_t ng = 0;
	for (size_t i = 0; i <= nn; i++)
		ng += per[i] != 0;
	r = malloc((ng ? ng : 1) * sizeof(*r));
	if (!r)
		goto out;
	for (size_t i = 0, k = 0; i <= nn; i++)
		if (per[i])
			r[k++] = (struct ranked){ i == nn ? NO_GROUP : (uint32_t)i, per[i] };
	order_p = p;
	qsort(r, ng, sizeof(*r), cmp_ranked);
	*nout = ng;
out:
	free(per);
	free(hit);
	return r;
}

/* Blocks [from, to) of R: split (only those groups), then written in
 * rank order.  0, or -1 with xb_err. */
static int write_batch(FILE *f, const struct xb_profile *p, const struct ranked *r, size_t from, size_t to,
		       bool only_erlang, const char *blame, size_t top, uint64_t all)
{
	bool *keep = calloc(p->nnames ? p->nnames : 1, sizeof(*keep));
	bool keep_nogroup = false;
	struct xb_group *grp = NULL;
	size_t ng = 0;
	int rc = -1;
	if (!keep) {
		xb_fail("out of memory writing the table");
		return -1;
	}
	for (size_t i = from; i < to; i++) {
		if (r[i].gid == NO_GROUP)
			keep_nogroup = true;
		else
			keep[r[i].gid] = true;
	}
	if (xb_by_split_some(p, keep, keep_nogroup, &grp, &ng) < 0)
		goto out;
	char name[1024];
	for (size_t i = from; i < to; i++) {
		struct xb_group *g = NULL;
		for (size_t k = 0; k < ng && !g; k++)
			if (grp[k].gid == r[i].gid)
				g = &grp[k];
		if (!g) {
			xb_fail("internal error: group %u not split", (unsigned)r[i].gid);
			goto out;
		}
		struct xb_row *rows;
		uint64_t counted, no_erl;
		size_t nrows = blame ? xb_profile_blame(&g->sub, blame, &rows, &counted, &no_erl)
				     : xb_profile_flat(&g->sub, only_erlang ? XB_FLAT_ERLANG : XB_FLAT_LEAF, &rows,
						       &counted);
		if (!rows) {
			xb_fail("out of memory writing the table");
			goto out;
		}
		fprintf(f, "== %s: %llu samples, %.2f%% of all\n",
			g->gid == NO_GROUP ? "(no group)" : xb_text_clean(p->names[g->gid].name, false, name, sizeof(name)),
			(unsigned long long)counted, all ? 100.0 * (double)counted / (double)all : 0.0);
		xb_write_wall_states(f, &g->sub, "   ");
		xb_write_rows(f, &g->sub, rows, nrows, top, counted);
		free(rows);
	}
	rc = 0;
out:
	free(keep);
	xb_by_groups_free(grp, ng);
	return rc;
}

int xb_write_grouped_table(FILE *f, const struct xb_profile *p, bool only_erlang, const char *blame,
			   size_t top, uint64_t processed, uint64_t received)
{
	size_t ng;
	struct ranked *r = rank_groups(p, only_erlang, blame, &ng);
	if (!r)
		return xb_fail("out of memory writing the table");
	uint64_t all = 0;
	for (size_t i = 0; i < ng; i++)
		all += r[i].counted;
	xb_write_processed(f, processed, received);
	if (blame)
		fprintf(f, "blame %s: %llu samples have it on their stack\n", blame, (unsigned long long)all);
	size_t shown = ng < top ? ng : top;
	int rc = 0;
	for (size_t from = 0; from < shown && rc == 0; from += BATCH)
		rc = write_batch(f, p, r, from, shown - from < BATCH ? shown : from + BATCH, only_erlang, blame,
				 top, all);
	if (rc == 0 && shown < ng) {
		uint64_t rest = 0;
		for (size_t j = shown; j < ng; j++)
			rest += r[j].counted;
		fprintf(f, "(%zu more groups: %llu samples, %.2f%% of all)\n", ng - shown, (unsigned long long)rest,
			all ? 100.0 * (double)rest / (double)all : 0.0);
	}
	free(r);
	return rc;
}

/* grouped_table.c - the table under --by: one block per group (the
 * profile split by src/profile/by.c), each with the plain table's rows. */
#define _GNU_SOURCE
#include "xb/by.h"
#include "xb/common.h"
#include "xb/writers.h"

#include <stdlib.h>
#include <string.h>

#define NO_GROUP XB_NO_GROUP

/* One group's block: its profile (the split's) and rows. */
struct block {
	uint32_t gid; /* group frame id, or NO_GROUP */
	struct xb_profile *sub;
	struct xb_row *rows;
	size_t nrows;
	uint64_t counted; /* samples the rows add up to (blame: the matching ones) */
};

static const struct xb_profile *order_p;
static int cmp_blocks(const void *a, const void *b)
{
	const struct block *x = a, *y = b;
	if (x->counted != y->counted)
		return x->counted > y->counted ? -1 : 1;
	if (x->gid == NO_GROUP || y->gid == NO_GROUP)
		return x->gid == NO_GROUP ? 1 : y->gid == NO_GROUP ? -1 : 0;
	return strcmp(order_p->names[x->gid].name, order_p->names[y->gid].name);
}

int xb_write_grouped_table(FILE *f, const struct xb_profile *p, bool only_erlang, const char *blame,
			   size_t top, uint64_t processed, uint64_t received)
{
	struct xb_group *grp;
	size_t ng;
	if (xb_by_split(p, &grp, &ng) < 0)
		return -1;
	struct block *g = calloc(ng ? ng : 1, sizeof(*g));
	int rc = -1;
	if (!g) {
		xb_fail("out of memory writing the table");
		goto out;
	}
	for (size_t i = 0; i < ng; i++) {
		g[i].gid = grp[i].gid;
		g[i].sub = &grp[i].sub;
	}
	uint64_t all = 0;
	for (size_t i = 0; i < ng; i++) {
		uint64_t no_erl;
		if (blame)
			g[i].nrows = xb_profile_blame(g[i].sub, blame, &g[i].rows, &g[i].counted, &no_erl);
		else
			g[i].nrows = xb_profile_flat(g[i].sub, only_erlang ? XB_FLAT_ERLANG : XB_FLAT_LEAF,
						     &g[i].rows, &g[i].counted);
		if (!g[i].rows) {
			xb_fail("out of memory writing the table");
			goto out;
		}
		all += g[i].counted;
	}
	order_p = p;
	qsort(g, ng, sizeof(*g), cmp_blocks);
	xb_write_processed(f, processed, received);
	if (blame)
		fprintf(f, "blame %s: %llu samples have it on their stack\n", blame,
			(unsigned long long)all);
	size_t shown = 0;
	char name[1024];
	for (size_t i = 0; i < ng; i++) {
		if (!g[i].counted)
			continue;
		if (shown == top) {
			uint64_t rest = 0;
			size_t nrest = 0;
			for (size_t j = i; j < ng; j++)
				if (g[j].counted) {
					rest += g[j].counted;
					nrest++;
				}
			fprintf(f, "(%zu more groups: %llu samples, %.2f%% of all)\n", nrest,
				(unsigned long long)rest, all ? 100.0 * (double)rest / (double)all : 0.0);
			break;
		}
		shown++;
		fprintf(f, "== %s: %llu samples, %.2f%% of all\n",
			g[i].gid == NO_GROUP ? "(no group)" : xb_text_clean(p->names[g[i].gid].name, false, name, sizeof(name)),
			(unsigned long long)g[i].counted, all ? 100.0 * (double)g[i].counted / (double)all : 0.0);
		xb_write_rows(f, g[i].sub, g[i].rows, g[i].nrows, top, g[i].counted);
	}
	rc = 0;
out:
	for (size_t i = 0; g && i < ng; i++)
		free(g[i].rows);
	free(g);
	xb_by_groups_free(grp, ng);
	return rc;
}

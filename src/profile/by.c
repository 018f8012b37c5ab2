/* by.c - --by: the group of a sample, and the table with one block per
 * group. */
#define _GNU_SOURCE
#include "xb/by.h"
#include "xb/common.h"
#include "xb/writers.h"

#include <stdlib.h>
#include <string.h>

const char *const xb_by_names[] = { "process", "scheduler", "cpu", "thread", NULL };

enum xb_by xb_by_parse(const char *name)
{
	for (int i = 0; name && xb_by_names[i]; i++)
		if (strcmp(name, xb_by_names[i]) == 0)
			return (enum xb_by)(i + 1);
	return XB_BY_NONE;
}

const char *xb_process_name(struct xb_vm *vm, const struct xb_estack *es, char *buf, size_t len)
{
	buf[0] = 0;
	if (es->regname[0]) {
		snprintf(buf, len, "%s", es->regname);
		return buf;
	}
	/* u.initial: ErtsCodeMFA (code_ix.h) - module and function atoms,
	 * arity a raw integer (not a term) */
	const uint64_t *mfa = es->initial;
	if (!xb_is_atom(mfa[0]) || !xb_is_atom(mfa[1]) || mfa[2] > 255)
		return buf;
	const char *m = xb_vm_atom(vm, mfa[0]);
	char mod[256];
	if (!m)
		return buf;
	snprintf(mod, sizeof(mod), "%s", m); /* xb_vm_atom's buffer may be reused */
	const char *f = xb_vm_atom(vm, mfa[1]);
	if (f)
		snprintf(buf, len, "%s:%s/%u", mod, f, (unsigned)mfa[2]);
	return buf;
}

const char *xb_thread_group_name(const struct xb_thread *t, char *buf, size_t len)
{
	switch (t->kind) {
	case 's':
		snprintf(buf, len, "scheduler %d", t->sched_no);
		break;
	case 'c':
		snprintf(buf, len, "dirty CPU scheduler %d", t->sched_no);
		break;
	case 'i':
		snprintf(buf, len, "dirty I/O scheduler %d", t->sched_no);
		break;
	default:
		snprintf(buf, len, "thread %s", t->comm);
	}
	return buf;
}

uint32_t xb_by_group(enum xb_by by, struct xb_profile *p, struct xb_vm *vm, const struct xb_sample *s,
		     const struct xb_thread *t, const struct xb_estack *es)
{
	char name[600], pname[300];
	switch (by) {
	case XB_BY_PROCESS:
		if (es->status != XB_ES_OK)
			snprintf(name, sizeof(name), "%s", XB_NO_PROCESS);
		else if (!es->pid[0])
			snprintf(name, sizeof(name), "%s", es->c_p ? XB_PROCESS_UNKNOWN : XB_NO_PROCESS);
		else if (xb_process_name(vm, es, pname, sizeof(pname))[0])
			snprintf(name, sizeof(name), "%s %s", es->pid, pname);
		else
			snprintf(name, sizeof(name), "%s", es->pid);
		break;
	case XB_BY_SCHEDULER:
		xb_thread_group_name(t, name, sizeof(name));
		break;
	case XB_BY_CPU:
		if (s->cpu >= 0)
			snprintf(name, sizeof(name), "cpu %d", s->cpu);
		else
			snprintf(name, sizeof(name), "cpu unknown");
		break;
	default:
		snprintf(name, sizeof(name), "thread %d (%s)", (int)t->tid, t->comm);
	}
	return xb_profile_intern(p, name, XB_GROUP_TAG, XB_FK_GROUP);
}

/* ---- the grouped table ---- */

#define NO_GROUP UINT32_MAX

/* One group: its stacks without the group frame, as a profile of their
 * own, so that the table's row rules (xb_profile_flat, xb_profile_blame)
 * apply to it unchanged. */
struct group {
	uint32_t gid;     /* group frame id, or NO_GROUP */
	struct xb_profile sub;
	struct xb_row *rows;
	size_t nrows;
	uint64_t counted; /* samples the rows add up to (blame: the matching ones) */
};

static const struct xb_profile *order_p;
static int cmp_groups(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	if (x->counted != y->counted)
		return x->counted > y->counted ? -1 : 1;
	if (x->gid == NO_GROUP || y->gid == NO_GROUP)
		return x->gid == NO_GROUP ? 1 : y->gid == NO_GROUP ? -1 : 0;
	return strcmp(order_p->names[x->gid].name, order_p->names[y->gid].name);
}

static uint32_t group_of(const struct xb_profile *p, const struct xb_stack *s)
{
	if (s->n && p->names[s->ids[s->n - 1]].kind == XB_FK_GROUP)
		return s->ids[s->n - 1];
	return NO_GROUP;
}

/* Add stack S (count and all) to G's profile, without its group frame;
 * REMAP/OWNER translate frame ids of P into G's (OWNER: the group that
 * set REMAP's entry). */
static int add_to_group(const struct xb_profile *p, const struct xb_stack *s, struct group *g, uint32_t gi,
			uint32_t *remap, uint32_t *owner, uint32_t *ids)
{
	uint32_t n = s->n - (g->gid != NO_GROUP);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t id = s->ids[k];
		if (owner[id] != gi) {
			const struct xb_fname *f = &p->names[id];
			/* (file and line too: part of a frame's identity, --lines) */
			remap[id] = xb_profile_intern_at(&g->sub, f->name, f->tag, f->kind, f->file, f->line);
			owner[id] = gi;
		}
		ids[k] = remap[id];
	}
	size_t before = g->sub.nstacks;
	if (xb_profile_add(&g->sub, ids, n, s->nnative < n ? s->nnative : n) < 0)
		return -1;
	/* A new stack (distinct stacks of one group stay distinct without
	 * the group frame): give it the original count. */
	if (g->sub.nstacks == before + 1) {
		g->sub.stacks[before].count = s->count;
		g->sub.total += s->count - 1;
	} else {
		for (uint64_t c = 1; c < s->count; c++)
			if (xb_profile_add(&g->sub, ids, n, s->nnative < n ? s->nnative : n) < 0)
				return -1;
	}
	return 0;
}

int xb_write_grouped_table(FILE *f, const struct xb_profile *p, bool only_erlang, const char *blame,
			   size_t top, uint64_t processed, uint64_t received)
{
	size_t nn = p->nnames ? p->nnames : 1;
	uint32_t *gindex = malloc(nn * sizeof(*gindex)); /* group frame id -> group */
	uint32_t *remap = malloc(nn * sizeof(*remap)), *owner = malloc(nn * sizeof(*owner));
	uint32_t *ids = malloc((XB_MAX_ERLANG * 2 + 512) * sizeof(*ids));
	uint32_t maxn = XB_MAX_ERLANG * 2 + 512;
	struct group *g = NULL;
	size_t ng = 0, gcap = 0;
	uint32_t nogroup = NO_GROUP;
	int rc = -1;
	if (!gindex || !remap || !owner || !ids) {
		xb_fail("out of memory writing the table");
		goto out;
	}
	for (size_t i = 0; i < nn; i++)
		gindex[i] = owner[i] = NO_GROUP;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		uint32_t gid = group_of(p, s);
		/* stacks without a group: none when the session groups */
		uint32_t gi = gid == NO_GROUP ? nogroup : gindex[gid];
		if (gi == NO_GROUP) {
			if (xb_grow((void **)&g, &gcap, ng + 1, sizeof(*g)) < 0) {
				xb_fail("out of memory writing the table");
				goto out;
			}
			memset(&g[ng], 0, sizeof(g[ng]));
			g[ng].gid = gid;
			xb_profile_init(&g[ng].sub);
			gi = (uint32_t)ng++;
			if (gid != NO_GROUP)
				gindex[gid] = gi;
			else
				nogroup = gi;
		}
		if (s->n > maxn) {
			uint32_t *bigger = realloc(ids, s->n * sizeof(*ids));
			if (!bigger) {
				xb_fail("out of memory writing the table");
				goto out;
			}
			ids = bigger;
			maxn = s->n;
		}
		if (add_to_group(p, s, &g[gi], gi, remap, owner, ids) < 0) {
			xb_fail("out of memory writing the table");
			goto out;
		}
	}
	uint64_t all = 0;
	for (size_t i = 0; i < ng; i++) {
		uint64_t no_erl;
		if (blame)
			g[i].nrows = xb_profile_blame(&g[i].sub, blame, &g[i].rows, &g[i].counted, &no_erl);
		else
			g[i].nrows = xb_profile_flat(&g[i].sub, only_erlang ? XB_FLAT_ERLANG : XB_FLAT_LEAF,
						     &g[i].rows, &g[i].counted);
		if (!g[i].rows) {
			xb_fail("out of memory writing the table");
			goto out;
		}
		all += g[i].counted;
	}
	order_p = p;
	qsort(g, ng, sizeof(*g), cmp_groups);
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
		xb_write_rows(f, &g[i].sub, g[i].rows, g[i].nrows, top, g[i].counted);
	}
	rc = 0;
out:
	for (size_t i = 0; i < ng; i++) {
		free(g[i].rows);
		xb_profile_free(&g[i].sub);
	}
	free(g);
	free(gindex);
	free(remap);
	free(owner);
	free(ids);
	return rc;
}

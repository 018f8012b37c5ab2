/* by.c - --by: the group of a sample, and a profile split by group (the
 * grouped table is written by src/output/grouped_table.c). */
#define _GNU_SOURCE
#include "xb/by.h"
#include "xb/common.h"

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

/* ---- splitting a profile by group ---- */

#define NO_GROUP XB_NO_GROUP

uint32_t xb_by_group_of(const struct xb_profile *p, const struct xb_stack *s)
{
	if (s->n && p->names[s->ids[s->n - 1]].kind == XB_FK_GROUP)
		return s->ids[s->n - 1];
	return NO_GROUP;
}

/* Add stack S (count and all) to G's profile, without its group frame;
 * REMAP/OWNER translate frame ids of P into G's (OWNER: the group that
 * set REMAP's entry). */
static int add_to_group(const struct xb_profile *p, const struct xb_stack *s, struct xb_group *g, uint32_t gi,
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

int xb_by_split(const struct xb_profile *p, struct xb_group **out, size_t *nout)
{
	return xb_by_split_some(p, NULL, false, out, nout);
}

int xb_by_split_some(const struct xb_profile *p, const bool *keep, bool keep_nogroup, struct xb_group **out,
		     size_t *nout)
{
	size_t nn = p->nnames ? p->nnames : 1;
	uint32_t *gindex = malloc(nn * sizeof(*gindex)); /* group frame id -> group */
	uint32_t *remap = malloc(nn * sizeof(*remap)), *owner = malloc(nn * sizeof(*owner));
	uint32_t maxn = XB_MAX_ERLANG * 2 + 512;
	uint32_t *ids = malloc(maxn * sizeof(*ids));
	struct xb_group *g = NULL;
	size_t ng = 0, gcap = 0;
	uint32_t nogroup = NO_GROUP;
	int rc = -1;
	if (!gindex || !remap || !owner || !ids) {
		xb_fail("out of memory splitting the profile by group");
		goto out;
	}
	for (size_t i = 0; i < nn; i++)
		gindex[i] = owner[i] = NO_GROUP;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		uint32_t gid = xb_by_group_of(p, s);
		if (keep && (gid == NO_GROUP ? !keep_nogroup : !keep[gid]))
			continue;
		/* stacks without a group: none when the session groups */
		uint32_t gi = gid == NO_GROUP ? nogroup : gindex[gid];
		if (gi == NO_GROUP) {
			if (xb_grow((void **)&g, &gcap, ng + 1, sizeof(*g)) < 0) {
				xb_fail("out of memory splitting the profile by group");
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
				xb_fail("out of memory splitting the profile by group");
				goto out;
			}
			ids = bigger;
			maxn = s->n;
		}
		if (add_to_group(p, s, &g[gi], gi, remap, owner, ids) < 0) {
			xb_fail("out of memory splitting the profile by group");
			goto out;
		}
	}
	rc = 0;
out:
	if (rc < 0) {
		xb_by_groups_free(g, ng);
		g = NULL;
		ng = 0;
	}
	*out = g;
	*nout = ng;
	free(gindex);
	free(remap);
	free(owner);
	free(ids);
	return rc;
}

void xb_by_groups_free(struct xb_group *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		xb_profile_free(&g[i].sub);
	free(g);
}

/* speedscope.c - a profile in speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json; the copy the tests
 * validate against is tests/data/speedscope-schema.json).
 *
 * One "sampled" profile per group frame (--by), named by it, in name
 * order (stacks without a group frame, if any, last, as "(no group)");
 * without groups, one profile named by the title.  Samples are the
 * distinct stacks, root to leaf, in flamegraph.pl's order (so speedscope's
 * time-order view reads like a flame graph), weights their counts, unit
 * "none".  shared.frames: every frame used except group frames, in id
 * order, with "file" and "line" when the frame has them.  Strings are
 * the names' bytes, JSON-escaped (invalid UTF-8 as U+FFFD). */
#define _GNU_SOURCE
#include "xb/by.h"
#include "xb/output.h"
#include "xb/output_util.h"
#include "xb/common.h"
#include "xb/version.h"

#include <stdlib.h>
#include <string.h>

#define NO_GROUP XB_NO_GROUP

static void put_profile_head(FILE *f, const char *name, uint64_t end, bool first)
{
	fputs(first ? "\n" : ",\n", f);
	fputs("{\"type\":\"sampled\",\"name\":", f);
	xb_put_json_string(f, name);
	fputs(",\"unit\":\"none\",\"startValue\":0,\"endValue\":", f);
	xb_put_u64(f, end);
	fputs(",\n\"samples\":[", f);
}

/* One profile: the stacks ORDER[from, to), all of the same group. */
static void put_profile(FILE *f, const struct xb_profile *p, const uint32_t *order, size_t from,
			size_t to, const char *name, const int64_t *index, bool first)
{
	uint64_t end = 0;
	for (size_t i = from; i < to; i++)
		end += p->stacks[order[i]].count;
	put_profile_head(f, name, end, first);
	for (size_t i = from; i < to; i++) {
		const struct xb_stack *s = &p->stacks[order[i]];
		uint32_t n = s->n - (xb_by_group_of(p, s) != NO_GROUP);
		fputs(i > from ? ",\n[" : "\n[", f);
		for (uint32_t k = n; k-- > 0;) {
			xb_put_u64(f, (uint64_t)index[s->ids[k]]);
			if (k)
				fputc(',', f);
		}
		fputc(']', f);
	}
	fputs("],\n\"weights\":[", f);
	for (size_t i = from; i < to; i++) {
		if (i > from)
			fputc(',', f);
		xb_put_u64(f, p->stacks[order[i]].count);
	}
	fputs("]}", f);
}

int xb_write_speedscope(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m)
{
	uint32_t *rank, *order;
	if (xb_out_order(p, &rank, &order) < 0)
		return -1;
	int64_t *index = malloc((p->nnames ? p->nnames : 1) * sizeof(*index));
	uint32_t *grouped = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*grouped));
	char *name = NULL;
	int rc = -1;
	if (!index || !grouped) {
		xb_fail("out of memory writing the speedscope profile");
		goto out;
	}
	/* Frame indices: frames used, group frames aside, in id order. */
	for (size_t i = 0; i < p->nnames; i++)
		index[i] = -1;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		uint32_t n = s->n - (xb_by_group_of(p, s) != NO_GROUP);
		for (uint32_t k = 0; k < n; k++)
			index[s->ids[k]] = -2; /* used */
	}
	int64_t nframes = 0;
	for (size_t i = 0; i < p->nnames; i++)
		if (index[i] == -2)
			index[i] = nframes++;
	/* Stacks with a group first (each group's together: the order is
	 * root first), then those without. */
	size_t ng = 0, nplain = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		ng += xb_by_group_of(p, &p->stacks[order[i]]) != NO_GROUP;
	for (size_t i = 0, a = 0; i < p->nstacks; i++) {
		if (xb_by_group_of(p, &p->stacks[order[i]]) != NO_GROUP)
			grouped[a++] = order[i];
		else
			grouped[ng + nplain++] = order[i];
	}

	const char *title = m->title ? m->title : "erlang-sample";
	if (m->blame) {
		size_t len = strlen(title) + strlen(m->blame) + 16;
		if (!(name = malloc(len))) {
			xb_fail("out of memory writing the speedscope profile");
			goto out;
		}
		snprintf(name, len, "%s --blame %s", title, m->blame);
	}
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n\"name\":", f);
	xb_put_json_string(f, name ? name : title);
	fputs(",\n\"exporter\":\"extrospect-beam@" XB_VERSION "\",\n\"activeProfileIndex\":0,\n"
	      "\"shared\":{\"frames\":[",
	      f);
	bool first = true;
	for (size_t i = 0; i < p->nnames; i++) {
		if (index[i] < 0)
			continue;
		const struct xb_fname *fn = &p->names[i];
		fputs(first ? "\n{\"name\":" : ",\n{\"name\":", f);
		first = false;
		xb_put_json_string(f, fn->name);
		if (fn->file) {
			fputs(",\"file\":", f);
			xb_put_json_string(f, fn->file);
		}
		if (fn->line) {
			fputs(",\"line\":", f);
			xb_put_u64(f, fn->line);
		}
		fputc('}', f);
	}
	fputs("]},\n\"profiles\":[", f);
	first = true;
	for (size_t i = 0; i < ng;) {
		uint32_t g = xb_by_group_of(p, &p->stacks[grouped[i]]);
		size_t j = i + 1;
		while (j < ng && xb_by_group_of(p, &p->stacks[grouped[j]]) == g)
			j++;
		put_profile(f, p, grouped, i, j, p->names[g].name, index, first);
		first = false;
		i = j;
	}
	if (nplain || first) /* no stacks at all: one empty profile */
		put_profile(f, p, grouped, ng, ng + nplain, ng ? "(no group)" : (name ? name : title),
			    index, first);
	fputs("]}\n", f);
	rc = xb_out_finish(f, "speedscope profile");
out:
	free(rank);
	free(order);
	free(index);
	free(grouped);
	free(name);
	return rc;
}

/* profile_sink.c - a session's profile in one of the profile formats; for
 * --blame, only the samples whose native stack has the function. */
#define _GNU_SOURCE
#include "xb/outputs.h"
#include "xb/common.h"
#include "xb/session.h"
#include "xb/writers.h"

#include <stdlib.h>

struct profile_sink {
	struct xb_sink k;
	struct xb_profile_sink_opts o;
};

static int write_table(struct profile_sink *ps, struct xb_session *s, FILE *out)
{
	struct xb_row *rows;
	if (ps->o.blame) {
		uint64_t matched, no_erl;
		size_t n = xb_profile_blame(&s->prof, ps->o.blame, &rows, &matched, &no_erl);
		xb_write_processed(out, s->st.processed, s->st.received);
		fprintf(out, "blame %s: %llu samples have it on their stack (%llu with no Erlang code above it)\n",
			ps->o.blame, (unsigned long long)matched, (unsigned long long)no_erl);
		xb_write_rows(out, &s->prof, rows, n, ps->o.top, matched);
		free(rows);
		return 0;
	}
	uint64_t counted;
	size_t n = xb_profile_flat(&s->prof, ps->o.only_erlang ? XB_FLAT_ERLANG : XB_FLAT_LEAF, &rows, &counted);
	xb_write_processed(out, s->st.processed, s->st.received);
	xb_write_rows(out, &s->prof, rows, n, ps->o.top, s->st.processed);
	free(rows);
	return 0;
}

static int write_profile(struct xb_sink *k, struct xb_session *s, FILE *out)
{
	struct profile_sink *ps = (struct profile_sink *)k;
	if (ps->o.format == XB_FMT_TABLE)
		return write_table(ps, s, out);
	const struct xb_profile *p = &s->prof;
	struct xb_profile filtered;
	if (ps->o.blame) {
		if (xb_profile_filter_blame(&s->prof, ps->o.blame, &filtered) < 0)
			return -1;
		p = &filtered;
	}
	int rc = xb_write_folded(out, p);
	if (ps->o.blame)
		xb_profile_free(&filtered);
	return rc;
}

static void free_sink(struct xb_sink *k)
{
	free(k);
}

static const struct xb_sink_ops profile_ops = {
	.name = "profile",
	.write = write_profile,
	.free = free_sink,
};

struct xb_sink *xb_profile_sink_new(const struct xb_profile_sink_opts *o)
{
	struct profile_sink *ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	ps->k.ops = &profile_ops;
	ps->o = *o;
	return &ps->k;
}

/* profile_sink.c - a session's profile in one of the profile formats; for
 * --blame, only the samples whose native stack has the function. */
#define _GNU_SOURCE
#include "xb/outputs.h"
#include "xb/common.h"
#include "xb/session.h"
#include "xb/writers.h"
#include "xb/output.h"

#include <string.h>

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
	/* --blame in a stack format: the whole stacks of the matching samples. */
	const struct xb_profile *p = &s->prof;
	struct xb_profile filtered;
	if (ps->o.blame) {
		if (xb_profile_filter_blame(&s->prof, ps->o.blame, &filtered) < 0)
			return -1;
		p = &filtered;
	}
	uint64_t per_thread_hz = s->o.period ? 0 : s->o.freq;
	struct xb_out_meta m = {
		.title = ps->o.title,
		.start_unix_ns = s->start_unix_ns,
		.duration_ns = (uint64_t)(s->elapsed_s * 1e9),
		.period_ns = per_thread_hz ? 1000000000ull / per_thread_hz : 0,
		.processed = s->st.processed,
		.received = s->st.received,
		.blame = ps->o.blame,
		.max_depth = s->o.max_depth,
	};
	int rc;
	switch (ps->o.format) {
	case XB_FMT_FLAMEGRAPH:
		rc = xb_write_flamegraph(out, p, &m);
		break;
	case XB_FMT_SPEEDSCOPE:
		rc = xb_write_speedscope(out, p, &m);
		break;
	case XB_FMT_PPROF:
		rc = xb_write_pprof(out, p, &m);
		break;
	default:
		rc = xb_write_folded(out, p);
	}
	if (ps->o.blame)
		xb_profile_free(&filtered);
	return rc;
}

const char *const xb_format_names[] = { "table", "folded", "flamegraph", "speedscope", "pprof", "json", NULL };

int xb_format_by_name(const char *name)
{
	for (int i = 0; xb_format_names[i]; i++)
		if (strcmp(xb_format_names[i], name) == 0)
			return i;
	return -1;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcmp(s + n - m, suffix) == 0;
}

int xb_format_by_extension(const char *path)
{
	static const struct {
		const char *ext;
		enum xb_format fmt;
	} exts[] = {
		{ ".svg", XB_FMT_FLAMEGRAPH }, { ".speedscope.json", XB_FMT_SPEEDSCOPE },
		{ ".json", XB_FMT_SPEEDSCOPE }, { ".pb.gz", XB_FMT_PPROF },
		{ ".pprof", XB_FMT_PPROF },     { ".folded", XB_FMT_FOLDED },
		{ ".txt", XB_FMT_FOLDED },
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(exts); i++)
		if (ends_with(path, exts[i].ext))
			return (int)exts[i].fmt;
	return -1;
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

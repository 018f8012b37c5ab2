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
	/* --wall: the samples are the profile's, each process once per tick */
	uint64_t processed = ps->o.wall_hz ? s->prof.total : s->st.processed;
	uint64_t received = ps->o.wall_hz ? s->prof.total : s->st.received;
	char note[400];
	if (ps->o.wall_hz)
		fprintf(out, "wall-clock samples: every process once per tick, %g ticks a second; the root is its "
			     "state\n", ps->o.wall_hz);
	if (ps->o.wall && xb_wall_note(ps->o.wall, note, sizeof(note)))
		fprintf(out, "note: %s\n", note);
	if (ps->o.grouped) /* --by */
		return xb_write_grouped_table(out, &s->prof, ps->o.only_erlang, ps->o.blame, ps->o.top, processed,
					      received);
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
	xb_write_processed(out, processed, received);
	xb_write_wall_states(out, &s->prof, "");
	xb_write_rows(out, &s->prof, rows, n, ps->o.top, processed);
	free(rows);
	return 0;
}

static int write_profile(struct xb_sink *k, struct xb_session *s, FILE *out)
{
	struct profile_sink *ps = (struct profile_sink *)k;
	if (ps->o.format == XB_FMT_TABLE)
		return write_table(ps, s, out);
	if (!xb_formats[ps->o.format].write) /* the tool refuses it first */
		return xb_fail("a profile cannot be written as %s", xb_formats[ps->o.format].name);
	/* --blame in a stack format: the whole stacks of the matching samples. */
	const struct xb_profile *p = &s->prof;
	struct xb_profile filtered;
	if (ps->o.blame) {
		if (xb_profile_filter_blame(&s->prof, ps->o.blame, &filtered) < 0)
			return -1;
		p = &filtered;
	}
	double per_thread_hz = ps->o.wall_hz ? ps->o.wall_hz : s->o.period ? 0 : s->o.freq;
	struct xb_out_meta m = {
		.title = ps->o.title,
		.start_unix_ns = s->start_unix_ns,
		.duration_ns = (uint64_t)(s->elapsed_s * 1e9),
		.period_ns = per_thread_hz > 0 ? (uint64_t)(1e9 / per_thread_hz) : 0,
		.processed = ps->o.wall_hz ? s->prof.total : s->st.processed,
		.received = ps->o.wall_hz ? s->prof.total : s->st.received,
		.blame = ps->o.blame,
		.max_depth = s->o.max_depth,
		.wall = ps->o.wall_hz > 0,
	};
	int rc = xb_formats[ps->o.format].write(out, p, &m);
	if (ps->o.blame)
		xb_profile_free(&filtered);
	return rc;
}

static int write_folded(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m)
{
	(void)m;
	return xb_write_folded(f, p);
}

const struct xb_format_desc xb_formats[] = {
	[XB_FMT_TABLE] = { .name = "table" },
	[XB_FMT_FOLDED] = { .name = "folded", .ext = { ".folded", ".txt" }, .write = write_folded },
	[XB_FMT_FLAMEGRAPH] = { .name = "flamegraph", .ext = { ".svg" }, .write = xb_write_flamegraph },
	[XB_FMT_SPEEDSCOPE] = { .name = "speedscope", .ext = { ".speedscope.json", ".json" },
				.write = xb_write_speedscope, .files = true },
	[XB_FMT_PPROF] = { .name = "pprof", .ext = { ".pb.gz", ".pprof" }, .write = xb_write_pprof, .files = true },
	[XB_FMT_JSON] = { .name = "json" },
};

const char *const xb_format_names[] = { "table", "folded", "flamegraph", "speedscope", "pprof", "json", NULL };
_Static_assert(XB_ARRAY_SIZE(xb_formats) == XB_ARRAY_SIZE(xb_format_names) - 1,
	       "a format in xb_formats and not in xb_format_names (the option's choices), or the reverse");

int xb_format_by_name(const char *name)
{
	for (size_t i = 0; i < XB_ARRAY_SIZE(xb_formats); i++)
		if (strcmp(xb_formats[i].name, name) == 0)
			return (int)i;
	return -1;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcmp(s + n - m, suffix) == 0;
}

int xb_format_by_extension(const char *path)
{
	int best = -1;
	size_t best_len = 0;
	for (size_t i = 0; i < XB_ARRAY_SIZE(xb_formats); i++)
		for (size_t j = 0; j < XB_ARRAY_SIZE(xb_formats[i].ext) && xb_formats[i].ext[j]; j++)
			if (ends_with(path, xb_formats[i].ext[j]) && strlen(xb_formats[i].ext[j]) > best_len) {
				best = (int)i;
				best_len = strlen(xb_formats[i].ext[j]);
			}
	return best;
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

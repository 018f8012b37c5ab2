/* xb-format-writer - write a synthetic profile in one output format, for
 * tests/acceptance/test_formats.py (which checks the files with their real
 * consumers).
 *
 *   xb-format-writer [--groups] [--blame FN] [--big NSTACKS [--samples N]
 *                    [--skew S] [--seed S]] [--wide NCHAINS] FORMAT OUT
 *
 * FORMAT: table, folded, flamegraph, speedscope or pprof; OUT a file or
 * "-" for stdout.  The profile is synth_small() (tests/tools/synth_profile.c),
 * synth_big() with --big, or synth_wide(NCHAINS, 60, 55) with --wide.  Exit 0, or 1 with one line on stderr. */
#define _GNU_SOURCE
#include "synth_profile.h"
#include "xb/common.h"
#include "xb/output.h"
#include "xb/writers.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "xb-format-writer"

static int write_table(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m)
{
	struct xb_row *rows;
	uint64_t counted;
	size_t n = xb_profile_flat(p, XB_FLAT_LEAF, &rows, &counted);
	xb_write_processed(f, m->processed, m->received);
	xb_write_rows(f, p, rows, n, 40, counted);
	free(rows);
	return fflush(f) || ferror(f) ? xb_fail("writing the table: write error") : 0;
}

static int write_folded(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m)
{
	(void)m;
	if (xb_write_folded(f, p) < 0 || fflush(f))
		return xb_fail("writing the folded stacks: write error");
	return 0;
}

static const struct {
	const char *name;
	int (*write)(FILE *, const struct xb_profile *, const struct xb_out_meta *);
} formats[] = {
	{ "table", write_table },
	{ "folded", write_folded },
	{ "flamegraph", xb_write_flamegraph },
	{ "speedscope", xb_write_speedscope },
	{ "pprof", xb_write_pprof },
};

int main(int argc, char **argv)
{
	bool groups = false;
	const char *blame = NULL;
	size_t big = 0, wide = 0;
	uint64_t samples = 960000, seed = 1;
	double skew = 1.0;
	static const struct option longopts[] = {
		{ "groups", 0, 0, 'g' }, { "blame", 1, 0, 'b' }, { "big", 1, 0, 'B' },
		{ "samples", 1, 0, 'n' }, { "skew", 1, 0, 'z' },  { "seed", 1, 0, 's' },
		{ "wide", 1, 0, 'w' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'g': groups = true; break;
		case 'b': blame = optarg; break;
		case 'B': big = strtoul(optarg, NULL, 10); break;
		case 'n': samples = strtoull(optarg, NULL, 10); break;
		case 'z': skew = strtod(optarg, NULL); break;
		case 's': seed = strtoull(optarg, NULL, 10); break;
		case 'w': wide = strtoul(optarg, NULL, 10); break;
		default:
			fprintf(stderr, PROG ": usage: " PROG " [--groups] [--blame FN] [--big N "
					"[--samples N] [--skew S] [--seed S]] [--wide N] FORMAT OUT\n");
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, PROG ": expected FORMAT and OUT\n");
		return 2;
	}
	const char *format = argv[optind], *out = argv[optind + 1];
	int (*write)(FILE *, const struct xb_profile *, const struct xb_out_meta *) = NULL;
	for (size_t i = 0; i < XB_ARRAY_SIZE(formats); i++)
		if (strcmp(format, formats[i].name) == 0)
			write = formats[i].write;
	if (!write) {
		fprintf(stderr, PROG ": unknown format '%s'\n", format);
		return 2;
	}

	struct xb_profile prof, filtered, *p = &prof;
	int built = wide  ? synth_wide(&prof, (unsigned)wide, 60, 55)
		    : big ? synth_big(&prof, big, samples, skew, seed)
			  : synth_small(&prof, groups);
	if (built < 0) {
		fprintf(stderr, PROG ": out of memory building the profile\n");
		return 1;
	}
	if (blame) {
		if (xb_profile_filter_blame(&prof, blame, &filtered) < 0) {
			fprintf(stderr, PROG ": %s\n", xb_err());
			return 1;
		}
		p = &filtered;
	}
	struct xb_out_meta meta = {
		.title = big || wide ? "xb-format-writer big synthetic profile"
				     : "xb-format-writer synthetic profile",
		.start_unix_ns = 1700000000ull * 1000000000ull,
		.duration_ns = 10ull * 1000000000ull,
		.period_ns = 1000000000ull / 997,
		.processed = prof.total,
		.received = prof.total + 5,
		.blame = blame,
		.max_depth = 128,
	};
	FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
	if (!f) {
		fprintf(stderr, PROG ": cannot open %s: %m\n", out);
		return 1;
	}
	int rc = write(f, p, &meta);
	if (f != stdout && fclose(f) != 0 && rc == 0)
		rc = xb_fail("closing %s: %m", out);
	if (rc < 0)
		fprintf(stderr, PROG ": %s\n", xb_err());
	if (blame)
		xb_profile_free(&filtered);
	xb_profile_free(&prof);
	return rc < 0 ? 1 : 0;
}

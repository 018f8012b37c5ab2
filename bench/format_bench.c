/* format_bench.c - what writing each output format costs, for a profile
 * the size of a 60 s run of a 16-scheduler VM sampled at 997 Hz.
 *
 *   build/format_bench [--rounds N] [--stacks N] [--samples N] [--skew S]
 *                      [--seed S] [--dir DIR]
 *
 * Builds the profile with synth_big() (tests/tools/synth_profile.c; by
 * default 957,120 samples = 60 x 16 x 997 over 40,000 distinct stacks of
 * depth 20-60, weighted as sampling would weight them), then, in each of
 * 1 + N rounds (the first a warm-up), writes
 * every format once to a file in DIR (default /tmp), in an order shuffled
 * per round: the table (xb_profile_flat + the report rows), folded,
 * flame graph, speedscope, pprof; and filters the profile for --blame
 * erts_garbage_collect.  Prints per format the median and minimum wall
 * time (open to close, the file's size) and the median's ratio to the
 * folded writer's, the baseline every flame graph tool starts from.
 *
 * Then the flame graph's size bound ("the SVG of a profile with
 * 50,000 distinct stacks stays under 10 MB"): the SVG of synth_big() with
 * 50,000 distinct stacks weighted as sampling would and all alike, and of
 * the worst cases, synth_wide(N, 60, 55): 600 chains (the most frames
 * above the 0.1 % minimum: the largest SVG) and 900 (50,400 stacks whose
 * 54,000 chain frames all hold more than 0.1 %: the minimum is raised),
 * each as a share of the bound (XB_FLAME_BOUND_BYTES, 10 MB).
 *
 * Exit 1 if a writer fails, or an SVG reaches the bound. */
#define _GNU_SOURCE
#include "synth_profile.h"
#include "xb/common.h"
#include "xb/output.h"
#include "xb/writers.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	return xb_write_folded(f, p) < 0 || fflush(f) ? xb_fail("writing folded: write error") : 0;
}

static const struct {
	const char *name, *ext;
	int (*write)(FILE *, const struct xb_profile *, const struct xb_out_meta *);
} formats[] = {
	{ "table", "txt", write_table },
	{ "folded", "folded", write_folded },
	{ "flamegraph", "svg", xb_write_flamegraph },
	{ "speedscope", "speedscope.json", xb_write_speedscope },
	{ "pprof", "pb.gz", xb_write_pprof },
};
#define NFMT (sizeof(formats) / sizeof(formats[0]))
#define BLAME NFMT /* the --blame filter's slot */

/* the SVG of any profile stays under 10 MB */
#define XB_FLAME_BOUND_BYTES 10000000.0

/* Write P's flame graph to a file in DIR: its size, or -1 (a message on
 * stderr) when the writer fails. */
static long long svg_size(const struct xb_profile *p, const struct xb_out_meta *m, const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/format_bench.%d.bound.svg", dir, (int)getpid());
	FILE *f = fopen(path, "w");
	int rc = f ? xb_write_flamegraph(f, p, m) : xb_fail("cannot open %s", path);
	if (f && fclose(f) != 0 && rc == 0)
		rc = xb_fail("closing %s", path);
	struct stat st;
	long long size = rc == 0 && stat(path, &st) == 0 ? (long long)st.st_size : -1;
	unlink(path);
	if (size < 0)
		fprintf(stderr, "format_bench: flamegraph: %s\n", rc < 0 ? xb_err() : "no file written");
	return size;
}

/* The flame graph's size against the bound, for the profiles that test
 * it; 0, or 1 when a writer failed or an SVG reached the bound. */
static int size_bound(const struct xb_out_meta *meta, uint64_t nsamples, uint64_t seed, const char *dir)
{
	static const struct {
		const char *what;
		size_t stacks; /* synth_big; 0: synth_wide(chains, 60, 55) */
		double skew;
		unsigned chains;
	} cases[] = {
		{ "50,000 stacks, weighted as sampled", 50000, 1.0, 0 },
		{ "50,000 stacks, all alike", 50000, 0.0, 0 },
		{ "33,600 stacks, 600 chains > 0.1 % each", 0, 0.0, 600 },
		{ "50,400 stacks, 900 chains: minimum 0.2 %", 0, 0.0, 900 },
	};
	int failed = 0;
	printf("flame graph size bound: %.0f MB\n", XB_FLAME_BOUND_BYTES / 1e6);
	printf("%-42s %12s %10s\n", "profile", "bytes", "/ bound");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct xb_profile q;
		int built = cases[i].stacks ? synth_big(&q, cases[i].stacks, nsamples, cases[i].skew, seed)
					    : synth_wide(&q, cases[i].chains, 60, 55);
		if (built < 0) {
			fprintf(stderr, "format_bench: out of memory building the profile\n");
			return 1;
		}
		struct xb_out_meta m = *meta;
		m.processed = m.received = q.total;
		long long size = svg_size(&q, &m, dir);
		xb_profile_free(&q);
		if (size < 0) {
			failed = 1;
			continue;
		}
		printf("%-42s %12lld %10.2f\n", cases[i].what, size, (double)size / XB_FLAME_BOUND_BYTES);
		if ((double)size >= XB_FLAME_BOUND_BYTES) {
			fprintf(stderr, "format_bench: the SVG of %s is %lld bytes, over the 10 MB bound\n",
				cases[i].what, size);
			failed = 1;
		}
	}
	return failed;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	unsigned rounds = 7;
	size_t nstacks = 40000;
	uint64_t nsamples = 60ull * 16 * 997, seed = 1;
	double skew = 1.0;
	const char *dir = "/tmp";
	int keep = 0; /* --keep: the last round's files stay in DIR (the suite reads them back) */
	static const struct option longopts[] = {
		{ "rounds", 1, 0, 'r' }, { "stacks", 1, 0, 'k' }, { "samples", 1, 0, 'n' },
		{ "skew", 1, 0, 'z' },   { "seed", 1, 0, 's' },   { "dir", 1, 0, 'd' },
		{ "keep", 0, 0, 'K' },   { 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': rounds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'k': nstacks = strtoul(optarg, NULL, 10); break;
		case 'n': nsamples = strtoull(optarg, NULL, 10); break;
		case 'z': skew = strtod(optarg, NULL); break;
		case 's': seed = strtoull(optarg, NULL, 10); break;
		case 'd': dir = optarg; break;
		case 'K': keep = 1; break;
		default:
			fprintf(stderr, "usage: format_bench [--rounds N] [--stacks N] [--samples N] "
					"[--skew S] [--seed S] [--dir DIR] [--keep]\n");
			return 2;
		}
	}
	if (rounds < 1)
		rounds = 1;

	struct xb_profile p;
	double t0 = now_ms();
	if (synth_big(&p, nstacks, nsamples, skew, seed) < 0) {
		fprintf(stderr, "format_bench: out of memory building the profile\n");
		return 1;
	}
	uint64_t frames = 0;
	for (size_t i = 0; i < p.nstacks; i++)
		frames += p.stacks[i].n;
	printf("profile: %zu distinct stacks, %llu samples, %zu frame names, mean depth %.1f "
	       "(built in %.0f ms)\n",
	       p.nstacks, (unsigned long long)p.total, p.nnames,
	       p.nstacks ? (double)frames / (double)p.nstacks : 0.0, now_ms() - t0);
	struct xb_out_meta meta = {
		.title = "format_bench: 60 s, 16 schedulers, 997 Hz",
		.start_unix_ns = 1700000000ull * 1000000000ull,
		.duration_ns = 60ull * 1000000000ull,
		.period_ns = 1000000000ull / 997,
		.processed = p.total,
		.received = p.total,
		.max_depth = 128,
	};

	double *ms[NFMT + 1];
	off_t size[NFMT] = { 0 };
	for (size_t k = 0; k <= NFMT; k++)
		if (!(ms[k] = calloc(rounds, sizeof(double))))
			return 1;
	char path[4096];
	unsigned order[NFMT + 1];
	uint64_t rs = seed * 0x9e3779b97f4a7c15ull + 1;
	int failed = 0;
	for (unsigned r = 0; r <= rounds; r++) { /* round 0: warm-up */
		for (unsigned k = 0; k <= NFMT; k++)
			order[k] = k;
		for (unsigned k = NFMT; k > 0; k--) { /* Fisher-Yates, xorshift */
			rs ^= rs << 13;
			rs ^= rs >> 7;
			rs ^= rs << 17;
			unsigned j = (unsigned)(rs % (k + 1)), t = order[k];
			order[k] = order[j];
			order[j] = t;
		}
		for (unsigned i = 0; i <= NFMT; i++) {
			unsigned k = order[i];
			double a = now_ms();
			if (k == BLAME) {
				struct xb_profile b;
				if (xb_profile_filter_blame(&p, "erts_garbage_collect", &b) < 0) {
					fprintf(stderr, "format_bench: blame filter: %s\n", xb_err());
					failed = 1;
				} else {
					xb_profile_free(&b);
				}
			} else {
				snprintf(path, sizeof(path), "%s/format_bench.%d.%s", dir, (int)getpid(),
					 formats[k].ext);
				FILE *f = fopen(path, "w");
				int rc = f ? formats[k].write(f, &p, &meta) : xb_fail("cannot open %s", path);
				if (f && fclose(f) != 0 && rc == 0)
					rc = xb_fail("closing %s", path);
				if (rc < 0) {
					fprintf(stderr, "format_bench: %s: %s\n", formats[k].name, xb_err());
					failed = 1;
				}
				struct stat st;
				if (r == rounds && stat(path, &st) == 0)
					size[k] = st.st_size;
				if (!keep || r != rounds)
					unlink(path);
			}
			if (r)
				ms[k][r - 1] = now_ms() - a;
		}
	}

	double folded = 0, med[NFMT + 1], min[NFMT + 1];
	for (unsigned k = 0; k <= NFMT; k++) {
		med[k] = median(ms[k], rounds);
		min[k] = ms[k][0];
	}
	folded = med[1];
	printf("%u rounds, interleaved (shuffled each round), after a warm-up round\n", rounds);
	printf("%-22s %10s %10s %12s %10s\n", "writer", "median ms", "min ms", "bytes", "/ folded");
	for (unsigned k = 0; k <= NFMT; k++)
		printf("%-22s %10.1f %10.1f %12lld %10.2f\n",
		       k == BLAME ? "blame filter (memory)" : formats[k].name, med[k], min[k],
		       k == BLAME ? 0LL : (long long)size[k], folded > 0 ? med[k] / folded : 0.0);
	for (unsigned k = 0; k <= NFMT; k++)
		free(ms[k]);
	xb_profile_free(&p);
	printf("\n");
	failed |= size_bound(&meta, nsamples, seed, dir);
	if (failed)
		fprintf(stderr, "format_bench: a writer failed, or an SVG reached the bound\n");
	return failed;
}

/* maps_bench.c - what parsing /proc/PID/maps costs, by its size.
 *
 *   build/maps_bench [--rounds N] [--target-ms MS]
 *
 * Builds maps texts of 1k, 4k, 16k, 64k and 256k (XB_MAPS_MAX_LINES)
 * mappings in the kernel's format (nine anonymous mappings of alternating
 * protections to one file-backed line padded to column 73, as a VM with
 * many threads and a few libraries has), then in each of 1 + N rounds
 * (default 10; the first a warm-up) parses each once with xb_maps_parse_n,
 * in an order shuffled per round.  Prints per size the median and minimum
 * time in ms, the median per line in ns, and the median per line as a
 * ratio to 1k's (all measured in this one run): a linear parser stays
 * near 1, a quadratic one grows with the size (the sscanf parser it
 * replaced: 64k lines 3.2 s, 250 times 1k's per line).  PASS when 64k
 * lines take less than the target (50 ms).
 *
 * Exit 1 if a parse fails or returns the wrong number of mappings. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/procmaps.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t SIZES[] = { 1u << 10, 1u << 12, 1u << 14, 1u << 16, XB_MAPS_MAX_LINES };
#define NSIZES (sizeof(SIZES) / sizeof(SIZES[0]))

static char *make_text(size_t lines, size_t *lenp)
{
	size_t cap = lines * 128, len = 0;
	char *t = malloc(cap);
	if (!t)
		return NULL;
	unsigned long long a = 0x7f0000000000ull;
	for (size_t i = 0; i < lines; i++, a += 0x2000) {
		int n;
		if (i % 10 == 9)
			n = snprintf(t + len, cap - len, "%llx-%llx r-xp %08llx fd:01 %zu%*s/usr/lib/x86_64-linux-gnu/lib%zu.so\n",
				     a, a + 0x1000, 0x1000ull * (i % 7), 100000 + i, (int)(26 - (i % 5)), "", i);
		else
			n = snprintf(t + len, cap - len, "%llx-%llx %s 00000000 00:00 0 \n", a, a + 0x1000,
				     i % 2 ? "---p" : "rw-p");
		len += (size_t)n;
	}
	*lenp = len;
	return t;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = 10;
	double target_ms = 50;
	static const struct option opts[] = { { "rounds", required_argument, NULL, 'r' },
					       { "target-ms", required_argument, NULL, 't' },
					       { NULL, 0, NULL, 0 } };
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (c == 'r' && atoi(optarg) > 0)
			rounds = atoi(optarg);
		else if (c == 't' && atof(optarg) > 0)
			target_ms = atof(optarg);
		else {
			fprintf(stderr, "usage: maps_bench [--rounds N (>0)] [--target-ms MS (>0)]\n");
			return 2;
		}
	}
	char *text[NSIZES];
	size_t len[NSIZES];
	for (size_t s = 0; s < NSIZES; s++)
		if (!(text[s] = make_text(SIZES[s], &len[s]))) {
			fprintf(stderr, "maps_bench: out of memory\n");
			return 1;
		}
	uint64_t *ns = calloc(NSIZES * (size_t)rounds, sizeof(*ns));
	if (!ns)
		return 1;
	srand(1);
	for (int r = 0; r <= rounds; r++) {
		size_t order[NSIZES];
		for (size_t s = 0; s < NSIZES; s++)
			order[s] = s;
		for (size_t s = NSIZES - 1; s > 0; s--) {
			size_t k = (size_t)rand() % (s + 1), x = order[s];
			order[s] = order[k];
			order[k] = x;
		}
		for (size_t j = 0; j < NSIZES; j++) {
			size_t s = order[j];
			struct xb_maps m;
			uint64_t t0 = xb_now_ns();
			int rc = xb_maps_parse_n(text[s], len[s], &m);
			uint64_t t = xb_now_ns() - t0;
			if (rc < 0 || m.n != SIZES[s]) {
				fprintf(stderr, "maps_bench: %zu lines: %s\n", SIZES[s],
					rc < 0 ? xb_err() : "wrong number of mappings");
				return 1;
			}
			xb_maps_free(&m);
			if (r > 0)
				ns[s * (size_t)rounds + (size_t)(r - 1)] = t;
		}
	}
	printf("%-8s %10s %10s %12s %14s\n", "lines", "median ms", "min ms", "ns/line", "per line / 1k");
	double base = 0, at64k = 0;
	for (size_t s = 0; s < NSIZES; s++) {
		uint64_t *v = ns + s * (size_t)rounds;
		qsort(v, (size_t)rounds, sizeof(*v), cmp_u64);
		double med = (double)v[rounds / 2], per = med / (double)SIZES[s];
		if (s == 0)
			base = per;
		if (SIZES[s] == 1u << 16)
			at64k = med / 1e6;
		printf("%-8zu %10.3f %10.3f %12.1f %14.2f\n", SIZES[s], med / 1e6, (double)v[0] / 1e6, per,
		       per / base);
	}
	printf("64k lines: %.2f ms median, target %.0f ms: %s\n", at64k, target_ms,
	       at64k < target_ms ? "PASS" : "FAIL");
	for (size_t s = 0; s < NSIZES; s++)
		free(text[s]);
	free(ns);
	return 0;
}

/* test_sched.c - unit tests of the scheduler views: the long-call tracker
 * (src/output/longcalls.c) on simulated VMs, the grouped table (--by) and
 * the states of samples (src/profile/states.c). */
#define _GNU_SOURCE
#include "unit.h"

#include "xb/by.h"
#include "xb/writers.h"
#include "xb/longcalls.h"
#include "xb/states.h"
#include "xb/threadcpu.h"
#include "xb/common.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

/* ---- long calls: a simulated scheduler ----
 *
 * One process calls a NIF over and over.  Call k runs [start[k], end[k]);
 * FCALLS at its entry and REDS (schedule-outs so far) are what the VM
 * would hold.  A sample at time t is in the call running then, or not in
 * a call (the Erlang code between calls).  Live reads return what the
 * process struct holds at the read time: the last call entered by then. */

struct sim {
	size_t n;
	uint64_t start[4096], end[4096];
	uint32_t fcalls[4096];
	uint64_t reds[4096];
};

/* Calls of LEN ns with GAP ns between them; a new time slice every SLICE
 * calls (SLICE 1: every call in a slice of its own, the same FCALLS). */
static void sim_build(struct sim *s, uint64_t t0, uint64_t len, uint64_t gap, size_t n, size_t slice)
{
	s->n = n;
	uint32_t fc = 4000;
	uint64_t reds = 100, t = t0;
	for (size_t k = 0; k < n; k++) {
		if (k && k % slice == 0) {
			fc = 4000;
			reds += 10;
		}
		fc -= 2; /* the loop's call, and the NIF's */
		s->start[k] = t;
		s->end[k] = t + len;
		s->fcalls[k] = fc;
		s->reds[k] = reds;
		t += len + gap;
	}
}

/* The call running at T, or -1. */
static long sim_at(const struct sim *s, uint64_t t)
{
	for (size_t k = 0; k < s->n; k++)
		if (t >= s->start[k] && t < s->end[k])
			return (long)k;
	return -1;
}

/* The last call entered by T, or -1. */
static long sim_last(const struct sim *s, uint64_t t)
{
	long last = -1;
	for (size_t k = 0; k < s->n && s->start[k] <= t; k++)
		last = (long)k;
	return last;
}

/* Feed samples every PERIOD ns from FROM to TO.  EXACT: identities from
 * the sample itself; else read at the next multiple of DRAIN ns (as the
 * drain loop does), plus DELAY. */
static void sim_sample(const struct sim *s, struct xb_longcalls *lc, uint64_t from, uint64_t to, uint64_t period,
		       bool exact, uint64_t drain, uint64_t delay)
{
	for (uint64_t t = from; t < to; t += period) {
		long k = sim_at(s, t);
		struct xb_lc_sample ls = { .t = t, .in_call = k >= 0, .c_p = 0x1000, .fn = 7, .caller = 3,
					   .pid = "<0.90.0>", .name = "caller" };
		if (k >= 0) {
			long at = k;
			ls.read_ns = t;
			if (!exact) {
				ls.read_ns = (t / drain + 1) * drain + delay;
				at = sim_last(s, ls.read_ns);
			}
			ls.id = (struct xb_call_id){ .fcalls = s->fcalls[at], .reds = s->reds[at], .have = true,
						     .fcalls_exact = exact, .reds_exact = exact };
		}
		xb_lc_add(lc, 0, &ls);
	}
}

/* Every reported call lies within one simulated call, whose length its
 * bounds hold; returns how many were reported. */
static size_t check_calls(const struct sim *s, const struct xb_longcalls *lc)
{
	for (size_t i = 0; i < lc->ncalls; i++) {
		const struct xb_long_call *c = &lc->calls[i];
		long k = sim_at(s, c->first_ns);
		CHECK(k >= 0 && c->last_ns < s->end[k], "call %zu [%llu, %llu] is not within one call", i,
		      (unsigned long long)c->first_ns, (unsigned long long)c->last_ns);
		if (k < 0)
			break;
		uint64_t real = s->end[k] - s->start[k];
		CHECK(c->min_ns <= real && (c->max_ns == UINT64_MAX || real <= c->max_ns),
		      "bounds [%llu, %llu] miss the real %llu", (unsigned long long)c->min_ns,
		      (unsigned long long)c->max_ns, (unsigned long long)real);
		CHECK(c->fn == 7 && c->caller == 3 && strcmp(c->pid, "<0.90.0>") == 0 && c->thread == 0,
		      "call %zu: wrong function, caller or process", i);
	}
	return lc->ncalls;
}

/* A thread's samples delivered out of time order (two CPUs' queues read
 * one after the other, the thread having moved between them): 0.8 ms
 * calls sampled every 0.5 ms, exact identities, each call's two samples
 * swapped (where it has two).  The late ones are counted and left out: no call is
 * reported long (a run taken from its later sample to its earlier one
 * had a lower bound below zero, wrapped to 2^64 ns, and was reported as
 * the longest call; the perf path's readers did that on OTP 29). */
static void t_lc_out_of_order(void)
{
	static struct sim s;
	sim_build(&s, 10 * MS, 8 * MS / 10, MS / 2, 300, 1);
	static struct xb_lc_sample v[1000];
	size_t n = 0;
	for (uint64_t t = 10 * MS + 100000; t < s.end[s.n - 1] && n < 1000; t += MS / 2) {
		long k = sim_at(&s, t);
		struct xb_lc_sample ls = { .t = t, .in_call = k >= 0, .c_p = 0x1000, .fn = 7, .caller = 3,
					   .pid = "<0.90.0>", .name = "caller", .read_ns = t };
		if (k >= 0)
			ls.id = (struct xb_call_id){ .fcalls = s.fcalls[k], .reds = s.reds[k], .have = true,
						     .fcalls_exact = true, .reds_exact = true };
		v[n++] = ls;
	}
	size_t swapped = 0;
	for (size_t i = 1; i + 1 < n; i++) {
		bool pair = v[i].in_call && v[i + 1].in_call && v[i].id.reds == v[i + 1].id.reds;
		if (!pair)
			continue;
		struct xb_lc_sample x = v[i];
		v[i] = v[i + 1];
		v[i + 1] = x;
		swapped++;
		i++;
	}
	struct xb_longcalls lc;
	xb_lc_init(&lc, 2 * MS);
	for (size_t i = 0; i < n; i++)
		xb_lc_add(&lc, 0, &v[i]);
	xb_lc_finish(&lc);
	CHECK(swapped >= 100 && lc.out_of_order == swapped, "%llu of the %zu swapped samples counted out of order",
	      (unsigned long long)lc.out_of_order, swapped);
	CHECK(lc.ncalls == 0, "%zu calls of 0.8 ms reported long, the first [%llu, %llu] ns", lc.ncalls,
	      (unsigned long long)(lc.ncalls ? lc.calls[0].min_ns : 0),
	      (unsigned long long)(lc.ncalls ? lc.calls[0].max_ns : 0));
	const struct xb_lc_stats *st = xb_lc_stats_of(&lc, 0);
	CHECK(st->longest_min_ns < 2 * MS, "the longest lower bound %llu ns", (unsigned long long)st->longest_min_ns);
	xb_lc_free(&lc);
}

/* 0.5 ms calls back to back (one slice), sampled every ms: never long. */
static void t_lc_back_to_back_exact(void)
{
	static struct sim s;
	sim_build(&s, 10 * MS, MS / 2, 0, 2000, 4000);
	struct xb_longcalls lc;
	xb_lc_init(&lc, 2 * MS);
	sim_sample(&s, &lc, 10 * MS, 10 * MS + 999 * MS, MS, true, 0, 0);
	xb_lc_finish(&lc);
	CHECK(check_calls(&s, &lc) == 0, "%zu back-to-back 0.5 ms calls reported long", lc.ncalls);
	const struct xb_lc_stats *st = xb_lc_stats_of(&lc, 0);
	CHECK(st->calls == st->samples && st->samples >= 990, "%llu calls in %llu samples",
	      (unsigned long long)st->calls, (unsigned long long)st->samples);
	xb_lc_free(&lc);
}

/* 50 ms calls, each in a slice of its own (the same FCALLS every time):
 * REDS tells them apart; bounds within a sample period of the truth. */
static void t_lc_new_slice_same_fcalls(void)
{
	static struct sim s;
	sim_build(&s, 10 * MS, 50 * MS, MS / 10, 20, 1);
	struct xb_longcalls lc;
	xb_lc_init(&lc, 2 * MS);
	sim_sample(&s, &lc, 10 * MS + 300000, 10 * MS + 20 * 50 * MS, MS, true, 0, 0);
	xb_lc_finish(&lc);
	CHECK(check_calls(&s, &lc) >= 18, "%zu of 20 calls of 50 ms reported", lc.ncalls);
	for (size_t i = 0; i < lc.ncalls; i++) {
		const struct xb_long_call *c = &lc.calls[i];
		if (c->max_ns == UINT64_MAX)
			continue;
		CHECK(c->min_ns >= 48 * MS && c->max_ns <= 52 * MS, "bounds [%llu, %llu] ns of a 50 ms call",
		      (unsigned long long)c->min_ns, (unsigned long long)c->max_ns);
		/* identities from the samples themselves: both edges proven
		 * at their own time */
		CHECK(c->start_exact && c->end_exact, "call %zu: start_exact %d end_exact %d with exact identities", i,
		      c->start_exact, c->end_exact);
	}
	xb_lc_free(&lc);
}

/* Identities read live, every 2 ms (the drain), for back-to-back 0.5 ms
 * calls: the reads see later calls than the samples were in; no call is
 * reported long, and none of the 50 ms ones is merged with the next. */
static void t_lc_live_reads_never_merge(void)
{
	static struct sim s;
	struct xb_longcalls lc;
	sim_build(&s, 10 * MS, MS / 2, 0, 2000, 4000);
	xb_lc_init(&lc, 2 * MS);
	sim_sample(&s, &lc, 10 * MS, 10 * MS + 999 * MS, MS, false, 2 * MS, 200000);
	xb_lc_finish(&lc);
	CHECK(check_calls(&s, &lc) == 0, "%zu back-to-back 0.5 ms calls reported long (live reads)", lc.ncalls);
	xb_lc_free(&lc);

	/* 50 ms calls, a slice each, read live 0..2 ms late: each reported
	 * within its own call, the lower bound short by the read delay. */
	sim_build(&s, 10 * MS, 50 * MS, MS / 10, 20, 1);
	xb_lc_init(&lc, 2 * MS);
	sim_sample(&s, &lc, 10 * MS + 300000, 10 * MS + 20 * 50 * MS, MS, false, 2 * MS, 200000);
	xb_lc_finish(&lc);
	CHECK(check_calls(&s, &lc) >= 18, "%zu of 20 calls of 50 ms reported (live reads)", lc.ncalls);
	size_t inexact = 0;
	for (size_t i = 0; i < lc.ncalls && !case_failed; i++) {
		CHECK(lc.calls[i].min_ns >= 45 * MS, "lower bound %llu ns of a 50 ms call read live",
		      (unsigned long long)lc.calls[i].min_ns);
		inexact += !lc.calls[i].start_exact || !lc.calls[i].end_exact;
	}
	/* identities read live: edges proven only by a later read */
	CHECK(inexact == lc.ncalls, "%zu of %zu calls read live claim both edges exact", lc.ncalls - inexact,
	      lc.ncalls);
	xb_lc_free(&lc);
}

/* A call running when sampling starts or stops has no upper bound; a
 * sample whose identity is unknown neither ends nor extends a call. */
static void t_lc_open_ends(void)
{
	struct xb_longcalls lc;
	xb_lc_init(&lc, 2 * MS);
	struct xb_call_id id = { 10, 20, true, true, true };
	for (int i = 0; i < 10; i++) {
		struct xb_lc_sample ls = { .t = (uint64_t)i * MS, .in_call = true, .c_p = 1, .fn = 2, .id = id,
					   .caller = XB_LC_NONE, .pid = "", .name = "" };
		if (i == 5)
			ls.id.have = false;
		xb_lc_add(&lc, 3, &ls);
	}
	xb_lc_finish(&lc);
	CHECK(lc.ncalls == 1 && lc.calls[0].min_ns == 9 * MS && lc.calls[0].max_ns == UINT64_MAX &&
		      lc.calls[0].thread == 3 && lc.calls[0].samples == 9,
	      "open call: %zu calls, min %llu max %llu samples %u", lc.ncalls,
	      lc.ncalls ? (unsigned long long)lc.calls[0].min_ns : 0ull,
	      lc.ncalls ? (unsigned long long)lc.calls[0].max_ns : 0ull, lc.ncalls ? lc.calls[0].samples : 0);
	xb_lc_free(&lc);
}

/* A call seen computing (samples, 0..10 ms) and then blocked off the CPU
 * (looks, 12..40 ms) with the same identity is one call: merged, lower
 * bound over both, the tighter upper bound; another identity is not. */
static void t_lc_off_cpu_merge(void)
{
	struct xb_longcalls lc;
	xb_lc_init(&lc, 2 * MS);
	struct xb_call_id id = { 10, 20, true, true, true };
	for (int i = 0; i <= 10; i++) {
		struct xb_lc_sample ls = { .t = (uint64_t)(i + 1) * MS, .in_call = true, .c_p = 1, .fn = 2, .id = id,
					   .caller = XB_LC_NONE, .pid = "", .name = "" };
		xb_lc_add(&lc, 3, &ls);
	}
	struct xb_long_call off = { .fn = 2, .caller = XB_LC_NONE, .thread = 3, .first_ns = 12 * MS, .last_ns = 40 * MS,
				    .min_ns = 28 * MS, .max_ns = 45 * MS, .samples = 15, .off_cpu = true, .c_p = 1,
				    .id = id };
	CHECK(xb_lc_add_call(&lc, &off) == 0, "add_call");
	struct xb_long_call other = off;
	other.id.fcalls = 9; /* the next call */
	other.first_ns = 50 * MS;
	other.last_ns = 60 * MS;
	other.min_ns = 10 * MS;
	other.max_ns = 14 * MS;
	CHECK(xb_lc_add_call(&lc, &other) == 0, "add_call");
	xb_lc_finish(&lc);
	CHECK(lc.ncalls == 2, "%zu calls (expected the merged one and the other)", lc.ncalls);
	const struct xb_long_call *m = lc.ncalls ? &lc.calls[0] : NULL;
	CHECK(m && !m->off_cpu && m->first_ns == 1 * MS && m->last_ns == 40 * MS && m->min_ns == 39 * MS &&
		      m->max_ns == 45 * MS,
	      "merged: first %llu last %llu min %llu max %llu", m ? (unsigned long long)m->first_ns : 0ull,
	      m ? (unsigned long long)m->last_ns : 0ull, m ? (unsigned long long)m->min_ns : 0ull,
	      m ? (unsigned long long)m->max_ns : 0ull);
	CHECK(lc.ncalls == 2 && lc.calls[1].off_cpu && lc.calls[1].id.fcalls == 9, "the other call kept as it was");
	CHECK(xb_lc_stats_of(&lc, 3)->calls == 2, "thread stats count %llu calls, not 2",
	      (unsigned long long)xb_lc_stats_of(&lc, 3)->calls);
	xb_lc_free(&lc);
}

/* ---- --by: the grouped table ---- */

static void t_grouped_table(void)
{
	struct xb_profile p;
	xb_profile_init(&p);
	uint32_t a = xb_profile_intern(&p, "m:a/0", "[Erlang]", XB_FK_ERLANG);
	uint32_t b = xb_profile_intern(&p, "m:b/0", "[Erlang]", XB_FK_ERLANG);
	uint32_t c = xb_profile_intern(&p, "memcpy", "[libc.so.6]", XB_FK_NATIVE);
	uint32_t g1 = xb_profile_intern(&p, "<0.80.0> w2", XB_GROUP_TAG, XB_FK_GROUP);
	uint32_t g2 = xb_profile_intern(&p, "<0.81.0> w\n1", XB_GROUP_TAG, XB_FK_GROUP);
	uint32_t s1[] = { a, g1 }, s2[] = { c, a, g1 }, s3[] = { b, g2 }, s4[] = { c, g2 };
	for (int i = 0; i < 60; i++)
		xb_profile_add(&p, s1, 2, 0);
	for (int i = 0; i < 20; i++)
		xb_profile_add(&p, s2, 3, 1);
	for (int i = 0; i < 30; i++)
		xb_profile_add(&p, s3, 2, 0);
	for (int i = 0; i < 10; i++)
		xb_profile_add(&p, s4, 2, 1);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(xb_write_grouped_table(f, &p, false, NULL, 40, 120, 120) == 0, "grouped table failed");
	fclose(f);
	CHECK(strstr(buf, "== <0.80.0> w2: 80 samples, 66.67% of all\n") != NULL, "first block: %s", buf);
	CHECK(strstr(buf, "== <0.81.0> w\\n1: 40 samples, 33.33% of all\n") != NULL, "second block (escaped): %s", buf);
	CHECK(strstr(buf, "75.00%") && strstr(buf, "25.00%"), "rows as shares of their group: %s", buf);
	CHECK(strstr(buf, "<0.80.0> w2") < strstr(buf, "<0.81.0>"), "groups not by samples: %s", buf);
	free(buf);
	/* --only-erlang: the group frame is never an Erlang frame */
	buf = NULL;
	f = open_memstream(&buf, &len);
	CHECK(xb_write_grouped_table(f, &p, true, NULL, 1, 120, 120) == 0, "grouped table failed");
	fclose(f);
	CHECK(strstr(buf, "== <0.81.0> w\\n1: 30 samples") == NULL && strstr(buf, "1 more groups: 30 samples"),
	      "--only-erlang, one group shown: %s", buf);
	free(buf);
	xb_profile_free(&p);
}

/* A run --by process on a VM that spawns a process per request: 200,000
 * groups.  The table shows -t of them; only those are split (it split
 * every group: a profile each, ~2 GB here), and what it writes is the
 * blocks in rank order, then the rest counted.  With -t past BATCH
 * (1024) the blocks come a batch at a time, in order. */
static long maxrss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void t_grouped_table_many_groups(void)
{
	enum { NG = 200000 };
	struct xb_profile p;
	xb_profile_init(&p);
	uint32_t a = xb_profile_intern(&p, "m:a/0", "[Erlang]", XB_FK_ERLANG);
	uint32_t c = xb_profile_intern(&p, "memcpy", "[libc.so.6]", XB_FK_NATIVE);
	uint64_t all = 0;
	for (int i = 0; i < NG; i++) {
		char name[64];
		snprintf(name, sizeof(name), "<0.%d.0> worker", 100 + i);
		uint32_t ids[] = { c, a, xb_profile_intern(&p, name, XB_GROUP_TAG, XB_FK_GROUP) };
		/* group i: 1 + i % 100 samples; the top ones (100): i = 99, 199, ... */
		for (int k = 0; k <= i % 100; k++)
			xb_profile_add(&p, ids, 3, 1);
		all += 1 + (uint64_t)(i % 100);
	}
	long before = maxrss_kb();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(xb_write_grouped_table(f, &p, false, NULL, 5, all, all) == 0, "grouped table failed");
	fclose(f);
	long grew = maxrss_kb() - before;
	CHECK(grew < 64 * 1024, "writing 5 of 200,000 groups grew the peak RSS by %ld KB", grew);
	const char *first = strstr(buf, "\n== <0.");
	unsigned long top_n = 0;
	CHECK(first && sscanf(first, "\n== <0.%*u.0> worker: %lu samples", &top_n) == 1 && top_n == 100 &&
	      strstr(buf, "(199995 more groups: 10099500 samples, "),
	      "the top group, the rest counted: %.400s", buf);
	free(buf);
	/* -t 2500: three batches, still in rank order (100 samples each for
	 * the first 2000, then 99) */
	buf = NULL;
	f = open_memstream(&buf, &len);
	CHECK(xb_write_grouped_table(f, &p, false, NULL, 2500, all, all) == 0, "grouped table failed");
	fclose(f);
	size_t blocks = 0;
	unsigned long last = ~0ul;
	bool ordered = true;
	for (const char *q = buf; (q = strstr(q, "== ")); q++) {
		const char *colon = strstr(q, ": ");
		unsigned long n = colon ? strtoul(colon + 2, NULL, 10) : 0;
		ordered = ordered && n <= last;
		last = n;
		blocks++;
	}
	CHECK(blocks == 2500 && ordered && last == 99, "-t 2500: %zu blocks, ordered %d, last %lu", blocks, ordered,
	      last);
	free(buf);
	xb_profile_free(&p);
}

/* ---- states of samples ---- */

struct fake {
	struct xb_profile p;
	struct xb_sample s;
	struct xb_thread t;
	struct xb_unwind uw;
	struct xb_estack es;
	uint32_t ids[16];
	struct xb_rsample rs;
};

/* A sample of a thread of KIND whose native frames are NATIVE (innermost
 * first, "name|tag"), then JIT glue FRAG (or NULL), then Erlang frames
 * when PROCESS. */
static void fake(struct fake *x, char kind, const char *const *native, size_t nn, const char *frag, bool process,
		 bool reached)
{
	memset(&x->s, 0, sizeof(x->s));
	memset(&x->t, 0, sizeof(x->t));
	memset(&x->uw, 0, sizeof(x->uw));
	memset(&x->es, 0, sizeof(x->es));
	x->t.kind = kind;
	x->t.sched_no = 1;
	uint32_t n = 0;
	for (size_t i = 0; i < nn; i++) {
		char name[128];
		snprintf(name, sizeof(name), "%s", native[i]);
		char *bar = strchr(name, '|');
		*bar = 0;
		x->ids[n++] = xb_profile_intern(&x->p, name, bar + 1, XB_FK_NATIVE);
	}
	x->uw.n = (unsigned)nn;
	x->uw.stop = reached ? XB_UW_REACHED_ERLANG : XB_UW_END;
	if (frag)
		x->ids[n++] = xb_profile_intern(&x->p, frag, "[JIT]", XB_FK_JIT);
	uint32_t nnative = n;
	if (process) {
		x->es.status = XB_ES_OK;
		x->es.c_p = 0x1000;
		snprintf(x->es.pid, sizeof(x->es.pid), "<0.90.0>");
		x->ids[n++] = xb_profile_intern(&x->p, "m:caller/1", "[Erlang]", XB_FK_ERLANG);
	} else {
		x->es.status = XB_ES_NO_PROCESS;
	}
	x->rs = (struct xb_rsample){ &x->s, &x->t, &x->uw, &x->es, x->ids, n, nnative };
}

static void t_states(void)
{
	static struct fake x;
	xb_profile_init(&x.p);
	struct xb_states c;
	memset(&c, 0, sizeof(c));
	xb_states_init(&c, NULL); /* beam binary: [beam.smp] */
	struct xb_sample_state st;
	/* JIT: a NIF through call_nif_shared, spinning in libc's clock */
	const char *jit_nif[] = { "clock_gettime|[libc.so.6]", "spin|[my_nif.so]", "my_nif_fn|[my_nif.so]",
				  "[unknown]|[beam.smp]" };
	fake(&x, 's', jit_nif, 4, "global::call_nif_shared", true, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_NIF && st.fn == 2 && st.process, "JIT NIF: state %d fn %d", st.state, st.fn);
	/* interpreter: process_main called the NIF directly */
	const char *emu_nif[] = { "spin|[my_nif.so]", "my_nif_fn|[my_nif.so]" };
	fake(&x, 's', emu_nif, 2, NULL, true, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_NIF && st.fn == 1, "emu NIF: state %d fn %d", st.state, st.fn);
	/* a BIF calling zlib is no NIF */
	const char *bif[] = { "crc32_z|[libz.so.1]", "crc32_1|[beam.smp]" };
	fake(&x, 's', bif, 2, "global::call_light_bif_shared", true, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_BIF && st.fn == 1, "BIF: state %d fn %d", st.state, st.fn);
	const char *gc[] = { "sweep_one_heap|[beam.smp]", "erts_garbage_collect_nobump|[beam.smp]" };
	fake(&x, 's', gc, 2, "global::garbage_collect", true, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_GC && st.fn == -1, "GC: state %d", st.state);
	const char *copy[] = { "copy_struct_x|[beam.smp]", "erts_send_message|[beam.smp]" };
	fake(&x, 's', copy, 2, NULL, true, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_COPY, "copy: state %d", st.state);
	fake(&x, 's', NULL, 0, NULL, true, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_EMULATOR, "Erlang code: state %d", st.state);
	/* no process */
	const char *port[] = { "tcp_inet_output|[beam.smp]", "erts_port_task_execute|[beam.smp]",
			       "erts_schedule|[beam.smp]" };
	fake(&x, 's', port, 3, "global::process_main", false, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_PORT && !st.process, "port task: state %d", st.state);
	const char *sched[] = { "[unknown]|[beam.smp]", "erts_schedule|[beam.smp]" };
	fake(&x, 's', sched, 2, "global::process_main", false, true);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_SCHEDULING, "scheduling: state %d", st.state);
	/* a dirty scheduler working for a process in a NIF library */
	const char *dirty[] = { "my_nif_fn|[my_nif.so]", "erts_call_dirty_nif|[beam.smp]",
				"erts_dirty_process_main|[beam.smp]", "start_thread|[libc.so.6]" };
	fake(&x, 'c', dirty, 4, NULL, true, false);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_NIF && st.fn == 0, "dirty NIF: state %d fn %d", st.state, st.fn);
	const char *poll[] = { "epoll_wait|[libc.so.6]", "erts_poll_wait|[beam.smp]" };
	fake(&x, 'o', poll, 2, NULL, false, false);
	xb_classify(&c, &x.p, &x.rs, &st);
	CHECK(st.state == XB_STATE_CHECK_IO, "poller: state %d", st.state);
	xb_states_free(&c);
	xb_profile_free(&x.p);
}

/* xb_thread_asleep on a thread that spins but gets no CPU: the spinner
 * and a SCHED_FIFO hog share CPU 0 for 250 ms, so the spinner is runnable
 * and waits (schedstat's wait time grows) without running.  It must not be
 * taken for asleep (--pstack and --dump stop waiting for a scheduler that
 * is), while a thread blocked in nanosleep is, after XB_ASLEEP_NS. */
static volatile int spin_stop, spin_tid, sleeper_tid, hog_ready;

static void pin0(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The calling thread on the last CPU (away from the hog's), SCHED_FIFO 1:
 * on a saturated machine a normal thread waking from a nap waits behind
 * the busy loops outside. */
static void last_cpu_fifo(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > 1) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((int)ncpu - 1, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	struct sched_param sp = { .sched_priority = 1 };
	pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}

static void *spinner(void *arg)
{
	(void)arg;
	pin0();
	spin_tid = (int)syscall(SYS_gettid);
	while (!spin_stop)
		;
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	/* away from the hog's CPU (waking up behind it would be waiting),
	 * and SCHED_FIFO: waking from its 20 ms naps behind busy loops, it
	 * would be runnable ('R'), and a poll that sees it so rightly
	 * restarts its quiet time */
	last_cpu_fifo();
	sleeper_tid = (int)syscall(SYS_gettid);
	while (!spin_stop) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *hog(void *arg)
{
	uint64_t ms = *(uint64_t *)arg;
	pin0();
	struct sched_param sp = { .sched_priority = 1 };
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
		hog_ready = -1;
		return NULL;
	}
	hog_ready = 1;
	uint64_t end = xb_now_ns() + ms * 1000000ull;
	while (xb_now_ns() < end)
		;
	return NULL;
}

static void t_asleep_not_starved(void)
{
	spin_stop = spin_tid = sleeper_tid = hog_ready = 0;
	pthread_t sp, sl, hg;
	pthread_create(&sp, NULL, spinner, NULL);
	pthread_create(&sl, NULL, sleeper, NULL);
	while (!spin_tid || !sleeper_tid)
		usleep(1000);
	usleep(20000); /* the spinner runs */
	struct xb_asleep a_spin = { 0 }, a_sleep = { 0 };
	uint64_t t0 = xb_now_ns();
	xb_thread_asleep(getpid(), spin_tid, &a_spin, t0);
	xb_thread_asleep(getpid(), sleeper_tid, &a_sleep, t0);
	uint64_t ms = 250;
	pthread_create(&hg, NULL, hog, &ms);
	while (!hog_ready)
		usleep(1000);
	/* The poller runs as SCHED_FIFO too, on the sleeper's CPU: on a
	 * saturated machine (busy loops outside, the soak) a normal thread
	 * waking every 5 ms got 6 polls in 250 ms; sleeping between polls,
	 * it leaves the sleeper its CPU. */
	cpu_set_t old_set;
	int old_policy;
	struct sched_param old_sp;
	pthread_getaffinity_np(pthread_self(), sizeof(old_set), &old_set);
	pthread_getschedparam(pthread_self(), &old_policy, &old_sp);
	last_cpu_fifo();
	bool spin_asleep = false, sleep_asleep = false;
	uint64_t polls = 0;
	while (hog_ready == 1 && xb_now_ns() - t0 < (ms - 20) * 1000000ull) {
		uint64_t now = xb_now_ns();
		spin_asleep |= xb_thread_asleep(getpid(), spin_tid, &a_spin, now);
		sleep_asleep |= xb_thread_asleep(getpid(), sleeper_tid, &a_sleep, now);
		polls++;
		usleep(5000);
	}
	pthread_setschedparam(pthread_self(), old_policy, &old_sp);
	pthread_setaffinity_np(pthread_self(), sizeof(old_set), &old_set);
	pthread_join(hg, NULL);
	spin_stop = 1;
	pthread_join(sp, NULL);
	pthread_join(sl, NULL);
	CHECK(hog_ready == 1, "SCHED_FIFO refused for the hog (%s): run as root", strerror(EPERM));
	CHECK(polls >= 10, "only %llu polls in the hog's %llu ms", (unsigned long long)polls,
	      (unsigned long long)ms);
	CHECK(!spin_asleep, "a spinning thread kept off its CPU was taken for asleep");
	CHECK(sleep_asleep, "a thread sleeping in nanosleep for %llu ms was not taken for asleep",
	      (unsigned long long)ms);
}

void sched_cases(void)
{
	run_case("thread_asleep_not_when_starved", t_asleep_not_starved);
	run_case("longcalls_back_to_back_exact", t_lc_back_to_back_exact);
	run_case("longcalls_new_slice_same_fcalls", t_lc_new_slice_same_fcalls);
	run_case("longcalls_live_reads_never_merge", t_lc_live_reads_never_merge);
	run_case("longcalls_open_ends", t_lc_open_ends);
	run_case("longcalls_off_cpu_merge", t_lc_off_cpu_merge);
	run_case("longcalls_out_of_order", t_lc_out_of_order);
	run_case("by_grouped_table", t_grouped_table);
	run_case("by_grouped_table_many_groups", t_grouped_table_many_groups);
	run_case("states_of_samples", t_states);
}

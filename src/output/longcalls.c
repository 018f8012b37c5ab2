/* longcalls.c - NIF and BIF calls that held a scheduler across samples
 * (see longcalls.h for what is proven and how). */
#define _GNU_SOURCE
#include "xb/longcalls.h"
#include "xb/common.h"

#include <stdlib.h>
#include <string.h>

/* The run of samples a thread is in (one call, as far as proven). */
struct xb_lc_run {
	bool have_prev;       /* the thread's last sample that bounds a run */
	uint64_t t_prev;
	bool open;
	uint64_t c_p;
	uint32_t fn, caller;
	struct xb_call_id id;
	bool have_before;     /* the sample before the run: start bound */
	uint64_t t_before;
	bool first_exact;     /* the run's first sample carried its identity */
	bool unread;          /* a sample whose identity could not be read came
			       * since the last one that bounds (t_prev), or
			       * during the run: it bounds nothing, so that edge
			       * is not the samples' own */
	bool unread_in_run;
	uint64_t min_read;    /* earliest read of the identity in the run */
	bool any_proven;
	uint64_t t_first_proven, t_last_proven;
	uint64_t t_first, t_last;
	unsigned samples;
	char pid[32], name[256];
};

void xb_lc_init(struct xb_longcalls *lc, uint64_t threshold_ns)
{
	memset(lc, 0, sizeof(*lc));
	lc->threshold_ns = threshold_ns;
}

void xb_lc_free(struct xb_longcalls *lc)
{
	free(lc->runs);
	free(lc->stats);
	free(lc->calls);
	memset(lc, 0, sizeof(*lc));
}

static bool exact(const struct xb_lc_sample *s)
{
	return s->id.fcalls_exact && s->id.reds_exact;
}

/* When the identity of S was known: the sample itself, or its live read. */
static uint64_t read_time(const struct xb_lc_sample *s)
{
	return exact(s) || s->read_ns < s->t ? s->t : s->read_ns;
}

static bool same_call(const struct xb_lc_run *r, const struct xb_lc_sample *s)
{
	return r->c_p == s->c_p && r->fn == s->fn && xb_call_id_same(&r->id, &s->id);
}

/* S proves at its own time that it is not in R's call: not in a call, in
 * another process or function, or an exact identity that differs.  (An
 * identity read live that differs proves only that R's call ended before
 * that read.) */
static bool outside_at_t(const struct xb_lc_run *r, const struct xb_lc_sample *s)
{
	return !s->in_call || r->c_p != s->c_p || r->fn != s->fn ||
	       (r->id.fcalls != s->id.fcalls && s->id.fcalls_exact) || (r->id.reds != s->id.reds && s->id.reds_exact);
}

static void copy_text(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* Close R; END is where the call is proven over (END_KNOWN false: not
 * known, sampling stopped; END_EXACT: by a sample at its own time, not a
 * later live read). */
static int close_run(struct xb_longcalls *lc, int thread, struct xb_lc_run *r, uint64_t end, bool end_known,
		     bool end_exact)
{
	r->open = false;
	uint64_t lo = r->any_proven ? r->t_last_proven - r->t_first_proven : 0;
	uint64_t hi = r->have_before && end_known && end >= r->t_before ? end - r->t_before : UINT64_MAX;
	struct xb_lc_stats *st = &lc->stats[thread];
	st->calls++;
	st->samples += r->samples;
	if (!st->have_longest || lo > st->longest_min_ns) {
		st->have_longest = true;
		st->longest_min_ns = lo;
		st->longest_max_ns = hi;
	}
	if (!r->any_proven || lo < lc->threshold_ns)
		return 0;
	if (xb_grow((void **)&lc->calls, &lc->callcap, lc->ncalls + 1, sizeof(*lc->calls)) < 0)
		return -1;
	struct xb_long_call *c = &lc->calls[lc->ncalls++];
	c->fn = r->fn;
	c->caller = r->caller;
	copy_text(c->pid, sizeof(c->pid), r->pid);
	copy_text(c->name, sizeof(c->name), r->name);
	c->thread = thread;
	c->first_ns = r->t_first_proven;
	c->last_ns = r->t_last_proven;
	c->min_ns = lo;
	c->max_ns = hi;
	c->samples = r->samples;
	c->off_cpu = false;
	c->start_exact = r->first_exact;
	c->end_exact = end_known && end_exact && !r->unread_in_run;
	c->c_p = r->c_p;
	c->id = r->id;
	return 0;
}

static int ensure_thread(struct xb_longcalls *lc, int thread)
{
	size_t need = (size_t)thread + 1;
	if (need <= lc->nthreads)
		return 0;
	size_t n = need < 64 ? 64 : need * 2;
	struct xb_lc_run *runs = realloc(lc->runs, n * sizeof(*runs));
	if (!runs)
		return -1;
	lc->runs = runs;
	struct xb_lc_stats *stats = realloc(lc->stats, n * sizeof(*stats));
	if (!stats)
		return -1;
	lc->stats = stats;
	memset(lc->runs + lc->nthreads, 0, (n - lc->nthreads) * sizeof(*lc->runs));
	memset(lc->stats + lc->nthreads, 0, (n - lc->nthreads) * sizeof(*lc->stats));
	lc->nthreads = lc->cap = n;
	return 0;
}

int xb_lc_add(struct xb_longcalls *lc, int thread, const struct xb_lc_sample *s)
{
	if (thread < 0 || ensure_thread(lc, thread) < 0)
		return thread < 0 ? 0 : -1;
	struct xb_lc_run *r = &lc->runs[thread];
	if (r->have_prev && s->t < r->t_prev) {
		lc->out_of_order++;
		return 0;
	}
	if (s->in_call && !s->id.have) {
		/* In a call whose identity could not be read: it may or may
		 * not be R's.  It ends R only if it is in another function or
		 * process; it bounds nothing else. */
		if (r->open && (r->c_p != s->c_p || r->fn != s->fn))
			return close_run(lc, thread, r, s->t, true, true);
		r->unread = true;
		if (r->open)
			r->unread_in_run = true;
		return 0;
	}
	if (s->in_call && r->open && same_call(r, s)) {
		bool proven = exact(s) || r->min_read < s->t;
		if (proven) {
			if (!r->any_proven)
				r->t_first_proven = s->t;
			r->any_proven = true;
			r->t_last_proven = s->t;
		}
		uint64_t rt = read_time(s);
		if (rt < r->min_read)
			r->min_read = rt;
		r->t_last = s->t;
		r->samples++;
		if (r->caller == XB_LC_NONE)
			r->caller = s->caller;
		/* a sample whose identity was read too late has none */
		if (!r->pid[0])
			copy_text(r->pid, sizeof(r->pid), s->pid);
		if (!r->name[0])
			copy_text(r->name, sizeof(r->name), s->name);
	} else {
		bool at_t = r->open && outside_at_t(r, s);
		if (r->open && close_run(lc, thread, r, at_t ? s->t : read_time(s), true, at_t) < 0)
			return -1;
		if (s->in_call) {
			r->open = true;
			r->c_p = s->c_p;
			r->fn = s->fn;
			r->caller = s->caller;
			r->id = s->id;
			r->have_before = r->have_prev;
			r->t_before = r->t_prev;
			r->min_read = read_time(s);
			r->any_proven = exact(s);
			r->first_exact = exact(s) && !r->unread;
			r->unread_in_run = false;
			r->t_first_proven = r->t_last_proven = s->t;
			r->t_first = r->t_last = s->t;
			r->samples = 1;
			copy_text(r->pid, sizeof(r->pid), s->pid);
			copy_text(r->name, sizeof(r->name), s->name);
		}
	}
	r->have_prev = true;
	r->t_prev = s->t;
	r->unread = false;
	return 0;
}

int xb_lc_add_call(struct xb_longcalls *lc, const struct xb_long_call *c)
{
	if (c->thread < 0 || ensure_thread(lc, c->thread) < 0)
		return c->thread < 0 ? 0 : -1;
	struct xb_lc_stats *st = &lc->stats[c->thread];
	st->calls++;
	st->samples += c->samples;
	if (c->off_cpu) {
		st->off_cpu_calls++;
		st->off_cpu_ns += c->blocked_ns;
	}
	if (!st->have_longest || c->min_ns > st->longest_min_ns) {
		st->have_longest = true;
		st->longest_min_ns = c->min_ns;
		st->longest_max_ns = c->max_ns;
	}
	if (c->min_ns < lc->threshold_ns)
		return 0;
	if (xb_grow((void **)&lc->calls, &lc->callcap, lc->ncalls + 1, sizeof(*lc->calls)) < 0)
		return -1;
	lc->calls[lc->ncalls++] = *c;
	return 0;
}

static int cmp_calls(const void *a, const void *b)
{
	const struct xb_long_call *x = a, *y = b;
	if (x->min_ns != y->min_ns)
		return x->min_ns > y->min_ns ? -1 : 1;
	if (x->max_ns != y->max_ns)
		return x->max_ns > y->max_ns ? -1 : 1;
	return x->first_ns < y->first_ns ? -1 : x->first_ns > y->first_ns;
}

/* Off-CPU call C is on-CPU call D (the same call: both identities
 * known and equal)? */
static bool same_long_call(const struct xb_long_call *c, const struct xb_long_call *d)
{
	return c->thread == d->thread && c->c_p == d->c_p && c->fn == d->fn && c->id.have && d->id.have &&
	       xb_call_id_same(&c->id, &d->id);
}

static void merge_off_cpu(struct xb_longcalls *lc)
{
	bool any = false;
	for (size_t i = 0; i < lc->ncalls; i++) {
		struct xb_long_call *c = &lc->calls[i];
		if (!c->off_cpu)
			continue;
		for (size_t j = 0; j < lc->ncalls; j++) {
			struct xb_long_call *d = &lc->calls[j];
			if (d->off_cpu || !same_long_call(c, d))
				continue;
			if (c->first_ns < d->first_ns)
				d->first_ns = c->first_ns;
			if (c->last_ns > d->last_ns)
				d->last_ns = c->last_ns;
			d->min_ns = d->last_ns - d->first_ns;
			if (c->max_ns < d->max_ns)
				d->max_ns = c->max_ns;
			d->samples += c->samples;
			/* (edges now from the looks between drains too) */
			d->start_exact = d->end_exact = false;
			if ((size_t)c->thread < lc->nthreads && lc->stats[c->thread].calls)
				lc->stats[c->thread].calls--; /* counted twice */
			c->samples = UINT32_MAX; /* merged: dropped below */
			any = true;
			break;
		}
	}
	if (!any)
		return;
	size_t out = 0;
	for (size_t i = 0; i < lc->ncalls; i++)
		if (!(lc->calls[i].off_cpu && lc->calls[i].samples == UINT32_MAX))
			lc->calls[out++] = lc->calls[i];
	lc->ncalls = out;
}

void xb_lc_finish(struct xb_longcalls *lc)
{
	for (size_t i = 0; i < lc->nthreads; i++)
		if (lc->runs[i].open)
			close_run(lc, (int)i, &lc->runs[i], 0, false, false);
	merge_off_cpu(lc);
	if (lc->ncalls)
		qsort(lc->calls, lc->ncalls, sizeof(*lc->calls), cmp_calls);
}

const struct xb_lc_stats *xb_lc_stats_of(const struct xb_longcalls *lc, int thread)
{
	static const struct xb_lc_stats none;
	return thread >= 0 && (size_t)thread < lc->nthreads ? &lc->stats[thread] : &none;
}

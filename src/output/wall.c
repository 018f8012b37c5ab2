/* wall.c - --wall: a wall-clock profile of the VM's processes.  At a
 * fixed rate (a tick), every process is read from the process table and
 * counted once, with its state as the root frame ("[running]",
 * "[runnable]", "[waiting]", "[suspended]", "[garbage collecting]",
 * "[exiting]") and its Erlang stack below it, innermost last in folded
 * order: the stacks go into the session's profile, which the usual
 * writers then write (the table, folded, flame graph, speedscope, pprof,
 * --by process).
 *
 * A process that is not running has its stack where the VM left it when
 * it was switched out (saved c_p->i and c_p->stop, as --dump reads it;
 * erlstack.c, xb_erlang_stack_saved), read then checked: its saved state
 * is read again after the stack and must not have changed.  A running
 * (or collecting) process's stack is its scheduler's latest CPU sample of
 * it, when that is recent (RUN_FRESH_NS), or, when its scheduler is
 * blocked off the CPU in a call the process made (a NIF that sleeps),
 * read from there (find_blocked).  What is not known is said by a
 * mark below the state: "[stack not sampled]", "[stack changed while
 * read]", "[stack unreadable]".  A process whose structure itself could
 * not be read consistently (proctab.c's checks) costs that tick's sample
 * of it, counted.
 *
 * Cost: one pass over the table per tick (its structures read in batches)
 * and one stack read per process not running.  Above --wall-max-processes
 * a random subset is read per tick (each process with the same
 * probability), each sample counted for 1/p processes (rounded at random,
 * so the counts stay unbiased), and the note says so with the error it
 * implies. */
#define _GNU_SOURCE
#include "xb/outputs.h"
#include "xb/by.h"
#include "xb/common.h"
#include "xb/names.h"
#include "xb/proctab.h"
#include "xb/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WALL_BATCH 256
#define STACK_PREFETCH 2048     /* bytes of each saved stack read in the batch */
#define RUN_FRESH_NS 30000000ull /* a running process's sample: at most this old */
#define RUN_MAX_IDS (XB_MAX_ERLANG + 4)

/* The latest sample of a thread that ran a process. */
struct last_run {
	uint64_t c_p, ns;
	bool partial;
	uint32_t ids[RUN_MAX_IDS]; /* Erlang frames (and marks), innermost first */
	unsigned n;
};

struct pending {
	struct xb_proc p;
	uint64_t weight;
	bool saved;       /* stack from the saved state: to be checked */
	const struct last_run *run;
	const char *mark; /* what is not known about its stack, or NULL */
	uint32_t ids[RUN_MAX_IDS + 3];
	unsigned n;
	uint64_t slot_now;
	uint8_t *now;     /* the process structure read again after its stack */
};

struct wall_sink {
	struct xb_sink k;
	struct xb_wall_opts o;
	struct xb_session *s;
	struct last_run *run; /* by sampler thread index */
	size_t nrun;
	struct last_run *blocked; /* this tick: processes running blocked off the CPU */
	size_t nblocked, blocked_cap;
	uint64_t blocked_seen;
	uint64_t period_ns, next_ns, tick_ns;
	struct xb_ptab t;
	bool t_open;
	char why[300]; /* the table could not be read: why */
	struct pending *v;
	uint8_t *bufs, *stacks;
	size_t n;
	double p;     /* this tick's share of processes read */
	uint64_t rng;
	/* what the run did */
	uint64_t ticks, late, samples, dropped, not_sampled, changed, unreadable, subset_ticks, changing;
	uint64_t procs_sum, procs_max;
	double p_min;
	double tick_s_sum, tick_s_max;
};

static uint64_t rnd(struct wall_sink *w)
{
	/* xorshift64*: enough to pick processes */
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 2685821657736338717ull;
}

static double rnd01(struct wall_sink *w)
{
	return (double)(rnd(w) >> 11) / 9007199254740992.0;
}

/* ---- running processes: their latest sample ---- */

static void add(struct xb_sink *k, struct xb_session *s, const struct xb_rsample *rs)
{
	struct wall_sink *w = (struct wall_sink *)k;
	const struct xb_estack *es = rs->es;
	size_t ti = (size_t)rs->s->thread;
	if (es->status != XB_ES_OK || !es->c_p)
		return;
	/* a sample with no Erlang frame (in the scheduler's glue) says
	 * nothing of where the process is: the one before it stands */
	bool erlang = false;
	for (uint32_t i = rs->nnative; i < rs->n && !erlang; i++)
		erlang = s->prof.names[rs->ids[i]].kind == XB_FK_ERLANG;
	if (!erlang)
		return;
	if (ti >= w->nrun && xb_grow_zeroed((void **)&w->run, &w->nrun, s->smp.nthreads > ti ? s->smp.nthreads : ti + 1,
					     sizeof(*w->run)) < 0)
		return;
	struct last_run *r = &w->run[ti];
	r->c_p = es->c_p;
	r->ns = xb_now_ns();
	r->partial = es->partial;
	r->n = 0;
	for (uint32_t i = rs->nnative; i < rs->n && r->n < RUN_MAX_IDS; i++)
		if (s->prof.names[rs->ids[i]].kind != XB_FK_GROUP)
			r->ids[r->n++] = rs->ids[i];
}

static const struct last_run *running_stack(struct wall_sink *w, uint64_t c_p, uint64_t now)
{
	const struct last_run *best = NULL;
	for (size_t i = 0; i < w->nrun; i++) {
		const struct last_run *r = &w->run[i];
		if (r->c_p == c_p && r->ns + RUN_FRESH_NS >= now && (!best || r->ns > best->ns))
			best = r;
	}
	for (size_t i = 0; !best && i < w->nblocked; i++)
		if (w->blocked[i].c_p == c_p)
			best = &w->blocked[i];
	return best;
}

/* Normal schedulers with no recent sample may be blocked off the CPU in a
 * NIF or BIF their process called (a sleep, blocking I/O): that process
 * then runs without a CPU sample; its stack as --pstack and --dump read
 * it (xb_session_blocked_call: read while the thread stayed blocked at
 * the same place in the same call).  One read per idle scheduler. */
static void find_blocked(struct wall_sink *w, struct xb_session *s, uint64_t now)
{
	static struct xb_unwind uw;
	static struct xb_estack es;
	char buf[1200];
	w->nblocked = 0;
	for (size_t i = 0; i < s->smp.nthreads; i++) {
		const struct xb_thread *t = &s->smp.threads[i];
		if (t->kind != 's' || t->dead || (i < w->nrun && w->run[i].ns + RUN_FRESH_NS >= now))
			continue;
		if (xb_grow((void **)&w->blocked, &w->blocked_cap, w->nblocked + 1, sizeof(*w->blocked)) < 0)
			return;
		if (!xb_session_blocked_call(s, t, &uw, &es) || !es.n)
			continue;
		struct last_run *r = &w->blocked[w->nblocked++];
		r->c_p = es.c_p;
		r->ns = now;
		r->partial = false;
		r->n = 0;
		for (unsigned k = 0; k < es.n && r->n < RUN_MAX_IDS; k++)
			r->ids[r->n++] = xb_profile_intern(&s->prof, xb_frames_code_name(&s->fr, es.frames[k], buf, sizeof(buf)),
							   "[Erlang]", XB_FK_ERLANG);
		w->blocked_seen++;
	}
}

/* ---- one tick ---- */

static const char *state_frame(enum xb_pstatus st)
{
	switch (st) {
	case XB_PS_RUNNING:
		return "[running]";
	case XB_PS_RUNNABLE:
		return "[runnable]";
	case XB_PS_EXITING:
		return "[exiting]";
	case XB_PS_GARBAGE_COLLECTING:
		return "[garbage collecting]";
	case XB_PS_SUSPENDED:
		return "[suspended]";
	default:
		return "[waiting]";
	}
}

struct saved_state {
	uint64_t pid, i, stop, heap, hend, reds;
	uint32_t state;
};

static struct saved_state state_of(const struct xb_proc *p)
{
	return (struct saved_state){ p->pid, p->i, p->stop, p->heap, p->hend, p->reds, p->state };
}

static struct saved_state state_in(const struct xb_vm *vm, const uint8_t *b)
{
	struct saved_state st = { 0 };
	const struct {
		enum xb_field f;
		uint64_t *dst;
	} v[] = { { XB_F_PROC_ID, &st.pid },     { XB_F_PROC_I, &st.i },       { XB_F_PROC_STOP, &st.stop },
		  { XB_F_PROC_HEAP, &st.heap }, { XB_F_PROC_HEND, &st.hend }, { XB_F_PROC_REDS, &st.reds } };
	for (size_t k = 0; k < XB_ARRAY_SIZE(v); k++)
		if (xb_off(vm, v[k].f) >= 0)
			memcpy(v[k].dst, b + xb_off(vm, v[k].f), 8);
	if (xb_off(vm, XB_F_PROC_STATE) >= 0)
		memcpy(&st.state, b + xb_off(vm, XB_F_PROC_STATE), 4);
	return st;
}

static bool same_state(const struct saved_state *a, const struct saved_state *b)
{
	return a->pid == b->pid && a->i == b->i && a->stop == b->stop && a->heap == b->heap && a->hend == b->hend &&
	       a->reds == b->reds && a->state == b->state;
}

static uint32_t mark(struct xb_session *s, const char *what)
{
	return xb_profile_intern(&s->prof, what, XB_MARK_TAG, XB_FK_MARK);
}

/* The saved stack of E's process into E's ids (innermost first). */
static void saved_stack(struct wall_sink *w, struct pending *e)
{
	static struct xb_estack es;
	struct xb_session *s = w->s;
	const struct xb_proc *p = &e->p;
	char buf[1200];
	xb_erlang_stack_saved(&s->es, p->addr, p->pid, p->i, p->stop, p->heap, p->hend, &es);
	if (es.status != XB_ES_OK) {
		e->mark = "[stack unreadable]";
		return;
	}
	for (unsigned k = 0; k < es.n && e->n < RUN_MAX_IDS; k++)
		e->ids[e->n++] = xb_profile_intern(&s->prof, xb_frames_code_name(&s->fr, es.frames[k], buf, sizeof(buf)),
						   "[Erlang]", XB_FK_ERLANG);
	if (es.truncated && !es.complete && e->n < RUN_MAX_IDS)
		e->ids[e->n++] = mark(s, XB_TRUNCATED);
}

/* The group frame of --by process: "<0.85.0> name" as by.c names it. */
static uint32_t group(struct wall_sink *w, const struct xb_proc *p)
{
	static struct xb_estack idn;
	struct xb_session *s = w->s;
	char pid[32], pname[300], name[600], ebuf[300];
	xb_proc_pid_text(&s->vm, p->pid, pid, sizeof(pid));
	const char *rn = p->reg_name ? xb_vm_atom(&s->vm, p->reg_name) : NULL;
	snprintf(idn.regname, sizeof(idn.regname), "%s",
		 !rn ? "" : s->fr.erlang_names ? rn : xb_elixir_atom(rn, ebuf, sizeof(ebuf)));
	memcpy(idn.initial, p->initial, sizeof(idn.initial));
	if (xb_process_name(&s->vm, &idn, pname, sizeof(pname))[0])
		snprintf(name, sizeof(name), "%s %s", pid, pname);
	else
		snprintf(name, sizeof(name), "%s", pid);
	return xb_profile_intern(&s->prof, name, XB_GROUP_TAG, XB_FK_GROUP);
}

/* E's sample into the profile: its frames, what is not known, its state,
 * its group. */
static void count(struct wall_sink *w, struct pending *e)
{
	struct xb_session *s = w->s;
	if (e->mark && e->n < RUN_MAX_IDS + 1)
		e->ids[e->n++] = mark(s, e->mark);
	e->ids[e->n++] = mark(s, state_frame(e->p.status));
	if (w->o.by_process)
		e->ids[e->n++] = group(w, &e->p);
	xb_profile_add_n(&s->prof, e->ids, e->n, 0, e->weight);
	w->samples += e->weight;
}

/* The saved stacks of the batch (the first STACK_PREFETCH bytes of each
 * in one batch of reads, each walked with its bytes as an overlay of the
 * VM's memory), then every process whose stack came from its saved state
 * read again (its slot and structure, in one batch) and compared; then
 * each is counted. */
static void flush(struct wall_sink *w)
{
	struct xb_vm *vm = &w->s->vm;
	size_t psz = (size_t)xb_off(vm, XB_F_PROC_SIZE);
	struct xb_readreq q[2 * WALL_BATCH];
	size_t k = 0;
	for (size_t i = 0; i < w->n; i++) {
		const struct xb_proc *p = &w->v[i].p;
		if (!w->v[i].saved || p->stop % 8 || p->stop < p->heap || p->stop >= p->hend)
			continue;
		uint64_t len = p->hend - p->stop < STACK_PREFETCH ? p->hend - p->stop : STACK_PREFETCH;
		q[k++] = (struct xb_readreq){ p->stop, w->stacks + i * STACK_PREFETCH, (size_t)len, false };
	}
	xb_read_many(&vm->mem, q, k);
	k = 0;
	for (size_t i = 0; i < w->n; i++) {
		struct pending *e = &w->v[i];
		const struct xb_proc *p = &e->p;
		if (!e->saved)
			continue;
		bool pre = !(p->stop % 8 || p->stop < p->heap || p->stop >= p->hend);
		struct xb_region g = { p->stop, pre ? q[k].len : 0, w->stacks + i * STACK_PREFETCH };
		if (pre && q[k++].ok)
			xb_remote_set_overlay(&vm->mem, &g, 1);
		saved_stack(w, e);
		xb_remote_set_overlay(&vm->mem, NULL, 0);
	}
	k = 0;
	for (size_t i = 0; i < w->n; i++) {
		struct pending *e = &w->v[i];
		if (!e->saved)
			continue;
		e->now = w->bufs + i * psz;
		q[k++] = (struct xb_readreq){ w->t.tab + (uint64_t)e->p.slot * 8, &e->slot_now, 8, false };
		q[k++] = (struct xb_readreq){ e->p.addr, e->now, psz, false };
	}
	xb_read_many(&vm->mem, q, k);
	k = 0;
	for (size_t i = 0; i < w->n; i++) {
		struct pending *e = &w->v[i];
		if (e->saved) {
			bool ok = q[k].ok && q[k + 1].ok && e->slot_now == e->p.addr;
			struct saved_state a = state_of(&e->p), b = ok ? state_in(vm, e->now) : a;
			k += 2;
			if (!ok || !same_state(&a, &b)) {
				/* the state as first read stands (it was read
				 * consistently); the stack may be torn */
				e->n = 0;
				e->mark = "[stack changed while read]";
				w->changed++;
			} else if (e->mark) {
				w->unreadable++;
			}
		}
		count(w, e);
	}
	w->n = 0;
}

static int one_process(const struct xb_proc *p, void *arg)
{
	struct wall_sink *w = arg;
	if (p->status == XB_PS_FREE)
		return 0;
	/* not read the same twice (a running process's heap moves): its
	 * state word as first read stands, its pid and slot having held */
	w->changing += (p->partial & XB_PP_CHANGING) != 0;
	uint64_t weight = 1;
	if (w->p < 1.0) {
		double inv = 1.0 / w->p, fl = floor(inv);
		weight = (uint64_t)fl + (rnd01(w) < inv - fl);
		if (!weight)
			return 0;
	}
	struct pending *e = &w->v[w->n++];
	memset(e, 0, offsetof(struct pending, ids));
	e->p = *p;
	e->n = 0;
	e->weight = weight;
	if (p->status == XB_PS_RUNNING || p->status == XB_PS_GARBAGE_COLLECTING) {
		const struct last_run *r = running_stack(w, p->addr, w->tick_ns);
		if (r) {
			memcpy(e->ids, r->ids, r->n * sizeof(*r->ids));
			e->n = r->n;
		} else {
			e->mark = "[stack not sampled]";
			w->not_sampled++;
		}
	} else {
		e->saved = true;
	}
	if (w->n == WALL_BATCH)
		flush(w);
	return 0;
}

static bool pick(void *arg)
{
	struct wall_sink *w = arg;
	return rnd01(w) < w->p;
}

static void tick(struct wall_sink *w, struct xb_session *s)
{
	double t0 = (double)xb_now_ns() / 1e9;
	w->s = s;
	w->tick_ns = xb_now_ns();
	if (!w->t_open) {
		if (xb_ptab_open(&s->vm, &w->t) < 0) {
			snprintf(w->why, sizeof(w->why), "%s", xb_err());
			return;
		}
		w->t_open = true;
	} else if (xb_ptab_refresh(&w->t) < 0) {
		snprintf(w->why, sizeof(w->why), "%s", xb_err());
		return;
	}
	find_blocked(w, s, w->tick_ns);
	uint32_t nproc = w->t.nlive;
	w->p = nproc > w->o.max_procs ? (double)w->o.max_procs / nproc : 1.0;
	if (w->p < 1.0) {
		w->subset_ticks++;
		if (w->p < w->p_min)
			w->p_min = w->p;
	}
	if (w->p < 1.0) /* each process with probability p: only those are read */
		xb_ptab_filter(&w->t, pick, w);
	struct xb_ptab_stats st = { 0 };
	xb_ptab_foreach(&w->t, XB_PROC_CHANGING | (w->o.by_process ? XB_PROC_NAMES : 0), one_process, w, &st);
	flush(w);
	w->dropped += st.changed + st.unreadable;
	w->ticks++;
	w->procs_sum += nproc;
	if (nproc > w->procs_max)
		w->procs_max = nproc;
	double dt = (double)xb_now_ns() / 1e9 - t0;
	w->tick_s_sum += dt;
	if (dt > w->tick_s_max)
		w->tick_s_max = dt;
}

static void started(struct xb_sink *k, struct xb_session *s)
{
	struct wall_sink *w = (struct wall_sink *)k;
	(void)s;
	/* the first tick one period in: running processes have samples */
	w->next_ns = xb_now_ns() + w->period_ns;
}

static void poll(struct xb_sink *k, struct xb_session *s)
{
	struct wall_sink *w = (struct wall_sink *)k;
	uint64_t now = xb_now_ns();
	if (!w->next_ns || now < w->next_ns)
		return;
	tick(w, s);
	w->next_ns += w->period_ns;
	now = xb_now_ns();
	if (w->next_ns <= now) { /* ticks that could not be kept */
		w->late += (now - w->next_ns) / w->period_ns + 1;
		w->next_ns = now + w->period_ns;
	}
}

/* The run's note, on stderr (the sink writes after the outputs). */
static int write_note(struct xb_sink *k, struct xb_session *s, FILE *f)
{
	struct wall_sink *w = (struct wall_sink *)k;
	(void)s;
	if (!w->ticks) {
		if (w->why[0])
			return xb_fail("--wall: the process table could not be read: %s", w->why);
		fprintf(f, "erlang-sample: --wall: no tick in %.2f s (one every %.3f s)\n", s->elapsed_s,
			1.0 / w->o.hz);
		return 0;
	}
	fprintf(f, "erlang-sample: --wall: %llu ticks at %g Hz over %.2f s, %.0f processes per tick on average "
		   "(%llu at most), %llu samples; tick cost %.1f ms on average, %.1f ms at most",
		(unsigned long long)w->ticks, w->o.hz, s->elapsed_s, (double)w->procs_sum / (double)w->ticks,
		(unsigned long long)w->procs_max, (unsigned long long)w->samples, 1e3 * w->tick_s_sum / (double)w->ticks,
		1e3 * w->tick_s_max);
	if (w->late)
		fprintf(f, "; %llu ticks skipped (a tick took longer than the period)", (unsigned long long)w->late);
	if (w->dropped)
		fprintf(f, "; %llu samples lost (a process changing under both reads of it)",
			(unsigned long long)w->dropped);
	if (w->blocked_seen)
		fprintf(f, "; %llu times a process ran blocked off the CPU in a call (its stack read where its "
			   "scheduler blocks)", (unsigned long long)w->blocked_seen);
	if (w->changing)
		fprintf(f, "; %llu samples of a process changing under both reads (its state as first read)",
			(unsigned long long)w->changing);
	if (w->changed || w->unreadable || w->not_sampled)
		fprintf(f, "; stacks unknown: %llu changed while read, %llu unreadable, %llu running and not sampled",
			(unsigned long long)w->changed, (unsigned long long)w->unreadable,
			(unsigned long long)w->not_sampled);
	fputc('\n', f);
	char note[400];
	if (xb_wall_note(k, note, sizeof(note)))
		fprintf(f, "erlang-sample: --wall: note: %s\n", note);
	return 0;
}

bool xb_wall_note(const struct xb_sink *k, char *buf, size_t len)
{
	const struct wall_sink *w = (const struct wall_sink *)k;
	buf[0] = 0;
	if (!w->subset_ticks)
		return false;
	double p = w->p_min;
	snprintf(buf, len,
		 "above --wall-max-processes %zu, %llu of %llu ticks read a random subset of the processes (at "
		 "least %.2f%% of them) and counted each sample for 1/p processes; a row of N samples is off by "
		 "about sqrt(N*(1-p)/p) (one standard deviation: +-%.1f%% at N=1000)",
		 w->o.max_procs, (unsigned long long)w->subset_ticks, (unsigned long long)w->ticks, 100.0 * p,
		 100.0 * sqrt((1 - p) / (1000.0 * p)));
	return true;
}

static void free_sink(struct xb_sink *k)
{
	struct wall_sink *w = (struct wall_sink *)k;
	if (w->t_open)
		xb_ptab_close(&w->t);
	free(w->run);
	free(w->blocked);
	free(w->v);
	free(w->bufs);
	free(w->stacks);
	free(w);
}

static const struct xb_sink_ops wall_ops = {
	.name = "wall",
	.add = add,
	.started = started,
	.poll = poll,
	.write = write_note,
	.free = free_sink,
};

struct xb_sink *xb_wall_sink_new(const struct xb_wall_opts *o, size_t proc_size)
{
	struct wall_sink *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->k.ops = &wall_ops;
	w->o = *o;
	w->period_ns = (uint64_t)(1e9 / o->hz);
	w->p = 1.0;
	w->p_min = 1.0;
	w->rng = xb_now_ns() | 1;
	w->v = calloc(WALL_BATCH, sizeof(*w->v));
	w->bufs = malloc(WALL_BATCH * proc_size);
	w->stacks = malloc(WALL_BATCH * STACK_PREFETCH);
	if (!w->v || !w->bufs || !w->stacks) {
		free_sink(&w->k);
		return NULL;
	}
	return &w->k;
}

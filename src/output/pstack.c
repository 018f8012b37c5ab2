/* pstack.c - --pstack: one mixed native + Erlang stack per scheduler,
 * the best one seen while sampling (up to --pstack-wait, or until every
 * scheduler has shown a process or is asleep). */
#define _GNU_SOURCE
#include "xb/outputs.h"
#include "xb/common.h"
#include "xb/names.h"
#include "xb/session.h"
#include "xb/tasks.h"
#include "xb/threadcpu.h"
#include "xb/writers.h"

#include <stdlib.h>
#include <string.h>

struct entry {
	bool have;
	struct xb_estack es;
	struct xb_unwind uw;
	const struct xb_code *jit_here;
	struct xb_asleep asleep;
};

struct pstack_sink {
	struct xb_sink k;
	struct xb_pstack_opts o;
	struct entry *v; /* by sampler thread index */
	size_t n;
};

/* The best sample of each scheduler: one running Erlang code with its
 * whole stack, else one with only the innermost function, else one whose
 * process could not be read (mid-GC it may not). */
static int rank(const struct xb_estack *es)
{
	if (es->status != XB_ES_OK)
		return 0;
	if (!es->n)
		return 1;
	return es->partial ? 2 : 3;
}

/* Entries for sampler threads 0..I; false when memory ran out. */
static bool ensure(struct pstack_sink *ps, struct xb_session *s, size_t i)
{
	return xb_grow_zeroed((void **)&ps->v, &ps->n, s->smp.nthreads > i ? s->smp.nthreads : i + 1,
			      sizeof(*ps->v)) == 0;
}

static void add(struct xb_sink *k, struct xb_session *s, const struct xb_rsample *rs)
{
	struct pstack_sink *ps = (struct pstack_sink *)k;
	size_t i = (size_t)rs->s->thread;
	if (!ensure(ps, s, i))
		return;
	struct entry *e = &ps->v[i];
	if (rank(rs->es) > (e->have ? rank(&e->es) : -1)) {
		e->have = true;
		e->es = *rs->es;
		e->uw = *rs->uw;
		e->jit_here = xb_frames_jit_here(&s->fr, rs->uw);
	}
}

/* Done early once every scheduler has shown a process or is asleep.  A
 * scheduler asleep for want of work (xb_thread_asleep: no CPU time for
 * 100 ms) is idle now; waiting the rest of --pstack-wait for it to run a
 * process would only delay the answer (eu-stack and py-spy dump answer at
 * once).  One that spins before sleeping (OTP's busy wait) uses CPU and
 * is waited for until it sleeps. */
static bool done(struct xb_sink *k, struct xb_session *s)
{
	struct pstack_sink *ps = (struct pstack_sink *)k;
	size_t ns = 0;
	uint64_t now = xb_now_ns();
	bool all = true;
	for (size_t i = 0; i < s->smp.nthreads; i++) {
		if (s->smp.threads[i].kind != 's')
			continue;
		ns++;
		if (!ensure(ps, s, i))
			return false;
		struct entry *e = &ps->v[i];
		if (e->have && e->es.status == XB_ES_OK)
			continue;
		/* look at every waiting scheduler, so that each one's quiet
		 * time starts at the first call */
		if (!xb_thread_asleep(s->vm.pid, s->smp.threads[i].tid, &e->asleep, now))
			all = false;
	}
	return ns > 0 && all;
}

/* The code map CODE belongs to: the session's, or one retired since
 * (--pstack keeps them until it prints). */
static struct xb_codemap *owner(struct xb_session *s, const struct xb_code *code)
{
	if (code >= s->cm.v && code < s->cm.v + s->cm.n)
		return &s->cm;
	for (size_t i = 0; i < s->es.nretired; i++) {
		struct xb_codemap *m = s->es.retired[i];
		if (code >= m->v && code < m->v + m->n)
			return m;
	}
	return NULL;
}

/* Erlang frame J of ES as printed: its name, and with --lines its source
 * location; cleaned for the terminal. */
static const char *erlang_frame(struct xb_session *s, const struct xb_estack *es, unsigned j, char *out,
				size_t len)
{
	char nb[1200], text[1400];
	const char *name = xb_frames_code_name(&s->fr, es->frames[j], nb, sizeof(nb)), *file;
	uint32_t line;
	struct xb_codemap *m = s->fr.lines ? owner(s, es->frames[j]) : NULL;
	if (m && xb_codemap_line(&s->vm, m, es->frames[j], xb_frames_line_addr(es, j), &file, &line) == 0) {
		snprintf(text, sizeof(text), "%s (%s:%u)", name, file, (unsigned)line);
		name = text;
	}
	return xb_text_clean(name, false, out, len);
}

/* Native frames, then the JIT code they were called from (if not an
 * Erlang function); returns the next frame number. */
static unsigned print_native(struct xb_session *s, FILE *f, const struct xb_unwind *uw,
			     const struct xb_code *jit_here)
{
	char name[512], tag[300], c1[512], c2[300];
	unsigned k = 0;
	for (; k < uw->n; k++) {
		xb_frames_native_name(&s->fr, uw->pcs[k], uw->activation[k], name, sizeof(name), tag, sizeof(tag));
		fprintf(f, "  #%-3u 0x%016llx %s %s\n", k, (unsigned long long)uw->pcs[k],
			xb_text_clean(name, false, c1, sizeof(c1)), xb_text_clean(tag, false, c2, sizeof(c2)));
	}
	if (jit_here)
		fprintf(f, "  #%-3u 0x%016llx %s [JIT]\n", k++, (unsigned long long)uw->erlang_pc,
			xb_text_clean(xb_frames_code_name(&s->fr, jit_here, name, sizeof(name)), false, c1,
				      sizeof(c1)));
	return k;
}

/* The rest of a "scheduler N (tid T): " line for a scheduler running a
 * process: who, then its frames innermost first.  A dirty scheduler's
 * native stack ends at its thread's root; the Erlang stack after it is the
 * process's, suspended while the dirty scheduler works for it. */
static void print_running(struct xb_session *s, FILE *f, const struct entry *e, bool dirty, bool blocked)
{
	const struct xb_estack *es = &e->es;
	char c1[1400], rb[300];
	const char *reg = s->fr.erlang_names ? es->regname : xb_elixir_atom(es->regname, rb, sizeof(rb));
	fprintf(f, "process %s%s%s%s\n", es->pid, es->regname[0] ? " " : "",
		xb_text_clean(reg, false, c1, sizeof(c1)),
		blocked ? ", blocked off the CPU in a call it made (NIF or BIF)" : "");
	unsigned k = print_native(s, f, &e->uw, e->jit_here);
	if (dirty && es->n)
		fprintf(f, "  -- the Erlang stack of %s, which waits for this scheduler:\n", es->pid);
	for (unsigned j = 0; j < es->n; j++, k++)
		fprintf(f, "  #%-3u 0x%016llx %s [Erlang]\n", k, (unsigned long long)es->addrs[j],
			erlang_frame(s, es, j, c1, sizeof(c1)));
	if (es->truncated)
		fprintf(f, "  ... (truncated at --max-callchain-depth)\n");
	if (es->partial)
		fprintf(f, "  ... %s: the stack moved before it could be read\n", XB_CALLERS_UNKNOWN);
}

/* Where an idle scheduler waits, unwound from its blocked system call. */
static void print_waiting(struct xb_session *s, FILE *f, pid_t tid)
{
	uint64_t sp, pc;
	if (!xb_task_blocked_at(s->vm.pid, tid, &sp, &pc)) {
		fprintf(f, "  (waiting stack not available)\n");
		return;
	}
	struct xb_unwind uw;
	xb_unwind_blocked(&s->uw, tid, sp, pc, &uw);
	print_native(s, f, &uw, NULL);
	if (uw.stop == XB_UW_REACHED_ERLANG)
		fprintf(f, "  #%-3u 0x%016llx (Erlang scheduler loop)\n", uw.n, (unsigned long long)uw.erlang_pc);
}

/* A scheduler never seen on a CPU may not be idle: it may be blocked off
 * the CPU in a NIF or BIF of the process it runs (a sleep, blocking I/O,
 * a lock): its stacks then (xb_session_blocked_call), into E only when
 * so (E may hold a sample that said otherwise). */
static bool blocked_in_call(struct xb_session *s, const struct xb_thread *t, struct entry *e)
{
	static struct xb_unwind uw;
	static struct xb_estack es;
	if (!xb_session_blocked_call(s, t, &uw, &es))
		return false;
	e->uw = uw;
	e->es = es;
	e->jit_here = NULL;
	return true;
}

static int write_pstack(struct xb_sink *k, struct xb_session *s, FILE *f)
{
	struct pstack_sink *ps = (struct pstack_sink *)k;
	size_t nsched = 0;
	for (size_t i = 0; i < s->smp.nthreads; i++)
		nsched += s->smp.threads[i].kind == 's';
	for (int no = 1; no <= (int)nsched; no++) {
		for (size_t i = 0; i < s->smp.nthreads; i++) {
			struct xb_thread *t = &s->smp.threads[i];
			if (t->kind != 's' || t->sched_no != no)
				continue;
			struct entry *e = ensure(ps, s, i) ? &ps->v[i] : NULL;
			if (e && !(e->have && e->es.status == XB_ES_OK) && blocked_in_call(s, t, e)) {
				fprintf(f, "scheduler %d (tid %d): ", no, (int)t->tid);
				print_running(s, f, e, false, true);
				continue;
			}
			if (!e || !e->have || e->es.status != XB_ES_OK) {
				/* Never seen running a process: idle.  OTP 29 schedulers
				 * spin in scheduler_wait() before sleeping, so one may
				 * have been sampled in scheduler code: idle too. */
				bool spun = e && e->have;
				fprintf(f, "scheduler %d (tid %d): idle%s\n", no, (int)t->tid,
					spun ? " (in scheduler code, no process)" : "");
				if (!ps->o.idle_stacks)
					continue;
				if (spun)
					print_native(s, f, &e->uw, e->jit_here);
				else
					print_waiting(s, f, t->tid);
				continue;
			}
			fprintf(f, "scheduler %d (tid %d): ", no, (int)t->tid);
			print_running(s, f, e, false, false);
		}
	}
	/* Dirty schedulers: only those seen working for a process (most
	 * of them sleep most of the time), then how many were not. */
	static const struct {
		char kind;
		const char *name;
	} dirty_kinds[] = { { 'c', "dirty CPU" }, { 'i', "dirty I/O" } };
	for (size_t d = 0; d < XB_ARRAY_SIZE(dirty_kinds); d++) {
		int total = 0, busy = 0;
		for (size_t i = 0; i < s->smp.nthreads; i++) {
			struct xb_thread *t = &s->smp.threads[i];
			if (t->kind != dirty_kinds[d].kind)
				continue;
			total++;
			struct entry *e = i < ps->n ? &ps->v[i] : NULL;
			if (!e || !e->have || e->es.status != XB_ES_OK || !e->es.n)
				continue;
			busy++;
			fprintf(f, "%s scheduler %d (tid %d): ", dirty_kinds[d].name, t->sched_no, (int)t->tid);
			print_running(s, f, e, true, false);
		}
		if (total > busy)
			fprintf(f, "%s schedulers: %d of %d not seen working for a process\n",
				dirty_kinds[d].name, total - busy, total);
	}
	return 0;
}

static void free_sink(struct xb_sink *k)
{
	struct pstack_sink *ps = (struct pstack_sink *)k;
	free(ps->v);
	free(ps);
}

static const struct xb_sink_ops pstack_ops = {
	.name = "pstack",
	.add = add,
	.done = done,
	.write = write_pstack,
	.free = free_sink,
};

struct xb_sink *xb_pstack_sink_new(const struct xb_pstack_opts *o)
{
	struct pstack_sink *ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	ps->k.ops = &pstack_ops;
	ps->o = *o;
	return &ps->k;
}

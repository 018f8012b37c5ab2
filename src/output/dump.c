/* dump.c - --dump: the Erlang stack of every process (or of those named),
 * running or not.  A process that is not running has its stack where the
 * VM left it when it was switched out: its saved instruction pointer
 * (c_p->i) names the innermost function, its saved stack pointer
 * (c_p->stop) starts the stack (erlstack.c, xb_erlang_stack_saved).  A
 * running process's stack is taken from a sample (the session samples the
 * schedulers until each has shown a process, or --pstack-wait).  Reads are
 * racy: a process whose saved state (pid, i, stop, heap, hend, state,
 * reds) changed while its stack was read is read again once, alone, then
 * marked "changing".  The process structures are read in batches (the
 * table's, then again after the stacks): about one system call per
 * process, 10,000 processes in well under a second. */
#define _GNU_SOURCE
#include "xb/outputs.h"
#include "xb/common.h"
#include "xb/json.h"
#include "xb/names.h"
#include "xb/output_util.h"
#include "xb/proctab.h"
#include "xb/session.h"
#include "xb/threadcpu.h"

#include <stdlib.h>
#include <string.h>

/* A running process's stack, from a sample: frame names, innermost first. */
struct seen {
	uint64_t c_p;
	char **frames;
	unsigned n;
	bool partial;
	bool blocked; /* seen blocked off the CPU in a call, not in a sample */
};

struct dump_sink {
	struct xb_sink k;
	struct xb_dump_opts o;
	struct seen *v;
	size_t n, cap;
	struct sched_state {
		bool seen; /* running a process */
		struct xb_asleep asleep;
	} *sched; /* by sampler thread index */
	size_t nsched;
};

static struct seen *find_seen(struct dump_sink *d, uint64_t c_p)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].c_p == c_p)
			return &d->v[i];
	return NULL;
}

static char **frame_names(struct xb_session *s, const struct xb_estack *es)
{
	char **v = calloc(es->n ? es->n : 1, sizeof(*v));
	char buf[1200];
	for (unsigned k = 0; v && k < es->n; k++)
		v[k] = strdup(xb_frames_code_name(&s->fr, es->frames[k], buf, sizeof(buf)));
	return v;
}

static void free_names(char **v, unsigned n)
{
	for (unsigned k = 0; v && k < n; k++)
		free(v[k]);
	free(v);
}

static void add(struct xb_sink *k, struct xb_session *s, const struct xb_rsample *rs)
{
	struct dump_sink *d = (struct dump_sink *)k;
	const struct xb_estack *es = rs->es;
	if ((size_t)rs->s->thread < d->nsched && es->status == XB_ES_OK && es->c_p)
		d->sched[rs->s->thread].seen = true;
	if (es->status != XB_ES_OK || !es->c_p || !es->n)
		return;
	struct seen *e = find_seen(d, es->c_p);
	if (e && (e->partial || !es->partial)) {
		/* keep the latest whole stack */
		if (es->partial)
			return;
		free_names(e->frames, e->n);
	} else if (!e) {
		if (xb_grow((void **)&d->v, &d->cap, d->n + 1, sizeof(*d->v)) < 0)
			return;
		e = &d->v[d->n++];
	} else {
		free_names(e->frames, e->n);
	}
	e->c_p = es->c_p;
	e->frames = frame_names(s, es);
	e->n = e->frames ? es->n : 0;
	e->partial = es->partial;
	e->blocked = false;
}

/* Done once every normal scheduler was seen running a process or is
 * asleep (xb_thread_asleep, as --pstack); the session's --pstack-wait
 * bounds the rest. */
static bool done(struct xb_sink *k, struct xb_session *s)
{
	struct dump_sink *d = (struct dump_sink *)k;
	if (xb_grow_zeroed((void **)&d->sched, &d->nsched, s->smp.nthreads, sizeof(*d->sched)) < 0)
		return false;
	uint64_t now = xb_now_ns();
	bool all = true;
	for (size_t i = 0; i < s->smp.nthreads; i++)
		if (s->smp.threads[i].kind == 's' && !d->sched[i].seen &&
		    !xb_thread_asleep(s->vm.pid, s->smp.threads[i].tid, &d->sched[i].asleep, now))
			all = false;
	return all;
}

struct row {
	char pid[32], name[600], status[24], current[600];
	uint64_t msgq;
	char **frames; /* names, innermost first */
	unsigned n;
	bool own; /* frames allocated here */
	const char *note;
};

static void print_row(FILE *f, struct xb_json *j, const struct row *r)
{
	char d1[1200], d2[1200];
	if (j) {
		xb_json_begin_object(j);
		xb_json_kv_string(j, "pid", r->pid);
		if (r->name[0])
			xb_json_kv_string(j, "name", r->name);
		else {
			xb_json_key(j, "name");
			xb_json_null(j);
		}
		xb_json_kv_string(j, "status", r->status);
		xb_json_kv_string(j, "current_function", r->current);
		xb_json_kv_uint(j, "message_queue_len", r->msgq);
		xb_json_key(j, "stack");
		xb_json_begin_array(j);
		for (unsigned k = 0; k < r->n; k++)
			xb_json_string(j, r->frames[k]);
		xb_json_end_array(j);
		if (r->note)
			xb_json_kv_string(j, "note", r->note);
		xb_json_end_object(j);
		return;
	}
	xb_display_name_buf(r->name, d1, sizeof(d1));
	xb_display_name_buf(r->current, d2, sizeof(d2));
	fprintf(f, "%s%s%s %s, current %s, %llu message%s%s%s\n", r->pid, d1[0] ? " " : "", d1, r->status, d2,
		(unsigned long long)r->msgq, r->msgq == 1 ? "" : "s", r->note ? "; " : "", r->note ? r->note : "");
	for (unsigned k = 0; k < r->n; k++)
		fprintf(f, "  #%-3u %s\n", k, xb_display_name_buf(r->frames[k], d1, sizeof(d1)) ? d1 : "");
}

static bool wanted(const struct dump_sink *d, const uint32_t *slots, size_t nslots, uint32_t slot)
{
	if (!d->o.nonly)
		return true;
	for (size_t i = 0; i < nslots; i++)
		if (slots[i] == slot)
			return true;
	return false;
}

/* A normal scheduler never seen running may be blocked off the CPU in a
 * NIF or BIF of its process (a sleep, blocking I/O): that process's stack
 * then, as --pstack shows it (xb_erlang_stack_blocked), when the thread
 * was still blocked at the same place after it was read. */
static void add_blocked(struct dump_sink *d, struct xb_session *s)
{
	static struct xb_unwind uw;
	static struct xb_estack es;
	for (size_t i = 0; i < s->smp.nthreads && i < d->nsched; i++) {
		const struct xb_thread *t = &s->smp.threads[i];
		if (t->kind != 's' || t->dead || d->sched[i].seen || !xb_session_blocked_call(s, t, &uw, &es) ||
		    !es.n || find_seen(d, es.c_p) || xb_grow((void **)&d->v, &d->cap, d->n + 1, sizeof(*d->v)) < 0)
			continue;
		struct seen *e = &d->v[d->n++];
		e->c_p = es.c_p;
		e->frames = frame_names(s, &es);
		e->n = e->frames ? es.n : 0;
		e->partial = false;
		e->blocked = true;
	}
}

/* The saved state a stack read from it depends on: the same before and
 * after the read, or the stack may be torn.  reds grows whenever the
 * process ran, so a process that ran and came back to the same place
 * counts as changed too. */
struct saved_state {
	uint64_t pid, i, stop, heap, hend, reds;
	uint32_t state;
};

static struct saved_state state_of(const struct xb_proc *p)
{
	return (struct saved_state){ p->pid, p->i, p->stop, p->heap, p->hend, p->reds, p->state };
}

static bool same_state(const struct saved_state *a, const struct saved_state *b)
{
	return a->pid == b->pid && a->i == b->i && a->stop == b->stop && a->heap == b->heap && a->hend == b->hend &&
	       a->reds == b->reds && a->state == b->state;
}

/* The saved state in a process structure as read (its raw bytes). */
static struct saved_state state_in(const struct xb_vm *vm, const uint8_t *b)
{
	struct saved_state st = { 0 };
	const struct {
		enum xb_field f;
		uint64_t *dst;
	} w[] = { { XB_F_PROC_ID, &st.pid },     { XB_F_PROC_I, &st.i },       { XB_F_PROC_STOP, &st.stop },
		  { XB_F_PROC_HEAP, &st.heap }, { XB_F_PROC_HEND, &st.hend }, { XB_F_PROC_REDS, &st.reds } };
	for (size_t k = 0; k < XB_ARRAY_SIZE(w); k++)
		if (xb_off(vm, w[k].f) >= 0)
			memcpy(w[k].dst, b + xb_off(vm, w[k].f), 8);
	if (xb_off(vm, XB_F_PROC_STATE) >= 0)
		memcpy(&st.state, b + xb_off(vm, XB_F_PROC_STATE), 4);
	return st;
}

struct pending {
	struct xb_proc p; /* the snapshot the row is about */
	struct row r;
	bool saved;       /* r.frames read from its saved state: to be checked */
	uint64_t slot_now;
	uint8_t *now;     /* the process structure read again after its stack */
};

#define DUMP_BATCH 256
#define STACK_PREFETCH 2048 /* bytes of each saved stack read in the batch */

struct dumper {
	struct dump_sink *d;
	struct xb_session *s;
	struct xb_ptab *t;
	const uint32_t *slots;
	FILE *f;
	struct xb_json *j;
	struct pending *v;
	uint8_t *bufs;   /* DUMP_BATCH process structures */
	uint8_t *stacks; /* DUMP_BATCH x STACK_PREFETCH bytes of their stacks */
	size_t n;
	uint64_t listed, gone, reread, changing;
};

/* The row of snapshot P: pid, name, status, current function, queue and,
 * for a running process, its stack from a sample; a process that is not
 * running is marked for saved_stack. */
static void fill_row(struct dumper *w, const struct xb_proc *p, struct pending *e)
{
	struct xb_session *s = w->s;
	struct row *r = &e->r;
	memset(e, 0, sizeof(*e));
	e->p = *p;
	r->msgq = p->msgq_len;
	xb_proc_pid_text(&s->vm, p->pid, r->pid, sizeof(r->pid));
	const char *rn = p->reg_name ? xb_vm_atom(&s->vm, p->reg_name) : NULL;
	char ebuf[600];
	snprintf(r->name, sizeof(r->name), "%s", !rn ? "" : s->fr.erlang_names ? rn : xb_elixir_atom(rn, ebuf, sizeof(ebuf)));
	snprintf(r->status, sizeof(r->status), "%s", xb_pstatus_name(p->status));
	xb_mfa_text(&s->vm, p->current_mfa, r->current, sizeof(r->current));
	if (!s->fr.erlang_names && xb_is_elixir_name(r->current)) { /* as the frames are spelled */
		char cb[sizeof(r->current)];
		snprintf(r->current, sizeof(r->current), "%s", xb_elixir_name(r->current, cb, sizeof(cb)));
	}
	if (p->status == XB_PS_RUNNING || p->status == XB_PS_GARBAGE_COLLECTING) {
		const struct seen *sn = find_seen(w->d, p->addr);
		if (sn) {
			r->frames = sn->frames;
			r->n = sn->n;
			r->note = sn->partial   ? "running: only the innermost function could be read"
				  : sn->blocked ? "running: blocked off the CPU in a call it made (NIF or BIF)"
						: NULL;
		} else {
			r->note = "running: not caught by a sample";
		}
		return;
	}
	e->saved = true;
}

/* The stack of a process that is not running, from its saved state
 * (c_p->i and c_p->stop), to be checked against the state read again. */
static void saved_stack(struct dumper *w, struct pending *e)
{
	static struct xb_estack es;
	struct xb_session *s = w->s;
	const struct xb_proc *p = &e->p;
	struct row *r = &e->r;
	xb_erlang_stack_saved(&s->es, p->addr, p->pid, p->i, p->stop, p->heap, p->hend, &es);
	if (es.status == XB_ES_OK) {
		r->frames = frame_names(s, &es);
		r->n = r->frames ? es.n : 0;
		r->own = true;
		if (es.truncated && !es.complete)
			r->note = "stack cut (--max-callchain-depth, or unreadable)";
	} else {
		r->note = es.why ? es.why : "stack not readable";
	}
}

static void free_row(struct row *r)
{
	if (r->own)
		free_names(r->frames, r->n);
	r->own = false;
	r->frames = NULL;
	r->n = 0;
}

/* A process whose saved state changed while its stack was read: read
 * once more, alone (state, stack, state again); still changing, it is
 * listed without a stack and marked.  0, or -1 when it is gone. */
static int read_again(struct dumper *w, struct pending *e)
{
	struct xb_proc p, again;
	free_row(&e->r);
	w->reread++;
	if (xb_proc_read(w->t, e->p.slot, XB_PROC_NAMES | XB_PROC_MEMORY, &p) < 0)
		return -1;
	fill_row(w, &p, e);
	if (!e->saved)
		return 0; /* running now: its stack from a sample */
	saved_stack(w, e);
	if (xb_proc_read(w->t, p.slot, 0, &again) < 0) {
		free_row(&e->r);
		return -1;
	}
	struct saved_state a = state_of(&p), b = state_of(&again);
	if (!same_state(&a, &b)) {
		free_row(&e->r);
		e->r.note = "changing: its state changed while its stack was read, twice";
		w->changing++;
	}
	return 0;
}

/* The saved stacks of the rows read so far: the first STACK_PREFETCH
 * bytes of each in one batch of reads, each walked with its bytes as an
 * overlay of the VM's memory (the rest of a deeper stack is read live). */
static void saved_stacks(struct dumper *w)
{
	struct xb_vm *vm = &w->s->vm;
	struct xb_readreq q[DUMP_BATCH];
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
}

/* The rows read so far: their saved stacks (saved_stacks), then every
 * process whose stack came from its saved state is read again (its slot
 * and structure, in one batch of reads) and its state compared; then the
 * rows are printed in slot order. */
static void flush(struct dumper *w)
{
	struct xb_vm *vm = &w->s->vm;
	size_t psz = (size_t)xb_off(vm, XB_F_PROC_SIZE);
	struct xb_readreq q[2 * DUMP_BATCH];
	size_t k = 0;
	saved_stacks(w);
	for (size_t i = 0; i < w->n; i++) {
		struct pending *e = &w->v[i];
		if (!e->saved)
			continue;
		e->now = w->bufs + i * psz;
		q[k++] = (struct xb_readreq){ w->t->tab + (uint64_t)e->p.slot * 8, &e->slot_now, 8, false };
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
			if ((!ok || !same_state(&a, &b)) && read_again(w, e) < 0) {
				w->gone++;
				continue;
			}
		}
		/* c_p->current is not kept for every waiting process: the VM
		 * then names the function its saved pc is in (process_info's
		 * current_function, erts_find_function_from_pc), as here. */
		if (strcmp(e->r.current, "-") == 0 && e->r.n)
			snprintf(e->r.current, sizeof(e->r.current), "%s", e->r.frames[0]);
		print_row(w->f, w->j, &e->r);
		free_row(&e->r);
		w->listed++;
	}
	w->n = 0;
}

static int one_process(const struct xb_proc *p, void *arg)
{
	struct dumper *w = arg;
	if (!wanted(w->d, w->slots, w->d->o.nonly, p->slot))
		return 0;
	fill_row(w, p, &w->v[w->n++]);
	if (w->n == DUMP_BATCH)
		flush(w);
	return 0;
}

/* Every process in slot order: the table's structures read in batches
 * (xb_ptab_foreach: a process that changed under them is read again, then
 * left out and counted), each stack read from its saved state, then the
 * state checked in batches (flush).  Rows are written as they are
 * checked: memory stays one batch, whatever the number of processes. */
static int write_dump(struct xb_sink *k, struct xb_session *s, FILE *f)
{
	struct dump_sink *d = (struct dump_sink *)k;
	add_blocked(d, s);
	struct xb_ptab t;
	if (xb_ptab_open(&s->vm, &t) < 0)
		return xb_fail("--dump: %s", xb_err());
	struct dumper w = { .d = d, .s = s, .t = &t, .f = f };
	uint32_t *slots = calloc(d->o.nonly ? d->o.nonly : 1, sizeof(*slots));
	w.v = calloc(DUMP_BATCH, sizeof(*w.v));
	w.bufs = malloc(DUMP_BATCH * (size_t)xb_off(&s->vm, XB_F_PROC_SIZE));
	w.stacks = malloc(DUMP_BATCH * STACK_PREFETCH);
	int rc = -1;
	if (!slots || !w.v || !w.bufs || !w.stacks) {
		xb_fail("out of memory");
		goto out;
	}
	w.slots = slots;
	for (size_t i = 0; i < d->o.nonly; i++)
		if (xb_ptab_find(&t, d->o.only[i], &slots[i]) < 0)
			goto out;
	struct xb_json jw;
	if (d->o.json) {
		w.j = &jw;
		xb_json_init(w.j, f, XB_JSON_PRETTY);
		xb_json_begin_array(w.j);
	}
	struct xb_ptab_stats st = { 0 };
	int frc = 0;
	if (d->o.nonly) {
		/* a few processes: those slots only */
		for (uint32_t slot = 0; xb_ptab_next(&t, &slot); slot++) {
			struct xb_proc p;
			if (!wanted(d, slots, d->o.nonly, slot))
				continue;
			if (xb_proc_read(&t, slot, XB_PROC_NAMES | XB_PROC_MEMORY, &p) < 0)
				st.gone++;
			else
				one_process(&p, &w);
		}
	} else {
		frc = xb_ptab_foreach(&t, XB_PROC_NAMES | XB_PROC_MEMORY, one_process, &w, &st);
	}
	flush(&w);
	/* not read consistently twice, or not at all: not listed */
	w.gone += st.gone + st.changed + st.unreadable;
	char summary[200];
	snprintf(summary, sizeof(summary), "%llu processes listed", (unsigned long long)w.listed);
	if (w.gone || w.reread || w.changing)
		snprintf(summary + strlen(summary), sizeof(summary) - strlen(summary),
			 "; %llu exited while read, %llu read again (changed under the first read), %llu changing",
			 (unsigned long long)w.gone, (unsigned long long)w.reread, (unsigned long long)w.changing);
	bool interrupted = frc < 0 && xb_interrupted; /* ^C: what was read, said so */
	if (interrupted)
		snprintf(summary + strlen(summary), sizeof(summary) - strlen(summary),
			 "; interrupted: the processes after these were not read");
	if (w.j) {
		xb_json_end_array(w.j);
		if (xb_json_finish(w.j) < 0)
			goto out;
		if (xb_verbose)
			xb_say(stderr, "--dump: %s", summary);
	} else {
		fprintf(f, "%s\n", summary);
	}
	rc = frc < 0 && !interrupted ? xb_fail("--dump: %s", xb_err()) : 0;
out:
	free(slots);
	free(w.v);
	free(w.bufs);
	free(w.stacks);
	xb_ptab_close(&t);
	return rc;
}

static void free_sink(struct xb_sink *k)
{
	struct dump_sink *d = (struct dump_sink *)k;
	for (size_t i = 0; i < d->n; i++)
		free_names(d->v[i].frames, d->v[i].n);
	free(d->v);
	free(d->sched);
	free(d);
}

static const struct xb_sink_ops dump_ops = {
	.name = "dump",
	.add = add,
	.done = done,
	.write = write_dump,
	.free = free_sink,
};

struct xb_sink *xb_dump_sink_new(const struct xb_dump_opts *o)
{
	struct dump_sink *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->k.ops = &dump_ops;
	d->o = *o;
	return &d->k;
}

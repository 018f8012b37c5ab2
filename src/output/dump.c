/* dump.c - --dump: the Erlang stack of every process (or of those named),
 * running or not.  A process that is not running has its stack where the
 * VM left it when it was switched out: its saved instruction pointer
 * (c_p->i) names the innermost function, its saved stack pointer
 * (c_p->stop) starts the stack (erlstack.c, xb_erlang_stack_saved).  A
 * running process's stack is taken from a sample (the session samples the
 * schedulers until each has shown a process, or --pstack-wait).  Reads are
 * racy: a process whose state changed while its stack was read is read
 * again once, then marked "changing". */
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

/* One process's stack from its saved state, read twice over: the state
 * (stop, i, heap) must be the same before and after the stack is read. */
static int saved_stack(struct xb_session *s, struct xb_ptab *t, struct xb_proc *p, struct xb_estack *es,
		       bool *changing)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		xb_erlang_stack_saved(&s->es, p->addr, p->pid, p->i, p->stop, p->heap, p->hend, es);
		struct xb_proc again;
		if (xb_proc_read(t, p->slot, XB_PROC_NAMES, &again) < 0)
			return -1; /* gone */
		if (again.pid == p->pid && again.i == p->i && again.stop == p->stop && again.heap == p->heap &&
		    again.hend == p->hend && again.status == p->status) {
			*changing = false;
			return 0;
		}
		*p = again;
	}
	*changing = true;
	return 0;
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

static int write_dump(struct xb_sink *k, struct xb_session *s, FILE *f)
{
	struct dump_sink *d = (struct dump_sink *)k;
	add_blocked(d, s);
	struct xb_ptab t;
	if (xb_ptab_open(&s->vm, &t) < 0)
		return xb_fail("--dump: %s", xb_err());
	uint32_t *slots = calloc(d->o.nonly ? d->o.nonly : 1, sizeof(*slots));
	if (!slots) {
		xb_ptab_close(&t);
		return xb_fail("out of memory");
	}
	for (size_t i = 0; i < d->o.nonly; i++)
		if (xb_ptab_find(&t, d->o.only[i], &slots[i]) < 0) {
			free(slots);
			xb_ptab_close(&t);
			return -1;
		}
	struct xb_json jw, *j = NULL;
	if (d->o.json) {
		j = &jw;
		xb_json_init(j, f, XB_JSON_PRETTY);
		xb_json_begin_array(j);
	}
	uint64_t listed = 0, gone = 0, changing = 0;
	static struct xb_estack es;
	for (uint32_t slot = 0; xb_ptab_next(&t, &slot); slot++) {
		if (!wanted(d, slots, d->o.nonly, slot))
			continue;
		struct xb_proc p;
		if (xb_proc_read(&t, slot, XB_PROC_NAMES | XB_PROC_MEMORY, &p) < 0) {
			gone++;
			continue;
		}
		struct row r = { .msgq = p.msgq_len };
		xb_proc_pid_text(&s->vm, p.pid, r.pid, sizeof(r.pid));
		const char *rn = p.reg_name ? xb_vm_atom(&s->vm, p.reg_name) : NULL;
		char ebuf[600];
		snprintf(r.name, sizeof(r.name), "%s",
			 !rn ? "" : s->fr.erlang_names ? rn : xb_elixir_atom(rn, ebuf, sizeof(ebuf)));
		snprintf(r.status, sizeof(r.status), "%s", xb_pstatus_name(p.status));
		xb_mfa_text(&s->vm, p.current_mfa, r.current, sizeof(r.current));
		const struct seen *e = find_seen(d, p.addr);
		if (p.status == XB_PS_RUNNING || p.status == XB_PS_GARBAGE_COLLECTING) {
			if (e) {
				r.frames = e->frames;
				r.n = e->n;
				r.note = e->partial   ? "running: only the innermost function could be read"
					 : e->blocked ? "running: blocked off the CPU in a call it made (NIF or BIF)"
						      : NULL;
			} else {
				r.note = "running: not caught by a sample";
			}
		} else {
			bool ch = false;
			if (saved_stack(s, &t, &p, &es, &ch) < 0) {
				gone++;
				continue;
			}
			if (ch) {
				changing++;
				r.note = "changing: its state changed while its stack was read, twice";
			} else if (es.status == XB_ES_OK) {
				r.frames = frame_names(s, &es);
				r.n = r.frames ? es.n : 0;
				r.own = true;
				if (es.truncated && !es.complete)
					r.note = "stack cut (--max-callchain-depth, or unreadable)";
			} else {
				r.note = es.why ? es.why : "stack not readable";
			}
		}
		/* c_p->current is not kept for every waiting process: the VM
		 * then names the function its saved pc is in (process_info's
		 * current_function, erts_find_function_from_pc), as here. */
		if (strcmp(r.current, "-") == 0 && r.n)
			snprintf(r.current, sizeof(r.current), "%s", r.frames[0]);
		print_row(f, j, &r);
		if (r.own)
			free_names(r.frames, r.n);
		listed++;
	}
	if (j) {
		xb_json_end_array(j);
		if (xb_json_finish(j) < 0) {
			free(slots);
			xb_ptab_close(&t);
			return -1;
		}
	} else {
		fprintf(f, "%llu processes listed", (unsigned long long)listed);
		if (gone || changing)
			fprintf(f, "; %llu exited while read, %llu changing", (unsigned long long)gone,
				(unsigned long long)changing);
		fputc('\n', f);
	}
	free(slots);
	xb_ptab_close(&t);
	return 0;
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

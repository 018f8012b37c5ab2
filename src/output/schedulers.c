/* schedulers.c - --schedulers and --long-calls (see schedulers.h). */
#define _GNU_SOURCE
#include "xb/schedulers.h"
#include "xb/by.h"
#include "xb/common.h"
#include "xb/longcalls.h"
#include "xb/output_util.h"
#include "xb/session.h"
#include "xb/states.h"
#include "xb/tasks.h"
#include "xb/threadcpu.h"
#include "xb/writers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TOP_PROCESSES 5
#define MAX_SCHED_BITS 1024

/* ---- a small map (u64, u32) -> u64, open addressing ---- */

struct kent {
	uint64_t a;
	uint32_t b;
	bool used;
	uint64_t v;
};
struct kmap {
	struct kent *e;
	size_t cap, n;
};

static uint64_t khash(uint64_t a, uint32_t b)
{
	uint64_t h = (a ^ ((uint64_t)b << 32 | b)) * 0x9E3779B97F4A7C15ull;
	return h ^ (h >> 29);
}

/* The value slot of (a, b), created as 0; NULL when memory runs out. */
static uint64_t *kmap_get(struct kmap *m, uint64_t a, uint32_t b)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct kent *e = calloc(cap, sizeof(*e));
		if (!e)
			return NULL;
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->e[i].used)
				continue;
			size_t j = khash(m->e[i].a, m->e[i].b) & (cap - 1);
			while (e[j].used)
				j = (j + 1) & (cap - 1);
			e[j] = m->e[i];
		}
		free(m->e);
		m->e = e;
		m->cap = cap;
	}
	size_t j = khash(a, b) & (m->cap - 1);
	while (m->e[j].used) {
		if (m->e[j].a == a && m->e[j].b == b)
			return &m->e[j].v;
		j = (j + 1) & (m->cap - 1);
	}
	m->e[j] = (struct kent){ a, b, true, 0 };
	m->n++;
	return &m->e[j].v;
}

static void kmap_free(struct kmap *m)
{
	free(m->e);
	memset(m, 0, sizeof(*m));
}

/* ---- what is kept ---- */

/* A normal scheduler watched for calls that hold it off the CPU (a NIF
 * or BIF that sleeps, blocks in I/O or on a lock): cpu-clock samples
 * never land there, so the thread is looked at between drains instead
 * (poll_blocked).  Each look reads the scheduler's current process and
 * its call identity (c_p->fcalls, c_p->reds: stored when a NIF or BIF is
 * called, so another call has another one); a run of looks with the same
 * reading may hold one call, never two. */
struct blocked {
	/* the current run of looks with one reading */
	bool run_have;           /* a current process (else: none, idle) */
	uint64_t run_c_p;
	struct xb_call_id run_id;
	uint64_t run_before_ns;  /* the look before the run (0: none) */
	uint64_t last_look_ns;
	/* the call found blocked in this run */
	bool active;
	uint32_t fn, caller;
	char pid[32], name[256];
	uint64_t first_ns, last_ns; /* first and last look that saw it blocked in the call */
	unsigned looks;
	/* time between looks that both saw it blocked (a look that finds
	 * it on a CPU, computing in the call, breaks the count) */
	uint64_t blocked_ns;
	bool last_blocked; /* the last look (at last_ns) saw it blocked */
};

struct tstat {
	uint64_t samples, state[XB_STATE_COUNT];
	int last_cpu;
	uint64_t cpu_moves;
	uint64_t mig_in, mig_out;
	struct xb_thread_cpu c0, c1;
	uint64_t w0, w1; /* when c0 and c1 were read */
	bool have0, have1;
	struct blocked bl; /* a normal scheduler: calls off the CPU */
};

struct pinfo {
	uint64_t pid_term;
	char pid[32], name[256];
	uint64_t samples, migrations;
	int last_thread; /* sampler thread index of its last normal-scheduler sample, or -1 */
	uint64_t scheds[MAX_SCHED_BITS / 64]; /* normal schedulers it was seen on */
};

struct sched_sink;
static void blocked_close(struct sched_sink *ss, size_t ti, struct blocked *b, uint64_t now);

struct sched_sink {
	struct xb_sink k;
	struct xb_sched_opts o;
	struct xb_states cls;
	struct xb_longcalls lc;
	struct tstat *ts; /* by sampler thread index */
	size_t nts;
	struct pinfo *procs;
	size_t nprocs, pcap;
	struct kmap pindex;  /* (pid_term, 0) -> procs index + 1 */
	struct kmap on;      /* (pid_term, thread) -> samples of that process there */
	struct kmap cpus;    /* (cpu, thread) -> samples */
	bool failed;         /* memory ran out: the report says so */
	uint64_t last_poll_ns;
};

static struct tstat *tstat_of(struct sched_sink *ss, size_t i)
{
	if (i >= ss->nts) {
		size_t old = ss->nts;
		if (xb_grow_zeroed((void **)&ss->ts, &ss->nts, i + 1 < 64 ? 64 : (i + 1) * 2, sizeof(*ss->ts)) < 0)
			return NULL;
		for (size_t j = old; j < ss->nts; j++)
			ss->ts[j].last_cpu = -1;
	}
	return &ss->ts[i];
}

static void read_cpu(struct xb_session *s, size_t i, struct xb_thread_cpu *c, uint64_t *when, bool *have)
{
	*have = xb_thread_cpu_read(s->vm.pid, s->smp.threads[i].tid, c) == 0;
	*when = xb_now_ns();
}

static void started(struct xb_sink *k, struct xb_session *s)
{
	struct sched_sink *ss = (struct sched_sink *)k;
	xb_states_free(&ss->cls);
	xb_states_init(&ss->cls, &s->vm); /* frames in the VM's own binary */
	for (size_t i = 0; i < s->smp.nthreads; i++) {
		struct tstat *t = tstat_of(ss, i);
		if (t && !s->smp.threads[i].dead)
			read_cpu(s, i, &t->c0, &t->w0, &t->have0);
	}
}

static void stopped(struct xb_sink *k, struct xb_session *s)
{
	struct sched_sink *ss = (struct sched_sink *)k;
	for (size_t i = 0; i < s->smp.nthreads; i++) {
		struct tstat *t = tstat_of(ss, i);
		if (t && t->have0)
			read_cpu(s, i, &t->c1, &t->w1, &t->have1);
	}
	for (size_t i = 0; i < ss->nts; i++)
		blocked_close(ss, i, &ss->ts[i].bl, 0);
	xb_lc_finish(&ss->lc);
}

static struct pinfo *proc_of(struct sched_sink *ss, uint64_t pid_term)
{
	uint64_t *slot = kmap_get(&ss->pindex, pid_term, 0);
	if (!slot)
		return NULL;
	if (*slot)
		return &ss->procs[*slot - 1];
	if (xb_grow((void **)&ss->procs, &ss->pcap, ss->nprocs + 1, sizeof(*ss->procs)) < 0)
		return NULL;
	struct pinfo *p = &ss->procs[ss->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid_term = pid_term;
	p->last_thread = -1;
	*slot = ss->nprocs;
	return p;
}

/* The Erlang function that called the native code of sample RS, or
 * XB_LC_NONE. */
static uint32_t caller_of(const struct xb_profile *p, const struct xb_rsample *rs)
{
	uint32_t k = rs->nnative + (rs->es->leaf_is_callee ? 1 : 0);
	if (k < rs->n && rs->ids[k] < p->nnames && p->names[rs->ids[k]].kind == XB_FK_ERLANG)
		return rs->ids[k];
	return XB_LC_NONE;
}

static void add(struct xb_sink *k, struct xb_session *s, const struct xb_rsample *rs)
{
	struct sched_sink *ss = (struct sched_sink *)k;
	size_t ti = (size_t)rs->s->thread;
	struct tstat *t = tstat_of(ss, ti);
	if (!t) {
		ss->failed = true;
		return;
	}
	if (!t->have0 && !t->samples) /* a thread that appeared while sampling */
		read_cpu(s, ti, &t->c0, &t->w0, &t->have0);
	struct xb_sample_state st;
	xb_classify(&ss->cls, &s->prof, rs, &st);
	t->samples++;
	t->state[st.state]++;
	/* CPUs */
	int cpu = rs->s->cpu;
	if (cpu >= 0) {
		if (t->last_cpu >= 0 && t->last_cpu != cpu)
			t->cpu_moves++;
		t->last_cpu = cpu;
		uint64_t *c = kmap_get(&ss->cpus, (uint64_t)cpu, (uint32_t)ti);
		if (c)
			(*c)++;
		else
			ss->failed = true;
	}
	/* Processes: who ran here, and who moved between normal schedulers */
	const struct xb_estack *es = rs->es;
	char name[256];
	const char *pname = "";
	bool have_pid = st.process && es->pid[0];
	if (have_pid) {
		struct pinfo *p = proc_of(ss, es->pid_term);
		uint64_t *on = kmap_get(&ss->on, es->pid_term, (uint32_t)ti);
		if (!p || !on) {
			ss->failed = true;
			return;
		}
		(*on)++;
		p->samples++;
		snprintf(p->pid, sizeof(p->pid), "%s", es->pid);
		pname = xb_process_name(&s->vm, es, name, sizeof(name));
		if (pname[0])
			snprintf(p->name, sizeof(p->name), "%s", pname);
		else
			pname = p->name;
		if (rs->t->kind == 's') {
			int no = rs->t->sched_no;
			if (p->last_thread >= 0 && (size_t)p->last_thread != ti) {
				p->migrations++;
				t->mig_in++;
				struct tstat *from = tstat_of(ss, (size_t)p->last_thread);
				if (from)
					from->mig_out++;
			}
			p->last_thread = (int)ti;
			if (no >= 1 && no <= MAX_SCHED_BITS)
				p->scheds[(no - 1) / 64] |= 1ull << ((no - 1) % 64);
		}
	}
	/* Long calls: NIFs and BIFs on normal schedulers */
	if (rs->t->kind == 's') {
		struct xb_lc_sample ls = {
			.t = rs->s->time_ns,
			.in_call = st.process && st.fn >= 0 && (uint32_t)st.fn < rs->n && es->c_p &&
				   (st.state == XB_STATE_NIF || st.state == XB_STATE_BIF),
			.c_p = es->c_p,
			.id = es->call,
			.read_ns = es->read_ns,
			.pid = have_pid ? es->pid : "",
			.name = pname,
		};
		if (ls.in_call) {
			ls.fn = rs->ids[st.fn];
			ls.caller = caller_of(&s->prof, rs);
		}
		if (xb_lc_add(&ss->lc, (int)ti, &ls) < 0)
			ss->failed = true;
	}
}

/* ---- writing ---- */

static const char *type_name(char kind)
{
	return kind == 's' ? "normal" : kind == 'c' ? "dirty_cpu" : kind == 'i' ? "dirty_io" : "other";
}

/* "1", "dirty_cpu 1", "dirty_io 1" (JSON and table). */
static const char *sched_label(const struct xb_thread *t, char *buf, size_t len)
{
	if (t->kind == 's')
		snprintf(buf, len, "%d", t->sched_no);
	else
		snprintf(buf, len, "%s %d", type_name(t->kind), t->sched_no);
	return buf;
}

/* Scheduler threads in report order: normal by number, dirty CPU, dirty
 * I/O; then (OTHERS) the other threads by tid.  Returns the count. */
static size_t report_order(const struct xb_session *s, size_t *idx, bool others)
{
	size_t n = 0;
	static const char kinds[] = { 's', 'c', 'i' };
	for (size_t kk = 0; kk < (others ? 1 : XB_ARRAY_SIZE(kinds)); kk++) {
		char kind = others ? 'o' : kinds[kk];
		size_t first = n;
		for (size_t i = 0; i < s->smp.nthreads; i++)
			if (s->smp.threads[i].kind == kind)
				idx[n++] = i;
		/* insertion sort by number (or tid) */
		for (size_t a = first + 1; a < n; a++) {
			size_t v = idx[a], b = a;
			const struct xb_thread *tv = &s->smp.threads[v];
			while (b > first) {
				const struct xb_thread *tb = &s->smp.threads[idx[b - 1]];
				bool gt = others ? tb->tid > tv->tid : tb->sched_no > tv->sched_no;
				if (!gt)
					break;
				idx[b] = idx[b - 1];
				b--;
			}
			idx[b] = v;
		}
	}
	return n;
}

/* A thread's share of the window on a CPU (u) and runnable but waiting
 * for one (w); and busy, what the VM's own clock counts as active
 * (erlang:statistics(scheduler_wall_time)): the time it worked, on a CPU
 * or preempted while working.  The kernel does not say which waits
 * followed a preemption and which a wake-up (a scheduler woken from sleep
 * waits for a CPU in the scheduler loop, which the VM does not count), so
 * w is split by the thread's involuntary and voluntary context switches;
 * both parts times the share of its samples not scheduling or spinning. */
struct util {
	double u, w, busy;
	bool have, have_wait;
};

static struct util util_of(const struct tstat *t)
{
	struct util r = { 0, 0, 0, false, false };
	if (!t || !t->have0 || !t->have1 || t->w1 <= t->w0)
		return r;
	double wall = (double)(t->w1 - t->w0);
	r.have = true;
	r.u = t->c1.run_ns >= t->c0.run_ns ? (double)(t->c1.run_ns - t->c0.run_ns) / wall : 0;
	r.have_wait = t->c0.have_wait && t->c1.have_wait;
	r.w = r.have_wait && t->c1.wait_ns >= t->c0.wait_ns ? (double)(t->c1.wait_ns - t->c0.wait_ns) / wall : 0;
	double working = t->samples ? 1.0 - (double)t->state[XB_STATE_SCHEDULING] / (double)t->samples : 0.0;
	double preempted = 1.0; /* share of the waits that followed a preemption */
	if (t->c0.have_switches && t->c1.have_switches && t->c1.voluntary >= t->c0.voluntary &&
	    t->c1.involuntary >= t->c0.involuntary) {
		uint64_t vol = t->c1.voluntary - t->c0.voluntary, inv = t->c1.involuntary - t->c0.involuntary;
		preempted = vol + inv ? (double)inv / (double)(vol + inv) : 1.0;
	}
	r.busy = (r.u + r.w * preempted) * working;
	if (r.busy > 1.0)
		r.busy = 1.0;
	return r;
}

struct top {
	uint64_t pid_term, n;
};

static int cmp_top(const void *a, const void *b)
{
	const struct top *x = a, *y = b;
	return x->n != y->n ? (x->n > y->n ? -1 : 1) : (x->pid_term < y->pid_term ? -1 : x->pid_term > y->pid_term);
}

/* The processes seen on thread TI, most samples first, into *out (free
 * it); the count. */
static size_t top_on(struct sched_sink *ss, size_t ti, struct top **out)
{
	size_t n = 0;
	*out = NULL;
	for (size_t i = 0; i < ss->on.cap; i++)
		n += ss->on.e[i].used && ss->on.e[i].b == ti;
	if (!n || !(*out = malloc(n * sizeof(**out))))
		return 0;
	size_t k = 0;
	for (size_t i = 0; i < ss->on.cap; i++)
		if (ss->on.e[i].used && ss->on.e[i].b == ti)
			(*out)[k++] = (struct top){ ss->on.e[i].a, ss->on.e[i].v };
	qsort(*out, k, sizeof(**out), cmp_top);
	return k;
}

static const struct pinfo *pinfo_of(struct sched_sink *ss, uint64_t pid_term)
{
	uint64_t *slot = kmap_get(&ss->pindex, pid_term, 0);
	return slot && *slot ? &ss->procs[*slot - 1] : NULL;
}

static double share(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static void json_num(FILE *f, double v)
{
	fprintf(f, "%.4f", v);
}

static void json_ms(FILE *f, uint64_t ns)
{
	if (ns == UINT64_MAX)
		fputs("null", f);
	else
		fprintf(f, "%.3f", (double)ns / 1e6);
}

/* "xb_nif_spin_nif" and "xb_nif.so" of frame FN (tag without brackets). */
static void fn_parts(const struct xb_profile *p, uint32_t fn, const char **name, char *lib, size_t len)
{
	const struct xb_fname *f = &p->names[fn];
	*name = f->name;
	size_t tl = strlen(f->tag);
	if (tl >= 2 && f->tag[0] == '[' && f->tag[tl - 1] == ']')
		snprintf(lib, len, "%.*s", (int)(tl - 2), f->tag + 1);
	else
		snprintf(lib, len, "%s", f->tag);
}

static void write_json_calls(struct sched_sink *ss, struct xb_session *s, FILE *f)
{
	char lib[300], lbl[64];
	fputs("\"long_calls\":[", f);
	for (size_t i = 0; i < ss->lc.ncalls; i++) {
		const struct xb_long_call *c = &ss->lc.calls[i];
		const char *fname;
		fn_parts(&s->prof, c->fn, &fname, lib, sizeof(lib));
		fputs(i ? ",\n{" : "\n{", f);
		fputs("\"function\":", f);
		xb_put_json_string(f, fname);
		fputs(",\"library\":", f);
		xb_put_json_string(f, lib);
		fputs(",\"caller\":", f);
		if (c->caller == XB_LC_NONE) {
			fputs("null", f);
		} else {
			const struct xb_fname *cf = &s->prof.names[c->caller];
			xb_put_json_string(f, cf->name);
			if (cf->file && cf->line) { /* --lines: where it made the call */
				fputs(",\"caller_file\":", f);
				xb_put_json_string(f, cf->file);
				fprintf(f, ",\"caller_line\":%u", cf->line);
			}
		}
		fputs(",\"pid\":", f);
		xb_put_json_string(f, c->pid);
		fputs(",\"name\":", f);
		xb_put_json_string(f, c->name);
		fputs(",\"scheduler\":", f);
		xb_put_json_string(f, c->thread >= 0 && (size_t)c->thread < s->smp.nthreads
					      ? sched_label(&s->smp.threads[c->thread], lbl, sizeof(lbl))
					      : "?");
		fputs(",\"min_ms\":", f);
		json_ms(f, c->min_ns);
		fputs(",\"max_ms\":", f);
		json_ms(f, c->max_ns);
		fprintf(f, ",\"first_ns\":%llu,\"last_ns\":%llu,\"samples\":%u,\"off_cpu\":%s,\"start_exact\":%s,"
			   "\"end_exact\":%s}",
			(unsigned long long)c->first_ns, (unsigned long long)c->last_ns, c->samples,
			c->off_cpu ? "true" : "false", c->start_exact ? "true" : "false", c->end_exact ? "true" : "false");
	}
	fputs("]", f);
}

/* Of the run's wall time, the share a scheduler was seen blocked off the
 * CPU in NIF/BIF calls: the time between looks that both found it blocked
 * in the same call (not the calls' lengths: a NIF may compute between two
 * sleeps, and a call shorter than two looks, ~4 ms, is not seen), so a
 * lower bound. */
static double off_cpu_share(const struct xb_lc_stats *lst, double window_s)
{
	double v = window_s > 0 ? (double)lst->off_cpu_ns / (window_s * 1e9) : 0.0;
	return v > 1.0 ? 1.0 : v;
}

/* The long-call summary of thread TI (JSON members, no braces). */
static void json_lc_summary(struct sched_sink *ss, FILE *f, size_t ti, const struct tstat *t, double window_s)
{
	const struct xb_lc_stats *lst = xb_lc_stats_of(&ss->lc, (int)ti);
	fputs(",\"nif_share\":", f);
	json_num(f, t ? share(t->state[XB_STATE_NIF], t->samples) : 0.0);
	fprintf(f, ",\"off_cpu_calls\":%llu,\"off_cpu_call_share\":", (unsigned long long)lst->off_cpu_calls);
	json_num(f, off_cpu_share(lst, window_s));
	fprintf(f, ",\"native_calls\":%llu,\"native_call_samples\":%llu,\"longest_call\":",
		(unsigned long long)lst->calls, (unsigned long long)lst->samples);
	if (!lst->have_longest) {
		fputs("null", f);
	} else {
		fputs("{\"min_ms\":", f);
		json_ms(f, lst->longest_min_ns);
		fputs(",\"max_ms\":", f);
		json_ms(f, lst->longest_max_ns);
		fputs("}", f);
	}
}

static int write_json(struct sched_sink *ss, struct xb_session *s, FILE *f)
{
	size_t *idx = malloc((s->smp.nthreads + 1) * sizeof(*idx));
	if (!idx)
		return xb_fail("out of memory writing the report");
	size_t n = report_order(s, idx, false);
	char lbl[64];
	fprintf(f, "{\"window_s\":%.3f,\"received\":%llu,\"processed\":%llu,\"long_calls_ms\":%g,\n",
		s->elapsed_s, (unsigned long long)s->st.received, (unsigned long long)s->st.processed,
		ss->o.long_calls_ms);
	fputs("\"schedulers\":[", f);
	for (size_t j = 0; j < n; j++) {
		size_t ti = idx[j];
		const struct xb_thread *th = &s->smp.threads[ti];
		const struct tstat *t = ti < ss->nts ? &ss->ts[ti] : NULL;
		struct util u = util_of(t);
		fputs(j ? ",\n{" : "\n{", f);
		fputs("\"scheduler\":", f);
		xb_put_json_string(f, sched_label(th, lbl, sizeof(lbl)));
		fprintf(f, ",\"type\":\"%s\",\"tid\":%d,\"samples\":%llu", type_name(th->kind), (int)th->tid,
			(unsigned long long)(t ? t->samples : 0));
		if (!ss->o.long_calls_only) {
			fputs(",\"utilization\":", f);
			if (u.have)
				json_num(f, u.u);
			else
				fputs("null", f);
			fputs(",\"runqueue_wait\":", f);
			if (u.have_wait)
				json_num(f, u.w);
			else
				fputs("null", f);
			fputs(",\"busy\":", f);
			if (u.have)
				json_num(f, u.busy);
			else
				fputs("null", f);
			fputs(",\"states\":{", f);
			for (int st = 0; st < XB_STATE_COUNT; st++) {
				fprintf(f, "%s\"%s\":", st ? "," : "", xb_state_names[st]);
				json_num(f, t ? share(t->state[st], t->samples) : 0.0);
			}
			fputs("},\"top_processes\":[", f);
			struct top *tops;
			size_t nt = top_on(ss, ti, &tops);
			for (size_t i = 0; i < nt && i < TOP_PROCESSES; i++) {
				const struct pinfo *p = pinfo_of(ss, tops[i].pid_term);
				fputs(i ? ",{\"pid\":" : "{\"pid\":", f);
				xb_put_json_string(f, p ? p->pid : "?");
				fputs(",\"name\":", f);
				xb_put_json_string(f, p ? p->name : "");
				fputs(",\"share\":", f);
				json_num(f, share(tops[i].n, t ? t->samples : 0));
				fputs("}", f);
			}
			free(tops);
			fprintf(f, "],\"migrations_in\":%llu,\"migrations_out\":%llu,\"cpu_moves\":%llu",
				(unsigned long long)(t ? t->mig_in : 0), (unsigned long long)(t ? t->mig_out : 0),
				(unsigned long long)(t ? t->cpu_moves : 0));
		}
		if (th->kind == 's')
			json_lc_summary(ss, f, ti, t, s->elapsed_s);
		fputs("}", f);
	}
	fputs("],\n", f);
	write_json_calls(ss, s, f);
	if (!ss->o.long_calls_only) {
		/* processes seen on several normal schedulers */
		fputs(",\n\"migrations\":[", f);
		size_t shown = 0;
		for (size_t i = 0; i < ss->nprocs; i++) {
			const struct pinfo *p = &ss->procs[i];
			if (!p->migrations)
				continue;
			fputs(shown++ ? ",\n{\"pid\":" : "\n{\"pid\":", f);
			xb_put_json_string(f, p->pid);
			fputs(",\"name\":", f);
			xb_put_json_string(f, p->name);
			fputs(",\"schedulers\":[", f);
			bool first = true;
			for (int no = 1; no <= MAX_SCHED_BITS; no++)
				if (p->scheds[(no - 1) / 64] & (1ull << ((no - 1) % 64))) {
					fprintf(f, "%s\"%d\"", first ? "" : ",", no);
					first = false;
				}
			fprintf(f, "],\"migrations\":%llu,\"samples\":%llu}", (unsigned long long)p->migrations,
				(unsigned long long)p->samples);
		}
		/* CPUs */
		fputs("],\n\"cpus\":[", f);
		int maxcpu = -1;
		for (size_t i = 0; i < ss->cpus.cap; i++)
			if (ss->cpus.e[i].used && (int)ss->cpus.e[i].a > maxcpu)
				maxcpu = (int)ss->cpus.e[i].a;
		bool firstcpu = true;
		for (int cpu = 0; cpu <= maxcpu; cpu++) {
			uint64_t total = 0;
			for (size_t i = 0; i < ss->cpus.cap; i++)
				if (ss->cpus.e[i].used && ss->cpus.e[i].a == (uint64_t)cpu)
					total += ss->cpus.e[i].v;
			if (!total)
				continue;
			fprintf(f, "%s{\"cpu\":%d,\"samples\":%llu,\"threads\":[", firstcpu ? "\n" : ",\n", cpu,
				(unsigned long long)total);
			firstcpu = false;
			bool first = true;
			for (size_t i = 0; i < ss->cpus.cap; i++) {
				const struct kent *e = &ss->cpus.e[i];
				if (!e->used || e->a != (uint64_t)cpu || e->b >= s->smp.nthreads)
					continue;
				char g[64];
				fputs(first ? "{\"thread\":" : ",{\"thread\":", f);
				first = false;
				xb_put_json_string(f, xb_thread_group_name(&s->smp.threads[e->b], g, sizeof(g)));
				fprintf(f, ",\"tid\":%d,\"share\":", (int)s->smp.threads[e->b].tid);
				json_num(f, share(e->v, total));
				fputs("}", f);
			}
			fputs("]}", f);
		}
		fputs("],\n\"threads_moved\":[", f);
		bool first = true;
		for (size_t i = 0; i < s->smp.nthreads && i < ss->nts; i++) {
			if (!ss->ts[i].cpu_moves)
				continue;
			char g[64];
			fputs(first ? "{\"thread\":" : ",{\"thread\":", f);
			first = false;
			xb_put_json_string(f, xb_thread_group_name(&s->smp.threads[i], g, sizeof(g)));
			fprintf(f, ",\"tid\":%d,\"moves\":%llu}", (int)s->smp.threads[i].tid,
				(unsigned long long)ss->ts[i].cpu_moves);
		}
		fputs("],\n\"other_threads\":[", f);
		size_t no = report_order(s, idx, true);
		for (size_t j = 0; j < no; j++) {
			size_t ti = idx[j];
			const struct tstat *t = ti < ss->nts ? &ss->ts[ti] : NULL;
			struct util u = util_of(t);
			fputs(j ? ",{\"thread\":" : "{\"thread\":", f);
			xb_put_json_string(f, s->smp.threads[ti].comm);
			fprintf(f, ",\"tid\":%d,\"samples\":%llu,\"utilization\":", (int)s->smp.threads[ti].tid,
				(unsigned long long)(t ? t->samples : 0));
			if (u.have)
				json_num(f, u.u);
			else
				fputs("null", f);
			fputs("}", f);
		}
		fputs("]", f);
	}
	/* Whether the states cover time in the kernel (system calls: a
	 * port's writes, page faults): only with --include-kernel, whose
	 * events sample kernel mode too (sampler.c, exclude_kernel). */
	fprintf(f, ",\n\"kernel_time\":%s", s->o.include_kernel ? "true" : "false");
	fprintf(f, ",\n\"complete\":%s}\n", ss->failed ? "false" : "true");
	free(idx);
	return 0;
}

static void pct(FILE *f, double v, int width)
{
	fprintf(f, "%*.1f%%", width - 1, 100.0 * v);
}

static void write_table_calls(struct sched_sink *ss, struct xb_session *s, FILE *f)
{
	char lib[300], lbl[64], c1[300], c2[300], c3[300], ctext[1400];
	fprintf(f, "\nlong NIF/BIF calls on normal schedulers (lower bound >= %g ms), longest first: %zu\n",
		ss->o.long_calls_ms, ss->lc.ncalls);
	if (ss->lc.ncalls)
		fprintf(f, "  %9s %9s  %-9s  %-28s  %-36s  %s\n", "min ms", "max ms", "scheduler", "process",
			"function", "caller");
	for (size_t i = 0; i < ss->lc.ncalls && i < ss->o.top; i++) {
		const struct xb_long_call *c = &ss->lc.calls[i];
		const char *fname;
		fn_parts(&s->prof, c->fn, &fname, lib, sizeof(lib));
		char maxs[32], proc[600], fn[700];
		if (c->max_ns == UINT64_MAX)
			snprintf(maxs, sizeof(maxs), "?");
		else
			snprintf(maxs, sizeof(maxs), "%.2f", (double)c->max_ns / 1e6);
		snprintf(proc, sizeof(proc), "%s%s%s", c->pid, c->name[0] ? " " : "",
			 xb_text_clean(c->name, false, c1, sizeof(c1)));
		snprintf(fn, sizeof(fn), "%s [%s]%s", xb_text_clean(fname, false, c2, sizeof(c2)), lib,
			 c->off_cpu ? " (off CPU)" : "");
		fprintf(f, "  %9.2f %9s  %-9s  %-28s  %-36s  %s\n", (double)c->min_ns / 1e6, maxs,
			c->thread >= 0 && (size_t)c->thread < s->smp.nthreads
				? sched_label(&s->smp.threads[c->thread], lbl, sizeof(lbl))
				: "?",
			proc, fn,
			c->caller == XB_LC_NONE
				? "(unknown)"
				: xb_text_clean(xb_fname_text(&s->prof.names[c->caller], ctext, sizeof(ctext)), false, c3,
						sizeof(c3)));
	}
	if (ss->lc.ncalls > ss->o.top)
		fprintf(f, "  ... %zu more (-t)\n", ss->lc.ncalls - ss->o.top);
}

static int write_table(struct sched_sink *ss, struct xb_session *s, FILE *f)
{
	size_t *idx = malloc((s->smp.nthreads + 1) * sizeof(*idx));
	if (!idx)
		return xb_fail("out of memory writing the report");
	size_t n = report_order(s, idx, false);
	char lbl[64], c1[300];
	xb_write_processed(f, s->st.processed, s->st.received);
	if (!ss->o.long_calls_only) {
		fprintf(f, "schedulers over %.2f s: util = share of wall time on a CPU, rq-wait = runnable but "
			   "waiting for a CPU (the kernel's accounting), busy = working, on a CPU or preempted "
			   "(what scheduler_wall_time counts); states = shares of the scheduler's samples%s\n",
			s->elapsed_s,
			s->o.include_kernel ? " (its time in user space and in the kernel)"
					    : " (its time in user space: --include-kernel adds its time in system "
					      "calls, as msacc counts it)");
		fprintf(f, "%-12s %6s %7s %6s %8s", "scheduler", "util", "rq-wait", "busy", "samples");
		for (int st = 0; st < XB_STATE_COUNT; st++)
			fprintf(f, " %*s", st == XB_STATE_SCHEDULING ? 10 : 8, xb_state_names[st]);
		fprintf(f, "  %s\n", "top processes");
		for (size_t j = 0; j < n; j++) {
			size_t ti = idx[j];
			const struct xb_thread *th = &s->smp.threads[ti];
			const struct tstat *t = ti < ss->nts ? &ss->ts[ti] : NULL;
			struct util u = util_of(t);
			fprintf(f, "%-12s ", sched_label(th, lbl, sizeof(lbl)));
			if (u.have)
				pct(f, u.u, 6);
			else
				fprintf(f, "%6s", "?");
			fputc(' ', f);
			if (u.have_wait)
				pct(f, u.w, 7);
			else
				fprintf(f, "%7s", "?");
			fputc(' ', f);
			if (u.have)
				pct(f, u.busy, 6);
			else
				fprintf(f, "%6s", "?");
			fprintf(f, " %8llu", (unsigned long long)(t ? t->samples : 0));
			for (int st = 0; st < XB_STATE_COUNT; st++) {
				fputc(' ', f);
				pct(f, t ? share(t->state[st], t->samples) : 0.0, st == XB_STATE_SCHEDULING ? 10 : 8);
			}
			struct top *tops;
			size_t nt = top_on(ss, ti, &tops);
			fputs(" ", f);
			for (size_t i = 0; i < nt && i < 3; i++) {
				const struct pinfo *p = pinfo_of(ss, tops[i].pid_term);
				fprintf(f, "%s %s%s%s %.1f%%", i ? "," : "", p ? p->pid : "?", p && p->name[0] ? " " : "",
					p ? xb_text_clean(p->name, false, c1, sizeof(c1)) : "",
					100.0 * share(tops[i].n, t ? t->samples : 0));
			}
			free(tops);
			fputc('\n', f);
		}
	}
	write_table_calls(ss, s, f);
	fprintf(f, "NIF time on normal schedulers (share of samples), calls seen, the longest,\n"
		   "and the time blocked off the CPU in calls (which samples cannot see):\n");
	for (size_t j = 0; j < n; j++) {
		size_t ti = idx[j];
		const struct xb_thread *th = &s->smp.threads[ti];
		if (th->kind != 's')
			continue;
		const struct tstat *t = ti < ss->nts ? &ss->ts[ti] : NULL;
		const struct xb_lc_stats *lst = xb_lc_stats_of(&ss->lc, (int)ti);
		fprintf(f, "  scheduler %d: nif %.1f%%, %llu NIF/BIF calls seen", th->sched_no,
			100.0 * (t ? share(t->state[XB_STATE_NIF], t->samples) : 0.0), (unsigned long long)lst->calls);
		if (lst->have_longest) {
			fprintf(f, ", longest >= %.2f ms", (double)lst->longest_min_ns / 1e6);
			if (lst->longest_max_ns != UINT64_MAX)
				fprintf(f, " (<= %.2f ms)", (double)lst->longest_max_ns / 1e6);
		}
		fputc('\n', f);
		if (lst->off_cpu_calls)
			fprintf(f, "    blocked off the CPU in %llu of them: >= %.1f%% of the run\n",
				(unsigned long long)lst->off_cpu_calls, 100.0 * off_cpu_share(lst, s->elapsed_s));
	}
	if (!ss->o.long_calls_only) {
		uint64_t moves = 0;
		size_t movers = 0;
		for (size_t i = 0; i < ss->nprocs; i++)
			if (ss->procs[i].migrations) {
				movers++;
				moves += ss->procs[i].migrations;
			}
		fprintf(f, "\nprocesses seen on more than one normal scheduler: %zu (%llu migrations seen)\n", movers,
			(unsigned long long)moves);
		size_t shown = 0;
		for (size_t i = 0; i < ss->nprocs && shown < ss->o.top; i++) {
			const struct pinfo *p = &ss->procs[i];
			if (!p->migrations)
				continue;
			shown++;
			fprintf(f, "  %s%s%s: schedulers", p->pid, p->name[0] ? " " : "",
				xb_text_clean(p->name, false, c1, sizeof(c1)));
			bool first = true;
			for (int no = 1; no <= MAX_SCHED_BITS; no++)
				if (p->scheds[(no - 1) / 64] & (1ull << ((no - 1) % 64))) {
					fprintf(f, "%s%d", first ? " " : ",", no);
					first = false;
				}
			fprintf(f, "; %llu migrations in %llu samples\n", (unsigned long long)p->migrations,
				(unsigned long long)p->samples);
		}
		fprintf(f, "\nCPUs (the CPU the kernel recorded for each sample):\n");
		int maxcpu = -1;
		for (size_t i = 0; i < ss->cpus.cap; i++)
			if (ss->cpus.e[i].used && (int)ss->cpus.e[i].a > maxcpu)
				maxcpu = (int)ss->cpus.e[i].a;
		for (int cpu = 0; cpu <= maxcpu; cpu++) {
			uint64_t total = 0;
			for (size_t i = 0; i < ss->cpus.cap; i++)
				if (ss->cpus.e[i].used && ss->cpus.e[i].a == (uint64_t)cpu)
					total += ss->cpus.e[i].v;
			if (!total)
				continue;
			fprintf(f, "  cpu %d: %llu samples:", cpu, (unsigned long long)total);
			bool first = true;
			for (size_t i = 0; i < ss->cpus.cap; i++) {
				const struct kent *e = &ss->cpus.e[i];
				if (!e->used || e->a != (uint64_t)cpu || e->b >= s->smp.nthreads)
					continue;
				char g[64];
				fprintf(f, "%s %s %.1f%%", first ? "" : ",",
					xb_text_clean(xb_thread_group_name(&s->smp.threads[e->b], g, sizeof(g)), false, c1,
						      sizeof(c1)),
					100.0 * share(e->v, total));
				first = false;
			}
			fputc('\n', f);
		}
		fprintf(f, "threads that moved between CPUs (moves seen between their samples):");
		bool any = false;
		for (size_t i = 0; i < s->smp.nthreads && i < ss->nts; i++) {
			if (!ss->ts[i].cpu_moves)
				continue;
			char g[64];
			fprintf(f, "%s %s (%llu)", any ? "," : "",
				xb_text_clean(xb_thread_group_name(&s->smp.threads[i], g, sizeof(g)), false, c1, sizeof(c1)),
				(unsigned long long)ss->ts[i].cpu_moves);
			any = true;
		}
		fprintf(f, "%s\n", any ? "" : " none");
		fprintf(f, "other threads (util):");
		size_t no = report_order(s, idx, true);
		for (size_t j = 0; j < no; j++) {
			size_t ti = idx[j];
			struct util u = util_of(ti < ss->nts ? &ss->ts[ti] : NULL);
			fprintf(f, "%s %s", j ? "," : "", xb_text_clean(s->smp.threads[ti].comm, false, c1, sizeof(c1)));
			if (u.have)
				fprintf(f, " %.1f%%", 100.0 * u.u);
		}
		fputc('\n', f);
	}
	if (ss->failed)
		fprintf(f, "(memory ran out while sampling: the figures above miss some samples)\n");
	free(idx);
	return 0;
}

static int write_report(struct xb_sink *k, struct xb_session *s, FILE *f)
{
	struct sched_sink *ss = (struct sched_sink *)k;
	int rc = ss->o.json ? write_json(ss, s, f) : write_table(ss, s, f);
	if (rc == 0 && ferror(f))
		return xb_fail("write error: %s", strerror(errno ? errno : EIO));
	return rc;
}

static void free_sink(struct xb_sink *k)
{
	struct sched_sink *ss = (struct sched_sink *)k;
	xb_states_free(&ss->cls);
	xb_lc_free(&ss->lc);
	kmap_free(&ss->pindex);
	kmap_free(&ss->on);
	kmap_free(&ss->cpus);
	free(ss->procs);
	free(ss->ts);
	free(ss);
}

/* ---- calls that block a scheduler off the CPU ---- */

/* Looks at the normal schedulers at most this often (/proc reads: a few
 * microseconds each; an unwind only when a new call is found). */
#define BLOCKED_POLL_NS (2ull * 1000 * 1000)

/* The call B was in is over, proven at NOW by a look with another
 * reading (0: sampling stopped, the end unknown): lower bound from its
 * first to its last blocked look, upper from the look before its run of
 * looks to NOW. */
static void blocked_close(struct sched_sink *ss, size_t ti, struct blocked *b, uint64_t now)
{
	if (!b->active)
		return;
	b->active = false;
	struct xb_long_call c = {
		.fn = b->fn,
		.caller = b->caller,
		.thread = (int)ti,
		.first_ns = b->first_ns,
		.last_ns = b->last_ns,
		.min_ns = b->last_ns - b->first_ns,
		.max_ns = now && b->run_before_ns ? now - b->run_before_ns : UINT64_MAX,
		.samples = b->looks,
		.off_cpu = true,
		.blocked_ns = b->blocked_ns,
		.c_p = b->run_c_p,
		.id = b->run_id,
	};
	snprintf(c.pid, sizeof(c.pid), "%s", b->pid);
	snprintf(c.name, sizeof(c.name), "%s", b->name);
	if (xb_lc_add_call(&ss->lc, &c) < 0)
		ss->failed = true;
}

/* Thread TI, its run of looks in a call of its current process: blocked
 * in it now?  Then the call is named and classified as a sample there
 * would be, and B holds it from NOW on. */
static void blocked_open(struct sched_sink *ss, struct xb_session *s, size_t ti, struct blocked *b, uint64_t now)
{
	const struct xb_thread *t = &s->smp.threads[ti];
	static struct xb_unwind uw;
	static struct xb_estack es;
	if (!xb_session_blocked_call(s, t, &uw, &es) || es.c_p != b->run_c_p || !xb_call_id_same(&es.call, &b->run_id))
		return;
	struct xb_sample smp = { .tid = t->tid, .time_ns = now, .ip = uw.n ? uw.pcs[0] : 0, .thread = (int)ti,
				 .cpu = -1 };
	uint32_t ids[XB_MAX_FRAMES], nnative;
	uint32_t n = xb_frames_ids(&s->fr, &smp, &uw, &es, ids, &nnative);
	struct xb_rsample rs = { &smp, t, &uw, &es, ids, n, nnative };
	struct xb_sample_state st;
	xb_classify(&ss->cls, &s->prof, &rs, &st);
	if (!st.process || st.fn < 0 || (uint32_t)st.fn >= n ||
	    (st.state != XB_STATE_NIF && st.state != XB_STATE_BIF))
		return;
	char name[256];
	const char *pname = xb_process_name(&s->vm, &es, name, sizeof(name));
	b->active = true;
	b->fn = ids[st.fn];
	b->caller = caller_of(&s->prof, &rs);
	b->first_ns = b->last_ns = now;
	b->last_blocked = true;
	b->blocked_ns = 0;
	b->looks = 1;
	snprintf(b->pid, sizeof(b->pid), "%s", es.pid);
	snprintf(b->name, sizeof(b->name), "%s", pname);
}

/* Between drains, each normal scheduler: one read of its current process
 * and call identity (a scheduler waiting for work has none and costs no
 * more); when it is in a call and blocked in a system call, the call is
 * found (an unwind, once per call) or its last look moves on.  A look
 * that reads another identity ends the run and the call in it; a look
 * that finds the thread on a CPU ends nothing (the same NIF may compute
 * between two sleeps).  A call shorter than two looks is not seen. */
static void poll_blocked(struct xb_sink *k, struct xb_session *s)
{
	struct sched_sink *ss = (struct sched_sink *)k;
	uint64_t now = xb_now_ns();
	if (now - ss->last_poll_ns < BLOCKED_POLL_NS)
		return;
	ss->last_poll_ns = now;
	for (size_t ti = 0; ti < s->smp.nthreads; ti++) {
		const struct xb_thread *t = &s->smp.threads[ti];
		if (t->kind != 's' || t->dead)
			continue;
		struct tstat *ts = tstat_of(ss, ti);
		if (!ts) {
			ss->failed = true;
			return;
		}
		struct blocked *b = &ts->bl;
		uint64_t c_p = 0, sp, pc;
		struct xb_call_id id = { 0 };
		bool have = xb_blocked_call_id(&s->es, t->sched_no, &c_p, &id) == 0;
		bool same = b->last_look_ns && have == b->run_have &&
			    (!have || (c_p == b->run_c_p && xb_call_id_same(&id, &b->run_id)));
		if (!same) {
			blocked_close(ss, ti, b, now);
			b->run_before_ns = b->last_look_ns;
			b->run_have = have;
			b->run_c_p = c_p;
			b->run_id = id;
		}
		b->last_look_ns = now;
		if (!have || !xb_task_blocked_at(s->vm.pid, t->tid, &sp, &pc)) {
			b->last_blocked = false;
			continue;
		}
		if (b->active) {
			if (b->last_blocked)
				b->blocked_ns += now - b->last_ns;
			b->last_ns = now;
			b->last_blocked = true;
			b->looks++;
		} else {
			blocked_open(ss, s, ti, b, now);
		}
	}
}

static const struct xb_sink_ops sched_ops = {
	.name = "schedulers",
	.add = add,
	.poll = poll_blocked,
	.started = started,
	.stopped = stopped,
	.write = write_report,
	.free = free_sink,
};

struct xb_sink *xb_schedulers_sink_new(const struct xb_sched_opts *o)
{
	struct sched_sink *ss = calloc(1, sizeof(*ss));
	if (!ss)
		return NULL;
	ss->k.ops = &sched_ops;
	ss->o = *o;
	xb_states_init(&ss->cls, NULL);
	xb_lc_init(&ss->lc, (uint64_t)(o->long_calls_ms * 1e6));
	return &ss->k;
}

/* erlang-sample - sampling profiler for a running BEAM.
 *
 *   erlang-sample [options] PID              flat profile
 *   erlang-sample --pstack PID               one stack per scheduler, now
 *   erlang-sample --blame copy_struct PID    Erlang code under a native fn
 *
 * Pipeline: sampling (perf_event) -> unwinding (libdwfl) -> Erlang state
 * (process_vm_readv) -> naming (code map) -> aggregating -> output.
 */
#define _GNU_SOURCE
#include "xb/check.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/demangle.h"
#include "xb/erlstack.h"
#include "xb/profile.h"
#include "xb/report.h"
#include "xb/sampler.h"
#include "xb/unwind.h"
#include "xb/version.h"
#include "xb/vm.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PROG "erlang-sample"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct opts {
	double duration;   /* seconds; 0 = until ^C */
	unsigned freq;
	uint64_t period;
	size_t top;
	unsigned max_depth;
	unsigned user_stack;
	bool only_erlang, include_kernel, skid_summary, pstack, idle_stacks, software;
	double pstack_wait;
	double max_skid_ms;
	const char *blame;
	const char *format; /* "table" or "folded" */
	const char *output;
	int force_cp, force_E, force_I;
	bool check;
	unsigned wakeup;
	unsigned drain_ms;
};

/* Kernel symbols for --include-kernel (/proc/kallsyms). */
struct ksym {
	uint64_t addr;
	char *name;
};
static struct ksym *ksyms;
static size_t nksyms;

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static void load_kallsyms(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	size_t cap = 0;
	char line[512];
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char t, name[256];
		if (sscanf(line, "%llx %c %255s", &a, &t, name) != 3 || !a)
			continue;
		if (t != 't' && t != 'T')
			continue;
		if (xb_grow((void **)&ksyms, &cap, nksyms + 1, sizeof(*ksyms)) < 0)
			break;
		ksyms[nksyms].addr = a;
		ksyms[nksyms].name = strdup(name);
		nksyms++;
	}
	fclose(f);
	qsort(ksyms, nksyms, sizeof(*ksyms), cmp_ksym);
}

static const char *ksym_name(uint64_t a)
{
	size_t lo = 0, hi = nksyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ksyms[mid].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? ksyms[lo - 1].name : "[unknown]";
}

struct ctx {
	struct opts *o;
	struct xb_vm *vm;
	struct xb_sampler *smp;
	struct xb_unwinder uw;
	struct xb_estate es;
	struct xb_codemap cm;
	struct xb_profile prof;
	uint64_t received, processed;
	uint64_t dropped_bad, dropped_stale, dropped_truncated, dropped_skid, no_regs;
	uint64_t unresolved_frames, truncated_erlang, depth_limited, modules_seen;
	uint64_t *skid_us;
	size_t nskid, skidcap;
	uint64_t first_ns, last_ns;
	/* --pstack: one captured stack per scheduler thread */
	struct pstack_entry {
		bool have;
		struct xb_estack es;
		struct xb_unwind uw;
		struct xb_sample meta; /* no stack data kept */
		const struct xb_code *jit_here;
	} *ps;
	size_t nps;
	struct xb_estack tmp_es;
	struct {
		uint64_t key;
		uint32_t id;
	} pccache[4096];
};

static void native_name(struct ctx *c, uint64_t pc, bool exact, char *name, size_t nlen,
			char *tag, size_t tlen)
{
	struct xb_modsyms *m;
	uint64_t look = exact ? pc : pc - 1;
	const struct xb_sym *s = xb_symbols_addr(&c->vm->syms, look, &m);
	if (s) {
		char d[512];
		snprintf(name, nlen, "%s", xb_demangle(s->name, d, sizeof(d)));
		snprintf(tag, tlen, "[%s]", m->name);
	} else if (m) {
		/* A static function of a stripped binary has no name: say so
		 * rather than borrow a neighbour's. */
		snprintf(name, nlen, "[unknown]");
		snprintf(tag, tlen, "[%s]", m->name);
	} else {
		const struct xb_map *mp = xb_maps_find(&c->vm->mem.maps, look);
		snprintf(name, nlen, "[unknown]");
		snprintf(tag, tlen, "[%s]", mp && mp->path[0] ? (strrchr(mp->path, '/') ? strrchr(mp->path, '/') + 1 : mp->path) : "anon");
	}
}

static const struct xb_code *jit_here_other(struct ctx *c, const struct xb_unwind *uw)
{
	if (c->vm->flavor != XB_FLAVOR_JIT || uw->stop != XB_UW_REACHED_ERLANG)
		return NULL;
	const struct xb_code *here =
		xb_codemap_find(&c->cm, uw->erlang_pc_exact ? uw->erlang_pc : uw->erlang_pc - 1);
	return here && here->kind == XB_CODE_OTHER ? here : NULL;
}

/* Frame ids, innermost first: kernel, native, JIT non-function, Erlang. */
static uint32_t build_ids(struct ctx *c, const struct xb_sample *s, const struct xb_unwind *uw,
			  const struct xb_estack *es, uint32_t *ids, uint32_t *nnative)
{
	uint32_t n = 0, max = XB_MAX_KFRAMES + XB_MAX_NATIVE + 1 + XB_MAX_ERLANG;
	char name[512], tag[300];
	if (c->o->include_kernel)
		for (unsigned k = 0; k < s->nkips && n < max; k++)
			ids[n++] = xb_profile_intern(&c->prof, ksym_name(s->kips[k]), "[kernel]", XB_FK_KERNEL);
	for (unsigned k = 0; k < uw->n && n < max; k++) {
		/* Direct-mapped cache pc -> frame id: symbol lookup and
		 * interning cost more than the rest of a sample. */
		uint64_t key = uw->pcs[k] * 2 + uw->activation[k];
		size_t h = (size_t)(key * 0x9E3779B97F4A7C15ull >> 52);
		if (c->pccache[h].key != key) {
			native_name(c, uw->pcs[k], uw->activation[k], name, sizeof(name), tag, sizeof(tag));
			c->pccache[h].key = key;
			c->pccache[h].id = xb_profile_intern(&c->prof, name, tag, XB_FK_NATIVE);
		}
		ids[n++] = c->pccache[h].id;
	}
	const struct xb_code *here = jit_here_other(c, uw);
	if (here)
		ids[n++] = xb_profile_intern(&c->prof, here->name, "[JIT]", XB_FK_JIT);
	else if (uw->stop == XB_UW_REACHED_ERLANG && es->status != XB_ES_OK &&
		 c->vm->flavor == XB_FLAVOR_EMU) {
		/* The interpreter loop with no process on it (scheduling). */
		native_name(c, uw->erlang_pc, uw->erlang_pc_exact, name, sizeof(name), tag, sizeof(tag));
		ids[n++] = xb_profile_intern(&c->prof, name, tag, XB_FK_NATIVE);
	}
	*nnative = n;
	for (unsigned k = 0; k < es->n && n < max; k++) {
		struct xb_code *code = (struct xb_code *)es->frames[k];
		if (!code->user)
			code->user = xb_profile_intern(&c->prof, code->name, "[Erlang]", XB_FK_ERLANG) + 1;
		ids[n++] = code->user - 1;
	}
	/* Only the innermost function is known (erlstack.c, leaf_only):
	 * say so where the callers would be, rather than let a flame graph
	 * show the function as a root. */
	if (es->partial && n < max)
		ids[n++] = xb_profile_intern(&c->prof, XB_CALLERS_UNKNOWN, "[Erlang]", XB_FK_MARK);
	return n;
}

/* --pstack keeps the best sample of each scheduler: one running Erlang code
 * with its whole stack, else one with only the innermost function, else
 * one whose process could not be read (mid-GC it may not). */
static int pstack_rank(const struct xb_estack *es)
{
	if (es->status != XB_ES_OK)
		return 0;
	if (!es->n)
		return 1;
	return es->partial ? 2 : 3;
}

static void on_sample(const struct xb_sample *s, void *arg)
{
	struct ctx *c = arg;
	c->received++;
	/* New code seen by an earlier sample: rebuild the map now, before
	 * this sample takes pointers into it (rate-limited). */
	if (c->es.refresh_wanted)
		xb_estate_refresh_code(&c->es, false);
	if (!c->first_ns)
		c->first_ns = s->time_ns;
	c->last_ns = s->time_ns;
	if (!s->user) {
		c->no_regs++;
		return;
	}
	const struct xb_thread *t = &c->smp->threads[s->thread];
	struct xb_unwind uw;
	xb_unwind_sample(&c->uw, s, &uw);
	if (c->uw.modules_changed != c->modules_seen) {
		/* A module reported since: pcs cached as "[unknown]" may have
		 * a name now. */
		c->modules_seen = c->uw.modules_changed;
		memset(c->pccache, 0, sizeof(c->pccache));
	}
	struct xb_estack *es = &c->tmp_es;
	xb_erlang_stack(&c->es, s, &uw, t->kind, t->sched_no, es);

	if (uw.stop == XB_UW_TRUNCATED) {
		c->dropped_truncated++;
		return;
	}
	c->depth_limited += uw.stop == XB_UW_DEPTH_LIMIT;
	if (es->status == XB_ES_BAD) {
		c->dropped_bad++;
		xb_debug("drop (tid %d ip %llx): %s\n", (int)s->tid, (unsigned long long)s->ip, es->why);
		if (xb_verbose >= 2) {
			char name[512], tag[300];
			for (unsigned k = 0; k < uw.n; k++) {
				native_name(c, uw.pcs[k], uw.activation[k], name, sizeof(name), tag, sizeof(tag));
				xb_debug("    #%u %s %s\n", k, name, tag);
			}
			const struct xb_code *h = xb_codemap_find(&c->cm, uw.erlang_pc - !uw.erlang_pc_exact);
			xb_debug("    JIT/Erlang frame: %s (regs valid 0x%x)\n", h ? h->name : "?", uw.regs_valid);
		}
		return;
	}
	if (es->status == XB_ES_STALE) {
		xb_debug("stale (tid %d ip %llx): %s\n", (int)s->tid, (unsigned long long)s->ip, es->why);
		c->dropped_stale++;
		return;
	}
	if (es->status == XB_ES_OK && es->read_ns) {
		uint64_t skid = es->read_ns > s->time_ns ? es->read_ns - s->time_ns : 0;
		if (xb_grow((void **)&c->skid_us, &c->skidcap, c->nskid + 1, sizeof(*c->skid_us)) == 0)
			c->skid_us[c->nskid++] = skid / 1000;
		if (es->remote_stack && (double)skid > c->o->max_skid_ms * 1e6) {
			c->dropped_skid++;
			return;
		}
	}
	c->unresolved_frames += es->unresolved;
	c->truncated_erlang += es->truncated;
	c->processed++;

	if (c->o->pstack) {
		if (s->thread >= 0 && (size_t)s->thread < c->nps) {
			struct pstack_entry *pe = &c->ps[s->thread];
			/* Prefer a sample running Erlang code, and one whose
			 * Erlang stack could be read (mid-GC it may not). */
			int rank_old = !pe->have ? -1 : pstack_rank(&pe->es);
			int rank_new = pstack_rank(es);
			if (rank_new > rank_old) {
				pe->have = true;
				pe->es = *es;
				pe->uw = uw;
				pe->meta = *s;
				pe->meta.stack = NULL;
				pe->jit_here = jit_here_other(c, &uw);
			}
		}
		return;
	}
	static uint32_t ids[XB_MAX_KFRAMES + XB_MAX_NATIVE + 1 + XB_MAX_ERLANG];
	uint32_t nnative;
	uint32_t n = build_ids(c, s, &uw, es, ids, &nnative);
	xb_profile_add(&c->prof, ids, n, nnative);
}

static int parse_reg(const char *s)
{
	static const char *const names[] = { "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "rip" };
	for (int i = 0; i < 9; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	if (s[0] == 'r') {
		char *end;
		long k = strtol(s + 1, &end, 10);
		if (!*end && k >= 8 && k <= 15)
			return XB_PREG_R8 + (int)(k - 8);
	}
	return -2;
}

/* Is there any function symbol FN matches (xb_blame_match) in the beam? */
static bool blame_symbol_exists(struct xb_vm *vm, const char *fn)
{
	struct xb_modsyms *m = vm->beam;
	xb_symbols_lookup(&vm->syms, m, fn, NULL); /* loads the table */
	char d[512];
	for (size_t i = 0; i < m->naddr; i++)
		if (xb_blame_match(fn, xb_demangle(m->byaddr[i].name, d, sizeof(d))))
			return true;
	return false;
}

static char thread_kind(const void *vm, const char *comm, int *no)
{
	return xb_vm_thread_kind(vm, comm, no);
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: " PROG " [OPTIONS] PID\n"
"Sample a running Erlang VM: which Erlang and native functions burn CPU.\n"
"The VM is never paused; nothing is loaded into it.\n"
"\n"
"Modes:\n"
"      --check              verify the release table, offsets and globals in use\n"
"                           against the running VM; one line per check, exit 1\n"
"                           on any FAIL\n"
"  (default)                flat profile: COUNT NAME PCT [TAG], most samples first\n"
"      --pstack             one mixed native+Erlang stack per running scheduler, now\n"
"                           (dirty schedulers: those working for a process)\n"
"      --blame FN           for samples whose native stack contains FN, count the\n"
"                           nearest Erlang function above it.  FN matches a symbol\n"
"                           exactly, or with any '_suffix' (copy_struct matches\n"
"                           copy_struct_x; erts_garbage_collect matches\n"
"                           erts_garbage_collect_nobump), or as a glob ('copy_*')\n"
"\n"
"Sampling:\n"
"  -d, --duration SECONDS   how long to sample (default: until ^C; 0 = until ^C)\n"
"  -F, --frequency HZ       samples per second per thread (default 997)\n"
"      --period N           sample every N events instead of a frequency\n"
"      --user-stack BYTES   user stack copied per sample (default 16384, max 65528)\n"
"      --include-kernel     also sample kernel frames\n"
"      --software-event     use cpu-clock even where a hardware PMU exists\n"
"      --wakeup N           be woken every N samples of a thread to read them;\n"
"                           0 (default) reads all buffers on a timer instead\n"
"                           (2 ms; 5 ms for a JIT VM), which disturbs the VM\n"
"                           less (see bench/)\n"
"\n"
"Output:\n"
"  -t, --top N              rows to print (default 40)\n"
"      --max-callchain-depth N  frames kept per stack, native and Erlang each\n"
"                           (default 128; native stacks are cut at 128 at most)\n"
"      --only-erlang        count the innermost Erlang frame of each sample\n"
"      --format table|folded  folded: one 'root;...;leaf COUNT' line per stack\n"
"  -o, --output FILE        write the report to FILE\n"
"      --skid-summary       print the delay between a sample and our reads of the\n"
"                           VM's memory (p50/p90/p99/max, microseconds)\n"
"      --max-skid-ms MS     discard samples whose live reads came later than\n"
"                           this after the sample (default 10)\n"
"      --pstack-wait SECONDS  how long --pstack waits for a scheduler to run\n"
"                           (default 1); one that does not is reported idle\n"
"      --idle-scheduler-stacks  with --pstack, show where idle schedulers wait\n"
"\n"
"Interpreter register overrides (default: from DWARF / release table):\n"
"      --force-c_p-register REG  --force-E-register REG  --force-I-register REG\n"
"\n"
"  -v, --verbose            diagnostics on stderr (event used, drop reasons);\n"
"                           alone, '-v' prints the version\n"
"  -h, --help               this help\n"
"      --version            print the version\n");
}

/* This process's user+system CPU time. */
static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
	return (double)xb_now_ns() / 1e9;
}

/* Native frames of a --pstack stack, then the JIT code they were called
 * from (if not an Erlang function); returns the next frame number. */
static unsigned print_native(struct ctx *c, FILE *f, const struct xb_unwind *uw,
			     const struct xb_code *jit_here)
{
	char name[512], tag[300];
	unsigned k = 0;
	for (; k < uw->n; k++) {
		native_name(c, uw->pcs[k], uw->activation[k], name, sizeof(name), tag, sizeof(tag));
		fprintf(f, "  #%-3u 0x%016llx %s %s\n", k, (unsigned long long)uw->pcs[k], name, tag);
	}
	if (jit_here)
		fprintf(f, "  #%-3u 0x%016llx %s [JIT]\n", k++, (unsigned long long)uw->erlang_pc,
			jit_here->name);
	return k;
}

/* The rest of a "scheduler N (tid T): " line for a scheduler running a
 * process: who, then its frames innermost first.  A dirty scheduler's
 * native stack ends at its thread's root; the Erlang stack after it is the
 * process's, suspended while the dirty scheduler works for it. */
static void print_running(struct ctx *c, FILE *f, const struct pstack_entry *pe, bool dirty)
{
	const struct xb_estack *es = &pe->es;
	fprintf(f, "process %s%s%s\n", es->pid, es->regname[0] ? " " : "", es->regname);
	unsigned k = print_native(c, f, &pe->uw, pe->jit_here);
	if (dirty && es->n)
		fprintf(f, "  -- the Erlang stack of %s, which waits for this scheduler:\n", es->pid);
	for (unsigned j = 0; j < es->n; j++, k++)
		fprintf(f, "  #%-3u 0x%016llx %s [Erlang]\n", k, (unsigned long long)es->addrs[j],
			es->frames[j]->name);
	if (es->truncated)
		fprintf(f, "  ... (truncated at --max-callchain-depth)\n");
	if (es->partial)
		fprintf(f, "  ... %s: the stack moved before it could be read\n", XB_CALLERS_UNKNOWN);
}

static void print_pstack(struct ctx *c, FILE *f)
{
	size_t nsched = 0;
	for (size_t i = 0; i < c->smp->nthreads; i++)
		nsched += c->smp->threads[i].kind == 's';
	for (int no = 1; no <= (int)nsched; no++) {
		for (size_t i = 0; i < c->smp->nthreads; i++) {
			struct xb_thread *t = &c->smp->threads[i];
			if (t->kind != 's' || t->sched_no != no)
				continue;
			struct pstack_entry *pe = i < c->nps ? &c->ps[i] : NULL;
			if (!pe || !pe->have || pe->es.status != XB_ES_OK) {
				/* Never seen running a process: idle.  OTP 29 schedulers
				 * spin in scheduler_wait() before sleeping, so one may
				 * have been sampled in scheduler code: idle too. */
				bool spun = pe && pe->have;
				fprintf(f, "scheduler %d (tid %d): idle%s\n", no, (int)t->tid,
					spun ? " (in scheduler code, no process)" : "");
				if (!c->o->idle_stacks)
					continue;
				if (spun) {
					print_native(c, f, &pe->uw, pe->jit_here);
					continue;
				}
				char path[96];
				snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)c->vm->pid, (int)t->tid);
				char *sc = xb_slurp(path, NULL);
				unsigned long long sp = 0, pc = 0;
				char *p = sc ? strrchr(sc, ' ') : NULL;
				if (p && sscanf(p, " %llx", &pc) == 1) {
					*p = 0;
					char *q = strrchr(sc, ' ');
					if (q)
						sscanf(q, " %llx", &sp);
				}
				free(sc);
				if (sp && pc) {
					struct xb_unwind uw;
					xb_unwind_blocked(&c->uw, t->tid, sp, pc, &uw);
					print_native(c, f, &uw, NULL);
					if (uw.stop == XB_UW_REACHED_ERLANG)
						fprintf(f, "  #%-3u 0x%016llx (Erlang scheduler loop)\n", uw.n,
							(unsigned long long)uw.erlang_pc);
				} else {
					fprintf(f, "  (waiting stack not available)\n");
				}
				continue;
			}
			fprintf(f, "scheduler %d (tid %d): ", no, (int)t->tid);
			print_running(c, f, pe, false);
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
		for (size_t i = 0; i < c->smp->nthreads; i++) {
			struct xb_thread *t = &c->smp->threads[i];
			if (t->kind != dirty_kinds[d].kind)
				continue;
			total++;
			struct pstack_entry *pe = i < c->nps ? &c->ps[i] : NULL;
			if (!pe || !pe->have || pe->es.status != XB_ES_OK || !pe->es.n)
				continue;
			busy++;
			fprintf(f, "%s scheduler %d (tid %d): ", dirty_kinds[d].name, t->sched_no, (int)t->tid);
			print_running(c, f, pe, true);
		}
		if (total > busy)
			fprintf(f, "%s schedulers: %d of %d not seen working for a process\n",
				dirty_kinds[d].name, total - busy, total);
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .freq = 997, .top = 40, .max_depth = 128, .user_stack = 16384,
			  .pstack_wait = 1.0, .max_skid_ms = 10, .drain_ms = 2, .format = "table",
			  .force_cp = -1, .force_E = -1, .force_I = -1 };
	enum { O_PERIOD = 256, O_STACK, O_DEPTH, O_ONLY_ERL, O_KERNEL, O_SKID, O_MAXSKID, O_FORMAT,
	       O_PSTACK, O_PWAIT, O_IDLE, O_BLAME, O_FCP, O_FE, O_FI, O_VERSION, O_SOFT, O_CHECK, O_WAKEUP };
	static const struct option lopts[] = {
		{ "duration", 1, 0, 'd' },   { "frequency", 1, 0, 'F' },    { "period", 1, 0, O_PERIOD },
		{ "top", 1, 0, 't' },        { "max-callchain-depth", 1, 0, O_DEPTH },
		{ "user-stack", 1, 0, O_STACK }, { "only-erlang", 0, 0, O_ONLY_ERL },
		{ "include-kernel", 0, 0, O_KERNEL }, { "skid-summary", 0, 0, O_SKID },
		{ "max-skid-ms", 1, 0, O_MAXSKID }, { "format", 1, 0, O_FORMAT }, { "output", 1, 0, 'o' },
		{ "pstack", 0, 0, O_PSTACK }, { "pstack-wait", 1, 0, O_PWAIT },
		{ "idle-scheduler-stacks", 0, 0, O_IDLE }, { "blame", 1, 0, O_BLAME },
		{ "force-c_p-register", 1, 0, O_FCP }, { "force-E-register", 1, 0, O_FE },
		{ "force-I-register", 1, 0, O_FI }, { "software-event", 0, 0, O_SOFT },
		{ "wakeup", 1, 0, O_WAKEUP }, { "check", 0, 0, O_CHECK },
		{ "verbose", 0, 0, 'v' },    { "help", 0, 0, 'h' },         { "version", 0, 0, O_VERSION },
		{ 0, 0, 0, 0 },
	};
	int ch;
	char *end;
	opterr = 0; /* one line of our own instead of getopt's */
	while ((ch = getopt_long(argc, argv, "d:F:t:o:vh", lopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o.duration = strtod(optarg, &end);
			if (*end || o.duration < 0 || !isfinite(o.duration)) {
				fprintf(stderr, PROG ": --duration wants seconds (e.g. 10 or 0.5), got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'F': {
			long v = strtol(optarg, &end, 10);
			if (*end || v <= 0 || v > 100000) {
				fprintf(stderr, PROG ": --frequency wants a rate in Hz (1..100000), got '%s'\n", optarg);
				return 2;
			}
			o.freq = (unsigned)v;
			break;
		}
		case O_PERIOD:
			o.period = strtoull(optarg, &end, 10);
			if (*end || !o.period) {
				fprintf(stderr, PROG ": --period wants a positive event count, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 't':
			o.top = strtoul(optarg, &end, 10);
			if (*end || !o.top) {
				fprintf(stderr, PROG ": --top wants a positive number of rows, got '%s'\n", optarg);
				return 2;
			}
			break;
		case O_DEPTH:
			o.max_depth = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !o.max_depth) {
				fprintf(stderr, PROG ": --max-callchain-depth wants a positive number, got '%s'\n", optarg);
				return 2;
			}
			break;
		case O_STACK:
			o.user_stack = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o.user_stack < 512 || o.user_stack > 65528) {
				fprintf(stderr, PROG ": --user-stack wants 512..65528 bytes, got '%s'\n", optarg);
				return 2;
			}
			break;
		case O_ONLY_ERL: o.only_erlang = true; break;
		case O_KERNEL: o.include_kernel = true; break;
		case O_SKID: o.skid_summary = true; break;
		case O_MAXSKID:
			o.max_skid_ms = strtod(optarg, &end);
			if (*end || o.max_skid_ms <= 0) {
				fprintf(stderr, PROG ": --max-skid-ms wants a positive number of milliseconds\n");
				return 2;
			}
			break;
		case O_FORMAT:
			if (strcmp(optarg, "table") && strcmp(optarg, "folded")) {
				fprintf(stderr, PROG ": --format is 'table' or 'folded', not '%s'\n", optarg);
				return 2;
			}
			o.format = optarg;
			break;
		case 'o': o.output = optarg; break;
		case O_PSTACK: o.pstack = true; break;
		case O_PWAIT:
			o.pstack_wait = strtod(optarg, &end);
			if (*end || o.pstack_wait <= 0) {
				fprintf(stderr, PROG ": --pstack-wait wants a positive number of seconds\n");
				return 2;
			}
			break;
		case O_IDLE: o.idle_stacks = true; break;
		case O_BLAME: o.blame = optarg; break;
		case O_FCP: case O_FE: case O_FI: {
			int r = parse_reg(optarg);
			if (r < 0) {
				fprintf(stderr, PROG ": '%s' is not an x86-64 register name (rax..r15)\n", optarg);
				return 2;
			}
			if (ch == O_FCP) o.force_cp = r;
			else if (ch == O_FE) o.force_E = r;
			else o.force_I = r;
			break;
		}
		case O_SOFT: o.software = true; break;
		case O_CHECK: o.check = true; break;
		case O_WAKEUP:
			o.wakeup = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o.wakeup > 64) {
				fprintf(stderr, PROG ": --wakeup wants 0..64 samples\n");
				return 2;
			}
			break;
		case 'v': xb_verbose++; break;
		case 'h': usage(stdout); return 0;
		case O_VERSION: printf(PROG " %s\n", XB_VERSION); return 0;
		default:
			fprintf(stderr, PROG ": %s '%s'; see " PROG " --help\n",
				optopt && strchr("dFto", optopt) ? "option needs a value:" : "unknown option or missing value",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind == argc && xb_verbose) {
		printf(PROG " %s\n", XB_VERSION);
		return 0;
	}
	if (optind != argc - 1) {
		fprintf(stderr, PROG ": %s; usage: " PROG " [options] PID (see --help)\n",
			optind >= argc ? "missing PID" : "too many arguments");
		return 2;
	}
	int pid;
	if (xb_parse_pid(argv[optind], &pid) < 0) {
		fprintf(stderr, PROG ": %s\n", xb_err());
		return 2;
	}
	if (o.pstack && o.blame) {
		fprintf(stderr, PROG ": --pstack and --blame are separate modes; pick one\n");
		return 2;
	}

	FILE *out = stdout;
	if (o.output && !(out = fopen(o.output, "w"))) {
		fprintf(stderr, PROG ": cannot write %s: %s; pass a writable -o path\n", o.output, strerror(errno));
		return 1;
	}

	struct xb_vm vm;
	struct ctx c;
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.vm = &vm;
	if (xb_vm_attach(&vm, pid) < 0) {
		if (o.check) /* a table that does not fit is a check that fails */
			fprintf(out, "FAIL attach                 %s\n0 checks passed, 1 failed\n", xb_err());
		else
			fprintf(stderr, PROG ": %s\n", xb_err());
		xb_vm_detach(&vm);
		return 1;
	}
	if (o.check) {
		int failed = xb_check(&vm, out);
		if (out != stdout)
			fclose(out);
		xb_vm_detach(&vm);
		return failed ? 1 : 0;
	}
	if (xb_codemap_build(&vm, &c.cm, XB_CM_FOLD_PROLOGUE) < 0) {
		fprintf(stderr, PROG ": cannot read the VM's code tables: %s\n", xb_err());
		xb_vm_detach(&vm);
		return 1;
	}
	xb_estate_init(&c.es, &vm, &c.cm, o.max_depth);
	c.es.want_identity = o.pstack;
	c.es.keep_old_maps = o.pstack; /* its captured frames live until it prints */
	if (o.force_cp >= 0) c.es.regs.c_p = o.force_cp;
	if (o.force_E >= 0) c.es.regs.E = o.force_E;
	if (o.force_I >= 0) c.es.regs.I = o.force_I;
	if (xb_unwinder_init(&c.uw, &vm, xb_estate_is_erlang_pc, &c.es, o.max_depth) < 0) {
		fprintf(stderr, PROG ": %s\n", xb_err());
		return 1;
	}
	xb_profile_init(&c.prof);
	if (o.include_kernel)
		load_kallsyms();

	struct xb_sampler smp;
	/* How often the rings are drained.  The interpreter's Erlang stack
	 * is read live, so the delay from sample to read (skid) decides how
	 * many stacks moved meanwhile: 2 ms.  The JIT's is in the sample's
	 * own stack copy and only deep stacks are read live: 5 ms, which
	 * halves the sampler's wakeups (most of its CPU per sample, bench/)
	 * and stays well inside the 10 ms skid bound. */
	if (vm.flavor == XB_FLAVOR_JIT && !o.pstack)
		o.drain_ms = 5;
	struct xb_sampler_opts so = { .freq = o.freq, .period = o.period, .stack_bytes = o.user_stack,
				      .include_kernel = o.include_kernel, .force_software = o.software,
				      .wakeup = o.wakeup, .thread_kind = thread_kind, .thread_kind_arg = &vm };
	if (xb_sampler_open(&smp, pid, &so) < 0) {
		fprintf(stderr, PROG ": %s\n", xb_err());
		return 1;
	}
	c.smp = &smp;
	if (xb_verbose)
		fprintf(stderr, PROG " %s: PID %d: OTP %s (erts %s), %s, debug info %s; event %s at %s; "
			"%zu threads; %zu code entries\n",
			XB_VERSION, pid, vm.otp[0] ? vm.otp : "?", vm.erts, xb_flavor_name(vm.flavor),
			xb_debug_name(vm.debug), smp.event_name, o.period ? "a fixed period" : "a frequency",
			smp.nthreads, c.cm.n);

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	double start = now_s(), last_module_check = start;
	double cpu0 = cpu_s();
	double limit = o.pstack ? o.pstack_wait : o.duration;
	bool vm_exited = false;
	for (;;) {
		if (o.pstack && c.nps < smp.nthreads) {
			struct pstack_entry *nps = realloc(c.ps, smp.nthreads * sizeof(*nps));
			if (nps) {
				memset(nps + c.nps, 0, (smp.nthreads - c.nps) * sizeof(*nps));
				c.ps = nps;
				c.nps = smp.nthreads;
			}
		}
		bool gone = false;
		if (xb_sampler_poll(&smp, o.wakeup ? 50 : (int)o.drain_ms, on_sample, &c, &gone) < 0) {
			fprintf(stderr, PROG ": %s\n", xb_err());
			break;
		}
		if (stop_requested)
			break;
		if (gone || !xb_vm_alive(&vm)) {
			vm_exited = true;
			break;
		}
		if (limit > 0 && now_s() - start >= limit)
			break;
		if (o.pstack) {
			/* Done early once every scheduler has shown a process. */
			bool all = true;
			size_t ns = 0;
			for (size_t i = 0; i < smp.nthreads; i++) {
				if (smp.threads[i].kind != 's')
					continue;
				ns++;
				if (i >= c.nps || !c.ps[i].have || c.ps[i].es.status != XB_ES_OK)
					all = false;
			}
			if (ns && all)
				break;
		}
		/* A library unloaded and another mapped at its address shows
		 * no unknown pc: look for it every 250 ms, so its samples are
		 * not named from the old file for longer than that. */
		if (now_s() - last_module_check >= 0.25) {
			last_module_check = now_s();
			xb_unwinder_refresh_modules(&c.uw);
		}
		if (xb_sampler_scan_threads(&smp, false) < 0 && !xb_vm_alive(&vm)) {
			vm_exited = true;
			break;
		}
	}
	double elapsed = now_s() - start;
	double cpu_sampling = cpu_s() - cpu0;

	/* ---- report ---- */
	if (o.pstack) {
		print_pstack(&c, out);
	} else if (strcmp(o.format, "folded") == 0) {
		xb_report_folded(out, &c.prof);
	} else if (o.blame) {
		struct xb_row *rows;
		uint64_t matched, no_erl;
		size_t n = xb_profile_blame(&c.prof, o.blame, &rows, &matched, &no_erl);
		xb_report_processed(out, c.processed, c.received);
		fprintf(out, "blame %s: %llu samples have it on their native stack (%llu with no Erlang code above it)\n",
			o.blame, (unsigned long long)matched, (unsigned long long)no_erl);
		xb_report_rows(out, &c.prof, rows, n, o.top, matched);
		free(rows);
		if (!matched && !blame_symbol_exists(&vm, o.blame))
			fprintf(stderr, PROG ": note: no symbol of this VM matches '%s'; a stripped beam "
					"(OTP 29 exports only its API) names none of its internal functions: "
					"install its debug symbols to blame them\n", o.blame);
	} else {
		struct xb_row *rows;
		uint64_t counted;
		size_t n = xb_profile_flat(&c.prof, o.only_erlang ? XB_FLAT_ERLANG : XB_FLAT_LEAF, &rows, &counted);
		xb_report_processed(out, c.processed, c.received);
		xb_report_rows(out, &c.prof, rows, n, o.top, c.processed);
		free(rows);
	}
	if (o.skid_summary) {
		FILE *sf = strcmp(o.format, "folded") == 0 && !o.output ? stderr : out;
		size_t n = c.nskid;
		fprintf(sf, "skid (sample -> VM memory read, us): p50 %llu  p90 %llu  p99 %llu  max %llu  "
			"(%zu samples); discarded as too stale (> %.1f ms): %llu\n",
			(unsigned long long)xb_percentile(c.skid_us, n, 50),
			(unsigned long long)xb_percentile(c.skid_us, n, 90),
			(unsigned long long)xb_percentile(c.skid_us, n, 99),
			(unsigned long long)xb_percentile(c.skid_us, n, 100), n, o.max_skid_ms,
			(unsigned long long)(c.dropped_skid + c.dropped_stale));
	}
	if (xb_verbose)
		fprintf(stderr, PROG ": cpu: %.3f s before sampling, %.3f s while sampling = %.1f us per "
			"processed sample\n", cpu0, cpu_sampling,
			c.processed ? 1e6 * cpu_sampling / (double)c.processed : 0.0);
	/* Every sample leaf_only kept is processed (nothing of it was read live). */
	uint64_t partial = c.es.partial_heap_moved + c.es.partial_moved_on;
	if (xb_verbose)
		fprintf(stderr, PROG ": %.2f s; received %llu, processed %llu; dropped: truncated unwind %llu, "
			"failed validation %llu, process moved on %llu, too stale %llu, no registers %llu; "
			"lost %llu, throttled %llu; rings enlarged %llu; unresolved stack words %llu; "
			"code map refreshes %llu; "
			"stack copy exhausted %llu; native stacks cut at the depth limit %llu; "
			"innermost Erlang function only %llu (heap moved %llu, process switched out %llu); "
			"module changes since attaching %llu\n",
			elapsed, (unsigned long long)c.received, (unsigned long long)c.processed,
			(unsigned long long)c.dropped_truncated, (unsigned long long)c.dropped_bad,
			(unsigned long long)c.dropped_stale, (unsigned long long)c.dropped_skid,
			(unsigned long long)c.no_regs, (unsigned long long)smp.lost,
			(unsigned long long)smp.throttled, (unsigned long long)smp.rings_grown,
			(unsigned long long)c.unresolved_frames,
			(unsigned long long)c.es.codemap_refreshes, (unsigned long long)c.uw.stack_misses,
			(unsigned long long)c.depth_limited, (unsigned long long)partial,
			(unsigned long long)c.es.partial_heap_moved, (unsigned long long)c.es.partial_moved_on,
			(unsigned long long)c.uw.modules_changed);
	if (!o.pstack && c.processed && partial * 10 > c.processed)
		fprintf(stderr, PROG ": note: %.0f%% of the samples name only their innermost Erlang "
			"function (shown under '%s'): their process garbage collected or was switched "
			"out before its stack could be read\n",
			100.0 * (double)partial / (double)c.processed, XB_CALLERS_UNKNOWN);
	if (smp.lost && !xb_verbose)
		fprintf(stderr, PROG ": warning: the kernel lost %llu samples (lower -F)\n", (unsigned long long)smp.lost);
	if (vm_exited)
		fprintf(stderr, PROG ": note: VM %d exited after %.1f s; the results above cover the time until then\n",
			pid, elapsed);
	if (out != stdout)
		fclose(out);
	xb_sampler_close(&smp);
	xb_profile_free(&c.prof);
	xb_codemap_free(&c.cm);
	xb_estate_free(&c.es);
	free(c.skid_us);
	free(c.ps);
	xb_vm_detach(&vm);
	return 0;
}

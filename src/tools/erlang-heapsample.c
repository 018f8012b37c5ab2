/* erlang-heapsample - where a running BEAM's memory is: per process, per
 * allocator, and inside one process's heap, read from outside.
 *
 *   erlang-heapsample PID                      processes, largest first
 *   erlang-heapsample --interval S PID         growth between snapshots
 *   erlang-heapsample --contents PROC PID      what PROC's heap holds
 *   erlang-heapsample --alloc PID              allocators, fragmentation, RSS
 *
 * The VM is never paused: its memory is read with process_vm_readv(2)
 * (src/beam/proctab.c, alloc.c, heapwalk.c); the rows are written by
 * src/output/heapsample.c.
 */
#define _GNU_SOURCE
#include "xb/alloc.h"
#include "xb/cli.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/heapwalk.h"
#include "xb/hsout.h"
#include "xb/names.h"
#include "xb/outfile.h"
#include "xb/proctab.h"
#include "xb/term.h"
#include "xb/version.h"
#include "xb/layout.h"
#include "xb/vm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#define PROG "erlang-heapsample"

/* process_vm_readv is all this tool needs (no perf events): say so when
 * it is refused, rather than the sampler's message. */
static int can_read(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == EACCES || errno == EPERM ? -1 : 0;
	unsigned long long a = 0, b;
	char perms[8] = "";
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s", &a, &b, perms) == 3 && perms[0] == 'r')
			break;
	fclose(f);
	char buf[8];
	struct iovec l = { buf, 1 }, r = { (void *)(uintptr_t)a, 1 };
	if (a && process_vm_readv(pid, &l, 1, &r, 1, 0) < 0 && (errno == EPERM || errno == EACCES))
		return -1;
	return 0;
}

static const char *const formats[] = { "table", "csv", "json", NULL };
static const char *const sorts[] = { "memory", "heap", "old_heap", "stack", "mbuf", "msgq", "binary",
				     "reductions", "long_lived", NULL };

static struct {
	size_t top;
	const char *sort, *format, *output, *contents, *layout;
	double interval;
	unsigned count;
	bool alloc, help, version, erlang_names;
	uint64_t max_words, seed;
	bool interval_given, count_given, top_given, sort_given, max_words_given;
} o = { .top = 30, .count = 1 };

static const struct xb_opt options[] = {
	{ "interval", 'i', XB_OPT_DOUBLE, &o.interval, "SECONDS",
	  "growth: snapshots SECONDS apart; rows are what each\n"
	  "process whose memory or long-lived data grew gained,\n"
	  "and how much of it is long-lived data (survived a\n"
	  "garbage collection: old heap used + young heap below\n"
	  "high_water), young heap, fragments, binaries,\n"
	  "messages; \"full sweep\": one ran meanwhile (the old\n"
	  "heap was emptied into the young one)",
	  0.01, 86400, .group = "Modes (default: one row per process, largest first):",
	  .given = &o.interval_given },
	{ "count", 'c', XB_OPT_UINT, &o.count, "N", "with --interval: N intervals (default 1)", 1, 1000000,
	  .given = &o.count_given },
	{ "contents", 0, XB_OPT_STR, &o.contents, "PROCESS",
	  "what PROCESS's heap is made of (PROCESS: <0.N.S>,\n"
	  "0.N.S, or a registered name): words by kind of term,\n"
	  "tuples by their first element when it is an atom\n"
	  "(records), with shares and a 95% interval" },
	{ "alloc", 0, XB_OPT_FLAG, &o.alloc, NULL,
	  "allocators: carriers and blocks per type summed over\n"
	  "instances, usage, fragmentation, and where the RSS is" },
	{ "top", 't', XB_OPT_SIZE, &o.top, "N", "rows to print (default 30; 0: all)", 0, 1e12,
	  .group = "Output:", .given = &o.top_given },
	{ "sort", 's', XB_OPT_CHOICE, &o.sort, "FIELD",
	  "order of the rows: memory (default), heap, old_heap,\n"
	  "stack, mbuf, msgq, binary, reductions; with\n"
	  "--interval: memory (default) or long_lived",
	  .choices = sorts, .given = &o.sort_given },
	{ "format", 'f', XB_OPT_CHOICE, &o.format, "FORMAT",
	  "table (default, 80 columns), csv, or json (an\n"
	  "array of objects with snake_case keys)", .choices = formats },
	{ "output", 'o', XB_OPT_STR, &o.output, "FILE",
	  "write to FILE (written in full, then renamed into\n"
	  "place; a symbolic link there is refused)" },
	{ "erlang-names", 0, XB_OPT_FLAG, &o.erlang_names, NULL,
	  "names of Elixir modules as the atoms they are\n"
	  "('Elixir.Foo.Bar':baz/2), not as Elixir spells them\n"
	  "(Foo.Bar.baz/2, the default)" },
	{ "max-words", 0, XB_OPT_U64, &o.max_words, "N",
	  "--contents reads every heap word up to N (default\n"
	  "16Mi = 128 MiB); a larger heap is sampled in chunks\n"
	  "of N words in all (and the objects across their ends)", 4096, 1e12,
	  .group = "Bounds:", .given = &o.max_words_given },
	{ "seed", 0, XB_OPT_U64, &o.seed, "N", "random seed of --contents sampling (default: clock)", 1, 1.8e19 },
	{ "layout", 0, XB_OPT_STR, &o.layout, "FILE",
	  "struct offsets from FILE, proven on the VM before use\n"
	  "(write FILE with erlang-sample --write-layout on a\n"
	  "build of the same release with debug info)", .group = "VM layout (default: the release table, DWARF, then discovery):" },
	{ "verbose", 'v', XB_OPT_COUNT, &xb_verbose, NULL, "diagnostics on stderr", .group = "" },
	{ "help", 'h', XB_OPT_FLAG, &o.help, NULL, "this help" },
	{ "version", 0, XB_OPT_FLAG, &o.version, NULL, "print the version" },
};

static const struct xb_cli cli = {
	.prog = PROG,
	.usage = "[OPTIONS] PID",
	.summary = "Where a running Erlang VM's memory is: per process, per allocator, in a heap.\n"
		   "The VM is never paused; nothing is loaded into it.\n",
	.opts = options,
	.nopts = XB_ARRAY_SIZE(options),
	.epilog =
		"Where the figures come from (struct fields of the VM, erl_process.h unless\n"
		"said otherwise; offsets from the release tables):\n"
		"  MEMORY   as process_info(P, memory): erts_process_memory() summed by hand:\n"
		"           sizeof(Process) + heap_sz + mbuf_sz + old_hend-old_heap (words) +\n"
		"           links and monitors + each queued message (sizeof(ErtsMessage) +\n"
		"           its heap fragments' used_size) + process dictionary + ...\n"
		"  HEAP     heap_sz; OLD: old_hend - old_heap; STACK: hend - stop;\n"
		"  MBUF     mbuf_sz; MSGQ: messages in sig_qs and sig_inq (walked);\n"
		"  BINARY   (off_heap.overhead + bin_old_vheap) words: off-heap binaries\n"
		"  REDS     reds\n"
		"  totals   compared with erlang:memory(processes) computed as erl_alloc.c\n"
		"           does: eheap_alloc blocks + fix_alloc lists of process\n"
		"           structures, links, monitors, ... + the process table; less\n"
		"           what no process owns: the table (erts_ptab_mem_size), the\n"
		"           scheduler registers (sizeof(ErtsSchedulerRegisters) blocks),\n"
		"           block headers, free fix_alloc items\n"
		"  --alloc  per allocator type (erl_alloc_util.h Allctr_t of each\n"
		"           instance): mbcs/sbcs .carriers[].size and .blocks[].curr.size,\n"
		"           the carrier pool cpool.stat.carriers_size/blocks_size (counted\n"
		"           into mbcs, as recon_alloc's \"current\"); carriers walked\n"
		"           (mbc_list, sbc_list, the pool) for free space (chdr size -\n"
		"           cpool.total_blocks_size) and the largest free block (aoff\n"
		"           strategies: AOFF_Carrier_t.rbt_node.hdr.bhdr); FRAG =\n"
		"           (free - largest free block) / free; RSS from /proc/PID/smaps\n"
		"           (anonymous rw) and /proc/PID/pagemap (resident carrier pages)\n"
		"A process that changes (garbage collects) while it is read is read again,\n"
		"then skipped and counted, never shown.  Exit status: 0, or 1 on an error\n"
		"(one line on stderr), 2 on bad usage.\n",
};

/* ---- process rows ---- */

struct row {
	uint64_t pid, reg_name, initial[3], current_mfa[3], i;
	enum xb_pstatus status;
	uint64_t memory, system, heap_sz, old_heap, old_used, long_lived, stack, mbuf, msgq, msgq_bytes, vheap, reds,
		links, monitors;
	uint64_t old_heap_addr; /* old_heap: a full sweep frees it (erl_gc.c) */
	uint64_t heap_addr;     /* heap: every collection allocates a new one */
	bool abandoned;         /* abandoned_heap set: a delayed collection */
	uint16_t gen_gcs;       /* minor collections since the last full sweep */
	bool partial;
};

struct rows {
	struct row *v;
	size_t n, cap;
};

static int collect(const struct xb_proc *p, void *arg)
{
	struct rows *rs = arg;
	if (xb_grow((void **)&rs->v, &rs->cap, rs->n + 1, sizeof(*rs->v)) < 0)
		return -1;
	struct row *r = &rs->v[rs->n++];
	r->pid = p->pid;
	r->reg_name = p->reg_name;
	memcpy(r->initial, p->initial, sizeof(r->initial));
	memcpy(r->current_mfa, p->current_mfa, sizeof(r->current_mfa));
	r->i = p->i;
	r->status = p->status;
	r->memory = p->memory;
	r->system = p->system_bytes <= p->memory ? p->system_bytes : p->memory;
	r->heap_sz = p->heap_sz;
	r->old_heap = xb_proc_old_heap_words(p);
	r->old_used = xb_proc_old_used_words(p);
	r->old_heap_addr = p->old_heap;
	r->heap_addr = p->heap;
	r->abandoned = p->abandoned_heap != 0;
	r->gen_gcs = p->gen_gcs;
	r->long_lived = xb_proc_long_lived_words(p);
	r->stack = xb_proc_stack_words(p);
	r->mbuf = p->mbuf_sz;
	r->msgq = p->msgq_len;
	r->msgq_bytes = p->msgq_bytes;
	r->vheap = p->vheap_words * 8;
	r->reds = p->reds;
	r->links = p->links;
	r->monitors = p->monitors;
	r->partial = p->partial != 0;
	return 0;
}

static int sort_field;

static uint64_t key_of(const struct row *r)
{
	switch (sort_field) {
	case 1: return r->heap_sz;
	case 2: return r->old_heap;
	case 3: return r->stack;
	case 4: return r->mbuf;
	case 5: return r->msgq;
	case 6: return r->vheap;
	case 7: return r->reds;
	default: return r->memory;
	}
}

static int by_key(const void *a, const void *b)
{
	uint64_t x = key_of(a), y = key_of(b);
	if (x != y)
		return x < y ? 1 : -1;
	const struct row *p = a, *q = b;
	return p->pid < q->pid ? -1 : p->pid > q->pid;
}

static char *dup_text(const char *s)
{
	char *d = strdup(s ? s : "");
	return d;
}

/* The code map, built the first time a printed row needs it: a process
 * whose `current` is NULL is named by its instruction pointer `i`, as
 * process_info(P, current_function) does (erl_bif_info.c
 * current_function: erts_lookup_function_info(rp->i)). */
static struct xb_codemap cm;
static int cm_state; /* 0 not built, 1 built, -1 failed */

static void current_from_i(struct xb_vm *vm, uint64_t i, char *buf, size_t len)
{
	if (!i)
		return;
	if (!cm_state)
		cm_state = xb_codemap_build(vm, &cm, XB_CM_FOLD_PROLOGUE) == 0 ? 1 : -1;
	const struct xb_code *c = cm_state > 0 ? xb_codemap_find(&cm, i) : NULL;
	if (c && c->kind == XB_CODE_FUNCTION)
		snprintf(buf, len, "%s", c->name);
}

/* Strings of a row, for a writer. */
/* NAME (a registered name's atom, or M:F/A) as Elixir spells it unless
 * --erlang-names (names.h), in a new string. */
static char *spelled(const char *name, bool atom)
{
	char b[1200];
	if (o.erlang_names)
		return dup_text(name);
	return dup_text(atom ? xb_elixir_atom(name, b, sizeof(b)) : xb_elixir_name(name, b, sizeof(b)));
}

static void view(struct xb_vm *vm, const struct row *r, struct xb_hs_proc *v)
{
	char b[1200], ini[600];
	memset(v, 0, sizeof(*v));
	xb_proc_pid_text(vm, r->pid, b, sizeof(b));
	v->pid = dup_text(b);
	xb_mfa_text(vm, r->initial, ini, sizeof(ini));
	v->initial_call = spelled(ini, false);
	const char *reg = r->reg_name ? xb_vm_atom(vm, r->reg_name) : NULL;
	v->registered_name = reg ? spelled(reg, true) : NULL;
	v->name = reg ? spelled(reg, true) : spelled(ini, false);
	xb_mfa_text(vm, r->current_mfa, b, sizeof(b));
	if (!strcmp(b, "-"))
		current_from_i(vm, r->i, b, sizeof(b));
	v->current_function = spelled(b, false);
	v->status = xb_pstatus_name(r->status);
	v->memory_bytes = r->memory;
	v->heap_words = r->heap_sz;
	v->old_heap_words = r->old_heap;
	v->old_heap_used_words = r->old_used;
	v->stack_words = r->stack;
	v->mbuf_words = r->mbuf;
	v->message_queue_len = r->msgq;
	v->message_queue_bytes = r->msgq_bytes;
	v->bin_vheap_bytes = r->vheap;
	v->reductions = r->reds;
	v->links = r->links;
	v->monitors = r->monitors;
	v->partial = r->partial;
}

static void view_free(struct xb_hs_proc *v)
{
	free((char *)v->pid);
	free((char *)v->initial_call);
	free((char *)v->registered_name);
	free((char *)v->name);
	free((char *)v->current_function);
}

static enum xb_hs_format fmt;

/* How a snapshot ended short (what was read is kept). */
enum cut { CUT_NONE, CUT_EXITED, CUT_INTERRUPTED };

/* One snapshot of every process; *cut says when the VM went away, or ^C
 * came, while reading. */
static int snapshot(struct xb_ptab *t, struct rows *rs, struct xb_ptab_stats *st, enum cut *cut)
{
	rs->n = 0;
	*cut = CUT_NONE;
	/* (a refresh cut short, the VM gone or ^C, reads no process: the
	 * totals printed then are of nothing) */
	memset(st, 0, sizeof(*st));
	int rc = xb_ptab_refresh(t);
	if (rc == 0)
		rc = xb_ptab_foreach(t, XB_PROC_MEMORY | XB_PROC_NAMES, collect, rs, st);
	if (rc != 0) {
		if (t->vm->mem.gone || !xb_vm_alive(t->vm))
			*cut = CUT_EXITED;
		else if (xb_interrupted)
			*cut = CUT_INTERRUPTED;
		else
			return -1;
	}
	return 0;
}

/* erl_alloc.c erts_alloc_permanent_cache_aligned(): the block asked for
 * is the size + ERTS_CACHE_LINE_SIZE - 1 (64 on x86-64 and aarch64,
 * erl_alloc.h), aligned inside it; erl_alloc_util.c UMEMSZ2BLKSZ adds
 * ABLK_HDR_SZ (offsetof(Block_t, u): one word where blocks carry their
 * carrier's offset, MBC_ABLK_OFFSET_BITS, the 64-bit builds) and rounds
 * up to UNIT_SZ (sizeof(Unit_t): ERTS_ALLOC_ALIGN_BYTES, 8 off Windows). */
#define CACHE_LINE_SIZE 64
#define ABLK_HDR_SZ 8
#define UNIT_CEILING(x) (((x) + 7) & ~(uint64_t)7)

/* The scheduler registers' blocks: one per dirty scheduler, and per
 * normal scheduler on the interpreter (erl_process.c
 * init_scheduler_registers: the JIT's normal schedulers keep theirs on
 * their own stack), counted by the schedulers' threads. */
static void sched_registers(struct xb_vm *vm, const struct xb_alloc_procs *ap, struct xb_hs_totals *tot)
{
	int64_t size = xb_off(vm, XB_F_SCHEDREGS_SIZE);
	int n[3];
	if (size <= 0) {
		tot->regs_why = "the release table lacks their size";
		return;
	}
	if (vm->flavor != XB_FLAVOR_EMU && vm->flavor != XB_FLAVOR_JIT) {
		tot->regs_why = "the emulator's flavour is unknown";
		return;
	}
	xb_vm_count_sched_threads(vm, n);
	/* OTP 25+ starts at least one dirty scheduler of each kind */
	if (n[1] < 1 || n[2] < 1 || n[1] > 1024 || n[2] > 1024 || n[0] > 1024) {
		tot->regs_why = "dirty scheduler threads not found by name";
		return;
	}
	tot->regs_count = (uint64_t)(n[1] + n[2] + (vm->flavor == XB_FLAVOR_EMU ? n[0] : 0));
	tot->regs_block = UNIT_CEILING((uint64_t)size + CACHE_LINE_SIZE - 1 + ABLK_HDR_SZ);
	if (tot->regs_count * tot->regs_block > ap->eheap) {
		tot->regs_why = "more than eheap_alloc holds";
		tot->regs_count = tot->regs_block = 0;
		return;
	}
	tot->regs_known = true;
}

static void vm_totals(struct xb_vm *vm, struct xb_ptab *t, struct xb_hs_totals *tot)
{
	struct xb_alloc_info *ai = calloc(1, sizeof(*ai));
	if (!ai) {
		tot->vm_why = "out of memory";
		return;
	}
	if (xb_alloc_read(vm, ai, 0) < 0) {
		static char why[512];
		snprintf(why, sizeof(why), "%s", xb_err());
		tot->vm_why = why;
	} else {
		struct xb_alloc_procs ap;
		tot->vm_ptab = xb_ptab_mem_size(t);
		/* erl_ptab.c erts_ptab_mem_size: an erts_atomic_t per slot,
		 * and an erts_atomic32_t of free id data */
		tot->ptab_slots = t->max;
		tot->ptab_slot_bytes = t->free_id_data ? 12 : 8;
		xb_alloc_processes(vm, ai, tot->vm_ptab, &ap);
		tot->vm_fix_known = ap.fix_known;
		tot->vm_processes = ap.total;
		tot->vm_eheap = ap.eheap;
		tot->vm_procs = ap.procs;
		tot->vm_fix_other = ap.fix_other;
		tot->fix_free = (ap.procs - ap.procs_used) + (ap.fix_other - ap.fix_other_used);
		tot->eheap_blocks = ap.eheap_blocks;
		tot->block_header = ABLK_HDR_SZ;
		if (tot->eheap_blocks * ABLK_HDR_SZ > ap.eheap) /* counts that cannot be */
			tot->eheap_blocks = 0;
		sched_registers(vm, &ap, tot);
		tot->vm_known = true;
	}
	free(ai);
}

static int mode_procs(struct xb_vm *vm, struct xb_ptab *t, FILE *out)
{
	struct rows rs = { 0 };
	struct xb_ptab_stats st;
	enum cut cut;
	if (snapshot(t, &rs, &st, &cut) < 0) {
		free(rs.v);
		return -1;
	}
	struct xb_hs_totals tot = { 0 };
	for (size_t i = 0; i < rs.n; i++) {
		tot.memory_bytes += rs.v[i].memory;
		tot.system_bytes += rs.v[i].system;
	}
	tot.processes = rs.n;
	tot.skipped_changed = st.changed;
	tot.skipped_gone = st.gone;
	tot.skipped_unreadable = st.unreadable;
	tot.partial = st.partial;
	if (cut == CUT_NONE)
		vm_totals(vm, t, &tot);
	else
		tot.vm_why = cut == CUT_EXITED ? "the VM exited" : "interrupted";
	if (rs.n) /* (qsort of NULL, 0: undefined) */
		qsort(rs.v, rs.n, sizeof(*rs.v), by_key);
	size_t n = o.top && o.top < rs.n ? o.top : rs.n;
	struct xb_hs_proc *v = calloc(n ? n : 1, sizeof(*v));
	int rc = -1;
	if (v) {
		for (size_t i = 0; i < n; i++)
			view(vm, &rs.v[i], &v[i]);
		rc = xb_hs_write_procs(out, fmt, v, n, fmt == XB_HS_TABLE ? &tot : NULL);
		if (rc == 0 && fmt != XB_HS_TABLE) {
			/* machine formats keep stdout clean: totals go to stderr */
			xb_hs_write_totals(stderr, &tot);
		}
		for (size_t i = 0; i < n; i++)
			view_free(&v[i]);
	}
	if (!v)
		xb_fail("out of memory");
	free(v);
	free(rs.v);
	if (cut == CUT_EXITED)
		xb_note(stderr, "VM %d exited while its processes were read; the rows above are "
				"the %zu processes read until then", (int)vm->pid, tot.processes);
	else if (cut == CUT_INTERRUPTED)
		xb_note(stderr, "interrupted while the processes were read; the rows above are "
				"the %zu processes read until then", tot.processes);
	return rc;
}

/* ---- growth ---- */

static int by_pid(const void *a, const void *b)
{
	const struct row *p = a, *q = b;
	return p->pid < q->pid ? -1 : p->pid > q->pid;
}

struct grow {
	struct row *now;
	int64_t d_mem, d_long, d_old_used, d_old, d_heap, d_mbuf, d_vheap, d_msgq, d_msgq_bytes, d_reds;
	bool is_new, full_sweep;
};

static bool long_lived;

static int by_growth(const void *a, const void *b)
{
	const struct grow *x = a, *y = b;
	int64_t p = long_lived ? x->d_long : x->d_mem, q = long_lived ? y->d_long : y->d_mem;
	if (p != q)
		return p < q ? 1 : -1;
	if (x->d_long != y->d_long)
		return x->d_long < y->d_long ? 1 : -1;
	return x->now->pid < y->now->pid ? -1 : x->now->pid > y->now->pid;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };
	while (!xb_stop_requested && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int mode_growth(struct xb_vm *vm, struct xb_ptab *t, FILE *out)
{
	struct rows prev = { 0 }, cur = { 0 };
	struct xb_ptab_stats st;
	enum cut cut;
	int rc = 0;
	if (snapshot(t, &prev, &st, &cut) < 0)
		return -1;
	if (cut != CUT_NONE) {
		if (cut == CUT_EXITED)
			xb_note(stderr, "VM %d exited during the first snapshot; no growth to show",
				(int)vm->pid);
		else
			xb_note(stderr, "interrupted during the first snapshot; no growth to show");
		free(prev.v);
		return 0;
	}
	if (prev.n)
		qsort(prev.v, prev.n, sizeof(*prev.v), by_pid);
	uint64_t t0 = xb_now_ns();
	xb_hs_write_growth_header(out, fmt);
	unsigned done = 0;
	for (unsigned k = 1; k <= o.count && !xb_stop_requested; k++) {
		sleep_s(o.interval);
		if (xb_stop_requested)
			break;
		if (snapshot(t, &cur, &st, &cut) < 0) {
			rc = -1;
			break;
		}
		uint64_t t1 = xb_now_ns();
		if (cut != CUT_NONE) {
			if (cut == CUT_EXITED)
				xb_note(stderr, "VM %d exited during snapshot %u; %u interval%s shown",
					(int)vm->pid, k, done, done == 1 ? "" : "s");
			else
				xb_note(stderr, "interrupted during snapshot %u; %u interval%s shown", k,
					done, done == 1 ? "" : "s");
			break;
		}
		if (cur.n)
			qsort(cur.v, cur.n, sizeof(*cur.v), by_pid);
		struct grow *g = calloc(cur.n ? cur.n : 1, sizeof(*g));
		if (!g) {
			rc = xb_fail("out of memory");
			break;
		}
		size_t ng = 0;
		for (size_t i = 0; i < cur.n; i++) {
			struct row *c = &cur.v[i];
			struct row *p = bsearch(c, prev.v, prev.n, sizeof(*prev.v), by_pid);
			struct row zero = { 0 };
			if (!p)
				p = &zero;
			struct grow *x = &g[ng++];
			x->now = c;
			x->is_new = p == &zero;
			x->d_mem = (int64_t)c->memory - (int64_t)p->memory;
			x->d_old_used = ((int64_t)c->old_used - (int64_t)p->old_used) * 8;
			x->d_long = ((int64_t)c->long_lived - (int64_t)p->long_lived) * 8;
			x->d_old = ((int64_t)c->old_heap - (int64_t)p->old_heap) * 8;
			x->d_heap = ((int64_t)c->heap_sz - (int64_t)p->heap_sz) * 8;
			x->d_mbuf = ((int64_t)c->mbuf - (int64_t)p->mbuf) * 8;
			x->d_vheap = (int64_t)c->vheap - (int64_t)p->vheap;
			x->d_msgq = (int64_t)c->msgq - (int64_t)p->msgq;
			x->d_msgq_bytes = (int64_t)c->msgq_bytes - (int64_t)p->msgq_bytes;
			x->d_reds = (int64_t)c->reds - (int64_t)p->reds;
			/* A full-sweep collection (erl_gc.c major_collection)
			 * moves everything live into a new young heap and frees
			 * the old heap; minor ones only add to the old heap
			 * (allocated once) and count gen_gcs up (GEN_GCS(p)++
			 * after every minor one, = 0 after a full sweep).  Both
			 * kinds allocate a new young heap.  So the old heap
			 * replaced or gone, gen_gcs lower, or the young heap
			 * replaced while gen_gcs stayed where it was (both
			 * snapshots just after a full sweep, neither with an old
			 * heap yet) mean one ran between the snapshots.  (Not
			 * counted as one: a young heap replaced by a delayed
			 * collection, delay_garbage_collection(), which sets
			 * abandoned_heap.  Missed: the old heap freed and
			 * reallocated at the same place, gen_gcs counted back
			 * up past where it was; the next minor collection has
			 * then promoted everything again.) */
			x->full_sweep = !x->is_new && ((p->old_heap_addr && c->old_heap_addr != p->old_heap_addr) ||
						       c->gen_gcs < p->gen_gcs ||
						       (c->gen_gcs == p->gen_gcs && c->heap_addr != p->heap_addr &&
							!c->abandoned && !p->abandoned));
		}
		/* Growers: memory or long-lived data grew.  (A full sweep
		 * replaces both heaps with one sized for what survived: a
		 * process adding to long-lived data can show less memory
		 * right after one, and is still growing.)  The sort key's
		 * growers first, largest first. */
		size_t ng2 = 0;
		for (size_t i = 0; i < ng; i++)
			if (g[i].d_mem > 0 || g[i].d_long > 0)
				g[ng2++] = g[i];
		ng = ng2;
		if (ng)
			qsort(g, ng, sizeof(*g), by_growth);
		size_t n = o.top && o.top < ng ? o.top : ng;
		struct xb_hs_growth *v = calloc(n ? n : 1, sizeof(*v));
		if (!v) {
			free(g);
			rc = xb_fail("out of memory");
			break;
		}
		for (size_t i = 0; i < n; i++) {
			struct xb_hs_proc pv;
			view(vm, g[i].now, &pv);
			v[i] = (struct xb_hs_growth){ .pid = pv.pid, .name = pv.name, .current_function = pv.current_function,
						      .interval = k, .seconds = (double)(t1 - t0) / 1e9,
						      .memory_bytes = g[i].d_mem, .long_lived_bytes = g[i].d_long,
						      .old_heap_used_bytes = g[i].d_old_used,
						      .old_heap_bytes = g[i].d_old, .heap_bytes = g[i].d_heap,
						      .mbuf_bytes = g[i].d_mbuf, .bin_vheap_bytes = g[i].d_vheap,
						      .message_queue_len = g[i].d_msgq,
						      .message_queue_bytes = g[i].d_msgq_bytes, .reductions = g[i].d_reds,
						      .new_process = g[i].is_new, .full_sweep = g[i].full_sweep };
			free((char *)pv.initial_call);
			free((char *)pv.registered_name);
		}
		if (fmt == XB_HS_TABLE && n == 0)
			fprintf(out, "interval %u (%.1f s): no process grew\n", k, (double)(t1 - t0) / 1e9);
		else
			rc = xb_hs_write_growth(out, fmt, v, n, false);
		if (fmt == XB_HS_TABLE && k < o.count)
			fputc('\n', out);
		for (size_t i = 0; i < n; i++) {
			free((char *)v[i].pid);
			free((char *)v[i].name);
			free((char *)v[i].current_function);
		}
		free(v);
		free(g);
		fflush(out);
		done++;
		/* the next interval starts from this snapshot */
		struct rows tmp = prev;
		prev = cur;
		cur = tmp;
		t0 = t1;
		if (rc < 0)
			break;
	}
	if (fmt == XB_HS_JSON)
		xb_hs_write_growth(out, fmt, NULL, 0, true);
	free(prev.v);
	free(cur.v);
	return rc;
}

/* ---- contents ---- */

static int mode_contents(struct xb_vm *vm, struct xb_ptab *t, FILE *out)
{
	uint32_t slot;
	if (xb_ptab_find(t, o.contents, &slot) < 0) {
		if (vm->mem.gone || !xb_vm_alive(vm)) { /* not "no such process": the VM went */
			xb_note(stderr, "VM %d exited while its process table was read; nothing to "
					"show", (int)vm->pid);
			return 0;
		}
		return xb_interrupted ? -1 : -2; /* ^C, or no such process (a usage error) */
	}
	struct xb_hw_opts ho = { .max_words = o.max_words, .seed = o.seed };
	struct xb_hw_result r;
	if (xb_heapwalk(t, slot, &ho, &r) < 0) {
		if (vm->mem.gone || !xb_vm_alive(vm)) {
			xb_note(stderr, "VM %d exited while the heap of %s was read; nothing to "
					"show", (int)vm->pid, o.contents);
			return 0;
		}
		return -1;
	}
	if (xb_verbose && r.reads > 1)
		xb_note(stderr, "the heap moved while it was read (the process garbage collected); "
				"read again");
	char pid[48], name[600];
	xb_proc_pid_text(vm, r.proc.pid, pid, sizeof(pid));
	struct xb_proc named;
	const char *reg = NULL;
	if (xb_proc_read(t, slot, XB_PROC_NAMES, &named) == 0 && named.reg_name)
		reg = xb_vm_atom(vm, named.reg_name);
	if (reg) {
		snprintf(name, sizeof(name), "%s", reg);
	} else {
		xb_mfa_text(vm, r.proc.initial, name, sizeof(name));
	}
	char *sp = spelled(name, reg != NULL);
	snprintf(name, sizeof(name), "%s", sp ? sp : "-");
	free(sp);
	struct xb_hs_kind *k = calloc(r.nkinds ? r.nkinds : 1, sizeof(*k));
	if (!k) {
		xb_heapwalk_free(&r);
		return xb_fail("out of memory");
	}
	size_t nk = o.top && o.top < r.nkinds ? o.top : r.nkinds;
	for (size_t i = 0; i < nk; i++)
		k[i] = (struct xb_hs_kind){ r.kinds[i].name, r.kinds[i].words, r.kinds[i].objects, r.kinds[i].share,
					    r.kinds[i].ci95 };
	char method[600];
	snprintf(method, sizeof(method), "%s%s", r.method,
		 r.words_unparsed ? "; some words did not parse (changed while read)" : "");
	struct xb_hs_contents c = { .pid = pid, .name = name, .words_total = r.words_total,
				    .words_read = r.words_read, .objects = r.objects, .whole = r.whole,
				    .method = method, .kinds = k, .nkinds = nk,
				    .offheap_bin_bytes = r.offheap_bin_bytes };
	int rc = xb_hs_write_contents(out, fmt, &c);
	if (fmt == XB_HS_TABLE && nk < r.nkinds)
		fprintf(out, "(%zu more kinds; -t 0 shows all)\n", r.nkinds - nk);
	free(k);
	xb_heapwalk_free(&r);
	return rc;
}

/* ---- allocators ---- */

/* -v: what was attached, once the last check that can refuse the VM
 * has passed (a refusal is one line). */
static void verbose_header(const struct xb_vm *vm)
{
	if (xb_verbose)
		fprintf(stderr, PROG " %s: PID %d: OTP %s (erts %s), %s, debug info %s; process table at 0x%llx\n",
			XB_VERSION, (int)vm->pid, vm->otp[0] ? vm->otp : "?", vm->erts, xb_flavor_name(vm->flavor),
			xb_debug_name(vm->debug), (unsigned long long)vm->sym.proc_tab);
}

static int mode_alloc(struct xb_vm *vm, FILE *out)
{
	struct xb_alloc_info *ai = calloc(1, sizeof(*ai));
	if (!ai)
		return xb_fail("out of memory");
	if (xb_alloc_read(vm, ai, XB_ALLOC_WALK | XB_ALLOC_RESIDENT) < 0) {
		free(ai);
		if (vm->mem.gone || !xb_vm_alive(vm)) {
			xb_note(stderr, "VM %d exited while its allocators were read; nothing to show",
				(int)vm->pid);
			return 0;
		}
		return -1;
	}
	verbose_header(vm);
	struct xb_hs_rss rss = { 0 };
	rss.known = xb_anon_rw_rss(vm->pid, &rss.anon_rw_rss, &rss.anon_rw_size) == 0;
	rss.resident_known = ai->resident_known;
	for (size_t i = 0; i < ai->ntypes; i++) {
		rss.carriers_bytes += xb_alloc_carriers_bytes(&ai->type[i]);
		rss.blocks_bytes += xb_alloc_blocks_bytes(&ai->type[i]);
		rss.carriers_resident += ai->type[i].resident;
		rss.resident_free += ai->type[i].resident_free;
	}
	int rc = xb_hs_write_alloc(out, fmt, ai, fmt == XB_HS_TABLE ? &rss : NULL);
	if (rc == 0 && fmt != XB_HS_TABLE)
		xb_hs_write_rss(stderr, ai, &rss);
	if (ai->note[0])
		xb_note(stderr, "%s", ai->note);
	free(ai);
	return rc;
}

int main(int argc, char **argv)
{
	int first = xb_cli_parse(&cli, argc, argv);
	if (first < 0)
		return 2;
	if (o.help) {
		xb_cli_help(&cli, stdout);
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;
	}
	if (o.version || (first == argc && xb_verbose)) {
		printf(PROG " %s\n", XB_VERSION);
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;
	}
	if (first != argc - 1) {
		fprintf(stderr, PROG ": %s; usage: " PROG " [options] PID (see --help)\n",
			first >= argc ? "missing PID" : "too many arguments");
		return 2;
	}
	int modes = (o.interval_given ? 1 : 0) + (o.contents ? 1 : 0) + (o.alloc ? 1 : 0);
	if (modes > 1) {
		xb_say(stderr, "--interval, --contents and --alloc are separate modes; pick one");
		return 2;
	}
	if (o.count_given && !o.interval_given) {
		xb_say(stderr, "--count needs --interval SECONDS");
		return 2;
	}
	if (o.sort_given && (o.contents || o.alloc)) {
		xb_say(stderr, "--sort orders process rows; --%s has none", o.contents ? "contents" : "alloc");
		return 2;
	}
	if (o.sort_given && strcmp(o.sort, "long_lived") == 0 && !o.interval_given) {
		xb_say(stderr, "--sort long_lived needs --interval (it is a growth)");
		return 2;
	}
	if (o.sort_given && o.interval_given && strcmp(o.sort, "memory") && strcmp(o.sort, "long_lived")) {
		xb_say(stderr, "with --interval, --sort is memory or long_lived, not %s", o.sort);
		return 2;
	}
	if (o.max_words_given && !o.contents) {
		xb_say(stderr, "--max-words bounds --contents; add --contents PROCESS");
		return 2;
	}
	int pid;
	if (xb_parse_pid(argv[first], &pid) < 0) {
		xb_say(stderr, "%s", xb_err());
		return 2;
	}
	fmt = !o.format || !strcmp(o.format, "table") ? XB_HS_TABLE : !strcmp(o.format, "csv") ? XB_HS_CSV : XB_HS_JSON;
	if (o.sort) {
		for (int i = 0; sorts[i]; i++)
			if (!strcmp(sorts[i], o.sort))
				sort_field = i;
		long_lived = !strcmp(o.sort, "long_lived");
	}

	if (can_read(pid) < 0) {
		xb_say(stderr, "permission denied reading the memory of process %d: run as root or "
				"as the VM's user, or give this tool CAP_SYS_PTRACE (what process_vm_readv needs; "
				"Yama ptrace_scope above 1 refuses even that)", pid);
		return 1;
	}
	/* ^C and SIGTERM from here on (common.h): while attaching --
	 * discovery of a stripped VM's tables takes seconds at worst -- one
	 * line, as erlang-sample does (the default action would end it too,
	 * but silently) */
	xb_catch_signals(PROG);
	struct xb_vm vm;
	/* what this mode reads, proven at attach (layout.h): a layout that
	 * does not hold for it is refused with one line, never printed as
	 * an empty or wrong table */
	struct xb_attach_opts ao = { o.alloc ? XB_NEED_ALLOC : XB_NEED_PROCS, o.layout };
	if (o.contents)
		ao.needs |= XB_NEED_CONTENTS;
	if (xb_vm_attach_with(&vm, pid, &ao) < 0 ||
	    xb_layout_require(&vm, ao.needs, o.alloc ? "--alloc" : o.contents ? "--contents" : "reading processes") < 0) {
		xb_report_failure(PROG, 1);
		xb_vm_detach(&vm);
		return 1;
	}
	struct xb_ptab t = { 0 };
	if (!o.alloc && xb_ptab_open(&vm, &t) < 0) {
		xb_report_failure(PROG, 1);
		xb_vm_detach(&vm);
		return 1;
	}
	if (!o.alloc)
		verbose_header(&vm);
	xb_vm_atoms_prefetch(&vm);
	/* The output is opened once the VM is attached: bad input never
	 * leaves a file behind. */
	struct xb_outfile of;
	FILE *out = stdout;
	if (o.output) {
		if (xb_outfile_open(&of, o.output, 0644, 0) < 0) {
			xb_report_failure(PROG, 1);
			xb_ptab_close(&t);
			xb_vm_detach(&vm);
			return 1;
		}
		out = of.f;
	}
	xb_signals_graceful(); /* the output is open: ^C stops the reading and what was read is written */
	int rc;
	if (o.alloc)
		rc = mode_alloc(&vm, out);
	else if (o.contents)
		rc = mode_contents(&vm, &t, out);
	else if (o.interval_given)
		rc = mode_growth(&vm, &t, out);
	else
		rc = mode_procs(&vm, &t, out);
	int status = 0;
	if (rc < 0) {
		status = rc == -2 ? 2 : 1;
		if (o.output)
			xb_outfile_abort(&of);
		xb_report_failure(PROG, status);
	} else if (o.output ? xb_outfile_commit(&of) < 0 : xb_flush_check(stdout, "standard output") < 0) {
		xb_report_failure(PROG, 1);
		status = 1;
	}
	/* budgets the VM's data went over (atoms, code map, ...): a note,
	 * and -v says where */
	if (status == 0)
		xb_overruns_report(stderr, PROG);
	if (cm_state > 0)
		xb_codemap_free(&cm);
	xb_ptab_close(&t);
	xb_vm_detach(&vm);
	return status;
}

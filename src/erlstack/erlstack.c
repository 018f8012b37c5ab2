/* erlstack.c - current process and Erlang stack of a sample. */
#define _GNU_SOURCE
#include "xb/erlstack.h"
#include "xb/common.h"
#include "xb/term.h"

#include <elfutils/libdw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFRESH_MIN_NS (100ull * 1000 * 1000)
#define MAX_HEAP_BYTES (1ull << 36)
#define CHUNK_WORDS 512
#define MAX_PROC_READ 1024 /* bytes of the process struct read at most */
/* One sample's walk reads at most this much of a stack (besides the
 * depth limit): a process's stack and heap share one block, and a huge
 * heap must not become a huge read.  1 MiB is 128 Ki words: 128 frames of
 * up to 1,000 live terms each (the compiler's y registers per frame). */
#define MAX_WALK_BYTES (1u << 20)
/* --pstack keeps every code map version its frames point into until it
 * prints: at most this many. */
#define MAX_RETIRED_MAPS 16

void xb_estate_init(struct xb_estate *st, struct xb_vm *vm, struct xb_codemap *cm,
		    unsigned max_depth)
{
	memset(st, 0, sizeof(*st));
	st->vm = vm;
	st->cm = cm;
	st->max_depth = max_depth > XB_MAX_ERLANG ? XB_MAX_ERLANG : max_depth;
	st->regs = vm->regs;
	st->check_current = true;
	st->flags = XB_CM_FOLD_PROLOGUE;
}

void xb_estate_refresh_code(struct xb_estate *st, bool force)
{
	uint64_t now = xb_now_ns();
	if (!force && now - st->last_refresh_ns < REFRESH_MIN_NS)
		return;
	st->last_refresh_ns = now;
	if (!force && xb_codemap_stale(st->vm, st->cm) != 1)
		return;
	if (st->keep_old_maps && st->nretired >= MAX_RETIRED_MAPS) {
		/* a VM loading code all the time: names of newer code wait
		 * rather than memory growing with every version */
		xb_overrun(XB_OVR_CODEMAP_KEPT, "%zu code map versions kept for --pstack; no more rebuilds",
			   st->nretired);
		st->refresh_wanted = false;
		return;
	}
	struct xb_codemap next;
	st->refresh_wanted = false;
	if (xb_codemap_build(st->vm, &next, st->flags) < 0)
		return; /* keep the old map */
	if (st->keep_old_maps) {
		/* --pstack keeps frames of earlier samples until it prints. */
		struct xb_codemap *old = malloc(sizeof(*old));
		if (old && xb_grow((void **)&st->retired, &st->nretired_cap, st->nretired + 1,
				   sizeof(*st->retired)) == 0) {
			*old = *st->cm;
			st->retired[st->nretired++] = old;
		} else {
			free(old);
			xb_codemap_free(&next);
			return; /* cannot keep the old one safely: keep using it */
		}
	} else {
		xb_codemap_free(st->cm);
	}
	*st->cm = next;
	st->codemap_refreshes++;
}

void xb_estate_free(struct xb_estate *st)
{
	for (size_t i = 0; i < st->nretired; i++) {
		xb_codemap_free(st->retired[i]);
		free(st->retired[i]);
	}
	free(st->retired);
	st->retired = NULL;
	st->nretired = st->nretired_cap = 0;
}

static bool in_jit_mapping(struct xb_vm *vm, uint64_t pc)
{
	const struct xb_map *m = xb_maps_find(&vm->mem.maps, pc);
	if (!m)
		return false;
	return m->executable && (m->path[0] == 0 || strncmp(m->path, "/memfd:", 7) == 0);
}

bool xb_estate_is_erlang_pc(void *arg, uint64_t pc)
{
	struct xb_estate *st = arg;
	struct xb_vm *vm = st->vm;
	if (vm->flavor == XB_FLAVOR_JIT) {
		if (xb_codemap_find(st->cm, pc))
			return true;
		/* New code not in our map yet, or JIT code with no name. */
		return in_jit_mapping(vm, pc);
	}
	uint64_t pm = vm->sym.process_main;
	return pm && pc >= pm && pc < pm + (vm->sym.process_main_size ? vm->sym.process_main_size : 1);
}

/* A miss may be code loaded since the map was built: ask for a rebuild,
 * which the caller does between samples (never during one: frames already
 * taken point into the current map). */
static const struct xb_code *lookup(struct xb_estate *st, uint64_t addr)
{
	const struct xb_code *c = xb_codemap_find(st->cm, addr);
	if (!c && addr >= 4096)
		st->refresh_wanted = true;
	return c;
}

/* A read of the process's state (its struct, its stack, the scheduler's
 * current process): answered from the memory captured with the sample when
 * it holds it (xb_remote_set_overlay: the user stack copy, and with BPF
 * capture the process struct and its stack), else read live now, which
 * exposes the sample to skid: out->live_read and read_ns say so. */
static int sread(struct xb_estate *st, struct xb_estack *out, uint64_t addr, void *buf, size_t len)
{
	struct xb_remote *r = &st->vm->mem;
	uint64_t before = r->live_reads;
	int rc = xb_read(r, addr, buf, len);
	if (r->live_reads != before) {
		out->live_read = true;
		out->read_ns = xb_now_ns();
		if (xb_verbose >= 3)
			xb_debug("live read 0x%llx+%zu (not captured with the sample)\n", (unsigned long long)addr, len);
	}
	return rc;
}

/* Read the fields of the process struct we need, in one read.  i and
 * current are 0 where the release table has no such field. */
struct proc {
	uint64_t id, heap, hend, stop, reg, i, current;
	bool exact; /* from memory captured with the sample, not read live */
	/* fcalls, reds (xb_call_id) and u.initial; have_* false where the
	 * release table has no such field */
	uint64_t fcalls, reds, initial[3];
	bool have_call, have_initial;
};

/* The fields of the scheduler views (xb_call_id, u.initial), from the
 * same read of the process struct as the rest (BUF holds its first LEN
 * bytes).  They are not needed to walk a stack: a release without them
 * (or a struct too large for BUF) leaves have_* false. */
static void read_proc_extra(const struct xb_vm *vm, const uint8_t *buf, size_t len, struct proc *p)
{
	int64_t fc = xb_off(vm, XB_F_PROC_FCALLS), rd = xb_off(vm, XB_F_PROC_REDS);
	int64_t in = xb_off(vm, XB_F_PROC_INITIAL), mm = xb_off(vm, XB_F_MFA_MODULE);
	int64_t mf = xb_off(vm, XB_F_MFA_FUNCTION), ma = xb_off(vm, XB_F_MFA_ARITY);
	p->have_call = fc >= 0 && rd >= 0 && (size_t)fc + 8 <= len && (size_t)rd + 8 <= len;
	if (p->have_call) {
		memcpy(&p->fcalls, buf + fc, 8);
		memcpy(&p->reds, buf + rd, 8);
	}
	p->have_initial = in >= 0 && mm >= 0 && mf >= 0 && ma >= 0;
	int64_t o[3] = { in + mm, in + mf, in + ma };
	for (int k = 0; k < 3 && p->have_initial; k++) {
		if (o[k] < 0 || (size_t)o[k] + 8 > len)
			p->have_initial = false;
		else
			memcpy(&p->initial[k], buf + o[k], 8);
	}
}

static int read_proc(struct xb_estate *st, struct xb_estack *out, uint64_t c_p, struct proc *p)
{
	struct xb_vm *vm = st->vm;
	int64_t fields[] = { xb_off(vm, XB_F_PROC_ID),   xb_off(vm, XB_F_PROC_HEAP),
			     xb_off(vm, XB_F_PROC_HEND), xb_off(vm, XB_F_PROC_STOP),
			     xb_off(vm, XB_F_PROC_REG),  xb_off(vm, XB_F_PROC_I),
			     xb_off(vm, XB_F_PROC_CURRENT) };
	uint64_t *dst[] = { &p->id, &p->heap, &p->hend, &p->stop, &p->reg, &p->i, &p->current };
	enum { REQUIRED = 5 };
	int64_t hi = 0;
	for (size_t i = 0; i < XB_ARRAY_SIZE(fields); i++) {
		if (fields[i] < 0 && i < REQUIRED)
			return -1;
		if (fields[i] + 8 > hi)
			hi = fields[i] + 8;
	}
	/* The scheduler views' fields come with the same read (read_proc_extra). */
	int64_t extra[] = { xb_off(vm, XB_F_PROC_FCALLS), xb_off(vm, XB_F_PROC_REDS),
			    xb_off(vm, XB_F_PROC_INITIAL) >= 0 && xb_off(vm, XB_F_MFA_ARITY) >= 0
				    ? xb_off(vm, XB_F_PROC_INITIAL) + xb_off(vm, XB_F_MFA_ARITY)
				    : -1 };
	for (size_t i = 0; i < XB_ARRAY_SIZE(extra); i++)
		if (extra[i] >= 0 && extra[i] + 8 > hi && extra[i] + 8 <= MAX_PROC_READ)
			hi = extra[i] + 8;
	uint8_t buf[MAX_PROC_READ];
	uint64_t live_before = vm->mem.live_reads;
	if (c_p == 0 || c_p % 8 || hi > (int64_t)sizeof(buf) || sread(st, out, c_p, buf, (size_t)hi) < 0)
		return -1;
	p->exact = vm->mem.live_reads == live_before;
	for (size_t i = 0; i < XB_ARRAY_SIZE(fields); i++) {
		*dst[i] = 0;
		if (fields[i] >= 0)
			memcpy(dst[i], buf + fields[i], 8);
	}
	if (!xb_is_pid(p->id) || p->heap == 0 || p->heap > p->hend ||
	    p->hend - p->heap > MAX_HEAP_BYTES || p->heap % 8 || p->hend % 8)
		return -1;
	read_proc_extra(vm, buf, (size_t)hi, p);
	return 0;
}

static void identify(struct xb_estate *st, const struct proc *p, struct xb_estack *out)
{
	struct xb_vm *vm = st->vm;
	out->pid_term = p->id;
	if (p->have_call) {
		out->call.fcalls = (uint32_t)p->fcalls;
		out->call.reds = p->reds;
		out->call.have = true;
		out->call.fcalls_exact = out->call.reds_exact = p->exact;
	}
	if (st->want_identity && p->have_initial)
		memcpy(out->initial, p->initial, sizeof(out->initial));
	xb_format_pid(p->id, vm->pid_num_bits, vm->pid_ser_bits, &vm->pix, out->pid, sizeof(out->pid));
	out->regname[0] = 0;
	if (!st->want_identity)
		return;
	uint64_t name;
	if (p->reg && xb_read_u64(&vm->mem, p->reg + (uint64_t)xb_off(vm, XB_F_REGPROC_NAME), &name) == 0) {
		const char *a = xb_vm_atom(vm, name);
		if (a)
			snprintf(out->regname, sizeof(out->regname), "%s", a);
	}
}

/* Append frame C (at ADDR); EXACT when the sample itself proves it (the
 * sampled pc or register, or a word of memory captured with the sample):
 * the exact frames form a prefix, innermost first (out->nexact). */
static void push(struct xb_estate *st, struct xb_estack *out, const struct xb_code *c,
		 uint64_t addr, bool exact)
{
	if (!c || c->kind != XB_CODE_FUNCTION)
		return;
	if (out->n >= st->max_depth) {
		out->truncated = true;
		return;
	}
	if (exact && out->nexact == out->n)
		out->nexact++;
	out->addrs[out->n] = addr;
	out->frames[out->n++] = c;
}

/* Walk [E, hend): words with primary tag 0 that point into code are
 * continuation pointers.  Words in memory captured with the sample come
 * from it (exact at sample time); the rest is read live (sread). */
static void walk(struct xb_estate *st, uint64_t E, uint64_t hend, struct xb_estack *out)
{
	struct xb_vm *vm = st->vm;
	uint64_t normal_exit = st->cm->normal_exit;
	uint64_t words[CHUNK_WORDS];
	uint64_t a = E;
	while (a < hend && !out->truncated) {
		if (a - E >= MAX_WALK_BYTES || xb_interrupted) {
			if (!xb_interrupted)
				xb_overrun(XB_OVR_STACK_BYTES, "a stack walk stopped after %u bytes (%u frames) of a "
					   "%llu-byte stack", MAX_WALK_BYTES, out->n, (unsigned long long)(hend - E));
			out->truncated = true;
			return;
		}
		size_t nw = (size_t)((hend - a) / 8);
		if (nw > CHUNK_WORDS)
			nw = CHUNK_WORDS;
		if (nw == 0)
			break;
		/* Stay inside a captured region, so that its words are not
		 * replaced by a later, live read of the same chunk. */
		uint64_t span = xb_remote_overlay_span(&vm->mem, a);
		if (span >= 8 && span / 8 < nw)
			nw = (size_t)(span / 8);
		uint64_t live_before = vm->mem.live_reads;
		if (sread(st, out, a, words, nw * 8) < 0) {
			out->truncated = true;
			return;
		}
		bool exact = vm->mem.live_reads == live_before;
		for (size_t i = 0; i < nw; i++) {
			uint64_t w = words[i];
			if (xb_verbose >= 3)
				xb_debug("  E+%llu: %016llx\n", (unsigned long long)(a - E + i * 8), (unsigned long long)w);
			if (!xb_is_cp(w))
				continue;
			if (w == normal_exit) {
				out->complete = true;
				return; /* bottom of every Erlang stack */
			}
			const struct xb_code *c = xb_codemap_find(st->cm, w - 1);
			if (!c) {
				/* Frame-pointer layouts keep saved frame
				 * pointers (stack addresses) here too. */
				if (!(w >= E && w < hend)) {
					out->unresolved++;
					st->refresh_wanted = true; /* new code? */
				}
				continue;
			}
			if (out->n == 0)
				out->leaf_ret = true; /* the innermost frame is a caller */
			push(st, out, c, w, exact);
			if (out->truncated)
				return; /* one frame past --max-callchain-depth */
		}
		a += nw * 8;
	}
}

/* Walk only memory captured with the sample, from E; true when the walk
 * reached beam_normal_exit (the whole stack was captured) or the depth
 * limit: exact, nothing read live. */
static bool walk_captured_only(struct xb_estate *st, uint64_t E, struct xb_estack *out)
{
	uint64_t span = xb_remote_overlay_span(&st->vm->mem, E);
	if (span < 8 || E % 8)
		return false;
	unsigned n0 = out->n, x0 = out->nexact;
	walk(st, E, E + span, out);
	if (out->complete || out->truncated)
		return true;
	out->n = n0;
	out->nexact = x0;
	out->unresolved = 0;
	if (n0 == 0)
		out->leaf_ret = false;
	return false;
}

/* E, saved when Erlang code called C, lies outside the heap the process
 * has at the moment of the sample (P captured with it, P->exact): only a
 * garbage collection replaces the heap, so one ran inside this very call,
 * and it moved the stack, frames unchanged, to c_p->stop (erl_gc.c,
 * do_minor and do_major: the stack is copied to the end of the new heap
 * and c_p->stop set there, before c_p->heap and c_p->hend are switched, so
 * mid-collection c_p->stop may still lie outside [heap, hend]).  When
 * memory captured with the sample holds the stack at c_p->stop down to
 * beam_normal_exit, that is the sample's stack; otherwise false, with
 * nothing kept.  (Read later, P proves nothing: the process may have run
 * on since.) */
static bool moved_stack(struct xb_estate *st, const struct proc *p, struct xb_estack *out)
{
	if (!p->exact || p->stop % 8 || !p->stop)
		return false;
	unsigned n0 = out->n, x0 = out->nexact;
	if (walk_captured_only(st, p->stop, out) && out->complete) {
		out->status = XB_ES_OK;
		return true;
	}
	out->n = n0;
	out->nexact = x0;
	out->complete = out->truncated = false;
	return false;
}

static bool reg(const struct xb_unwind *uw, int r, uint64_t *v)
{
	if (r < 0 || r >= XB_PREG_COUNT || !(uw->regs_valid & (1u << r)))
		return false;
	*v = uw->regs[r];
	return true;
}

/* ErtsSchedulerData.current_process of scheduler NO of KIND ('s' normal,
 * 'c'/'i' dirty). */
static int sched_current(struct xb_estate *st, struct xb_estack *out, char kind, int no,
			 uint64_t *c_p)
{
	struct xb_vm *vm = st->vm;
	uint64_t esdp;
	int r = kind == 's' ? xb_vm_sched_data(vm, no, &esdp) : xb_vm_dirty_sched_data(vm, kind, no, &esdp);
	if (r < 0)
		return -1;
	return sread(st, out, esdp + (uint64_t)xb_off(vm, XB_F_SCHED_CURRENT_PROCESS), c_p, 8);
}

static bool current_matches(struct xb_estate *st, struct xb_estack *out, int sched_no, uint64_t c_p)
{
	uint64_t cur;
	if (!st->check_current || sched_no <= 0)
		return true;
	return sched_current(st, out, 's', sched_no, &cur) == 0 && cur == c_p;
}

/* The sample's innermost Erlang function is a fact of the sample (its pc,
 * or the interpreter's I, from the sampled registers, names loaded code),
 * but its callers are gone: the process garbage collected (its stack moved
 * with the heap) or was switched out before the stack could be read, which
 * in the interpreter is read live a drain interval after the sample.
 * Dropping such samples would under-count exactly the processes that
 * allocate most; keep the function, mark the stack partial (reports show a
 * "[callers unknown]" frame above it) and never guess the callers.
 * The caller has set out->c_p and identified the process. */
static void leaf_only(struct xb_estate *st, const struct xb_code *here, uint64_t pc,
		      enum xb_partial_cause cause, struct xb_estack *out)
{
	/* Forget what a failed walk left behind. */
	out->n = out->nexact = 0;
	out->unresolved = 0;
	out->truncated = out->complete = out->live_read = out->leaf_ret = false;
	push(st, out, here, pc, true);
	/* HERE is JIT code that is not an Erlang function (a shared fragment
	 * such as global::call_light_bif_shared, through which module code
	 * calls BIFs): the sample proves its native frames and the fragment,
	 * and that some Erlang code called it; which one is on the Erlang
	 * stack it could not read.  Kept with no Erlang frame, marked. */
	out->partial = true;
	out->partial_cause = cause;
	st->partial[cause]++;
	out->status = XB_ES_OK;
}

/* A process whose stack starts at E: its frames, innermost at I (HERE;
 * HERE_EXACT when I comes from the sample itself), then the stack from E,
 * from captured memory where the sample holds it, else read live. */
static void finish(struct xb_estate *st, uint64_t c_p, const struct proc *p,
		   const struct xb_code *here, bool here_exact, uint64_t I, uint64_t E,
		   struct xb_estack *out)
{
	out->c_p = c_p;
	identify(st, p, out);
	push(st, out, here, I, here_exact);
	walk(st, E, p->hend, out);
	out->status = XB_ES_OK;
}

/* How the JIT call site at return address PC gets E back after the C call
 * (emit_leave_runtime in jit/x86/beam_asm.hpp, frame layout RA): either
 * `mov rsp, [c_p + offsetof(Process, stop)]` (the call site stored E in
 * c_p->stop: Update::eStack) or `mov rsp, rbp` (E stayed in E_saved).
 * rbp is junk in the first case and c_p->stop stale in the second, so the
 * instruction decides.  Code never changes under a return address that is
 * live, so results are cached per address. */
enum { LEAVE_UNKNOWN, LEAVE_E_SAVED, LEAVE_STOP };

static int leave_kind(struct xb_estate *st, uint64_t pc)
{
	static __thread struct {
		uint64_t pc;
		int kind;
	} cache[4096];
	size_t h = (size_t)((pc >> 2) * 0x9E3779B97F4A7C15ull >> 52) & 4095;
	if (cache[h].pc == pc)
		return cache[h].kind;
	/* emit_leave_runtime usually follows the call directly; a few call
	 * sites first save the result (e.g. `sub r14, rax` after a GC), so
	 * look a little further for the first of the two instructions. */
	uint8_t b[32];
	int kind = LEAVE_UNKNOWN;
	int64_t stop = xb_off(st->vm, XB_F_PROC_STOP);
	size_t len = sizeof(b);
	const struct xb_map *m = xb_maps_find(&st->vm->mem.maps, pc);
	if (m && m->end - pc < len)
		len = (size_t)(m->end - pc); /* the last call site of a mapping */
	memset(b, 0, sizeof(b));
	if (xb_read(&st->vm->mem, pc, b, len) < 0)
		return LEAVE_UNKNOWN; /* not cached: the maps may not show new code yet */
	for (size_t i = 0; i + 7 <= len && kind == LEAVE_UNKNOWN; i++) {
		const uint8_t *q = b + i;
		int32_t d;
		if ((q[0] == 0x48 && q[1] == 0x89 && q[2] == 0xec) || /* mov rsp, rbp */
		    (q[0] == 0x48 && q[1] == 0x8b && q[2] == 0xe5))
			kind = LEAVE_E_SAVED;
		else if (q[0] == 0x49 && q[1] == 0x8b && q[2] == 0x65 && stop < 128 &&
			 q[3] == (uint8_t)stop)
			kind = LEAVE_STOP; /* mov rsp, [r13 + disp8] */
		else if (q[0] == 0x49 && q[1] == 0x8b && q[2] == 0xa5 &&
			 (memcpy(&d, q + 3, 4), d == stop))
			kind = LEAVE_STOP; /* mov rsp, [r13 + disp32] */
	}
	cache[h].pc = pc;
	cache[h].kind = kind;
	return kind;
}

/* JIT code keeps FCALLS in a callee-saved register (beam_asm.hpp), so
 * where unwinding reached JIT code it still holds the reductions left
 * when the C code the sample is in was called: exact, unlike c_p->fcalls
 * read live (struct xb_call_id). */
static void jit_fcalls(struct xb_estate *st, const struct xb_unwind *uw, struct xb_estack *out)
{
	uint64_t fc;
	if (out->call.have && reg(uw, st->regs.fcalls, &fc)) {
		out->call.fcalls = (uint32_t)fc;
		out->call.fcalls_exact = true;
	}
}

static void jit(struct xb_estate *st, const struct xb_sample *s, const struct xb_unwind *uw,
		int sched_no, struct xb_estack *out)
{
	uint64_t pc = uw->erlang_pc, lookup_pc = uw->erlang_pc_exact ? pc : pc - 1;
	const struct xb_code *here = lookup(st, lookup_pc);
	/* The scheduler loop itself is JIT code: no process runs there. */
	if (here && strcmp(here->name, "global::process_main") == 0) {
		out->status = XB_ES_NO_PROCESS;
		return;
	}
	if (!here) {
		/* JIT code our map does not name yet: the innermost function
		 * is unknown, and guessing from the stack would credit its
		 * caller.  A rebuild is pending (lookup). */
		out->status = XB_ES_BAD;
		out->why = "JIT code not in the code map yet";
		return;
	}
	/* From here on the sample itself proves where it is: the sampled pc,
	 * or the return address into JIT code found by unwinding the
	 * sample's own stack copy.  When the process and the rest of its
	 * stack cannot be read (or not in time), that much is kept (leaf_only)
	 * instead of dropping the sample: the native work under Erlang code
	 * (copying, GC) is exactly what must not be under-counted. */
	uint64_t c_p, E;
	if (!reg(uw, st->regs.c_p, &c_p)) {
		out->why = "c_p register not recovered";
		leaf_only(st, here, pc, XB_PARTIAL_UNREADABLE, out);
		return;
	}
	bool in_jit = uw->erlang_pc_exact && uw->n == 0;
	/* Fast path: in JIT code E is rsp, so the sample's stack copy holds
	 * the top of the Erlang stack.  When it holds all of it (down to
	 * beam_normal_exit) the stack is exact and needs no live read; the
	 * process is only read when its identity is wanted. */
	if (in_jit && !st->want_identity && here->kind == XB_CODE_FUNCTION) {
		push(st, out, here, pc, true);
		if (walk_captured_only(st, s->regs[st->regs.E], out)) {
			out->c_p = c_p;
			out->status = XB_ES_OK;
			return;
		}
		out->n = out->nexact = 0;
		out->unresolved = 0;
	}
	struct proc p;
	st->roles_seen++;
	if (read_proc(st, out, c_p, &p) < 0) {
		out->why = "c_p is not a process";
		leaf_only(st, here, pc, XB_PARTIAL_UNREADABLE, out);
		return;
	}
	st->roles_ok++;
	if (in_jit) {
		E = s->regs[st->regs.E]; /* in JIT code E is rsp: the copy starts there */
	} else if (st->cm->frame_layout != 0) {
		E = p.stop; /* frame-pointer layout: stored before every C call */
	} else {
		int k = leave_kind(st, pc);
		if (k == LEAVE_E_SAVED && reg(uw, st->regs.E_saved, &E)) {
			/* E stayed in E_saved (rbp) */
		} else if (k == LEAVE_STOP) {
			E = p.stop;
		} else {
			st->unknown_call_sites++;
			out->why = "cannot tell where this JIT call site keeps E";
			leaf_only(st, here, pc, XB_PARTIAL_UNREADABLE, out);
			return;
		}
	}
	if (E % 8) {
		out->why = "misaligned E";
		leaf_only(st, here, pc, XB_PARTIAL_UNREADABLE, out);
		return;
	}
	out->c_p = c_p;
	identify(st, &p, out);
	jit_fcalls(st, uw, out);
	push(st, out, here, pc, true);
	bool in_heap = E >= p.heap && E <= p.hend;
	if (in_jit && !in_heap) {
		/* JIT code running on the scheduler's own stack (fragments
		 * outside any process), or the process was garbage collected
		 * since the sample (its heap moved): the copy may still hold
		 * the whole stack, down to beam_normal_exit. */
		if (walk_captured_only(st, E, out)) {
			out->status = XB_ES_OK;
			return;
		}
		if (here->kind != XB_CODE_FUNCTION) {
			out->status = XB_ES_NO_PROCESS; /* a fragment outside any process */
			return;
		}
		leaf_only(st, here, pc, XB_PARTIAL_HEAP_MOVED, out);
		return;
	}
	if (!in_heap) {
		/* E (a register of the sample, or c_p->stop) is not in the
		 * heap we read: the process is being or has been garbage
		 * collected.  Captured mid-collection, c_p->stop may already be
		 * the stack's new place (moved_stack); otherwise only the
		 * innermost function is known. */
		if (moved_stack(st, &p, out))
			return;
		leaf_only(st, here, pc, XB_PARTIAL_HEAP_MOVED, out);
		return;
	}
	/* Frames not captured with the sample are read live: make sure the
	 * process is still the one running there. */
	if (!walk_captured_only(st, E, out) && !current_matches(st, out, sched_no, c_p)) {
		leaf_only(st, here, pc, XB_PARTIAL_SWITCHED, out);
		return;
	}
	if (out->complete || out->truncated) {
		out->status = XB_ES_OK;
		return;
	}
	if (xb_verbose >= 3)
		xb_debug("jit: pc %llx (%s) in_jit %d E %llx stop %llx hend %llx rbp %llx\n",
			 (unsigned long long)pc, here->name, in_jit, (unsigned long long)E,
			 (unsigned long long)p.stop, (unsigned long long)p.hend,
			 (unsigned long long)uw->regs[XB_PREG_BP]);
	walk(st, E, p.hend, out);
	out->status = XB_ES_OK;
}

/* Entry address of the native function containing PC: its symbol, or
 * where a stripped object has none (a static NIF function), the start of
 * its CFI entry (.eh_frame FDEs start where functions start): PC must be
 * covered by one, and its start comes from .eh_frame_hdr's table
 * (dwarf_frame_info's range is the CFI row's, not the FDE's: a pc past a
 * push got the address after the push). */
static uint64_t native_entry(struct xb_vm *vm, uint64_t pc, struct xb_modsyms **modp)
{
	const struct xb_sym *sym = xb_symbols_addr(&vm->syms, pc, modp);
	if (sym)
		return sym->addr;
	if (!*modp)
		return 0;
	Dwarf_Addr bias;
	Dwarf_CFI *cfi = dwfl_module_eh_cfi((*modp)->mod, &bias);
	Dwarf_Frame *frame;
	if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0)
		return 0;
	free(frame);
	return xb_symbols_fde_start(*modp, pc);
}

/* An address inside native frame K's function: a return address is
 * past the call, so step back into it. */
static uint64_t frame_pc(const struct xb_unwind *uw, unsigned k)
{
	return uw->activation[k] ? uw->pcs[k] : uw->pcs[k] - 1;
}

static bool in_fn(const struct xb_unwind *uw, unsigned k, uint64_t lo, uint64_t size)
{
	uint64_t pc = frame_pc(uw, k);
	return lo && pc >= lo && pc < lo + (size ? size : 1);
}

/* The C function process_main called (the outermost native frame): its
 * entry (0 when unknown, or when the sample is in process_main itself)
 * and module.  emu_in_bif and emu_in_nif both test it. */
struct callee {
	uint64_t entry;
	struct xb_modsyms *mod;
};

static struct callee emu_callee(struct xb_vm *vm, const struct xb_unwind *uw)
{
	struct callee c = { 0, NULL };
	if (uw->n > 0)
		c.entry = native_entry(vm, frame_pc(uw, uw->n - 1), &c.mod);
	return c;
}

/* erts_schedule and erts_dirty_process_main, looked up once (0 where the
 * beam has no symbol for them). */
static void sched_syms(struct xb_estate *st)
{
	struct xb_vm *vm = st->vm;
	if (st->dirty_syms_looked)
		return;
	st->dirty_syms_looked = true;
	st->dpm = xb_symbols_lookup(&vm->syms, vm->beam, "erts_dirty_process_main", &st->dpm_size);
	st->esched = xb_symbols_lookup(&vm->syms, vm->beam, "erts_schedule", &st->esched_size);
}

/* process_main called erts_schedule (do_schedule, context_switch in
 * beam_emu.c): the scheduler is choosing or switching processes, for
 * none of them; the process in c_p, and I, are the one being switched
 * out (or a stale one), not work being done. */
static bool emu_scheduling(struct xb_estate *st, const struct xb_unwind *uw)
{
	if (uw->n == 0)
		return false;
	sched_syms(st);
	return in_fn(uw, uw->n - 1, st->esched, st->esched_size);
}

/* A BIF called through a native-function wrapper, not from module code:
 * a call to an exported BIF (call_ext, apply, a Fun) goes to the BIF's
 * Export, whose code is nif_bif.call_bif in emu/bif_instrs.tab:
 *
 *   code[-3..-1]  the BIF's ErtsCodeMFA
 *   code[0]       &&call_bif (a label inside process_main)
 *   code[1]       the BIF's C function
 *
 * The erlang module's BIFs are such wrappers too, as the body of their
 * stub functions (erlang:crc32/1 is code[-3..1] in erlang's loaded code).
 * I points at code[0] and stays in its register across the call (the
 * epilogue needs it), so the sample's I says exactly which BIF ran, and
 * code[1] being the C function process_main called proves it.  E's
 * register is reused during the call, but call_bif first stores E in
 * c_p->stop (SWAPOUT), I in c_p->i (SET_CP_I_ABS) and &code[-3] in
 * c_p->current; the BIF returns to the continuation pointer at E[0]
 * ($RETURN), which is the caller's frame.  So there is no innermost
 * function of our own (a BIF has no Erlang code): the stack from
 * c_p->stop, read live, starts at the caller, provided c_p->i and
 * c_p->current (read together, a drain interval after the sample) still
 * say a call through this wrapper: nothing the process did since stored
 * another I.  Whether the scheduler still runs c_p does not matter here:
 * a BIF that uses up the reductions is switched out right at the wrapper
 * (`goto context_switch` in call_bif, with I, E and current saved), and
 * there the saved stack is exactly the caller's.  What this cannot tell
 * apart is a later call through the same wrapper from another Erlang
 * function within the skid bound (--max-skid-ms): the same exposure as
 * every interpreter stack, which is read live.
 * emu_in_bif says whether the sample is in such a call (true with *I the
 * wrapper's code[0]); emu_bif_stack reads the stack. */
static bool emu_in_bif(struct xb_estate *st, const struct xb_unwind *uw, const struct callee *callee,
		       uint64_t *Iout)
{
	struct xb_vm *vm = st->vm;
	uint64_t I, w[5];
	int64_t arity = xb_off(vm, XB_F_MFA_ARITY);
	uint64_t pm = vm->sym.process_main, pm_size = vm->sym.process_main_size;
	if (!callee->entry || callee->mod != vm->beam || !reg(uw, st->regs.I, &I) || I % 8 ||
	    I < 4096 || arity < 0 || !pm || !pm_size)
		return false; /* BIFs are in beam.smp (NIF libraries: emu_in_nif) */
	/* The ErtsCodeMFA ends with arity, right before code[0]. */
	if (xb_read(&vm->mem, I - (uint64_t)arity - 8, w, sizeof(w)) < 0)
		return false;
	/* module, function, arity, &&call_bif (every instruction word is a
	 * label in process_main), the C function */
	if (!xb_is_atom(w[0]) || !xb_is_atom(w[1]) || w[2] > 255 || w[3] < pm || w[3] >= pm + pm_size ||
	    w[4] < 4096)
		return false;
	/* What proves it a call_bif: the C function process_main called
	 * is code[1]. */
	if (callee->entry != w[4])
		return false;
	*Iout = I;
	return true;
}

/* Like emu_in_bif, from c_p->current instead of the sampled I: the
 * ErtsCodeMFA there is followed by &&call_bif (code[0], a label in
 * process_main) and the C function process_main called (code[1]).  Only
 * for a process struct captured with the sample (P->exact): read later,
 * current may say a later call. */
static bool emu_bif_by_current(struct xb_estate *st, const struct callee *callee, const struct proc *p,
			       uint64_t *Iout)
{
	struct xb_vm *vm = st->vm;
	uint64_t w[2];
	int64_t arity = xb_off(vm, XB_F_MFA_ARITY);
	uint64_t pm = vm->sym.process_main, pm_size = vm->sym.process_main_size;
	if (!callee->entry || callee->mod != vm->beam || arity < 0 || !p->current || p->current % 8 ||
	    !pm || !pm_size)
		return false;
	uint64_t code = p->current + (uint64_t)arity + 8; /* the ErtsCodeMFA ends with arity */
	if (xb_read(&vm->mem, code, w, sizeof(w)) < 0 || w[0] < pm || w[0] >= pm + pm_size ||
	    w[1] != callee->entry)
		return false;
	*Iout = code;
	return true;
}

/* The stack of c_p under the BIF whose wrapper is at I (emu_in_bif);
 * false, with nothing done, when c_p no longer says this call (then the
 * registers are all there is: emu goes on as for any other sample). */
static bool emu_bif_stack(struct xb_estate *st, uint64_t c_p, const struct proc *p, uint64_t I,
			  struct xb_estack *out)
{
	struct xb_vm *vm = st->vm;
	uint64_t top, E = p->stop;
	uint64_t mfa = I - (uint64_t)xb_off(vm, XB_F_MFA_ARITY) - 8;
	const struct xb_code *caller = NULL;
	uint64_t live_before = vm->mem.live_reads;
	if (p->i == I && p->current == mfa && E % 8 == 0 && E >= p->heap && E + 8 <= p->hend &&
	    sread(st, out, E, &top, 8) == 0 && xb_is_cp(top))
		caller = xb_codemap_find(st->cm, top - 1);
	if (!caller || caller->kind != XB_CODE_FUNCTION)
		return false;
	/* The caller from the word just checked, the rest from above it. */
	finish(st, c_p, p, caller, p->exact && vm->mem.live_reads == live_before, top, E + 8, out);
	out->leaf_ret = true; /* the caller, at its return address */
	return true;
}

/* The interpreter's I.  GCC keeps `register BeamInstr *I asm("rbx")` in
 * rbx across process_main, but inside some instructions it borrows rbx
 * for a temporary and parks I in another register, and process_main's
 * DWARF does not say so.  So: take the table's register when it points
 * into a loaded function; otherwise take the one function that any other
 * general register points into; if none or several, give up (the sample
 * is dropped, not guessed). */
static const struct xb_code *emu_current(struct xb_estate *st, const struct xb_unwind *uw,
					  uint64_t *Iout)
{
	uint64_t I;
	if (reg(uw, st->regs.I, &I) && I % 8 == 0) {
		const struct xb_code *c = lookup(st, I);
		if (c && c->kind == XB_CODE_FUNCTION) {
			*Iout = I;
			return c;
		}
	}
	const struct xb_code *found = NULL;
	for (int r = 0; r < XB_PREG_COUNT; r++) {
		uint64_t v;
		if (r == XB_PREG_SP || r == XB_PREG_IP || r == XB_PREG_FLAGS || r == st->regs.E ||
		    r == st->regs.c_p || !reg(uw, r, &v) || v % 8)
			continue;
		const struct xb_code *c = xb_codemap_find(st->cm, v);
		if (!c || c->kind != XB_CODE_FUNCTION)
			continue;
		if (found && found != c)
			return NULL; /* ambiguous */
		found = c;
		*Iout = v;
	}
	return found;
}

/* A NIF called by the interpreter (nif_bif.call_nif in
 * emu/bif_instrs.tab).  I and E are dead across that call, so GCC reuses
 * their registers and neither can be trusted there; but call_nif first
 * sets c_p->current to the function's MFA (the ErtsCodeMFA right before
 * its code) and HEAVY_SWAPOUT saves E in c_p->stop.  Those are read live
 * (P, read with the rest of the process struct),
 * and c_p->current is also left behind by BIF calls and context switches,
 * so they are used only when they prove to be about this very call:
 *  - the C function process_main called (the outermost native frame) is
 *    not in beam.smp (BIFs are; NIF libraries are not: the NIFs built into
 *    beam.smp keep the register path), and
 *  - it is the function the NIF stub after that MFA calls, I[1] (the
 *    ErtsNativeFunc layout that comment in bif_instrs.tab describes).
 * Until load_nif_2nd_finisher (erl_nif.c) patches the function itself,
 * which waits for thread progress, calls go through a stub outside the
 * module's code (erts_call_nif_early: an ErtsNifBeamStub with its own copy
 * of the MFA), and a yielding NIF (enif_schedule_nif) runs from a
 * per-process copy; the function is then found by that MFA's name.
 * On success *I is the function's first instruction. */
static const struct xb_code *emu_in_nif(struct xb_estate *st, const struct callee *callee,
					const struct proc *p, uint64_t *I)
{
	struct xb_vm *vm = st->vm;
	uint64_t entry = callee->entry, mfa = p->current, fn;
	int64_t arity = xb_off(vm, XB_F_MFA_ARITY);
	if (!entry || callee->mod == vm->beam || arity < 0 || mfa == 0 || mfa % 8)
		return NULL;
	uint64_t code = mfa + (uint64_t)arity + 8; /* the ErtsCodeMFA ends with arity */
	if (xb_read_u64(&vm->mem, code + 8, &fn) < 0 || fn != entry)
		return NULL;
	const struct xb_code *c = xb_codemap_find(st->cm, code);
	if (c && c->kind == XB_CODE_FUNCTION) {
		*I = code;
		return c;
	}
	if (c)
		return NULL; /* inside something else: not a stub */
	size_t h = (size_t)(((mfa >> 3) ^ fn) * 0x9E3779B97F4A7C15ull >> 58);
	struct xb_nif_stub *e = &st->nif_stubs[h];
	if (e->mfa != mfa || e->fn != fn || e->gen != st->codemap_refreshes) {
		char name[2300];
		e->mfa = mfa;
		e->fn = fn;
		e->gen = st->codemap_refreshes;
		e->code = xb_codemap_read_mfa(vm, mfa, name, sizeof(name)) < 0
				  ? NULL
				  : xb_codemap_find_name(st->cm, name);
	}
	c = e->code;
	if (!c)
		return NULL;
	*I = c->start;
	return c;
}

/* Is the sampled I the call_nif instruction of the NIF the sample is in
 * (I[1] is the C function process_main called: the ErtsNativeFunc layout
 * of nif_bif.call_nif, emu/bif_instrs.tab)?  Then the function I is in is
 * the NIF's own, and its caller is the next frame (xb_estack
 * .leaf_is_callee).  For a NIF library outside beam.smp, as emu_in_nif. */
static bool emu_nif_stub(struct xb_vm *vm, const struct callee *callee, uint64_t I)
{
	uint64_t fn;
	return callee->entry && callee->mod != vm->beam && I % 8 == 0 &&
	       xb_read_u64(&vm->mem, I + 8, &fn) == 0 && fn == callee->entry;
}

/* The word at the interpreter's E is NIL (`allocate` reserves the frame's
 * CP slot as NIL, and a return sets it back: AH and RETURN in
 * emu/macros.tab) or a continuation pointer (SAVE_CONTINUATION_POINTER,
 * emu/macros.tab).  Anything else means E no longer points at this
 * process's stack top: a garbage collection moved the stack and the
 * allocator handed the old block back as the new heap. */
static bool emu_stack_top_ok(struct xb_estate *st, struct xb_estack *out, uint64_t E,
			     const struct proc *p)
{
	uint64_t top;
	if (E + 8 > p->hend)
		return true; /* nothing above E to read */
	if (sread(st, out, E, &top, 8) < 0)
		return false;
	if (top == XB_NIL)
		return true;
	const struct xb_code *c = xb_is_cp(top) ? xb_codemap_find(st->cm, top - 1) : NULL;
	return c && c->kind == XB_CODE_FUNCTION;
}

static void emu(struct xb_estate *st, const struct xb_unwind *uw, int sched_no,
		struct xb_estack *out)
{
	struct xb_vm *vm = st->vm;
	uint64_t c_p = 0, c_p_reg = 0, E, I;
	struct proc p;
	/* A normal scheduler publishes the process it runs in its
	 * ErtsSchedulerData (current_process); dirty schedulers and builds
	 * without it use the register process_main keeps c_p in. */
	if (emu_scheduling(st, uw))
		return; /* native only */
	bool have_reg = reg(uw, st->regs.c_p, &c_p_reg);
	uint64_t live_before = vm->mem.live_reads;
	bool have = sched_no > 0 && sched_current(st, out, 's', sched_no, &c_p) == 0;
	/* Captured with the sample (BPF, or read at its moment), the
	 * scheduler's current process is a fact: the register may be reused
	 * inside an instruction, or by the C code the sample is in. */
	bool have_exact = have && vm->mem.live_reads == live_before;
	uint64_t c_p_call = have_exact && c_p ? c_p : c_p_reg;
	bool have_call = (have_exact && c_p) || have_reg;
	/* In a BIF called through its wrapper the sample's own c_p and I
	 * say which process ran which BIF, whatever runs there now. */
	struct callee callee = emu_callee(vm, uw);
	if (have_call && emu_in_bif(st, uw, &callee, &I) && read_proc(st, out, c_p_call, &p) == 0 &&
	    emu_bif_stack(st, c_p_call, &p, I, out))
		return;
	/* The same call when the sampled I is lost (a callee that saved rbx
	 * where the unwinder cannot find it): call_bif stores the wrapper's
	 * MFA in c_p->current before the call; from the process captured
	 * with the sample that proves the call as well as I would. */
	if (have_call && read_proc(st, out, c_p_call, &p) == 0 && p.exact &&
	    emu_bif_by_current(st, &callee, &p, &I) && emu_bif_stack(st, c_p_call, &p, I, out))
		return;
	if (have_exact && c_p != 0)
		have_reg = false;
	if (have && c_p == 0 && !have_reg) {
		out->status = XB_ES_NO_PROCESS; /* scheduling, not running a process */
		return;
	}
	if (!have && !have_reg) {
		out->status = XB_ES_BAD;
		out->why = "c_p not recovered";
		return;
	}
	/* Another process, or none, runs there now (the scheduler's
	 * current_process is read a drain interval after the sample): ours
	 * is c_p_reg. */
	bool switched = have && have_reg && c_p_reg != c_p;
	if (!have || switched)
		c_p = c_p_reg;
	st->roles_seen += have_reg;
	if (read_proc(st, out, c_p, &p) < 0) {
		/* The process is gone or changed past recognition; the
		 * sampled I (a register) still names what ran. */
		const struct xb_code *here = emu_current(st, uw, &I);
		if (here) {
			out->leaf_is_callee = emu_nif_stub(vm, &callee, I);
			out->why = "c_p is not a process";
			leaf_only(st, here, I, XB_PARTIAL_UNREADABLE, out);
			return;
		}
		out->status = have ? XB_ES_STALE : XB_ES_BAD;
		out->why = "c_p is not a process";
		return;
	}
	st->roles_ok += have_reg;
	/* In a NIF, I and E are in c_p (emu_in_nif); elsewhere in registers. */
	bool here_exact = true;
	const struct xb_code *here = emu_in_nif(st, &callee, &p, &I);
	if (here) {
		E = p.stop;
		here_exact = p.exact;
		out->leaf_is_callee = true; /* the NIF's own function, then its caller */
	} else {
		here = emu_current(st, uw, &I);
		if (!here) {
			out->status = XB_ES_BAD;
			out->why = "I not recovered";
			return;
		}
		out->leaf_is_callee = emu_nif_stub(vm, &callee, I);
		if (!reg(uw, st->regs.E, &E)) {
			out->c_p = c_p;
			identify(st, &p, out);
			out->why = "E register not recovered";
			leaf_only(st, here, I, XB_PARTIAL_UNREADABLE, out);
			return;
		}
	}
	if (E % 8) {
		out->c_p = c_p;
		identify(st, &p, out);
		out->why = "misaligned E";
		leaf_only(st, here, I, XB_PARTIAL_UNREADABLE, out);
		return;
	}
	/* Switched out since the sample: when the sample was in a call from
	 * process_main (uw->n > 0) that call may have been erts_schedule,
	 * done for no process, unless erts_schedule has a symbol
	 * (emu_scheduling returned such samples early); a sample in the
	 * instruction loop itself surely ran Erlang code for c_p_reg. */
	if (switched && uw->n > 0 && !st->esched) {
		out->status = XB_ES_STALE;
		out->why = "process moved on before its stack could be read";
		return;
	}
	/* Captured mid-collection (a C call from process_main collecting this
	 * very process): the stack has been copied to c_p->stop already, and
	 * E, the register, still points at the old copy, which the capture
	 * did not take (moved_stack; else as below, reading E live). */
	if (!switched && p.exact && p.stop % 8 == 0 && (p.stop < p.heap || p.stop > p.hend)) {
		out->c_p = c_p;
		identify(st, &p, out);
		push(st, out, here, I, here_exact);
		if (moved_stack(st, &p, out))
			return;
		out->n = out->nexact = 0;
		out->leaf_ret = out->truncated = false;
	}
	/* The process was switched out, or its heap (and the stack at its
	 * end) moved in a garbage collection since the sample: the stack E
	 * pointed to is gone, but I still names what ran. */
	if (switched || E < p.heap || E > p.hend || !emu_stack_top_ok(st, out, E, &p)) {
		if (xb_verbose >= 3)
			xb_debug("emu: switched %d E %llx heap %llx hend %llx stop %llx I %llx (%s)\n", switched,
				 (unsigned long long)E, (unsigned long long)p.heap, (unsigned long long)p.hend,
				 (unsigned long long)p.stop, (unsigned long long)I, here->name);
		out->c_p = c_p;
		identify(st, &p, out);
		if (!switched) {
			/* mid-collection: the stack at its new place (moved_stack) */
			push(st, out, here, I, here_exact);
			if (moved_stack(st, &p, out))
				return;
		}
		leaf_only(st, here, I, switched ? XB_PARTIAL_SWITCHED : XB_PARTIAL_HEAP_MOVED, out);
		return;
	}
	finish(st, c_p, &p, here, here_exact, I, E, out);
}

/* A dirty scheduler between jobs is in erts_schedule (or its own loop),
 * called from erts_dirty_process_main, and the current_process we read a
 * little later may already be the next job's: such a sample is scheduling,
 * not work for that process.  Needs both functions' symbols (a stripped
 * OTP 29 beam has neither: its dirty samples keep the process). */
static bool dirty_scheduling(struct xb_estate *st, const struct xb_unwind *uw)
{
	sched_syms(st);
	if (!st->dpm || !st->esched)
		return false;
	for (unsigned k = 0; k < uw->n; k++)
		if (in_fn(uw, k, st->dpm, st->dpm_size))
			return k == 0 || in_fn(uw, k - 1, st->esched, st->esched_size);
	return false;
}

static void reset(struct xb_estack *out, enum xb_es_status status);

/* A dirty scheduler runs C code (a dirty NIF, or a GC as a system task)
 * on behalf of a process that is not executing Erlang code meanwhile: its
 * c_p->stop and c_p->i were saved when it left the normal scheduler. */
static void dirty(struct xb_estate *st, const struct xb_unwind *uw, char kind, int no,
		  struct xb_estack *out)
{
	if (dirty_scheduling(st, uw))
		return; /* native only */
	struct xb_vm *vm = st->vm;
	uint64_t c_p, I;
	struct proc p;
	if (sched_current(st, out, kind, no, &c_p) < 0) {
		xb_debug("dirty %s scheduler %d: %s\n", kind == 'c' ? "CPU" : "I/O", no, xb_err());
		return; /* native only */
	}
	if (c_p == 0 || read_proc(st, out, c_p, &p) < 0 || xb_off(vm, XB_F_PROC_I) < 0)
		return; /* no process: native only */
	I = p.i;
	if (p.stop < p.heap || p.stop > p.hend || p.stop % 8) {
		/* A garbage collection of this very process (a dirty GC
		 * system task, erts_execute_dirty_system_task) is moving its
		 * stack: captured mid-collection, c_p->stop is the stack's new
		 * place (moved_stack); else native only. */
		const struct xb_code *here = lookup(st, I);
		if (!here || !p.exact)
			return;
		out->c_p = c_p;
		identify(st, &p, out);
		push(st, out, here, I, true);
		if (!moved_stack(st, &p, out))
			reset(out, XB_ES_NO_PROCESS);
		return;
	}
	finish(st, c_p, &p, lookup(st, I), p.exact, I, p.stop, out);
}

/* OUT as an empty result of STATUS: no frames, no process, no call. */
static void reset(struct xb_estack *out, enum xb_es_status status)
{
	out->status = status;
	out->why = NULL;
	out->n = out->nexact = 0;
	out->unresolved = 0;
	out->truncated = out->live_read = out->complete = out->partial = out->leaf_ret = false;
	out->leaf_is_callee = false;
	out->read_ns = 0;
	out->c_p = 0;
	out->pid[0] = out->regname[0] = 0;
	memset(&out->call, 0, sizeof(out->call));
	memset(out->initial, 0, sizeof(out->initial));
}

void xb_erlang_stack(struct xb_estate *st, const struct xb_sample *s, const struct xb_unwind *uw,
		     char kind, int sched_no, struct xb_estack *out)
{
	reset(out, XB_ES_NO_PROCESS);
	if (uw->stop != XB_UW_REACHED_ERLANG) {
		if (uw->stop == XB_UW_END && (kind == 'c' || kind == 'i') && sched_no > 0)
			dirty(st, uw, kind, sched_no, out);
		if (out->status != XB_ES_OK)
			out->n = 0;
		return; /* otherwise a native-only stack */
	}
	if (kind != 's')
		sched_no = 0; /* current_process checks are for normal schedulers */
	if (st->vm->flavor == XB_FLAVOR_JIT) {
		jit(st, s, uw, sched_no, out);
		/* In C code called from JIT code, the pc is the return address */
		if (out->n && out->addrs[0] == uw->erlang_pc && !uw->erlang_pc_exact)
			out->leaf_ret = true;
	} else {
		emu(st, uw, sched_no, out);
	}
	if (out->status != XB_ES_OK)
		out->n = 0;
}

void xb_erlang_stack_saved(struct xb_estate *st, uint64_t c_p, uint64_t pid_term, uint64_t i, uint64_t stop,
			   uint64_t heap, uint64_t hend, struct xb_estack *out)
{
	struct xb_vm *vm = st->vm;
	reset(out, XB_ES_BAD);
	out->c_p = c_p;
	out->pid_term = pid_term;
	xb_format_pid(pid_term, vm->pid_num_bits, vm->pid_ser_bits, &vm->pix, out->pid, sizeof(out->pid));
	if (stop % 8 || stop < heap || stop > hend || hend - stop > MAX_HEAP_BYTES) {
		out->why = "the saved stack pointer is not in the process's heap";
		return;
	}
	/* c_p->i: where the process resumes, inside its innermost function
	 * (a receive, or after the call it yielded in) */
	const struct xb_code *here = i ? xb_codemap_find(st->cm, i) : NULL;
	push(st, out, here, i, false);
	walk(st, stop, hend, out);
	out->status = XB_ES_OK;
}

void xb_erlang_stack_blocked(struct xb_estate *st, const struct xb_unwind *uw, int sched_no,
			     struct xb_estack *out)
{
	struct xb_vm *vm = st->vm;
	reset(out, XB_ES_NO_PROCESS);
	/* native frames (the call and its system call) down to Erlang code */
	if (uw->stop != XB_UW_REACHED_ERLANG || sched_no <= 0 || uw->n == 0 || uw->erlang_pc_exact)
		return;
	bool emu = vm->flavor == XB_FLAVOR_EMU;
	/* The interpreter's scheduler waits inside erts_schedule, called
	 * from process_main, sometimes before it clears current_process. */
	if (emu && emu_scheduling(st, uw))
		return;
	/* An idle scheduler waits with no current process (erts_schedule
	 * cleared it): only a blocked call has one. */
	uint64_t c_p;
	struct proc p;
	if (sched_current(st, out, 's', sched_no, &c_p) < 0 || c_p == 0)
		return;
	if (read_proc(st, out, c_p, &p) < 0) {
		out->status = XB_ES_BAD;
		out->why = "the scheduler's current process is not a process";
		return;
	}
	/* The code the native frames return to: in the JIT, the NIF's or
	 * BIF's own function or a shared fragment (no frame of its own), which
	 * must be in the code map (else its caller would be blamed: jit());
	 * in the interpreter, process_main (no frame). */
	const struct xb_code *here = lookup(st, uw->erlang_pc - 1);
	if (!emu && !here) {
		out->status = XB_ES_BAD;
		out->why = "JIT code not in the code map yet";
		return;
	}
	if (here && strcmp(here->name, "global::process_main") == 0)
		return; /* the scheduler loop itself: no call for a process */
	/* Where E was left: as for a sample in C code (jit(): a call site
	 * that keeps E in E_saved leaves c_p->stop stale); the interpreter
	 * stores it in c_p->stop before every call (SWAPOUT). */
	uint64_t E = p.stop;
	if (!emu && st->cm->frame_layout == 0 && leave_kind(st, uw->erlang_pc) == LEAVE_E_SAVED &&
	    !reg(uw, st->regs.E_saved, &E)) {
		out->status = XB_ES_BAD;
		out->why = "E_saved register not recovered";
		return;
	}
	if (E % 8 || E < p.heap || E > p.hend) {
		out->status = XB_ES_BAD;
		out->why = "the blocked process's stack pointer is not in its heap";
		return;
	}
	out->c_p = c_p;
	identify(st, &p, out);
	push(st, out, here, uw->erlang_pc, false);
	walk(st, E, p.hend, out);
	out->status = XB_ES_OK;
}

int xb_blocked_call_id(struct xb_estate *st, int sched_no, uint64_t *c_p, struct xb_call_id *id)
{
	struct xb_estack scratch;
	struct proc p;
	memset(id, 0, sizeof(*id));
	*c_p = 0;
	if (sched_no <= 0 || sched_current(st, &scratch, 's', sched_no, c_p) < 0 || *c_p == 0 ||
	    read_proc(st, &scratch, *c_p, &p) < 0 || !p.have_call)
		return -1;
	id->fcalls = (uint32_t)p.fcalls;
	id->reds = p.reds;
	id->have = true;
	return 0;
}


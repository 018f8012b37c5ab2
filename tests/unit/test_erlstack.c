/* test_erlstack.c - the Erlang stack walk (src/erlstack/erlstack.c) over
 * recorded memory: a remote reader backed by a snapshot of regions
 * (xb_remote_open_snapshot) stands in for the VM, so JIT and interpreter
 * frames are walked without a live VM.  Offsets are OTP 25's (erts
 * 13.1.5: struct process, erl_process.h), registers the JIT's
 * (jit/x86/beam_asm.hpp: c_p r13, E rsp, E_saved rbp). */
#define _GNU_SOURCE
#include "xb/codemap.h"
#include "xb/erlstack.h"
#include "xb/term.h"
#include "xb/vm.h"

#include <stdlib.h>
#include <string.h>

#include "unit.h"

/* Code: three Erlang functions and a JIT fragment; the bottom of every
 * stack is NORMAL_EXIT (beam_normal_exit). */
#define F_START 0x10000u /* m:f/1 */
#define G_START 0x10100u /* m:g/1 */
#define H_START 0x10200u /* m:h/0 */
#define FRAG_START 0x20000u /* global::call_light_bif_shared */
#define NORMAL_EXIT 0x30008u
#define C_P 0x7000000u
#define HEAP 0x8000000u
#define HEND (HEAP + 0x1000u)
#define PID_TERM ((uint64_t)(85 << 4) | XB_TAG_IMMED1_PID) /* <0.85.0> on OTP 25 */

static struct fixture {
	struct xb_vm vm;
	struct xb_codemap cm;
	struct xb_estate st;
	struct xb_region r[6];
	unsigned nr;
	uint8_t proc[776];
	uint64_t stack[0x1000 / 8];
	uint8_t code[2][32];
} fx;

static void add_code(const char *name, uint64_t start, uint64_t end)
{
	xb_codemap_add(&fx.cm, start, end, name, strlen(name), 0);
}

static void setup(enum xb_flavor flavor)
{
	xb_codemap_free(&fx.cm);
	memset(&fx, 0, sizeof(fx));
	struct xb_vm *vm = &fx.vm;
	vm->flavor = flavor;
	vm->pid_num_bits = 15;
	vm->pid_ser_bits = 13;
	for (int i = 0; i < XB_F_COUNT; i++)
		vm->off[i] = XB_NOFIELD;
	vm->off[XB_F_PROC_SIZE] = 776;
	vm->off[XB_F_PROC_ID] = 0;
	vm->off[XB_F_PROC_REG] = 48;
	vm->off[XB_F_PROC_STOP] = 88;
	vm->off[XB_F_PROC_HEAP] = 128;
	vm->off[XB_F_PROC_HEND] = 136;
	vm->off[XB_F_PROC_I] = 256;
	vm->off[XB_F_PROC_CURRENT] = 472;
	vm->off[XB_F_MFA_ARITY] = 16;
	if (flavor == XB_FLAVOR_JIT)
		vm->regs = (struct xb_regroles){ XB_PREG_R13, XB_PREG_SP, XB_PREG_IP, XB_PREG_BP, XB_PREG_R14 };
	else
		vm->regs = (struct xb_regroles){ XB_PREG_R13, XB_PREG_R12, XB_PREG_BX, XB_PREG_NONE, XB_PREG_NONE };
	add_code("m:f/1", F_START, G_START);
	add_code("m:g/1", G_START, H_START);
	add_code("m:h/0", H_START, H_START + 0x100);
	add_code("global::call_light_bif_shared", FRAG_START, FRAG_START + 0x100);
	xb_codemap_finish(&fx.cm);
	fx.cm.normal_exit = NORMAL_EXIT;
	xb_estate_init(&fx.st, vm, &fx.cm, 128);
	fx.st.dirty_syms_looked = true; /* no symbols in a snapshot */
	/* the process struct */
	uint64_t v;
	v = PID_TERM, memcpy(fx.proc + 0, &v, 8);
	v = HEAP, memcpy(fx.proc + 128, &v, 8);
	v = HEND, memcpy(fx.proc + 136, &v, 8);
}

/* The stack of m:f/1 called by m:g/1 called by m:h/0, at E (an offset
 * into the heap), as the VM lays it out: a CP per frame, other words
 * (y registers, NIL) between. */
static uint64_t lay_stack(uint64_t E)
{
	uint64_t *w = fx.stack + (E - HEAP) / 8;
	w[0] = G_START + 0x40;    /* return into m:g/1 */
	w[1] = XB_NIL;            /* a y register */
	w[2] = (uint64_t)(7 << 4) | 0xf; /* small 7 */
	w[3] = H_START + 0x20;    /* return into m:h/0 */
	w[4] = NORMAL_EXIT;
	return E;
}

static void region(uint64_t addr, const void *data, uint64_t len)
{
	fx.r[fx.nr++] = (struct xb_region){ addr, len, data };
}

static void open_snapshot(void)
{
	CHECK(xb_remote_open_snapshot(&fx.vm.mem, NULL, fx.r, fx.nr) == 0, "snapshot");
}

static void expect(const struct xb_estack *es, const char *const *names, unsigned n)
{
	CHECK(es->status == XB_ES_OK, "status %d (%s)", es->status, es->why ? es->why : "");
	CHECK(es->n == n, "%u frames, expected %u", es->n, n);
	for (unsigned i = 0; i < n && i < es->n; i++)
		CHECK(strcmp(es->frames[i]->name, names[i]) == 0, "frame %u is %s, expected %s", i,
		      es->frames[i]->name, names[i]);
}

static const char *const FGH[] = { "m:f/1", "m:g/1", "m:h/0" };

/* JIT, sampled in Erlang code: E is rsp and the stack is in the sample's
 * own copy of the user stack; nothing is read live. */
static void t_jit_in_erlang_code(void)
{
	setup(XB_FLAVOR_JIT);
	uint64_t E = lay_stack(HEND - 0x100);
	region(E, fx.stack + (E - HEAP) / 8, HEND - E); /* the user stack copy */
	open_snapshot();
	struct xb_sample s = { .ip = F_START + 0x10, .user = true };
	s.regs[XB_PREG_SP] = E;
	s.regs[XB_PREG_R13] = C_P;
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = F_START + 0x10,
				.erlang_pc_exact = true, .regs_valid = 0xffffffffu };
	memcpy(uw.regs, s.regs, sizeof(uw.regs));
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 1, &es);
	expect(&es, FGH, 3);
	CHECK(es.complete && !es.partial && !es.live_read && es.nexact == 3,
	      "complete %d partial %d live %d nexact %u", es.complete, es.partial, es.live_read, es.nexact);
	xb_remote_close(&fx.vm.mem);
}

/* JIT, sampled in C code called from m:f/1 at a call site that keeps E in
 * rbp (`mov rsp, rbp` after the call, emit_leave_runtime): the process
 * struct and stack come from memory captured with the sample (as the BPF
 * capture path provides), identity included. */
static void t_jit_in_c_e_saved(void)
{
	setup(XB_FLAVOR_JIT);
	uint64_t E = lay_stack(HEND - 0x200), ra = F_START + 0x20;
	static const uint8_t mov_rsp_rbp[] = { 0x48, 0x89, 0xec };
	memcpy(fx.code[0], mov_rsp_rbp, sizeof(mov_rsp_rbp));
	region(ra, fx.code[0], sizeof(fx.code[0]));
	region(C_P, fx.proc, sizeof(fx.proc));
	region(HEAP, fx.stack, sizeof(fx.stack));
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500001000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = ra, .erlang_pc_exact = false, .n = 2 };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs[XB_PREG_BP] = E;
	uw.regs_valid = (1u << XB_PREG_R13) | (1u << XB_PREG_BP);
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 3);
	CHECK(es.complete && !es.live_read && es.nexact == 3 && strcmp(es.pid, "<0.85.0>") == 0,
	      "complete %d live %d nexact %u pid %s", es.complete, es.live_read, es.nexact, es.pid);
	xb_remote_close(&fx.vm.mem);
}

/* The same, at a call site that stored E in c_p->stop
 * (`mov rsp, [r13 + 88]`). */
static void t_jit_in_c_stop(void)
{
	setup(XB_FLAVOR_JIT);
	uint64_t E = lay_stack(HEND - 0x80), ra = F_START + 0x60;
	static const uint8_t mov_rsp_stop[] = { 0x49, 0x8b, 0x65, 88 };
	memcpy(fx.code[1], mov_rsp_stop, sizeof(mov_rsp_stop));
	memcpy(fx.proc + 88, &E, 8);
	region(ra, fx.code[1], sizeof(fx.code[1]));
	region(C_P, fx.proc, sizeof(fx.proc));
	region(HEAP, fx.stack, sizeof(fx.stack));
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500001000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = ra, .n = 1 };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs[XB_PREG_BP] = 0xdead; /* junk at such a call site */
	uw.regs_valid = (1u << XB_PREG_R13) | (1u << XB_PREG_BP);
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 3);
	CHECK(es.complete && es.nexact == 3, "complete %d nexact %u", es.complete, es.nexact);
	xb_remote_close(&fx.vm.mem);
}

/* The process struct cannot be read (gone, or not captured and the
 * snapshot has no live process to read): the sample still proves its
 * innermost Erlang function (the return address into m:f/1 from the
 * native stack copy); it is kept alone, marked partial, never dropped. */
static void t_jit_unreadable_keeps_leaf(void)
{
	setup(XB_FLAVOR_JIT);
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500001000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = F_START + 0x20, .n = 3 };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs_valid = 1u << XB_PREG_R13;
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 1);
	CHECK(es.partial && es.partial_cause == XB_PARTIAL_UNREADABLE && es.nexact == 1,
	      "partial %d cause %d nexact %u", es.partial, es.partial_cause, es.nexact);
	/* Under a JIT fragment (BIFs are called through shared code) the
	 * Erlang caller is on the Erlang stack: unknown, no frame, kept. */
	uw.erlang_pc = FRAG_START + 0x10;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	CHECK(es.status == XB_ES_OK && es.n == 0 && es.partial, "fragment: status %d n %u partial %d",
	      es.status, es.n, es.partial);
	xb_remote_close(&fx.vm.mem);
}

/* E (exact, from rbp) lies outside the heap the process has now: it
 * garbage collected since the sample and its stack moved.  Only the
 * innermost function is kept. */
static void t_jit_heap_moved(void)
{
	setup(XB_FLAVOR_JIT);
	uint64_t ra = F_START + 0x30;
	static const uint8_t mov_rsp_rbp[] = { 0x48, 0x89, 0xec };
	memcpy(fx.code[0], mov_rsp_rbp, sizeof(mov_rsp_rbp));
	region(ra, fx.code[0], sizeof(fx.code[0]));
	region(C_P, fx.proc, sizeof(fx.proc));
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500001000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = ra, .n = 1 };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs[XB_PREG_BP] = 0x9000000; /* the old stack */
	uw.regs_valid = (1u << XB_PREG_R13) | (1u << XB_PREG_BP);
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 1);
	CHECK(es.partial && es.partial_cause == XB_PARTIAL_HEAP_MOVED, "partial %d cause %d", es.partial,
	      es.partial_cause);
	xb_remote_close(&fx.vm.mem);
}

/* Captured in the middle of a garbage collection: c_p->stop is already
 * the stack's place in the new heap (outside [heap, hend], which are still
 * the old heap's).  The stack found there, down to beam_normal_exit, is
 * the sample's; without it only the leaf is kept. */
static void t_jit_mid_gc_moved_stack(void)
{
	static uint64_t newstack[8];
	setup(XB_FLAVOR_JIT);
	uint64_t ra = F_START + 0x70, NEWS = 0x9000000;
	static const uint8_t mov_rsp_stop[] = { 0x49, 0x8b, 0x65, 88 };
	memcpy(fx.code[1], mov_rsp_stop, sizeof(mov_rsp_stop));
	memcpy(fx.proc + 88, &NEWS, 8);
	newstack[0] = G_START + 0x40;
	newstack[1] = XB_NIL;
	newstack[2] = H_START + 0x20;
	newstack[3] = NORMAL_EXIT;
	region(ra, fx.code[1], sizeof(fx.code[1]));
	region(C_P, fx.proc, sizeof(fx.proc));
	region(NEWS, newstack, sizeof(newstack));
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500001000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = ra, .n = 2 };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs_valid = 1u << XB_PREG_R13;
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 3);
	CHECK(es.complete && !es.partial && es.nexact == 3, "complete %d partial %d nexact %u", es.complete,
	      es.partial, es.nexact);
	/* the moved stack does not reach beam_normal_exit in the capture */
	newstack[3] = XB_NIL;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 1);
	CHECK(es.partial && es.partial_cause == XB_PARTIAL_HEAP_MOVED, "partial %d cause %d", es.partial,
	      es.partial_cause);
	xb_remote_close(&fx.vm.mem);
}

/* A deep stack past the capture: the captured part is exact, the rest
 * would be read live, which a snapshot cannot: the walk stops there
 * (truncated) with the exact prefix counted. */
static void t_jit_capture_boundary(void)
{
	setup(XB_FLAVOR_JIT);
	uint64_t E = HEND - 0x800;
	for (unsigned i = 0; i < 0x800 / 8 - 1; i++)
		fx.stack[(E - HEAP) / 8 + i] = (i % 4 == 0) ? G_START + 0x40 : XB_NIL;
	fx.stack[(HEND - HEAP) / 8 - 1] = NORMAL_EXIT;
	region(E, fx.stack + (E - HEAP) / 8, 0x400); /* half of it captured */
	open_snapshot();
	struct xb_sample s = { .ip = F_START + 0x10, .user = true };
	s.regs[XB_PREG_SP] = E;
	s.regs[XB_PREG_R13] = C_P;
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = F_START + 0x10,
				.erlang_pc_exact = true, .regs_valid = 0xffffffffu };
	memcpy(uw.regs, s.regs, sizeof(uw.regs));
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	/* the process struct is not captured either: only the leaf */
	CHECK(es.status == XB_ES_OK && es.n == 1 && es.partial, "status %d n %u partial %d", es.status, es.n,
	      es.partial);
	xb_remote_close(&fx.vm.mem);
	/* with the process struct captured: 1 + 0x400/32 exact frames,
	 * then the walk cannot read on */
	fx.nr = 0;
	region(E, fx.stack + (E - HEAP) / 8, 0x400);
	region(C_P, fx.proc, sizeof(fx.proc));
	open_snapshot();
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	CHECK(es.status == XB_ES_OK && es.n == 1 + 0x400 / 32 && es.nexact == es.n && !es.complete &&
	      es.truncated, "status %d n %u nexact %u complete %d truncated %d", es.status, es.n, es.nexact,
	      es.complete, es.truncated);
	xb_remote_close(&fx.vm.mem);
}

/* Interpreter, sampled in process_main's instruction loop: I (rbx here)
 * is inside m:f/1, E (r12) is the stack top on the heap; the word at E is
 * a continuation pointer. */
static void t_emu_in_process_main(void)
{
	setup(XB_FLAVOR_EMU);
	uint64_t E = lay_stack(HEND - 0x100);
	region(C_P, fx.proc, sizeof(fx.proc));
	region(HEAP, fx.stack, sizeof(fx.stack));
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500002000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = 0x555500002000, .erlang_pc_exact = true };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs[XB_PREG_R12] = E;
	uw.regs[XB_PREG_BX] = F_START + 0x18;
	uw.regs_valid = 0xffffffffu;
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 3);
	CHECK(es.complete && !es.live_read && es.nexact == 3 && strcmp(es.pid, "<0.85.0>") == 0,
	      "complete %d live %d nexact %u pid %s", es.complete, es.live_read, es.nexact, es.pid);
	/* The word at E is neither NIL nor a CP: the heap was reused by a
	 * garbage collection; I still names the function. */
	fx.stack[(E - HEAP) / 8] = 0x1234567;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 1);
	CHECK(es.partial && es.partial_cause == XB_PARTIAL_HEAP_MOVED, "partial %d cause %d", es.partial,
	      es.partial_cause);
	/* I in no function, and no other register names one: dropped */
	fx.stack[(E - HEAP) / 8] = G_START + 0x40;
	uw.regs[XB_PREG_BX] = 0x40;
	for (int r = 0; r < XB_PREG_COUNT; r++)
		if (r != XB_PREG_R13 && r != XB_PREG_R12 && r != XB_PREG_BX)
			uw.regs[r] = 0;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	CHECK(es.status == XB_ES_BAD && es.n == 0, "status %d n %u", es.status, es.n);
	xb_remote_close(&fx.vm.mem);
	xb_codemap_free(&fx.cm);
}

/* Interpreter, sampled inside a garbage collection of its own process (a
 * C call from process_main): the stack has been copied to c_p->stop, in
 * the new heap, while E, the register, still points at the old copy in
 * [heap, hend]; the capture took the new one (STOP_MOVED).  The walk is
 * the moved stack, not whatever the old place holds by now (here: only
 * m:g/1's frame, as if the old heap were being reused). */
static void t_emu_mid_gc_moved_stack(void)
{
	static uint64_t newstack[8];
	setup(XB_FLAVOR_EMU);
	uint64_t NEWS = 0x9000000, E = HEND - 0x100;
	memcpy(fx.proc + 88, &NEWS, 8);
	newstack[0] = G_START + 0x40;
	newstack[1] = XB_NIL;
	newstack[2] = H_START + 0x20;
	newstack[3] = NORMAL_EXIT;
	fx.stack[(E - HEAP) / 8] = H_START + 0x20; /* the old place, reused */
	fx.stack[(E - HEAP) / 8 + 1] = NORMAL_EXIT;
	region(C_P, fx.proc, sizeof(fx.proc));
	region(HEAP, fx.stack, sizeof(fx.stack));
	region(NEWS, newstack, sizeof(newstack));
	open_snapshot();
	struct xb_sample s = { .ip = 0x555500009000, .user = true };
	struct xb_unwind uw = { .stop = XB_UW_REACHED_ERLANG, .erlang_pc = 0x555500002000, .erlang_pc_exact = true,
				.n = 2 };
	uw.regs[XB_PREG_R13] = C_P;
	uw.regs[XB_PREG_R12] = E;
	uw.regs[XB_PREG_BX] = F_START + 0x18;
	uw.regs_valid = 0xffffffffu;
	static struct xb_estack es;
	xb_erlang_stack(&fx.st, &s, &uw, 's', 0, &es);
	expect(&es, FGH, 3);
	CHECK(es.complete && !es.partial && es.nexact == 3, "complete %d partial %d nexact %u", es.complete,
	      es.partial, es.nexact);
	xb_remote_close(&fx.vm.mem);
	xb_codemap_free(&fx.cm);
}

void erlstack_cases(void)
{
	run_case("erlstack_jit_in_erlang_code", t_jit_in_erlang_code);
	run_case("erlstack_jit_in_c_e_saved", t_jit_in_c_e_saved);
	run_case("erlstack_jit_in_c_stop", t_jit_in_c_stop);
	run_case("erlstack_jit_unreadable_keeps_leaf", t_jit_unreadable_keeps_leaf);
	run_case("erlstack_jit_heap_moved", t_jit_heap_moved);
	run_case("erlstack_jit_capture_boundary", t_jit_capture_boundary);
	run_case("erlstack_jit_mid_gc_moved_stack", t_jit_mid_gc_moved_stack);
	run_case("erlstack_emu_in_process_main", t_emu_in_process_main);
	run_case("erlstack_emu_mid_gc_moved_stack", t_emu_mid_gc_moved_stack);
}

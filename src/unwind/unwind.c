/* unwind.c - libdwfl unwinding over perf samples (dwfl_attach_state with
 * our own callbacks: no ptrace, no /proc/PID/mem). */
#define _GNU_SOURCE
#include "xb/unwind.h"
#include "xb/common.h"
#include "xb/regs.h"

#include <dwarf.h>
#include <string.h>

/* State for the blocked-thread variant. */
static __thread struct {
	bool remote;
	uint64_t sp, pc;
	pid_t tid;
} blocked;

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	struct xb_unwinder *u = arg;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return blocked.remote ? blocked.tid : u->cur->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	(void)dwfl;
	struct xb_unwinder *u = arg;
	if (blocked.remote) /* no copy: the thread is blocked, its stack is stable */
		return xb_read_u64(u->mem, addr, result) == 0;
	const struct xb_sample *s = u->cur;
	uint64_t sp = s->regs[XB_PREG_SP];
	if (s->stack && xb_copy_holds(sp, s->stack_size, addr, 8)) {
		memcpy(result, s->stack + (addr - sp), 8);
		return true;
	}
	/* Past the copy: reading the live stack now would mix two moments.
	 * Stop here (raise --user-stack for deeper native stacks). */
	u->stack_misses++;
	return false;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct xb_unwinder *u = arg;
	Dwarf_Word regs[17];
	if (blocked.remote) {
		memset(regs, 0, sizeof(regs));
		regs[7] = blocked.sp;
		regs[16] = blocked.pc;
		/* Only sp and pc are known; leave the rest undefined. */
		return dwfl_thread_state_registers(thread, 7, 1, &regs[7]) &&
		       dwfl_thread_state_registers(thread, 16, 1, &regs[16]);
	}
	for (int i = 0; i < 17; i++)
		regs[i] = u->cur->regs[xb_dw2perf[i]];
	return dwfl_thread_state_registers(thread, 0, 17, regs);
}

static const Dwfl_Thread_Callbacks callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

int xb_unwinder_init(struct xb_unwinder *u, struct xb_remote *mem, struct xb_symbols *syms, Dwfl_Module *main,
		     pid_t pid, xb_is_erlang_pc f, void *arg, unsigned max_depth)
{
	memset(u, 0, sizeof(*u));
	u->mem = mem;
	u->syms = syms;
	u->is_erlang = f;
	u->is_erlang_arg = arg;
	u->max_depth = max_depth > XB_MAX_NATIVE ? XB_MAX_NATIVE : max_depth;
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(main, &bias);
	if (!dwfl_attach_state(syms->dwfl, elf, pid, &callbacks, u))
		return xb_fail("libdwfl cannot unwind this process: %s", dwfl_errmsg(-1));
	u->attached = true;
	return 0;
}

/* elfutils (backends/x86_64_cfi.c, still in 0.188) gives the x86-64 ABI's
 * default rules with DWARF register 0 (rax) where it means rbx (3): rbx
 * comes out undefined in every frame whose CFI does not save it, and rax
 * "the same value" as in the frame below, which for a caller-saved
 * register is not known at all.  The ABI says rbx is callee-saved: a
 * function that changes it saves it, and its CFI then says where (libdw
 * follows that rule); one that does not leaves it as it was.  So rbx is
 * carried up from the frame below while libdw calls it undefined
 * (frame_cb), and rax is taken only from the sample itself (frame 0). */
#define DW_RAX 0
#define DW_RBX 3

static void take_regs(struct xb_unwinder *u, Dwfl_Frame *state, struct xb_unwind *out)
{
	out->regs_valid = 0;
	for (unsigned i = 0; i < 17; i++) {
		Dwarf_Word v;
		if (i == DW_RAX && out->n > 0)
			continue;
		if (dwfl_frame_reg(state, i, &v) == 0) {
			out->regs[xb_dw2perf[i]] = v;
			out->regs_valid |= 1u << xb_dw2perf[i];
		}
	}
	if (!(out->regs_valid & (1u << XB_PREG_BX)) && u->rbx_known) {
		out->regs[XB_PREG_BX] = u->rbx;
		out->regs_valid |= 1u << XB_PREG_BX;
	}
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct xb_unwinder *u = arg;
	struct xb_unwind *out = u->out;
	Dwarf_Addr pc;
	bool act;
	if (!dwfl_frame_pc(state, &pc, &act))
		return DWARF_CB_ABORT;
	Dwarf_Word rbx;
	if (dwfl_frame_reg(state, DW_RBX, &rbx) == 0) {
		u->rbx = rbx; /* saved by this frame's callee, or the sample's own */
		u->rbx_known = true;
	}
	if (u->is_erlang(u->is_erlang_arg, pc)) {
		out->stop = XB_UW_REACHED_ERLANG;
		out->erlang_pc = pc;
		out->erlang_pc_exact = act;
		take_regs(u, state, out);
		return DWARF_CB_ABORT;
	}
	if (out->n >= u->max_depth) {
		out->stop = XB_UW_DEPTH_LIMIT;
		return DWARF_CB_ABORT;
	}
	out->pcs[out->n] = pc;
	out->activation[out->n] = act;
	out->n++;
	return DWARF_CB_OK;
}

/* Re-reading /proc/PID/maps costs ~0.1 ms: at most every 100 ms.  A
 * target with tens of thousands of mappings makes it cost milliseconds:
 * then at most every 10 times what it cost (from the end of the last). */
#define MODULE_SCAN_MIN_NS (100ull * 1000 * 1000)

bool xb_unwinder_refresh_modules(struct xb_unwinder *u)
{
	uint64_t now = xb_now_ns();
	uint64_t gap = 10 * u->mem->maps_cost_ns;
	if (gap < MODULE_SCAN_MIN_NS)
		gap = MODULE_SCAN_MIN_NS;
	if (now - u->last_module_scan_ns < gap)
		return false;
	int rr = xb_remote_refresh(u->mem, true);
	u->last_module_scan_ns = xb_now_ns();
	if (rr < 0)
		return false;
	if (u->mem->maps_gen == u->maps_gen_seen)
		return false; /* the same maps: the modules match them already */
	u->maps_gen_seen = u->mem->maps_gen;
	int n = xb_symbols_refresh(u->syms, &u->mem->maps);
	if (n <= 0)
		return false;
	u->modules_changed += (uint64_t)n;
	xb_debug("%d module(s) reported or dropped since attaching\n", n);
	return true;
}

static int prewarm_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
			  void *arg)
{
	(void)userdata, (void)name, (void)start, (void)arg;
	Dwarf_Addr bias;
	dwfl_module_getsymtab(mod);
	dwfl_module_eh_cfi(mod, &bias);
	dwfl_module_dwarf_cfi(mod, &bias);
	return DWARF_CB_OK;
}

void xb_unwinder_prewarm(struct xb_unwinder *u)
{
	if (u->syms && u->syms->dwfl)
		dwfl_getmodules(u->syms->dwfl, prewarm_module, NULL, 0);
}

/* An unwind that stopped at a pc outside every module libdwfl knows: maybe
 * a shared object mapped after we attached (a NIF library loaded late, a
 * driver).  Bring the modules up to date and say whether the unwind is
 * worth repeating. */
static bool new_module_at(struct xb_unwinder *u, const struct xb_unwind *out, uint64_t ip)
{
	/* The first pc no module covers (libdwfl's frame-pointer fallback
	 * may have added junk after it). */
	uint64_t pc = 0;
	for (unsigned k = 0; k < out->n && !pc; k++)
		if (!xb_symbols_module_at(u->syms, out->pcs[k]))
			pc = out->pcs[k];
	if (!out->n && !xb_symbols_module_at(u->syms, ip))
		pc = ip; /* no frame at all: the sampled pc itself */
	return pc && xb_unwinder_refresh_modules(u) && xb_symbols_module_at(u->syms, pc);
}

static void run(struct xb_unwinder *u, pid_t tid, struct xb_unwind *out)
{
	memset(out, 0, sizeof(*out));
	out->stop = XB_UW_TRUNCATED;
	u->out = out;
	u->rbx_known = false;
	int r = dwfl_getthread_frames(u->syms->dwfl, tid, frame_cb, u);
	if (r == 0 && out->stop == XB_UW_TRUNCATED)
		out->stop = XB_UW_END;
	/* r == -1 with stop unchanged: unwinding failed part-way. */
}

void xb_unwind_sample(struct xb_unwinder *u, const struct xb_sample *s, struct xb_unwind *out)
{
	blocked.remote = false;
	u->cur = s;
	/* Fast path: the sample is already in Erlang code. */
	if (u->is_erlang(u->is_erlang_arg, s->ip)) {
		memset(out, 0, sizeof(*out));
		out->stop = XB_UW_REACHED_ERLANG;
		out->erlang_pc = s->ip;
		out->erlang_pc_exact = true;
		memcpy(out->regs, s->regs, sizeof(out->regs));
		out->regs_valid = 0xffffffffu;
		return;
	}
	uint64_t misses = u->stack_misses;
	run(u, s->tid, out);
	if (out->stop == XB_UW_TRUNCATED && new_module_at(u, out, s->ip)) {
		u->stack_misses = misses; /* count the repeat's only */
		run(u, s->tid, out);
	}
}

void xb_unwind_blocked(struct xb_unwinder *u, pid_t tid, uint64_t sp, uint64_t pc,
		       struct xb_unwind *out)
{
	blocked.remote = true;
	blocked.sp = sp;
	blocked.pc = pc;
	blocked.tid = tid;
	run(u, tid, out);
	if (out->stop == XB_UW_TRUNCATED && new_module_at(u, out, pc))
		run(u, tid, out);
	blocked.remote = false;
}

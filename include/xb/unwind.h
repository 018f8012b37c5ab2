/* unwind.h - stage 2: native frames with libdwfl, from the sampled
 * registers and stack copy, up to where Erlang code runs (process_main in
 * the interpreter, the first JIT frame in the JIT). */
#ifndef XB_UNWIND_H
#define XB_UNWIND_H

#include "xb/remote.h"
#include "xb/sampler.h"
#include "xb/symbols.h"

#define XB_MAX_NATIVE 128

enum xb_unwind_stop {
	XB_UW_REACHED_ERLANG, /* stopped at a JIT / process_main frame */
	XB_UW_END,            /* the native stack ended (a thread's root) */
	XB_UW_TRUNCATED,      /* ran out of stack copy or CFI: the stack is unknown */
	XB_UW_DEPTH_LIMIT,    /* cut at --max-callchain-depth: known, shortened */
};

struct xb_unwind {
	uint64_t pcs[XB_MAX_NATIVE]; /* innermost first; return addresses as-is */
	bool activation[XB_MAX_NATIVE]; /* pc is exact (frame 0 or signal frame) */
	unsigned n;
	enum xb_unwind_stop stop;
	/* Registers of the frame where Erlang code runs (perf numbering). */
	uint64_t regs[XB_PREG_COUNT];
	uint32_t regs_valid; /* bit per perf register */
	uint64_t erlang_pc;  /* pc of that frame */
	bool erlang_pc_exact;
};

/* Whether LEN bytes at ADDR lie in the copy of SIZE bytes taken from
 * BASE (the sampled stack from rsp), in differences: an address near 2^64
 * (read from a frame unwound without CFI) must not wrap past the check. */
static inline bool xb_copy_holds(uint64_t base, uint64_t size, uint64_t addr, uint64_t len)
{
	return size >= len && addr >= base && addr - base <= size - len;
}

/* Decides where native unwinding stops. */
typedef bool (*xb_is_erlang_pc)(void *arg, uint64_t pc);

struct xb_unwinder {
	/* Plumbing only (no BEAM here): the process's memory and maps, and
	 * its modules as libdwfl knows them. */
	struct xb_remote *mem;
	struct xb_symbols *syms;
	const struct xb_sample *cur;
	struct xb_unwind *out;
	xb_is_erlang_pc is_erlang;
	void *is_erlang_arg;
	unsigned max_depth;
	bool attached;
	uint64_t stack_misses; /* reads past the stack copy */
	/* Modules reported to or dropped from libdwfl since we attached
	 * (xb_unwinder_refresh_modules). */
	uint64_t modules_changed, last_module_scan_ns;
	uint64_t maps_gen_seen; /* mem->maps_gen the modules were last matched with */
	/* rbx of the frame below, carried up past frames that keep it (see
	 * take_regs in unwind.c) */
	uint64_t rbx;
	bool rbx_known;
};

/* Attach libdwfl's unwinder to process PID through the main executable's
 * module MAIN (its ELF says the architecture); MEM and SYMS stay the
 * caller's. */
int xb_unwinder_init(struct xb_unwinder *u, struct xb_remote *mem, struct xb_symbols *syms, Dwfl_Module *main,
		     pid_t pid, xb_is_erlang_pc f, void *arg, unsigned max_depth);
/* Re-read the maps and bring libdwfl's modules up to date: libraries
 * mapped since we attached, and ones unmapped or replaced (a NIF library
 * unloaded, another mapped at its address).  Rate-limited (100 ms, or 10
 * times what reading the maps costs; nothing to do when they have not
 * changed); called
 * when a sample runs into unknown code, and periodically.  True when
 * modules changed: names cached per pc must be dropped. */
bool xb_unwinder_refresh_modules(struct xb_unwinder *u);
/* Load what libdwfl loads lazily (unwind and symbol tables of every
 * module known now), so that the first samples do not pay for it. */
void xb_unwinder_prewarm(struct xb_unwinder *u);
/* Unwind one sample.  Never fails hard: a broken unwind ends early. */
void xb_unwind_sample(struct xb_unwinder *u, const struct xb_sample *s, struct xb_unwind *out);
/* Unwind from a bare (sp, pc) pair (a blocked thread's
 * /proc/PID/task/TID/syscall), reading its stack remotely. */
void xb_unwind_blocked(struct xb_unwinder *u, pid_t tid, uint64_t sp, uint64_t pc,
		       struct xb_unwind *out);

#endif

/* erlstack.h - stage 3: from the registers where Erlang code runs to the
 * current process and its Erlang stack.
 *
 * Register roles come from the release table (JIT: c_p = r13, E = rsp or
 * E_saved = rbp in C code; interpreter: c_p/E/I as process_main's DWARF
 * gives them, overridable on the command line).  Everything read is
 * validated; what fails validation costs the sample, never prints. */
#ifndef XB_ERLSTACK_H
#define XB_ERLSTACK_H

#include "xb/codemap.h"
#include "xb/sampler.h"
#include "xb/unwind.h"

#define XB_MAX_ERLANG 1024

enum xb_es_status {
	XB_ES_OK,         /* a process and its stack */
	XB_ES_NO_PROCESS, /* scheduler code with no Erlang process (native only) */
	XB_ES_BAD,        /* validation failed: drop the sample */
	XB_ES_STALE,      /* the process moved on before we could read it */
};

/* Why only the innermost Erlang function (or none: a JIT fragment) of a
 * sample is known (leaf_only in erlstack.c; the session adds STALE). */
enum xb_partial_cause {
	XB_PARTIAL_HEAP_MOVED,  /* the process garbage collected: its stack moved */
	XB_PARTIAL_SWITCHED,    /* the process was switched out */
	XB_PARTIAL_UNREADABLE,  /* its state could not be read or failed validation */
	XB_PARTIAL_STALE,       /* read live too late (--max-skid-ms) */
	XB_PARTIAL_NCAUSES
};

/* Which call of native code (a NIF or a BIF) a process is in: what tells
 * one long call from back-to-back calls of the same function with the
 * same caller (long calls, src/output/longcalls.c).  FCALLS, the
 * reductions left in the time slice, is decremented by every function
 * call and stored in c_p->fcalls when a NIF or BIF is called (JIT:
 * emit_enter_runtime<Update::eReductions> in call_nif_shared and
 * call_light_bif_shared, jit/x86/instr_bif.cpp; interpreter:
 * HEAVY_SWAPOUT in call_nif and `c_p->fcalls = FCALLS - 1` in the BIF
 * instructions, emu/bif_instrs.tab), so two calls in one time slice
 * differ in it; c_p->reds grows at every schedule-out (erts_schedule,
 * erl_process.c: p->reds += actual_reds), so two calls in different
 * slices differ in it.  In the JIT, FCALLS also stays in a callee-saved
 * register for the whole call: exact from the sample's registers. */
struct xb_call_id {
	uint32_t fcalls; /* low 32 bits (a 32-bit count from OTP 27) */
	uint64_t reds;
	bool have;         /* both known */
	bool fcalls_exact; /* from the sample itself (register or captured memory) */
	bool reds_exact;   /* else read live, no later than xb_estack.read_ns */
};

/* The same call identity (both parts; whether they were exact aside)? */
static inline bool xb_call_id_same(const struct xb_call_id *a, const struct xb_call_id *b)
{
	return a->fcalls == b->fcalls && a->reds == b->reds;
}

struct xb_estack {
	enum xb_es_status status;
	const char *why; /* for XB_ES_BAD / STALE */
	uint64_t c_p, pid_term;
	char pid[32];
	char regname[256];
	const struct xb_code *frames[XB_MAX_ERLANG]; /* innermost first */
	uint64_t addrs[XB_MAX_ERLANG]; /* pc or return address of each frame */
	unsigned n;
	unsigned unresolved; /* CP-looking words that named no loaded code */
	bool truncated;
	bool complete; /* reached beam_normal_exit */
	bool leaf_ret; /* addrs[0] is a return address (a caller's frame, or the
			* JIT call site of the C code sampled), not where code runs:
			* its call is at addrs[0] - 1, as for every frame after it */
	bool partial;  /* only the innermost function (or none): the rest could not
			* be read, or not in time (see leaf_only in erlstack.c) */
	enum xb_partial_cause partial_cause;
	unsigned nexact; /* frames[0..nexact) are proven by the sample itself (its
			  * registers and memory captured with it), the rest was read live */
	bool live_read;  /* some of the process's state was read live (skid applies) */
	uint64_t read_ns;  /* when the last live read finished */
	/* --by process, --schedulers, long calls (read with the process
	 * struct; zero when it was not read): */
	struct xb_call_id call;
	uint64_t initial[3]; /* u.initial: module, function (atoms), arity; when
			      * identity is wanted (xb_estate.want_identity) */
	bool leaf_is_callee; /* frames[0] is the function whose native code the
			      * sample is in (the interpreter runs a NIF from its
			      * function's code): its caller is frames[1] */
};

struct xb_estate {
	struct xb_vm *vm;
	struct xb_codemap *cm;
	unsigned max_depth;
	struct xb_regroles regs; /* possibly overridden */
	bool check_current;      /* verify scheduler current_process == c_p */
	bool want_identity;      /* read the registered name (and always the pid) */
	uint64_t codemap_refreshes, last_refresh_ns;
	uint64_t unknown_call_sites;
	uint64_t partial[XB_PARTIAL_NCAUSES]; /* leaf_only, by cause */
	bool refresh_wanted;     /* a lookup missed: rebuild between samples */
	bool keep_old_maps;      /* retire replaced maps instead of freeing */
	struct xb_codemap **retired;
	size_t nretired, nretired_cap;
	unsigned flags; /* codemap build flags */
	/* Interpreter: NIF stubs outside module code -> their function
	 * (emu_in_nif), by stub MFA address and NIF; gen = codemap_refreshes. */
	struct xb_nif_stub {
		uint64_t mfa, fn, gen;
		const struct xb_code *code;
	} nif_stubs[64];
	/* erts_dirty_process_main and erts_schedule (dirty_scheduling). */
	bool dirty_syms_looked;
	uint64_t dpm, dpm_size, esched, esched_size;
	/* JIT: executable mappings that are not files (JIT code). */
	uint64_t jit_lo, jit_hi;
	/* The register roles on the samples: c_p read through its role and
	 * checked as a process (read_proc), and how often it was one. */
	uint64_t roles_seen, roles_ok;
};

void xb_estate_init(struct xb_estate *st, struct xb_vm *vm, struct xb_codemap *cm,
		    unsigned max_depth);
/* Is PC where Erlang code runs (for the unwinder)? */
bool xb_estate_is_erlang_pc(void *st, uint64_t pc);
/* kind/sched_no: the sampled thread's scheduler kind ('s' normal, 'c'
 * dirty cpu, 'i' dirty io, 'o' other) and number (0 if none). */
void xb_erlang_stack(struct xb_estate *st, const struct xb_sample *s, const struct xb_unwind *uw,
		     char kind, int sched_no, struct xb_estack *out);
/* Rebuild the code map if the VM loaded code (rate-limited).  Call it
 * between samples, never while an xb_estack of the current map is in use
 * (unless keep_old_maps). */
void xb_estate_refresh_code(struct xb_estate *st, bool force);
void xb_estate_free(struct xb_estate *st);
/* The Erlang stack of a process that is not running, from the state the
 * VM saved when it was switched out (--dump): its innermost function at
 * the saved instruction pointer I (c_p->i), then the stack from the saved
 * stack pointer STOP (c_p->stop) to HEND, read live.  The caller reads
 * the process state again afterwards to see whether it changed. */
void xb_erlang_stack_saved(struct xb_estate *st, uint64_t c_p, uint64_t pid_term, uint64_t i, uint64_t stop,
			   uint64_t heap, uint64_t hend, struct xb_estack *out);
/* A normal scheduler (number SCHED_NO) found blocked off the CPU, its
 * native stack UW unwound from the system call it waits in
 * (xb_unwind_blocked) down to Erlang code: a NIF or BIF it runs for its
 * current process waits there (blocking I/O, a sleep, a lock).  The
 * process, its scheduler's current_process, cannot run meanwhile, so its
 * saved stack (c_p->stop, stored before the call) is read as it is.
 * XB_ES_NO_PROCESS for a scheduler that waits for work (no current
 * process, or the scheduler loop itself).  The caller checks afterwards
 * that the thread is still blocked where it was. */
void xb_erlang_stack_blocked(struct xb_estate *st, const struct xb_unwind *uw, int sched_no,
			     struct xb_estack *out);
/* The identity of the call a blocked normal scheduler SCHED_NO is in: its
 * current process and that process's c_p->fcalls and c_p->reds (stored
 * before a NIF or BIF is called, and one reduction apart for two calls
 * in a row), read live.  0, or -1 when it has no current process. */
int xb_blocked_call_id(struct xb_estate *st, int sched_no, uint64_t *c_p, struct xb_call_id *id);

#endif

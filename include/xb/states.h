/* states.h - what a sampled VM thread was doing (--schedulers), from the
 * sample's frames alone (src/profile/states.c).
 *
 * On a scheduler running a process (the unwinder reached Erlang code):
 *   emulator    Erlang code, and the JIT's glue between its instructions
 *   nif         a NIF: JIT code called it through global::call_nif_shared
 *               (call_nif_early, dispatch_nif), a dirty scheduler through
 *               erts_call_dirty_nif, or the interpreter called a function
 *               outside the beam binary (jit/x86/instr_bif.cpp,
 *               emu/bif_instrs.tab call_nif)
 *   gc          garbage collection (*garbage_collect*, erts_gc_*)
 *   copy        copying terms (copy_struct*, copy_shallow*, size_object*)
 *   port        driver code called for the process (erts_port_output*,
 *               erts_port_control*, erts_port_call*)
 *   bif         other native code run for the process: BIFs, sends, ...
 * On a scheduler with no process:
 *   port        port tasks (erts_port_task_execute, erl_port_task.c)
 *   check_io    I/O polling (erts_check_io*, erts_poll_wait*)
 *   aux         aux work (handle_aux_work, erl_process.c)
 *   gc          garbage collection for no process
 *   scheduling  the scheduler loop: picking processes, balancing, and
 *               busy-waiting (spinning) before it sleeps
 * other         the rest (a thread that is no scheduler, a stack that does
 *               not fit the above).
 * The names come from symbols: in a beam without them (a stripped OTP 29
 * exports almost none) the NIF and GC fragments of the JIT still name
 * themselves, and the rest of the scheduler's own work is "scheduling". */
#ifndef XB_STATES_H
#define XB_STATES_H

#include "xb/profile.h"
#include "xb/rsample.h"
#include "xb/vm.h"

enum xb_state {
	XB_STATE_EMULATOR,
	XB_STATE_NIF,
	XB_STATE_BIF,
	XB_STATE_GC,
	XB_STATE_COPY,
	XB_STATE_PORT,
	XB_STATE_CHECK_IO,
	XB_STATE_AUX,
	XB_STATE_SCHEDULING,
	XB_STATE_OTHER,
	XB_STATE_COUNT
};
/* "emulator", "nif", "bif", "gc", "copy", "port", "check_io", "aux",
 * "scheduling", "other" */
extern const char *const xb_state_names[XB_STATE_COUNT];

/* Per frame id of a profile, what its name says (computed once). */
struct xb_states {
	uint16_t *flags;
	size_t n, cap;
	char beam_tag[300]; /* "[beam.smp]": frames in the VM's own binary */
};

void xb_states_init(struct xb_states *c, const struct xb_vm *vm);
void xb_states_free(struct xb_states *c);

struct xb_sample_state {
	enum xb_state state;
	bool process;   /* running (or working for) a process */
	/* In a NIF or BIF called by a process: index into rs->ids of the
	 * function called (the NIF's C function, the BIF's), else -1. */
	int fn;
};

/* Classify RS, whose frame ids are in P (the session's profile). */
void xb_classify(struct xb_states *c, const struct xb_profile *p, const struct xb_rsample *rs,
		 struct xb_sample_state *out);

#endif

/* vm.h - a running BEAM as the tools see it (struct xb_vm) and what can
 * be asked of it.  Shared by every tool.  Implemented by src/beam/:
 * attach.c (identify it, pick its release table, resolve the globals),
 * atoms.c (atom text), sched.c (scheduler threads and their data) and
 * discover.c (globals a stripped binary does not name). */
#ifndef XB_VM_H
#define XB_VM_H

#include "xb/layout.h"
#include "xb/release.h"
#include "xb/remote.h"
#include "xb/safefile.h"
#include "xb/symbols.h"
#include "xb/term.h"

#include <limits.h>
#include <sys/types.h>

struct xb_atom_cache {
	uint64_t *keys; /* atom index + 1; 0 = empty */
	char **vals;    /* quoted atom text */
	size_t cap, n;
	size_t bytes;   /* memory it holds, roughly (budget: atoms.c) */
};

/* Addresses of the VM's globals (run-time, 0 when unknown). */
struct xb_vm_syms {
	uint64_t atom_table;      /* erts_atom_table (atom.c) */
	uint64_t proc_tab;        /* erts_proc (erl_process.c) */
	uint64_t sched_data_ptr;  /* erts_aligned_scheduler_data: pointer variable */
	uint64_t dirty_cpu_data_ptr, dirty_io_data_ptr; /* erts_aligned_dirty_{cpu,io}_scheduler_data */
	uint64_t no_schedulers;   /* erts_no_schedulers (Uint) */
	uint64_t jit_desc;        /* __jit_debug_descriptor */
	const char *jit_desc_how; /* "symbol" or "discovered" */
	uint64_t ranges;          /* static `r` in beam_ranges.c */
	const char *ranges_how;   /* how `r` was found */
	uint64_t active_code_ix;  /* the_active_code_index (erts_atomic32_t) */
	uint64_t normal_exit_ptr; /* beam_normal_exit: pointer variable */
	uint64_t frame_layout;    /* erts_frame_layout (int) */
	uint64_t process_main, process_main_size;
};

struct xb_vm {
	pid_t pid;
	char exe[PATH_MAX];  /* as /proc/PID/exe names it */
	char root[PATH_MAX]; /* OTP root (-root) */
	char erts[32];       /* erts version */
	char otp[32];        /* OTP release (major), "?" if unknown */
	char otp_version[32];/* full OTP version when known */
	enum xb_flavor flavor;
	enum xb_debug debug;
	struct xb_remote mem;
	struct xb_symbols syms;
	struct xb_modsyms *beam;
	Dwarf *dwarf;        /* beam's DWARF, or NULL */
	Dwarf_Addr dwarf_bias;
	/* The release table the offsets started from: this erts version's
	 * (rel_exact), else the nearest one; its non-offset facts (subtags,
	 * fix_alloc types) are used as they are. */
	const struct xb_release *rel;
	bool rel_exact;
	bool table_from_dwarf;        /* no exact table: offsets from DWARF */
	int64_t off[XB_F_COUNT];
	struct xb_layout lay;         /* where each offset came from, and its proof */
	/* the code map the layout proof built with the offsets in use (a
	 * struct xb_codemap *), for the first user to take instead of
	 * building it again: xb_layout_take_codemap() */
	void *proof_cm;
	uint8_t lay_base_proof[XB_F_COUNT]; /* the sweep's unmoved proofs (layout.c) */
	struct xb_regroles regs;
	int num_code_ix, pid_num_bits, pid_ser_bits, pid_pixdata;
	const char *thread_fmt[3]; /* scheduler thread names (release table) */
	struct xb_vm_syms sym;
	struct xb_atom_cache atoms;
	struct xb_pix pix; /* pid decoding, from erts_proc */
	uint64_t sched_base, sched_count; /* cached scheduler data array */
	uint64_t alive_checked_ns;
	struct xb_cred cred; /* the target's credentials (whose files it may read) */
	bool cred_ok;
	bool pinned;         /* mem holds the process's pidfd */
};

/* Kind of a VM thread from its name: 's' scheduler, 'c' dirty CPU, 'i'
 * dirty I/O (with *no = N), or 'o'. */
char xb_vm_thread_kind(const struct xb_vm *vm, const char *comm, int *no);

/* The VM's scheduler threads by kind: n[0] normal, n[1] dirty CPU, n[2]
 * dirty I/O. */
void xb_vm_count_sched_threads(const struct xb_vm *vm, int n[3]);
/* The VM's threads now, classified by xb_vm_thread_kind: *out (free it)
 * holds the returned count; -1 when the process is gone. */
struct xb_vm_thread {
	pid_t tid;
	char kind;
	int no;
};
int xb_vm_threads(const struct xb_vm *vm, struct xb_vm_thread **out);

/* Attach (read-only).  On error, xb_err() holds a one-line message that
 * names the problem and the fix.  The offsets the features NEEDS read
 * (layout.h enum xb_need) are proven on the live VM, and discovered where
 * they fail; a tool then asks xb_layout_require for what it will do. */
struct xb_attach_opts {
	unsigned needs;
	const char *layout_file; /* --layout FILE, or NULL */
};
int xb_vm_attach_with(struct xb_vm *vm, pid_t pid, const struct xb_attach_opts *o);
/* The same, proving what naming code needs. */
int xb_vm_attach(struct xb_vm *vm, pid_t pid);
void xb_vm_detach(struct xb_vm *vm);

/* Is the process still alive? */
bool xb_vm_alive(struct xb_vm *vm);
/* Field offset, or XB_NOFIELD. */
static inline int64_t xb_off(const struct xb_vm *vm, enum xb_field f) { return vm->off[f]; }

/* ---- atoms.c ---- */
/* The atom's text, quoted as the VM prints it (cached: atoms are never
 * freed).  NULL on a bad term or failed read. */
const char *xb_vm_atom(struct xb_vm *vm, uint64_t term);
/* Fill the atom cache in batched reads (best effort; -1 if unsupported). */
int xb_vm_atoms_prefetch(struct xb_vm *vm);
/* Raw (unquoted) text of an atom into buf. */
int xb_vm_atom_raw(struct xb_vm *vm, uint64_t term, char *buf, size_t len, size_t *outlen);
void xb_vm_atoms_free(struct xb_vm *vm);

/* Number of the running scheduler threads and the address of scheduler
 * N's data (1-based). */
int xb_vm_sched_data(struct xb_vm *vm, int no, uint64_t *addr);
/* Same for dirty schedulers: kind 'c' (cpu) or 'i' (io), N 1-based. */
int xb_vm_dirty_sched_data(struct xb_vm *vm, char kind, int no, uint64_t *addr);
/* The address of the current_process field of a scheduler thread's data
 * (KIND 's', 'c' or 'i', as xb_vm_thread_kind says; NO 1-based), 8-aligned;
 * 0 for other threads or when it cannot be known. */
uint64_t xb_vm_current_process_slot(struct xb_vm *vm, char kind, int no);

/* Find unnamed globals by their contents (see discover.c); the counts are
 * the VM's scheduler threads of each kind. */
void xb_vm_discover(struct xb_vm *vm, int nsched, int ndirty_cpu, int ndirty_io);

/* The beam's writable data (.data, .bss) copied out, for searches by
 * content (discover.c, alloc.c).  Free with xb_vm_data_regions_free. */
struct xb_vm_data_region {
	uint64_t start;
	uint8_t *buf;
	size_t len;
};
size_t xb_vm_data_regions(struct xb_vm *vm, struct xb_vm_data_region *out, size_t max);
void xb_vm_data_regions_free(struct xb_vm_data_region *r, size_t n);

/* Find the static `r` of beam_ranges.c through the code of an exported
 * function that references it (no DWARF, no .symtab).  Exposed for tests. */
uint64_t xb_vm_find_ranges_by_refs(struct xb_vm *vm);
/* Does ADDR look like the ranges array (sorted, sane counts)? */
bool xb_vm_ranges_plausible(struct xb_vm *vm, uint64_t addr);

#endif

/* layout.h - the VM's struct layouts as the tools use them: for every
 * field offset in use, where it came from (a compiled-in release table,
 * the beam's own DWARF, a layout file, or discovered in the live VM's
 * data) and the invariant the live VM's data satisfied at attach.
 *
 *   attach.c   picks the first source (exact table, DWARF, --layout FILE,
 *              else the nearest table) and calls xb_layout_prove;
 *   prove.c    checks every field the tool's features read against live
 *              objects (processes, scheduler data, atoms, code tables...)
 *              and, where an offset fails, searches offsets nearby for
 *              the ones that satisfy the invariants (discovery);
 *   layout.c   the bookkeeping: sources, what each feature needs, the
 *              one line a tool prints when a field cannot be proven, and
 *              layout files (--write-layout / --layout).
 *
 * A field is PROVEN when live objects gave evidence for its offset and
 * none against it; CONSISTENT when nothing contradicted it but no live
 * object exercised it (e.g. every process's heap fragment list is empty
 * right now) and proven fields on both sides of it moved by the same
 * amount as it did; FAILED otherwise.  A feature runs only when each
 * field it reads is PROVEN or CONSISTENT. */
#ifndef XB_LAYOUT_H
#define XB_LAYOUT_H

#include "xb/release.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct xb_vm;

enum xb_lsrc {
	XB_LSRC_NONE = 0,   /* no offset (XB_NOFIELD) */
	XB_LSRC_TABLE,      /* a compiled-in release table */
	XB_LSRC_DWARF,      /* this beam's DWARF */
	XB_LSRC_FILE,       /* --layout FILE */
	XB_LSRC_DISCOVERED, /* searched in the live VM's data */
};
const char *xb_lsrc_name(enum xb_lsrc s);

enum xb_lproof {
	XB_LP_UNCHECKED = 0, /* not needed by what the tool does */
	XB_LP_PROVEN,
	XB_LP_CONSISTENT,
	XB_LP_FAILED,
	XB_LP_UNUSED, /* in the table, but not read on this VM (pix masks where pids carry no slot) */
};
const char *xb_lproof_name(enum xb_lproof p);

/* What a tool does, and so which fields it reads (xb_field_specs[].needs). */
enum xb_need {
	XB_NEED_ATOMS = 1 << 0,    /* atom text */
	XB_NEED_PTAB = 1 << 1,     /* the process table and pid terms */
	XB_NEED_CODE = 1 << 2,     /* naming code: ranges, code headers, JIT registrations */
	XB_NEED_LINES = 1 << 3,    /* --lines */
	XB_NEED_STACK = 1 << 4,    /* a process's stack and identity (sampling, --pstack, --dump) */
	XB_NEED_SCHED = 1 << 5,    /* scheduler data */
	XB_NEED_PROCS = 1 << 6,    /* erlang-heapsample's process figures, --dump's states */
	XB_NEED_ALLOC = 1 << 7,    /* erlang-heapsample --alloc, memory(processes) */
	XB_NEED_CONTENTS = 1 << 8, /* erlang-heapsample --contents */
	XB_NEED_ALL = (1 << 9) - 1,
};
/* "--alloc", "sampling", ... for messages. */
const char *xb_need_name(unsigned need);

struct xb_fstate {
	uint8_t src, proof;
	uint32_t ok, bad, seen; /* objects giving evidence for, against, looked at */
	const char *inv;        /* the invariant, in words (static text) */
	char note[96];          /* a counterexample, or what bracketed it */
};

struct xb_layout {
	struct xb_fstate f[XB_F_COUNT];
	const char *origin;          /* "exact table", "nearest table", "DWARF", "layout file" */
	char origin_detail[96];      /* "erts 13.1.5", the file name... */
	unsigned needs_checked;      /* features whose fields were checked */
	unsigned needs_ok;           /* ... and every one of them held */
	unsigned discovered;         /* fields whose offset discovery changed */
	uint64_t prove_ns, discover_ns;
	char failed[160];            /* the first field that failed, for the refusal */
	/* Facts that are not offsets. */
	uint8_t pid_src, pid_proof;  /* pid_num_bits/ser_bits/pixdata */
	uint8_t regs_src;            /* register roles */
	bool mutating;               /* a mutation sweep: never discover, never print */
	bool forced;                 /* EXTROSPECT_FORCE_RELEASE: that table, proven, never corrected */
};

/* Prove on the live VM every field NEEDS reads; where one fails and
 * DISCOVER is set, search offsets nearby for ones that hold (discovery),
 * and prove again.  Fills vm->lay; returns the needs that hold. */
unsigned xb_layout_prove(struct xb_vm *vm, unsigned needs, bool discover);

struct xb_codemap;
/* Move the code map the layout proof built with the offsets in use
 * (vm->proof_cm) into CM: true, or false when there is none (build it:
 * xb_codemap_build).  xb_layout_drop_codemap frees it unused. */
bool xb_layout_take_codemap(struct xb_vm *vm, struct xb_codemap *cm);
void xb_layout_drop_codemap(struct xb_vm *vm);
/* EXTROSPECT_LAYOUT_UNPROVEN=1 (tests with fake VMs): no discovery, and
 * xb_layout_require warns instead of refusing. */
bool xb_layout_unproven_ok(void);
/* 0 when every field NEED reads holds; else -1 with one line in xb_err()
 * naming WHAT (e.g. "--alloc"), the first field that failed, its struct's
 * source file, why, and what to do. */
int xb_layout_require(struct xb_vm *vm, unsigned need, const char *what);

/* The fields that NEEDS read, and what they depend on (the proofs of a
 * process's stack fields read the process table, ...). */
unsigned xb_layout_closure(unsigned needs);

/* --check: one line per field in use (offset, source, proof), then a
 * summary line; returns the number of fields that failed. */
int xb_layout_report(const struct xb_vm *vm, FILE *out);

/* Layout files: a versioned text file of offsets and the facts that are
 * not offsets (pid layout, register roles, code indices, thread names).
 * Written from what the live VM proved; read back strictly (bounded, every
 * name known, every offset inside its struct) and proven again before use. */
int xb_layout_write(const struct xb_vm *vm, const char *path);
/* Parse PATH into OFF and the facts of VM (register roles, pid layout,
 * ...); -1 with one line naming the file, the line and the problem. */
int xb_layout_read(struct xb_vm *vm, const char *path, int64_t off[XB_F_COUNT]);
/* Pure: parse TEXT (LEN bytes).  Exposed for unit tests and the fuzzer. */
struct xb_layout_file {
	int64_t off[XB_F_COUNT];
	char erts[32];
	int flavor; /* enum xb_flavor */
	int pid_num_bits, pid_ser_bits, pid_pixdata, num_code_ix;
	bool have_pid, have_code_ix, have_regs;
	struct xb_regroles regs;
	char thread_fmt[3][32];
};
int xb_layout_parse(const char *text, size_t len, struct xb_layout_file *out, char *why, size_t wlen);

/* The provers of the readers with their own walks (prove_tables.c):
 * --lines' line tables, the allocators, heap objects.  They set
 * vm->lay.f[] for their fields with the offsets OFF. */
void xb_layout_prove_lines(struct xb_vm *vm, const int64_t *off);
void xb_layout_prove_alloc(struct xb_vm *vm, const int64_t *off);
void xb_layout_prove_contents(struct xb_vm *vm, const int64_t *off);
void xb_layout_prove_procs(struct xb_vm *vm, const int64_t *off);
/* Struct sizes from the VM's fix_alloc lists (and corrected from them
 * with DISCOVER). */
void xb_layout_prove_fix_sizes(struct xb_vm *vm, int64_t *off, bool discover);
/* Mark FIELDS (N of them) PROVEN or FAILED together with INV, and WHY. */
int xb_layout_mark(struct xb_vm *vm, const int64_t *off, const enum xb_field *fields, size_t n, bool ok,
		   const char *inv, const char *why);

/* Prove again after moving ONLY (the mutation sweep): the walks that do
 * not read it keep the proofs of the last full run (vm->lay_base_proof). */
unsigned xb_layout_prove_field(struct xb_vm *vm, unsigned needs, enum xb_field only);

/* The mutation sweep behind EXTROSPECT_LAYOUT_MUTATIONS (tests only): for
 * every field in use, its offset moved by -16, -8, +8 and +16 must fail
 * its proof.  Prints one line per field and a summary; returns the number
 * of moves not caught. */
int xb_layout_mutation_sweep(struct xb_vm *vm, unsigned needs, FILE *out);

#endif

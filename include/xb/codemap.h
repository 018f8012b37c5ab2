/* codemap.h - names for Erlang code addresses, built from the VM's own
 * code tables:
 *   JIT: the GDB JIT registrations (__jit_debug_descriptor, one symfile per
 *        module; jit/beam_jit_metadata.cpp);
 *   interpreter: beam_ranges.c's module ranges and each module's
 *        BeamCodeHeader function table (beam_code.h).
 * The same map names sampled frames and is written out as a perf map. */
#ifndef XB_CODEMAP_H
#define XB_CODEMAP_H

#include "xb/vm.h"

#include <stdio.h>

enum xb_code_kind {
	XB_CODE_FUNCTION, /* module:function/arity */
	XB_CODE_OTHER,    /* M::codeHeader, global::FRAGMENT, ... */
};

struct xb_code {
	uint64_t start, end;
	char *name;
	uint32_t kind;
	uint32_t seq; /* registration order, 0 = newest (JIT) */
	uint32_t user; /* free for the caller (erlang-sample: interned id + 1) */
};

struct xb_codemap {
	struct xb_code *v;
	size_t n, cap;
	/* What the map was built from, to tell when code was loaded. */
	uint64_t stamp[3];
	/* From the JIT's emulator record (or the VM's globals). */
	int frame_layout;     /* 0 = return address only, 1 = frame pointers */
	uint64_t normal_exit; /* beam_normal_exit: bottom of every Erlang stack */
	uint64_t code_low, code_high; /* span of all entries */
	size_t modules, dropped;
};

enum {
	XB_CM_FOLD_PROLOGUE = 1, /* merge "X-CodeInfoPrologue" into "X" */
};

int xb_codemap_build(struct xb_vm *vm, struct xb_codemap *cm, unsigned flags);
void xb_codemap_free(struct xb_codemap *cm);
const struct xb_code *xb_codemap_find(const struct xb_codemap *cm, uint64_t addr);
/* The function named NAME ("m:f/a", as in the map); linear, for rare use. */
const struct xb_code *xb_codemap_find_name(const struct xb_codemap *cm, const char *name);
/* "m:f/a" of the ErtsCodeMFA at ADDR in the VM.  0, or -1. */
int xb_codemap_read_mfa(struct xb_vm *vm, uint64_t addr, char *out, size_t len);
/* Has the VM loaded code since cm was built?  1 yes, 0 no, -1 error. */
int xb_codemap_stale(struct xb_vm *vm, const struct xb_codemap *cm);
/* Sort, and resolve overlaps in favour of newer registrations. */
void xb_codemap_finish(struct xb_codemap *cm);
int xb_codemap_add(struct xb_codemap *cm, uint64_t start, uint64_t end, const char *name,
		   size_t namelen, uint32_t seq);

/* Parse one JIT symfile (the bytes of a jit_code_entry's symfile) into cm.
 * Pure: exposed for unit tests.  Returns 0, or -1 on a malformed record. */
int xb_codemap_parse_symfile(struct xb_codemap *cm, const int64_t *off,
			     const uint8_t *buf, size_t len, uint32_t seq, unsigned flags);

/* Perf map text: "START SIZE NAME\n" per entry, addresses in hex. */
int xb_perfmap_print(const struct xb_codemap *cm, FILE *f);

#endif

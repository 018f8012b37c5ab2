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

/* One source location: code from addr on is at LINE of file FILE (an
 * index into its module's file names); line 0 means "no location". */
struct xb_line {
	uint64_t addr;
	uint32_t line, file;
};

/* A module's source lines (--lines), read on first use: the JIT's
 * line_info records, from the module's symfile again
 * (jit/beam_jit_metadata.cpp), or the interpreter's BeamCodeLineTab
 * behind its code header (beam_code.h). */
struct xb_linemod {
	uint64_t start, end;  /* the module's code */
	uint64_t src, srclen; /* JIT: its symfile; interpreter: the code header */
	uint32_t seq;         /* its registration (struct xb_code.seq) */
	int state;            /* 0 not read yet, 1 read, -1 none (no line info, unreadable) */
	struct xb_line *v;    /* sorted by addr */
	size_t n;
	char **files;
	size_t nfiles;
};

struct xb_codemap {
	struct xb_code *v;
	size_t n, cap;
	struct xb_linemod *lmods; /* sorted by start */
	size_t nlmods, caplmods;
	uint64_t gen; /* unique per build: caches keyed by address check it */
	/* What the map was built from, to tell when code was loaded. */
	uint64_t stamp[3];
	/* From the JIT's emulator record (or the VM's globals). */
	int frame_layout;     /* 0 = return address only, 1 = frame pointers */
	uint64_t normal_exit; /* beam_normal_exit: bottom of every Erlang stack */
	uint64_t code_low, code_high; /* span of all entries */
	size_t modules, dropped;
	/* Budgets of one build (codemap.c): what the VM's tables say is
	 * read up to XB_CODEMAP_MAX_ENTRIES entries, XB_CODEMAP_MAX_NAME_BYTES
	 * of names and XB_CODEMAP_MAX_READ bytes read; past one, the build
	 * stops with what it has (full) and the overrun is counted. */
	size_t name_bytes;
	uint64_t bytes_read;
	bool full;
	bool essential;    /* adding the emulator's own code past the budget */
	size_t superseded; /* JIT registrations of code newer ones name: skipped */
	bool saw_global;   /* the JIT's record of its shared code ("global") was parsed */
	size_t line_bytes; /* --lines: memory of the line tables read so far */
};

#define XB_CODEMAP_MAX_ENTRIES (1u << 19)      /* a large system has ~200,000 functions */
#define XB_CODEMAP_MAX_NAME_BYTES (64u << 20)
#define XB_CODEMAP_MAX_READ (256ull << 20)     /* symfiles or module code read per build */
#define XB_CODEMAP_MAX_JIT_CHAIN (1u << 20)    /* registrations (every module load adds one) */
#define XB_CODEMAP_MAX_LINE_BYTES (64u << 20)  /* all modules' line tables together */

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

/* Does OFF (a release's field offsets) describe the JIT symfile records
 * (every field the parsers read present and small)? */
bool xb_codemap_symfile_layout_ok(const int64_t *off);
/* Parse one JIT symfile (the bytes of a jit_code_entry's symfile) into cm.
 * Pure: exposed for unit tests.  Returns 0, or -1 on a malformed record. */
int xb_codemap_parse_symfile(struct xb_codemap *cm, const int64_t *off,
			     const uint8_t *buf, size_t len, uint32_t seq, unsigned flags);

/* The source file and line of the code at ADDR, which lies in function C
 * of CM (a return address must be passed as the call's address, RA - 1).
 * Reads the module's line table on first use.  Only lines of C itself are
 * used: a module or function without line info has none (-1), never a
 * neighbour's.  *FILE lives as long as CM. */
int xb_codemap_line(struct xb_vm *vm, struct xb_codemap *cm, const struct xb_code *c, uint64_t addr,
		    const char **file, uint32_t *line);
/* Parse the line records of one JIT module symfile into LM (pure: exposed
 * for unit tests).  0, or -1 on a malformed record. */
int xb_codemap_parse_symfile_lines(const int64_t *off, const uint8_t *buf, size_t len,
				   struct xb_linemod *lm);
void xb_linemod_free(struct xb_linemod *lm);

/* xb_perfmap_print (perf map text) is in xb/perfmap.h. */

#endif

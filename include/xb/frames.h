/* frames.h - naming a resolved sample's frames: native frames by their
 * ELF symbols (demangled), kernel frames by /proc/kallsyms, JIT glue and
 * Erlang frames by the code map, and the synthetic marks that say what is
 * not known ("[callers unknown]", "[truncated]").  Frames are interned in
 * a profile's name table; a stack is a list of ids, innermost first. */
#ifndef XB_FRAMES_H
#define XB_FRAMES_H

#include "xb/erlstack.h"
#include "xb/kallsyms.h"
#include "xb/profile.h"
#include "xb/sampler.h"
#include "xb/unwind.h"

/* Root of a stack cut at --max-callchain-depth. */
#define XB_TRUNCATED "[truncated]"
/* Longest stack xb_frames_ids writes. */
#define XB_MAX_FRAMES (XB_MAX_KFRAMES + XB_MAX_NATIVE + 2 + XB_MAX_ERLANG + 2)

struct xb_frames {
	struct xb_vm *vm;
	struct xb_codemap *cm;  /* the current map (the session's) */
	struct xb_profile *p;   /* names are interned here */
	bool include_kernel;
	bool lines;        /* --lines: Erlang frames carry their source file and line */
	bool files;        /* Erlang frames carry their module's source file (an
			    * output shows it: pprof, speedscope); read from the
			    * module's line table at a function's first sample */
	bool erlang_names; /* --erlang-names: 'Elixir.Foo':bar/1, not Foo.bar/1 */
	struct xb_kallsyms ksyms;
	uint64_t modules_seen;  /* unwinder's module changes when pccache was filled */
	struct {
		uint64_t key;
		uint32_t id;
	} pccache[4096];
	struct {
		uint64_t addr, gen; /* the call's address, the code map's generation */
		uint32_t id;
	} linecache[4096];
};

void xb_frames_init(struct xb_frames *fr, struct xb_vm *vm, struct xb_codemap *cm,
		    struct xb_profile *p, bool include_kernel);
void xb_frames_free(struct xb_frames *fr);
/* Forget cached names (libdwfl's modules changed: a pc named "[unknown]"
 * may have a name now). */
void xb_frames_flush(struct xb_frames *fr);

/* The name and tag ("[beam.smp]", "[libc.so.6]") of native pc; EXACT when
 * pc is where the thread was (not a return address). */
void xb_frames_native_name(struct xb_frames *fr, uint64_t pc, bool exact, char *name, size_t nlen,
			   char *tag, size_t tlen);
/* The JIT code the unwinder stopped at, when it is not an Erlang function
 * (global::FRAGMENT, M::codeHeader), else NULL. */
const struct xb_code *xb_frames_jit_here(struct xb_frames *fr, const struct xb_unwind *uw);

/* The name of code entry C as every output prints it: Elixir's spelling
 * of Elixir modules (names.h) unless --erlang-names.  Returns c->name or
 * BUF. */
const char *xb_frames_code_name(const struct xb_frames *fr, const struct xb_code *c, char *buf,
				size_t len);
/* The address whose source line frame K of ES is at: its pc, or for a
 * caller (a return address) the call, RA - 1. */
uint64_t xb_frames_line_addr(const struct xb_estack *es, unsigned k);

/* Frame ids of a sample, innermost first: kernel, native, JIT glue (or the
 * interpreter loop when no process runs), Erlang, then marks.  *nnative
 * is the number of non-Erlang frames at the start.  Returns the count
 * (at most XB_MAX_FRAMES). */
uint32_t xb_frames_ids(struct xb_frames *fr, const struct xb_sample *s, const struct xb_unwind *uw,
		       const struct xb_estack *es, uint32_t *ids, uint32_t *nnative);

#endif

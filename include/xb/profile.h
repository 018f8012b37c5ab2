/* profile.h - stage 4: aggregating stacks.  Frames are interned names;
 * a stack is the list of frame ids, innermost first; identical stacks
 * share a counter. */
#ifndef XB_PROFILE_H
#define XB_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* XB_FK_MARK: a synthetic frame, not code (XB_CALLERS_UNKNOWN). */
/* XB_FK_GROUP: the outermost frame of a stack grouped by --by (a process,
 * a scheduler, a CPU, a thread); stack formats show it as the root, and
 * speedscope writes one profile per group. */
enum xb_frame_kind { XB_FK_ERLANG, XB_FK_NATIVE, XB_FK_KERNEL, XB_FK_JIT, XB_FK_MARK, XB_FK_GROUP };

/* Outermost frame of a stack whose Erlang callers could not be read. */
#define XB_CALLERS_UNKNOWN "[callers unknown]"
/* --blame's row for matching samples with no Erlang code on their stack. */
#define XB_NO_ERLANG "[no Erlang code above]"
/* Tag of synthetic frames (XB_FK_MARK) in tables. */
#define XB_MARK_TAG "[-]"

struct xb_fname {
	char *name;
	char *tag; /* "[Erlang]", "[beam.smp]", "[kernel]", ... */
	enum xb_frame_kind kind;
	char *file;    /* source file (--lines), or NULL */
	uint32_t line; /* line in file, 0 when unknown */
};

struct xb_stack {
	uint32_t *ids; /* innermost first */
	uint32_t n, nnative; /* the first nnative ids are native/kernel frames */
	uint64_t count;
	uint64_t hash;
};

struct xb_profile {
	struct xb_fname *names;
	size_t nnames, namecap;
	uint32_t *nametab; /* open addressing: id+1 */
	size_t nametab_cap;
	struct xb_stack *stacks;
	size_t nstacks, stackcap;
	uint32_t *stacktab;
	size_t stacktab_cap;
	uint64_t total; /* samples added */
};

void xb_profile_init(struct xb_profile *p);
void xb_profile_free(struct xb_profile *p);
uint32_t xb_profile_intern(struct xb_profile *p, const char *name, const char *tag,
			   enum xb_frame_kind kind);
/* The same with a source location (--lines): frames of one function at
 * different lines are different frames.  FILE NULL: none. */
uint32_t xb_profile_intern_at(struct xb_profile *p, const char *name, const char *tag,
			      enum xb_frame_kind kind, const char *file, uint32_t line);
/* A frame as text and folded output print it: "name (file:LINE)" when it
 * has a location, else its name.  Returns f->name or BUF. */
const char *xb_fname_text(const struct xb_fname *f, char *buf, size_t len);
int xb_profile_add(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative);
/* The same stack COUNT times (a weighted sample: --wall's scaled subsets). */
int xb_profile_add_n(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative, uint64_t count);
/* A hash of text for tables indexed by its low bits: seeded at start and
 * mixed, so that names a target chooses cannot be made to share them
 * (profile.c: the profile's own tables, pprof's string table). */
uint64_t xb_text_hash(const char *s);
/* The longest walk from a name's home slot to where it sits in the name
 * table (0: none collided).  For tests of the hash. */
size_t xb_profile_longest_probe(const struct xb_profile *p);

/* One row of a flat report. */
struct xb_row {
	uint32_t id;
	uint64_t count;
};
enum xb_flat_mode {
	XB_FLAT_LEAF,       /* innermost frame */
	XB_FLAT_ERLANG,     /* innermost Erlang frame (--only-erlang) */
};
/* The row of one stack (IDS, N frames, the first NNATIVE native) in a
 * flat report of MODE; false when it has none (empty; no Erlang frame). */
bool xb_flat_row(const struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative,
		 enum xb_flat_mode mode, uint32_t *row);
/* Count per frame; rows sorted by count (desc), then name.  Caller frees. */
size_t xb_profile_flat(const struct xb_profile *p, enum xb_flat_mode mode, struct xb_row **rows,
		       uint64_t *counted);

/* --blame: does native frame name S match the user's FN?  Rules: exact;
 * S == FN followed by "_" and more (copy_struct -> copy_struct_x,
 * erts_garbage_collect -> erts_garbage_collect_nobump); or an fnmatch(3)
 * glob when FN has *, ? or [. */
bool xb_blame_match(const char *fn, const char *sym);
/* Frames --blame looks at: native functions, JIT code and Erlang
 * functions (an Erlang FN blames its callers). */
bool xb_blame_kind(enum xb_frame_kind k);
/* One stack's --blame row: HIT[id] says which frame names match FN (ids
 * past NHIT do not).  Matched at a native frame: the innermost Erlang
 * frame; at an Erlang function: its caller; when there is none, the
 * stack's root mark, else NONE.  False when nothing matches. */
/* Does frame K of stack IDS (nnative native frames first) match, HIT
 * being xb_blame_kind && xb_blame_match per frame id?  Native and JIT
 * frames count in the native part, Erlang frames in the Erlang part. */
bool xb_blame_at(const struct xb_profile *p, const bool *hit, size_t nhit, const uint32_t *ids,
		 uint32_t k, uint32_t nnative);
bool xb_blame_row(const struct xb_profile *p, const bool *hit, size_t nhit, const uint32_t *ids,
		  uint32_t n, uint32_t nnative, uint32_t none, uint32_t *row);
/* Rows: innermost Erlang frame above the innermost native frame matching
 * FN (or the caller of the innermost Erlang function matching FN), or for samples with no Erlang frame a mark saying why (their root
 * mark, else XB_NO_ERLANG, interned into P): the rows add up to *matched,
 * the samples whose native stack contains FN; *no_erlang of them have no
 * Erlang frame. */
size_t xb_profile_blame(struct xb_profile *p, const char *fn, struct xb_row **rows,
			uint64_t *matched, uint64_t *no_erlang);
/* HIT[id] for P's frame names: xb_blame_kind && xb_blame_match(FN).
 * Caller frees; NULL when out of memory. */
bool *xb_blame_hits(const struct xb_profile *p, const char *fn);
/* --blame in stack formats (src/profile/blame_filter.c): DST (initialised
 * here; free it with xb_profile_free) gets the whole stacks of SRC, with
 * their counts, that hold a frame xb_blame_kind and xb_blame_match(FN,
 * name) accept - the same samples xb_profile_blame() counts.  -1 (message
 * set, DST empty) when memory runs out. */
int xb_profile_filter_blame(const struct xb_profile *src, const char *fn, struct xb_profile *dst);

/* --blame FN that matches nothing: the names closest to it, offered one
 * by one (native symbols and Erlang functions alike).  Closest: within
 * max(1, len(FN)/3) edits of FN, or of FN's start (copy_struc ->
 * copy_struct_x: one), an Erlang name compared without its arity when FN
 * has none; nearest first, then shortest.  After those, the names that
 * share the longest start with FN (4 characters or more).  Pure
 * (unit-tested). */
#define XB_NCLOSE 3
struct xb_close_list {
	char name[XB_NCLOSE][128];
	unsigned score[XB_NCLOSE]; /* lower is closer */
	int n;
};
struct xb_close {
	struct xb_close_list edits, prefix;
};
void xb_close_offer(struct xb_close *c, const char *fn, const char *name);
/* "a, b, c" into BUF (empty when none): XB_NCLOSE at most. */
void xb_close_text(const struct xb_close *c, char *buf, size_t len);

#endif

/* term.h - decoding Erlang terms as stored by the VM (64-bit).
 * Tags from erts/emulator/beam/erl_term.h; stable since OTP R13 except the
 * pid layout, whose field widths come from the release table. */
#ifndef XB_TERM_H
#define XB_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XB_TAG_PRIMARY_MASK 0x3u  /* _TAG_PRIMARY_MASK */
#define XB_TAG_PRIMARY_HEADER 0x0u /* also: continuation pointers on the stack */
#define XB_TAG_IMMED1_MASK 0xfu
#define XB_TAG_IMMED1_PID 0x3u     /* _TAG_IMMED1_PID */
#define XB_TAG_IMMED1_SMALL 0xfu   /* _TAG_IMMED1_SMALL */
#define XB_TAG_IMMED2_MASK 0x3fu
#define XB_TAG_IMMED2_ATOM 0x0bu   /* _TAG_IMMED2_ATOM */
#define XB_TAG_IMMED2_NIL 0x3bu

static inline bool xb_is_atom(uint64_t t) { return (t & XB_TAG_IMMED2_MASK) == XB_TAG_IMMED2_ATOM; }
static inline uint64_t xb_atom_index(uint64_t t) { return t >> 6; }
static inline bool xb_is_small(uint64_t t) { return (t & XB_TAG_IMMED1_MASK) == XB_TAG_IMMED1_SMALL; }
static inline int64_t xb_small_value(uint64_t t) { return (int64_t)t >> 4; }
static inline bool xb_is_pid(uint64_t t) { return (t & XB_TAG_IMMED1_MASK) == XB_TAG_IMMED1_PID; }
/* The most words one heap, old heap or heap fragment can plausibly hold
 * (8 TiB): a larger size read from a process struct or an ErlHeapFragment
 * is a torn or hostile read, and sums of such would wrap. */
#define XB_MAX_HEAP_WORDS (1ull << 40)

/* NIL: erl_term.h, (0x3 << _TAG_IMMED1_SIZE) | _TAG_IMMED1_IMMED2 (OTP 25-29). */
#define XB_NIL ((uint64_t)0x3b)

/* A continuation pointer (return address) on an Erlang stack: primary tag 0. */
static inline bool xb_is_cp(uint64_t t) { return t != 0 && (t & XB_TAG_PRIMARY_MASK) == 0; }

/* A pid term holds "pixdata": the process table index interleaved into
 * the pid's data (erl_ptab.h, erts_ptab_pixdata2data), with masks and
 * shifts read from erts_proc at attach time. */
struct xb_pix {
	uint64_t mask, cl_mask, cli_mask;
	unsigned cl_shift, cli_shift;
	bool valid;
};

/* "<0.NUM.SER>" for a local pid term (pix may be NULL or invalid: the
 * data is then taken as is).  Returns -1 if not a pid. */
int xb_format_pid(uint64_t t, int num_bits, int ser_bits, const struct xb_pix *pix, char *buf,
		  size_t len);

/* Quote an atom's UTF-8 text as erts does for %T (erl_printf_term.c,
 * print_atom_name): quoted unless it starts with a Latin-1 lowercase
 * letter and continues with Latin-1 alphanumerics or '_'; reserved words
 * are not quoted.  Returns the length written (truncated to fit). */
size_t xb_atom_quote(const char *name, size_t len, char *out, size_t outlen);

#endif

/* output_util.h - what the picture writers share (src/output/output_util.c),
 * and the flame graph's frame tree (src/output/flamegraph.c), exposed for
 * the unit tests. */
#ifndef XB_OUTPUT_UTIL_H
#define XB_OUTPUT_UTIL_H

#include "xb/profile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- text ---------------------------------------------------------------
 * Names come from the VM and from symbol tables: arbitrary bytes. */

/* Decode one UTF-8 character of S (LEN > 0 bytes left); returns the bytes
 * it takes (>= 1).  An invalid or truncated sequence yields U+FFFD and
 * takes its maximal valid prefix, or one byte (Unicode's "maximal subpart"
 * practice: what Python's bytes.decode("utf-8", "replace") does). */
size_t xb_utf8_next(const char *s, size_t len, uint32_t *cp);

/* Display columns of code point CP on a terminal (wcwidth in C.UTF-8,
 * whatever the process's locale): 0 for combining and zero-width
 * characters, 2 for wide ones, 1 for what wcwidth does not know. */
int xb_cp_width(uint32_t cp);
/* Bytes of S (LEN bytes of UTF-8) that fit in COLS display columns, whole
 * characters only; *USED (if not NULL) gets the columns they take. */
size_t xb_display_fit(const char *s, size_t len, int cols, int *used);

/* A name as text to show (SVG, pprof): valid UTF-8 without control
 * characters.  Invalid sequences become U+FFFD; TAB, LF, CR become "\t",
 * "\n", "\r"; other C0 controls and DEL "\xHH"; C1 controls "\u0080".."\u009f";
 * bidirectional controls and zero-width characters "\u202e" (the
 * supplementary ones "\U000e0001").  Malloc'd; NULL when memory runs out. */
char *xb_display_name(const char *raw);
/* The same into BUF (LEN bytes, NUL included; cut at a whole character);
 * returns the length. */
size_t xb_display_name_buf(const char *raw, char *buf, size_t len);

/* Write N bytes of S (valid UTF-8 without controls: a display name)
 * XML-escaped: & < > " ' as entities. */
void xb_put_xml(FILE *f, const char *s, size_t n);

/* Write raw bytes S as a JSON string, quotes included: " and \ escaped,
 * control characters (and DEL) as \u00XX, invalid UTF-8 as U+FFFD. */
void xb_put_json_string(FILE *f, const char *s);

/* Fit display text S into MAXCHARS characters: returns how many bytes of S
 * to show; *cut says whether ".." follows them (the whole text takes
 * MAXCHARS at most, "..", included).  Under 3 characters nothing is shown
 * unless the whole text fits. */
size_t xb_fit_text(const char *s, size_t maxchars, bool *cut);

/* Decimal, fast (the writers print millions of numbers). */
void xb_put_u64(FILE *f, uint64_t v);

/* Flush F and check it: -1 with "writing the WHAT: REASON" on any error. */
int xb_out_finish(FILE *f, const char *what);

/* ---- order --------------------------------------------------------------- */

/* *rank: per frame id, its position in frames sorted by name, then tag,
 * then id (bytewise).  *order: the indices of P's stacks sorted root to
 * leaf by rank, a stack before those it is a prefix of - flamegraph.pl's
 * order of folded lines.  Both malloc'd; -1 (message set) when memory runs
 * out. */
int xb_out_order(const struct xb_profile *p, uint32_t **rank, uint32_t **order);

/* ---- the flame graph's frame tree --------------------------------------- */

#define XB_FLAME_ROOT UINT32_MAX /* the frame of node 0, "all" */

struct xb_flame_node {
	uint32_t frame; /* profile frame id, or XB_FLAME_ROOT */
	uint32_t depth; /* 0: the root */
	uint64_t x;     /* samples left of it */
	uint64_t total; /* samples in it and below */
};

struct xb_flame {
	struct xb_flame_node *nodes; /* depth-first, children by rank */
	size_t n;
	uint64_t total;
	double min_fraction;    /* as built */
	uint32_t maxdepth;      /* of the nodes kept */
	size_t merged_frames;   /* nodes left out as narrower than the minimum */
	uint64_t merged_samples; /* their samples, now drawn as their parents' */
};

/* The tree of P's stacks without the nodes holding less than MIN_FRACTION
 * of all samples (their samples stay in their parent's width). */
int xb_flame_build(const struct xb_profile *p, double min_fraction, struct xb_flame *fl);
void xb_flame_free(struct xb_flame *fl);

#endif

/* writers.h - the text outputs of a profile.
 *
 * The table keeps the original's shape: a first line "processed X/Y
 * samples (Z%)", then one row per function: COUNT  NAME  PCT%  [TAG].
 * Parse rows from the right: the percentage and the bracketed tag are
 * always the last two fields.  Folded stacks are one "root;...;leaf COUNT"
 * line per distinct stack, for flame graph tools.  Names come from the
 * target's memory: every writer escapes them for its format, and no
 * control character reaches a terminal or a file. */
#ifndef XB_WRITERS_H
#define XB_WRITERS_H

#include "xb/output.h"
#include "xb/profile.h"

#include <stdio.h>

/* NAME as display text (xb_display_name_buf: valid UTF-8, control
 * characters written out as \n, \xHH, ...), and, when FOLDED, ';' as ':'
 * (it separates frames there); into buf. */
const char *xb_text_clean(const char *name, bool folded, char *buf, size_t len);

void xb_write_processed(FILE *f, uint64_t processed, uint64_t received);
/* --wall: the share of P's samples under each state root ("[running]",
 * "[waiting]", ...: a stack's outermost frame, below its group), as one
 * line "PREFIXstates: waiting 97.50%, running 2.50%"; nothing when no
 * stack has a state root (not a wall-clock profile). */
void xb_write_wall_states(FILE *f, const struct xb_profile *p, const char *prefix);
void xb_write_rows(FILE *f, const struct xb_profile *p, const struct xb_row *rows, size_t n,
		   size_t top, uint64_t denom);
/* Folded stacks (root to leaf, ';'-separated, " COUNT"). */
int xb_write_folded(FILE *f, const struct xb_profile *p);

/* The table under --by (src/output/grouped_table.c, groups from
 * xb_by_split): "processed X/Y samples (Z%)", then one block per
 * group, most samples first:
 *   == GROUP: N samples, P% of all
 *   COUNT  NAME  PCT%  [TAG]      (its top rows; PCT of the group)
 * at most TOP groups (a last line counts the rest).  Rows as the plain
 * table counts them: the innermost frame, or with ONLY_ERLANG the
 * innermost Erlang frame, or with BLAME the --blame rows (N and P are then
 * the group's samples with BLAME on their stack).  0, or -1 with xb_err. */
int xb_write_grouped_table(FILE *f, const struct xb_profile *p, bool only_erlang, const char *blame,
			   size_t top, uint64_t processed, uint64_t received);

#endif

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
void xb_write_rows(FILE *f, const struct xb_profile *p, const struct xb_row *rows, size_t n,
		   size_t top, uint64_t denom);
/* Folded stacks (root to leaf, ';'-separated, " COUNT"). */
int xb_write_folded(FILE *f, const struct xb_profile *p);

#endif

/* report.h - stage 5: output.  The default table keeps the original's
 * shape: a first line "processed X/Y samples (Z%)", then one row per
 * function: COUNT  NAME  PCT%  [TAG].  Parse rows from the right: the
 * percentage and the bracketed tag are always the last two fields. */
#ifndef XB_REPORT_H
#define XB_REPORT_H

#include "xb/profile.h"

#include <stdio.h>

void xb_report_processed(FILE *f, uint64_t processed, uint64_t received);
void xb_report_rows(FILE *f, const struct xb_profile *p, const struct xb_row *rows, size_t n,
		    size_t top, uint64_t denom);
/* Folded stacks (root to leaf, ';'-separated, " COUNT"), for flame graphs. */
int xb_report_folded(FILE *f, const struct xb_profile *p);
/* Percentiles of skid samples (microseconds), p in [0,100]. */
uint64_t xb_percentile(uint64_t *v, size_t n, double p);

#endif

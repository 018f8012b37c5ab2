/* folded.c - folded stacks ("root;...;leaf COUNT"), the input of
 * flamegraph.pl, inferno, speedscope's importer and many others. */
#define _GNU_SOURCE
#include "xb/writers.h"
#include "xb/common.h"

#include <errno.h>
#include <string.h>

int xb_write_folded(FILE *f, const struct xb_profile *p)
{
	char buf[1024], text[1400];
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		if (!s->n)
			continue;
		for (uint32_t k = s->n; k-- > 0;) {
			/* ';' separates frames and the last ' ' the count:
			 * keep names from containing the former. */
			fputs(xb_text_clean(xb_fname_text(&p->names[s->ids[k]], text, sizeof(text)), true, buf,
					    sizeof(buf)),
			      f);
			if (k)
				fputc(';', f);
		}
		fprintf(f, " %llu\n", (unsigned long long)s->count);
	}
	return ferror(f) ? xb_fail("write error: %s", strerror(errno ? errno : EIO)) : 0;
}

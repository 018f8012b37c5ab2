/* kallsyms.h - kernel function names (/proc/kallsyms), for
 * --include-kernel. */
#ifndef XB_KALLSYMS_H
#define XB_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct xb_kallsyms {
	struct xb_ksym {
		uint64_t addr;
		char *name;
	} *v;
	size_t n;
};

/* Load text symbols (t/T); an unreadable or zeroed file (kptr_restrict)
 * leaves the table empty: every address is then "[unknown]". */
void xb_kallsyms_load(struct xb_kallsyms *k);
const char *xb_kallsyms_name(const struct xb_kallsyms *k, uint64_t addr);
void xb_kallsyms_free(struct xb_kallsyms *k);

#endif

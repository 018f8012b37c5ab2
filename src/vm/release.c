/* release.c - selecting a release table. */
#include "xb/release.h"

#include <stdio.h>
#include <string.h>

const struct xb_release *xb_release_find(const char *erts)
{
	for (const struct xb_release *const *r = xb_releases; *r; r++)
		if (strcmp((*r)->erts, erts) == 0)
			return *r;
	return NULL;
}

void xb_release_list(char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	for (const struct xb_release *const *r = xb_releases; *r && used < len; r++) {
		int n = snprintf(buf + used, len - used, "%sOTP %s (erts %s)", used ? ", " : "",
				 (*r)->otp, (*r)->erts);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

const struct xb_release_flavor *xb_release_flavor(const struct xb_release *r, enum xb_flavor f)
{
	return f == XB_FLAVOR_JIT ? &r->jit : &r->emu;
}

/* release.c - selecting a release table. */
#include "xb/release.h"

#include <stdio.h>
#include <stdlib.h>
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

bool xb_thread_name_match(const char *fmt, const char *comm, int *no)
{
	const char *pct = strstr(fmt, "%d");
	if (!pct)
		return false;
	size_t pre = (size_t)(pct - fmt);
	if (strncmp(comm, fmt, pre) != 0)
		return false;
	const char *d = comm + pre, *e = d;
	while (*e >= '0' && *e <= '9')
		e++;
	if (e == d)
		return false;
	/* What follows the number is the format's suffix, possibly cut
	 * short by the 15-character comm limit (TASK_COMM_LEN). */
	const char *suffix = pct + 2;
	size_t rest = strcspn(e, "\n");
	if (rest > strlen(suffix) || strncmp(e, suffix, rest) != 0)
		return false;
	if (rest < strlen(suffix) && strlen(comm) - (comm[strlen(comm) - 1] == '\n') < 15)
		return false;
	*no = atoi(d);
	return *no > 0;
}

const char *xb_flavor_name(enum xb_flavor f)
{
	return f == XB_FLAVOR_JIT ? "jit" : f == XB_FLAVOR_EMU ? "emu" : "unknown";
}

/* priv.c - our capabilities (capget(2), without libcap). */
#define _GNU_SOURCE
#include "xb/priv.h"
#include "xb/common.h"

#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

bool xb_have_cap(int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	if (cap < 0 || cap >= 64 || syscall(SYS_capget, &h, d) < 0)
		return false;
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

int xb_perf_event_paranoid(void)
{
	char *t = xb_slurp("/proc/sys/kernel/perf_event_paranoid", NULL);
	int v = t ? atoi(t) : 2;
	free(t);
	return v;
}

/* priv.h - which privileges this process has, to say which one is
 * missing when the kernel refuses. */
#ifndef XB_PRIV_H
#define XB_PRIV_H

#include <stdbool.h>

/* Is capability CAP (linux/capability.h) in our effective set? */
bool xb_have_cap(int cap);
/* kernel.perf_event_paranoid, or 2 (the default) when unreadable. */
int xb_perf_event_paranoid(void);

#endif

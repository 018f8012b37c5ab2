/* remote.h - reading the target's memory with process_vm_readv(2).
 *
 * Never ptrace, never /proc/PID/mem, never a pause.  Every read is checked
 * against the target's mappings first; a read that is out of bounds, fails,
 * or comes back short returns -1 and counts as a failure.  The target keeps
 * running, so a successful read can still be stale: callers validate what
 * they read. */
#ifndef XB_REMOTE_H
#define XB_REMOTE_H

#include "xb/procmaps.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct xb_remote {
	pid_t pid;
	struct xb_maps maps;
	uint64_t maps_time_ns; /* when maps were last read */
	uint64_t reads, failures;
	bool gone; /* the process has exited */
};

int xb_remote_open(struct xb_remote *r, pid_t pid);
void xb_remote_close(struct xb_remote *r);
/* Re-read the maps (rate-limited unless force). */
int xb_remote_refresh(struct xb_remote *r, bool force);
int xb_read(struct xb_remote *r, uint64_t addr, void *buf, size_t len);
int xb_read_u64(struct xb_remote *r, uint64_t addr, uint64_t *v);
int xb_read_u32(struct xb_remote *r, uint64_t addr, uint32_t *v);
/* Is [addr, addr+len) inside readable mappings (no refresh)? */
bool xb_remote_readable(const struct xb_remote *r, uint64_t addr, size_t len);

#endif

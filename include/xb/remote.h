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

/* A piece of the target's memory as it was at some moment (a sample). */
struct xb_region {
	uint64_t addr, len;
	const uint8_t *data;
};
#define XB_MAX_REGIONS 4

struct xb_remote {
	pid_t pid;
	struct xb_maps maps;
	uint64_t maps_time_ns; /* when maps were last read (the read's end) */
	/* What the last read of the maps cost (reading and, when the text
	 * changed, parsing): refreshes are spaced by a multiple of it, so a
	 * target with many mappings cannot make them most of the tool's
	 * work.  maps_gen counts the changes (a refresh that found the same
	 * text keeps the parsed maps and the generation). */
	uint64_t maps_cost_ns, maps_gen;
	char *maps_text; /* the text maps was parsed from */
	size_t maps_text_len;
	uint64_t reads, failures;
	bool gone; /* the process has exited */
	/* Memory captured with the sample being processed (the overlay): a
	 * read that lies inside one of these regions is answered from it,
	 * exact at the moment of the sample; any other read goes to the live
	 * process and is counted in live_reads (it may see a later moment). */
	const struct xb_region *overlay;
	unsigned noverlay;
	uint64_t live_reads;
	/* A snapshot (xb_remote_open_snapshot): the regions are all there is;
	 * nothing is read live. */
	bool snapshot_only;
	/* The target pinned (pidfd_open): readable once it has exited, so a
	 * PID reused by another process is never taken for it.  -1 when the
	 * kernel has no pidfds (then its start time is compared). */
	int pidfd;
	uint64_t start_time; /* /proc/PID/stat field 22 at open */
	/* Fault injection for tests (EXTROSPECT_FAULT, see remote.c): 0 none,
	 * 1 every live read returns random bytes, 2 one read in PERMILLE/1000
	 * has a byte flipped. */
	int fault;
	unsigned fault_permille;
	uint64_t fault_state, faults;
};

int xb_remote_open(struct xb_remote *r, pid_t pid);
/* Is the process opened still the one running (not exited, PID not
 * reused)?  Sets r->gone when not. */
bool xb_remote_alive(struct xb_remote *r);
void xb_remote_close(struct xb_remote *r);
/* Re-read the maps (rate-limited unless force: at most every 20 ms, or
 * 10 times what the last read cost, counted from its end). */
int xb_remote_refresh(struct xb_remote *r, bool force);
int xb_read(struct xb_remote *r, uint64_t addr, void *buf, size_t len);
int xb_read_u64(struct xb_remote *r, uint64_t addr, uint64_t *v);
int xb_read_u32(struct xb_remote *r, uint64_t addr, uint32_t *v);
/* A remote over recorded memory only (tests, replays): MAPS_TEXT (the
 * /proc/PID/maps format, may be NULL) says what is mapped where, REGIONS
 * what the memory held.  Reads outside the regions fail. */
int xb_remote_open_snapshot(struct xb_remote *r, const char *maps_text,
			    const struct xb_region *regions, unsigned n);
/* Answer reads from these regions first until the next call (n = 0:
 * none).  The regions must stay valid meanwhile. */
void xb_remote_set_overlay(struct xb_remote *r, const struct xb_region *v, unsigned n);
/* Bytes readable from the overlay at ADDR without leaving its region (0
 * if ADDR is in none). */
uint64_t xb_remote_overlay_span(const struct xb_remote *r, uint64_t addr);
/* One piece of a batched read. */
struct xb_readreq {
	uint64_t addr;
	void *buf;
	size_t len;
	bool ok; /* set by xb_read_many */
};
/* Read many pieces with as few process_vm_readv calls as the kernel
 * allows (up to IOV_MAX pieces each); a piece that fails is retried alone
 * and marked !ok, the others are still read.  Returns how many succeeded.
 * With an overlay or a snapshot each piece goes through xb_read. */
size_t xb_read_many(struct xb_remote *r, struct xb_readreq *q, size_t n);
/* Is [addr, addr+len) inside readable mappings (no refresh)? */
bool xb_remote_readable(const struct xb_remote *r, uint64_t addr, size_t len);

#endif

/* remote.c - validated process_vm_readv(2). */
#define _GNU_SOURCE
#include "xb/remote.h"
#include "xb/common.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Mappings change while the VM runs (heaps grow, code is loaded).  A read
 * that misses the cached maps triggers a re-read, but not more often than
 * this, so a stream of bad pointers cannot turn into a stream of
 * /proc reads. */
#define MAPS_REFRESH_MIN_NS (20ull * 1000 * 1000)
#define READ_PIECE (4u << 20)

/* Field 22 of /proc/PID/stat (starttime), 0 if unreadable. */
static uint64_t start_time(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	char *st = xb_slurp(path, NULL);
	uint64_t t = 0;
	char *p = st ? strrchr(st, ')') : NULL;
	/* after "pid (comm)": state is field 3, starttime field 22 */
	for (int field = 3; p && *p && field <= 22; field++) {
		p = strchr(p + 1, ' ');
		if (p && field == 21)
			t = strtoull(p + 1, NULL, 10);
	}
	free(st);
	return t;
}

/* EXTROSPECT_FAULT, for tests only (ignored when the tool runs with file
 * capabilities: secure_getenv): "random" makes every read of the target's
 * memory (live, or from what a sample captured) return random bytes;
 * "flip:N" flips one random bit in N of every 1000 reads.
 * The tools must stay within their limits and name only what they
 * validated either way. */
static void fault_setup(struct xb_remote *r)
{
	const char *f = secure_getenv("EXTROSPECT_FAULT");
	if (!f || !*f)
		return;
	r->fault_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
	if (strcmp(f, "random") == 0) {
		r->fault = 1;
	} else if (strncmp(f, "flip:", 5) == 0) {
		r->fault = 2;
		r->fault_permille = (unsigned)strtoul(f + 5, NULL, 10);
	}
}

static uint64_t fault_rand(struct xb_remote *r)
{
	uint64_t x = r->fault_state; /* xorshift64 */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	r->fault_state = x;
	return x;
}

static void fault_apply(struct xb_remote *r, void *buf, size_t len)
{
	uint8_t *b = buf;
	if (r->fault == 1) {
		for (size_t i = 0; i < len; i++)
			b[i] = (uint8_t)fault_rand(r);
		r->faults++;
	} else if (r->fault == 2 && fault_rand(r) % 1000 < r->fault_permille) {
		b[fault_rand(r) % len] ^= (uint8_t)(1u << (fault_rand(r) % 8));
		r->faults++;
	}
}

int xb_remote_open(struct xb_remote *r, pid_t pid)
{
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (r->pidfd < 0 && errno == ESRCH) {
		r->gone = true;
		return xb_fail("process %d exited", (int)pid);
	}
	r->start_time = start_time(pid);
	fault_setup(r);
	return xb_remote_refresh(r, true);
}

bool xb_remote_alive(struct xb_remote *r)
{
	if (r->gone || r->snapshot_only)
		return !r->gone;
	if (r->pidfd >= 0) {
		struct pollfd p = { .fd = r->pidfd, .events = POLLIN };
		if (poll(&p, 1, 0) == 1)
			r->gone = true; /* exited (a zombie counts: nothing left to read) */
	} else if (kill(r->pid, 0) < 0 ? errno == ESRCH : start_time(r->pid) != r->start_time) {
		r->gone = true;
	}
	return !r->gone;
}

void xb_remote_close(struct xb_remote *r)
{
	xb_maps_free(&r->maps);
	free(r->maps_text);
	r->maps_text = NULL;
	if (r->pidfd > 0)
		close(r->pidfd);
	r->pidfd = -1;
}

int xb_remote_open_snapshot(struct xb_remote *r, const char *maps_text,
			    const struct xb_region *regions, unsigned n)
{
	memset(r, 0, sizeof(*r));
	r->pidfd = -1;
	r->snapshot_only = true;
	r->overlay = regions;
	r->noverlay = n;
	if (maps_text && xb_maps_parse(maps_text, &r->maps) < 0)
		return -1;
	return 0;
}

void xb_remote_set_overlay(struct xb_remote *r, const struct xb_region *v, unsigned n)
{
	if (r->snapshot_only)
		return; /* the snapshot is the memory */
	r->overlay = n ? v : NULL;
	r->noverlay = n;
}

static const struct xb_region *overlay_find(const struct xb_remote *r, uint64_t addr)
{
	for (unsigned i = 0; i < r->noverlay; i++) {
		const struct xb_region *g = &r->overlay[i];
		if (g->data && addr >= g->addr && addr - g->addr < g->len)
			return g;
	}
	return NULL;
}

uint64_t xb_remote_overlay_span(const struct xb_remote *r, uint64_t addr)
{
	const struct xb_region *g = overlay_find(r, addr);
	return g ? g->len - (addr - g->addr) : 0;
}

/* Once per run: the target has more mappings than are kept. */
static void maps_truncated(struct xb_remote *r)
{
	xb_overrun(XB_OVR_MAPS, "process %d has more than %u mappings (or %u MiB of /proc/%d/maps); "
		   "reads beyond the first ones fail", (int)r->pid, XB_MAPS_MAX_LINES,
		   XB_MAPS_MAX_BYTES >> 20, (int)r->pid);
}

int xb_remote_refresh(struct xb_remote *r, bool force)
{
	if (r->snapshot_only)
		return -1;
	uint64_t t0 = xb_now_ns();
	uint64_t gap = 10 * r->maps_cost_ns;
	if (gap < MAPS_REFRESH_MIN_NS)
		gap = MAPS_REFRESH_MIN_NS;
	if (!force && t0 - r->maps_time_ns < gap)
		return -1;
	size_t len;
	bool truncated;
	char *text = xb_maps_text(r->pid, &len, &truncated);
	if (!text) {
		xb_remote_alive(r);
		return -1;
	}
	if (!xb_remote_alive(r)) { /* the maps may be another process's */
		free(text);
		return xb_fail("process %d exited", (int)r->pid);
	}
	if (r->maps_text && len == r->maps_text_len && memcmp(text, r->maps_text, len) == 0) {
		/* nothing changed: keep what was parsed */
		free(text);
	} else {
		struct xb_maps m;
		if (xb_maps_parse_n(text, len, &m) < 0) {
			free(text);
			return -1;
		}
		m.truncated = m.truncated || truncated;
		if (m.truncated)
			maps_truncated(r);
		xb_maps_free(&r->maps);
		free(r->maps_text);
		r->maps = m;
		r->maps_text = text;
		r->maps_text_len = len;
		r->maps_gen++;
	}
	r->maps_time_ns = xb_now_ns();
	r->maps_cost_ns = r->maps_time_ns - t0;
	return 0;
}

bool xb_remote_readable(const struct xb_remote *r, uint64_t addr, size_t len)
{
	uint64_t end = addr + len;
	if (end < addr)
		return false;
	while (addr < end) {
		const struct xb_map *m = xb_maps_find(&r->maps, addr);
		if (!m || !m->readable)
			return false;
		addr = m->end;
	}
	return true;
}

int xb_read(struct xb_remote *r, uint64_t addr, void *buf, size_t len)
{
	r->reads++;
	if (len == 0)
		return 0;
	const struct xb_region *g = overlay_find(r, addr);
	if (g && g->len - (addr - g->addr) >= len) {
		memcpy(buf, g->data + (addr - g->addr), len);
		/* memory captured at the sample (BPF, the perf path's readers)
		 * came from the target as much as a live read did */
		if (r->fault && !r->snapshot_only)
			fault_apply(r, buf, len);
		return 0;
	}
	if (r->snapshot_only) {
		r->failures++;
		return xb_fail("address 0x%llx+%zu is not in the snapshot", (unsigned long long)addr, len);
	}
	r->live_reads++;
	if (!xb_remote_readable(r, addr, len) &&
	    (xb_remote_refresh(r, false) < 0 || !xb_remote_readable(r, addr, len))) {
		r->failures++;
		return xb_fail("address 0x%llx+%zu is not mapped in process %d",
			       (unsigned long long)addr, len, (int)r->pid);
	}
	/* Large reads (a module's code, a symfile) go in pieces: one
	 * process_vm_readv of 64 MiB takes tens of milliseconds, and ^C
	 * (xb_interrupted) must be seen within 100 ms. */
	ssize_t n = 0;
	for (size_t done = 0; done < len;) {
		if (done && xb_interrupted) {
			r->failures++;
			return xb_fail("interrupted");
		}
		size_t piece = len - done < READ_PIECE ? len - done : READ_PIECE;
		struct iovec local = { (uint8_t *)buf + done, piece };
		struct iovec remote = { (void *)(uintptr_t)(addr + done), piece };
		ssize_t k = process_vm_readv(r->pid, &local, 1, &remote, 1, 0);
		if (k != (ssize_t)piece) {
			n = k < 0 ? k : (ssize_t)done + k;
			break;
		}
		done += piece;
		n = (ssize_t)done;
	}
	if (n == (ssize_t)len) {
		if (r->fault)
			fault_apply(r, buf, len);
		return 0;
	}
	r->failures++;
	if (n < 0 && errno == ESRCH)
		r->gone = true;
	if (n < 0)
		return xb_fail("process_vm_readv(%d, 0x%llx, %zu): %m", (int)r->pid,
			       (unsigned long long)addr, len);
	return xb_fail("short read from process %d at 0x%llx (%zd of %zu bytes)", (int)r->pid,
		       (unsigned long long)addr, n, len);
}

int xb_read_u64(struct xb_remote *r, uint64_t addr, uint64_t *v)
{
	return xb_read(r, addr, v, sizeof(*v));
}

int xb_read_u32(struct xb_remote *r, uint64_t addr, uint32_t *v)
{
	return xb_read(r, addr, v, sizeof(*v));
}

size_t xb_read_many(struct xb_remote *r, struct xb_readreq *q, size_t n)
{
	size_t good = 0;
	if (r->snapshot_only || r->noverlay) {
		for (size_t i = 0; i < n; i++)
			good += (q[i].ok = xb_read(r, q[i].addr, q[i].buf, q[i].len) == 0);
		return good;
	}
	enum { BATCH = IOV_MAX < 1024 ? IOV_MAX : 1024 };
	struct iovec loc[BATCH], rem[BATCH];
	size_t idx[BATCH];
	size_t i = 0;
	while (i < n) {
		size_t k = 0, first = i;
		for (; i < n && k < BATCH; i++) {
			q[i].ok = false;
			if (q[i].len == 0) {
				q[i].ok = true;
				good++;
				continue;
			}
			if (!xb_remote_readable(r, q[i].addr, q[i].len) &&
			    (xb_remote_refresh(r, false) < 0 || !xb_remote_readable(r, q[i].addr, q[i].len))) {
				r->reads++;
				r->failures++;
				continue;
			}
			loc[k] = (struct iovec){ q[i].buf, q[i].len };
			rem[k] = (struct iovec){ (void *)(uintptr_t)q[i].addr, q[i].len };
			idx[k++] = i;
		}
		(void)first;
		size_t done = 0;
		while (done < k) {
			ssize_t got = process_vm_readv(r->pid, loc + done, k - done, rem + done, k - done, 0);
			r->reads++;
			r->live_reads++;
			if (got < 0) {
				if (errno == ESRCH) {
					r->gone = true;
					return good;
				}
				got = 0;
			}
			/* Whole pieces only: the kernel never splits an element. */
			size_t b = (size_t)got;
			while (done < k && b >= loc[done].iov_len) {
				b -= loc[done].iov_len;
				if (r->fault)
					fault_apply(r, loc[done].iov_base, loc[done].iov_len);
				q[idx[done]].ok = true;
				good++;
				done++;
			}
			if (done < k) { /* this piece failed: skip it */
				r->failures++;
				done++;
			}
		}
	}
	return good;
}

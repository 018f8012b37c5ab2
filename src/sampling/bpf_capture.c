/* bpf_capture.c - loads and feeds the BPF capture program
 * (src/sampling/capture.bpf.c, embedded in the binary at build time) with
 * Debian's libbpf 1.1, and decodes its records into struct xb_sample. */
#define _GNU_SOURCE
#include "xb/bpf_capture.h"
#include "xb/priv.h"
#include "xb/common.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The object file, turned into an array by scripts/embed-bpf (meson). */
extern const unsigned char xb_capture_bpf_obj[];
extern const size_t xb_capture_bpf_obj_len;

#define DEFAULT_STACK 16384
#define DEFAULT_RING (4u << 20)

struct xb_bpf {
	struct bpf_object *obj;
	int prog_fd, threads_fd, conf_fd, counters_fd;
	struct ring_buffer *rb;
	int stats_fd;
	uint32_t ring_bytes;
	uint32_t max_threads; /* the threads map's entries */
	/* current consume() call */
	void (*cb)(const struct xb_sample *s, void *arg);
	void *arg;
	int delivered;
	uint64_t until_ns; /* the call's budget ends (0: none) */
	bool budget_hit;
	uint64_t total_delivered, malformed;
	uint64_t flags[XB_BPF_NFLAGS];
};

/* ---- libbpf's messages --------------------------------------------------
 * libbpf prints warnings (and a failed program's verifier log) through a
 * process-wide callback.  While loading, they are collected so that a
 * failure can be explained in one line; otherwise they go to -vv. */

static char *lb_text;
static size_t lb_len, lb_cap;
static bool lb_collect;

#define LB_KEEP (256u << 10) /* the tail of a long verifier log is what explains */

static int lb_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char *msg = NULL;
	int n = vasprintf(&msg, fmt, ap);
	if (n < 0)
		return 0;
	if (xb_verbose >= 2)
		xb_debug("libbpf: %s", msg);
	if (lb_collect) {
		size_t m = (size_t)n;
		const char *src = msg;
		if (m > LB_KEEP) {
			src += m - LB_KEEP;
			m = LB_KEEP;
		}
		if (lb_len + m > LB_KEEP) { /* keep the newest text */
			size_t drop = lb_len + m - LB_KEEP;
			memmove(lb_text, lb_text + drop, lb_len - drop);
			lb_len -= drop;
		}
		if (xb_grow((void **)&lb_text, &lb_cap, lb_len + m + 1, 1) == 0) {
			memcpy(lb_text + lb_len, src, m);
			lb_len += m;
			lb_text[lb_len] = 0;
		}
	}
	free(msg);
	return 0;
}

static bool summary_line(const char *l)
{
	return !*l || strncmp(l, "processed ", 10) == 0 || strncmp(l, "verification time", 17) == 0 ||
	       strncmp(l, "stack depth", 11) == 0 || strncmp(l, "-- ", 3) == 0;
}

/* The line of the verifier's log that says why it refused: the last one
 * before its summary ("processed N insns ..."), where the verifier stops
 * and explains.  Destroys lb_text. */
static void verifier_reason(char *out, size_t len)
{
	snprintf(out, len, "(no verifier log)");
	char *end = lb_text ? strstr(lb_text, "-- END PROG LOAD LOG --") : NULL;
	if (!end)
		return;
	*end = 0;
	for (;;) {
		while (end > lb_text && end[-1] == '\n')
			*--end = 0;
		char *l = end;
		while (l > lb_text && l[-1] != '\n')
			l--;
		if (l == end || !summary_line(l) || l == lb_text) {
			if (*l && !summary_line(l))
				snprintf(out, len, "%s", l);
			return;
		}
		end = l;
	}
}

static int explain_load_failure(int err)
{
	err = err < 0 ? -err : err;
	/* The verifier refuses with EACCES or EINVAL, after its log. */
	if (lb_text && strstr(lb_text, "END PROG LOAD LOG")) {
		char why[512];
		verifier_reason(why, sizeof(why));
		return xb_fail("the kernel refused the BPF program: %s", why);
	}
	if (err == EPERM || err == EACCES) {
		bool bpf = xb_have_cap(CAP_BPF) || xb_have_cap(CAP_SYS_ADMIN);
		bool perfmon = xb_have_cap(CAP_PERFMON) || xb_have_cap(CAP_SYS_ADMIN);
		return xb_fail("BPF capture needs CAP_BPF and CAP_PERFMON (or root): this process has %s",
			       bpf && perfmon ? "both, but the kernel still refused (lockdown? a security module?)"
			       : bpf ? "CAP_BPF but not CAP_PERFMON"
			       : perfmon ? "CAP_PERFMON but not CAP_BPF" : "neither");
	}
	if (err == ENOSYS)
		return xb_fail("the kernel has no bpf() system call (CONFIG_BPF_SYSCALL): BPF capture cannot be used");
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 0)
		return xb_fail("kernel has no BPF ring buffer (needs Linux 5.8)");
	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) == 0)
		return xb_fail("kernel cannot run BPF programs on perf events (CONFIG_BPF_EVENTS)");
	/* Anything else: libbpf's own last words. */
	char last[512] = "";
	if (lb_text) {
		char *l = lb_text, *e = lb_text + lb_len;
		while (e > l && e[-1] == '\n')
			*--e = 0;
		char *nl = strrchr(l, '\n');
		snprintf(last, sizeof(last), "%s", nl ? nl + 1 : l);
	}
	return xb_fail("loading the BPF capture program failed: %s%s%s", strerror(err),
		       last[0] ? ": " : "", last);
}

/* ---- configuration ------------------------------------------------------ */

int xb_bpf_make_conf(const struct xb_bpf_cfg *c, uint32_t ring_bytes, struct xb_bpf_conf *k)
{
	memset(k, 0, sizeof(*k));
	if (c->proc_size == 0 || c->proc_size > XB_BPF_PROC_MAX)
		return xb_fail("BPF capture: struct process of %u bytes (at most %u)", c->proc_size,
			       XB_BPF_PROC_MAX);
	const int32_t offs[3] = { c->off_heap, c->off_hend, c->off_stop };
	for (int i = 0; i < 3; i++)
		if (offs[i] < 0 || (uint32_t)offs[i] + 8 > c->proc_size)
			return xb_fail("BPF capture: process field offset %d outside its %u bytes", offs[i],
				       c->proc_size);
	k->proc_size = c->proc_size;
	k->off_heap = c->off_heap;
	k->off_hend = c->off_hend;
	k->off_stop = c->off_stop;
	k->off_htop = c->off_htop >= 0 && (uint32_t)c->off_htop + 8 <= c->proc_size ? c->off_htop : -1;
	k->ustack_max = c->ustack_max ? c->ustack_max : DEFAULT_STACK;
	k->estack_max = c->estack_max ? c->estack_max : DEFAULT_STACK;
	if (k->ustack_max > XB_BPF_USTACK_MAX || k->estack_max > XB_BPF_ESTACK_MAX)
		return xb_fail("BPF capture: stack copies of at most %u bytes", XB_BPF_USTACK_MAX);
	k->ustack_max &= ~7u;
	k->estack_max &= ~7u;
	k->estack_margin = c->estack_margin & ~7u;
	if (k->estack_margin > k->estack_max / 2)
		return xb_fail("BPF capture: a margin of %u bytes below E leaves too little of %u for the stack",
			       k->estack_margin, k->estack_max);
	k->E_reg = c->E_reg >= 0 && c->E_reg < XB_BPF_NREGS ? c->E_reg : -1;
	k->E_alt_reg = c->E_alt_reg >= 0 && c->E_alt_reg < XB_BPF_NREGS ? c->E_alt_reg : -1;
	k->pm_lo = c->pm_lo;
	k->pm_hi = c->pm_hi;
	k->wakeup_bytes = ring_bytes / 2;
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) == 0) {
		k->pidns_dev = (uint64_t)st.st_dev;
		k->pidns_ino = (uint64_t)st.st_ino;
	}
	return 0;
}

int xb_bpf_configure(struct xb_bpf *b, const struct xb_bpf_cfg *cfg)
{
	struct xb_bpf_conf k;
	uint32_t zero = 0;
	if (xb_bpf_make_conf(cfg, b->ring_bytes, &k) < 0)
		return -1;
	if (bpf_map_update_elem(b->conf_fd, &zero, &k, BPF_ANY) < 0)
		return xb_fail("BPF capture: setting the configuration: %m");
	return 0;
}

/* ---- open / close ------------------------------------------------------- */

static int on_record(void *ctx, void *data, size_t size);

static int map_fd(struct xb_bpf *b, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(b->obj, name);
	return m ? bpf_map__fd(m) : -1;
}

/* Entries of the threads map: one per thread with an event, and each
 * event takes a file descriptor, so as many as the fd limit allows (the
 * tool raised its soft limit to the hard one), at least the 16,384 the
 * object declares and at most XB_BPF_MAX_THREADS (a preallocated hash
 * map: about 64 bytes of kernel memory each).  EXTROSPECT_BPF_THREADS=N
 * sets it (tests: a map that fills up). */
static uint32_t threads_entries(void)
{
	const char *e = secure_getenv("EXTROSPECT_BPF_THREADS");
	if (e && *e) {
		char *end;
		unsigned long v = strtoul(e, &end, 10);
		if (!*end && v >= 1 && v <= XB_BPF_MAX_THREADS)
			return (uint32_t)v;
	}
	struct rlimit rl;
	uint64_t n = 16384;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		n = rl.rlim_cur == RLIM_INFINITY ? XB_BPF_MAX_THREADS : rl.rlim_cur;
	if (n < 16384)
		n = 16384;
	return n > XB_BPF_MAX_THREADS ? XB_BPF_MAX_THREADS : (uint32_t)n;
}

uint32_t xb_bpf_max_threads(const struct xb_bpf *b)
{
	return b->max_threads;
}

int xb_bpf_open(struct xb_bpf **out, const struct xb_bpf_cfg *cfg)
{
	*out = NULL;
	uint32_t ring_bytes = cfg->ring_bytes ? cfg->ring_bytes : DEFAULT_RING;
	long page = sysconf(_SC_PAGESIZE);
	if (ring_bytes < 65536 || (ring_bytes & (ring_bytes - 1)) || ring_bytes % (uint32_t)page)
		return xb_fail("BPF capture: ring of %u bytes (a power of 2, at least 64 KiB)", ring_bytes);
	struct xb_bpf_conf k;
	if (xb_bpf_make_conf(cfg, ring_bytes, &k) < 0)
		return -1;
	struct xb_bpf *b = calloc(1, sizeof(*b));
	if (!b)
		return xb_fail("out of memory");
	b->stats_fd = -1;
	b->ring_bytes = ring_bytes;

	libbpf_print_fn_t old = libbpf_set_print(lb_print);
	lb_len = 0;
	if (lb_text)
		lb_text[0] = 0;
	lb_collect = true;
	int err = 0;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "xb_capture");
	b->obj = bpf_object__open_mem(xb_capture_bpf_obj, xb_capture_bpf_obj_len, &oo);
	if (!b->obj) {
		err = -errno;
		lb_collect = false;
		libbpf_set_print(old);
		free(b);
		return xb_fail("the embedded BPF object does not open: %s", strerror(-err));
	}
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_map *ring = bpf_object__find_map_by_name(b->obj, "ring");
	struct bpf_map *scratch = bpf_object__find_map_by_name(b->obj, "scratch");
	struct bpf_map *threads = bpf_object__find_map_by_name(b->obj, "threads");
	b->max_threads = threads_entries();
	if (ncpu <= 0 || !ring || !scratch || !threads || bpf_map__set_max_entries(ring, ring_bytes) < 0 ||
	    bpf_map__set_max_entries(scratch, (uint32_t)ncpu) < 0 ||
	    bpf_map__set_max_entries(threads, b->max_threads) < 0) {
		err = -EINVAL;
	} else {
		err = bpf_object__load(b->obj);
	}
	lb_collect = false;
	if (err) {
		explain_load_failure(err); /* its feature probes stay quiet too */
		bpf_object__close(b->obj);
		libbpf_set_print(old);
		free(b);
		return -1;
	}
	libbpf_set_print(old);
	struct bpf_program *prog = bpf_object__find_program_by_name(b->obj, "xb_capture");
	b->prog_fd = prog ? bpf_program__fd(prog) : -1;
	b->threads_fd = map_fd(b, "threads");
	b->conf_fd = map_fd(b, "conf");
	b->counters_fd = map_fd(b, "counters");
	uint32_t zero = 0;
	if (b->prog_fd < 0 || b->threads_fd < 0 || b->conf_fd < 0 || b->counters_fd < 0) {
		xb_fail("the embedded BPF object lacks its program or maps");
		goto fail;
	}
	if (bpf_map_update_elem(b->conf_fd, &zero, &k, BPF_ANY) < 0) {
		xb_fail("BPF capture: setting the configuration: %m");
		goto fail;
	}
	b->rb = ring_buffer__new(bpf_map__fd(ring), on_record, b, NULL);
	if (!b->rb) {
		xb_fail("BPF capture: mapping the ring buffer: %s", strerror(errno));
		goto fail;
	}
	*out = b;
	return 0;
fail:
	bpf_object__close(b->obj);
	free(b);
	return -1;
}

void xb_bpf_close(struct xb_bpf *b)
{
	if (!b)
		return;
	ring_buffer__free(b->rb);
	bpf_object__close(b->obj);
	if (b->stats_fd >= 0)
		close(b->stats_fd);
	free(b);
}

int xb_bpf_attach(struct xb_bpf *b, int perf_fd, pid_t tid, uint64_t cur_proc_slot)
{
	uint32_t key = (uint32_t)tid;
	uint64_t val = cur_proc_slot;
	if (bpf_map_update_elem(b->threads_fd, &key, &val, BPF_ANY) < 0) {
		if (errno == E2BIG || errno == ENOMEM) {
			/* full: the caller counts this thread unsampled */
			xb_fail("BPF capture: the thread map is full (%u threads)", b->max_threads);
			return XB_BPF_FULL;
		}
		return xb_fail("BPF capture: thread map entry of %d: %m", (int)tid);
	}
	if (ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, b->prog_fd) < 0) {
		int e = errno;
		bpf_map_delete_elem(b->threads_fd, &key);
		return xb_fail("BPF capture: attaching to the event of thread %d: %s%s", (int)tid,
			       strerror(e), e == EEXIST ? " (it already has a program)" : "");
	}
	return 0;
}

void xb_bpf_detach_thread(struct xb_bpf *b, pid_t tid)
{
	uint32_t key = (uint32_t)tid;
	bpf_map_delete_elem(b->threads_fd, &key);
}

int xb_bpf_fd(const struct xb_bpf *b)
{
	return ring_buffer__epoll_fd(b->rb);
}

/* ---- records ------------------------------------------------------------ */

static int on_record(void *ctx, void *data, size_t size)
{
	struct xb_bpf *b = ctx;
	struct xb_sample s;
	if (xb_bpf_parse(data, size, &s) < 0) {
		b->malformed++;
		return 0;
	}
	b->delivered++;
	b->total_delivered++;
	uint32_t f;
	memcpy(&f, (const uint8_t *)data + offsetof(struct xb_bpf_rec, flags), sizeof(f));
	for (unsigned i = 0; i < XB_BPF_NFLAGS; i++)
		b->flags[i] += (f >> i) & 1;
	if (b->cb)
		b->cb(&s, b->arg);
	if (b->until_ns && xb_now_ns() >= b->until_ns) {
		/* libbpf has advanced past this record before calling us:
		 * a negative return stops the loop with it consumed */
		b->budget_hit = true;
		return -EAGAIN;
	}
	return 0;
}

int xb_bpf_consume(struct xb_bpf *b, void (*cb)(const struct xb_sample *s, void *arg), void *arg,
		   uint64_t budget_ns)
{
	b->cb = cb;
	b->arg = arg;
	b->delivered = 0;
	b->until_ns = budget_ns ? xb_now_ns() + budget_ns : 0;
	b->budget_hit = false;
	int r = ring_buffer__consume(b->rb);
	b->cb = NULL;
	if (r < 0 && b->budget_hit)
		r = 0;
	if (r < 0)
		return xb_fail("BPF capture: reading the ring buffer: %s", strerror(-r));
	return b->delivered;
}

int xb_bpf_enable_stats(struct xb_bpf *b)
{
	if (b->stats_fd >= 0)
		return 0;
	b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (b->stats_fd < 0)
		return xb_fail("BPF run-time statistics: %s", strerror(errno));
	return 0;
}

int xb_bpf_stats(struct xb_bpf *b, struct xb_bpf_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->delivered = b->total_delivered;
	st->malformed = b->malformed;
	memcpy(st->flags, b->flags, sizeof(st->flags));
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return xb_fail("cannot count the CPUs");
	uint64_t *v = calloc((size_t)ncpu, sizeof(uint64_t));
	if (!v)
		return xb_fail("out of memory");
	uint64_t *dst[XB_BPF_C_COUNT] = { &st->runs, &st->records, &st->ring_full, &st->no_conf };
	for (uint32_t k = 0; k < XB_BPF_C_COUNT; k++) {
		if (bpf_map_lookup_elem(b->counters_fd, &k, v) < 0)
			continue;
		for (int c = 0; c < ncpu; c++)
			*dst[k] += v[c];
	}
	free(v);
	uint64_t consumed = b->total_delivered + b->malformed;
	st->unread = st->records > consumed ? st->records - consumed : 0;
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(b->prog_fd, &info, &len) == 0) {
		st->run_ns = info.run_time_ns;
		st->run_cnt = info.run_cnt;
		st->verified_insns = info.verified_insns;
	}
	return 0;
}

const char *xb_bpf_flag_name(unsigned i)
{
	static const char *const names[XB_BPF_NFLAGS] = {
		"kernel_regs", "no_thread", "slot_fault", "proc_fault", "proc_bad", "rsp_in_heap",
		"ustack_capped", "E_from_reg", "E_from_alt", "E_from_stop", "estack_capped",
		"margin_fault", "estack_cut", "ustack_cut", "tail_from_htop", "stop_moved",
	};
	return i < XB_BPF_NFLAGS ? names[i] : NULL;
}

static bool span_ok(uint64_t addr, uint64_t len)
{
	return addr + len >= addr; /* no wrap-around */
}

int xb_bpf_parse(const void *rec, size_t len, struct xb_sample *out)
{
	struct xb_bpf_rec h;
	memset(out, 0, sizeof(*out));
	out->cpu = -1;
	out->thread = -1;
	if (!rec || len < sizeof(h))
		return -1;
	memcpy(&h, rec, sizeof(h));
	if (h.magic != XB_BPF_MAGIC || h.version != XB_BPF_VERSION || h.hdr_size != sizeof(h))
		return -1;
	if (h.proc_len > XB_BPF_PROC_MAX || h.ustack_len > XB_BPF_USTACK_MAX ||
	    h.estack_len > XB_BPF_ESTACK_MAX)
		return -1;
	/* Each length is bounded above, so the sum cannot overflow. */
	uint64_t need = (uint64_t)h.hdr_size + h.proc_len + h.ustack_len + h.estack_len;
	if (need != h.total_len || need > len || h.tid == 0)
		return -1;
	const uint8_t *p = rec;
	const uint8_t *proc = p + h.hdr_size;
	const uint8_t *ust = proc + h.proc_len;
	const uint8_t *est = ust + h.ustack_len;
	bool user = !(h.flags & XB_BPF_F_KERNEL_REGS);
	out->tid = (pid_t)h.tid;
	out->cpu = h.cpu < 1u << 20 ? (int)h.cpu : -1;
	out->time_ns = h.time_ns;
	out->ip = h.regs[XB_PREG_IP];
	out->user = user;
	if (user)
		memcpy(out->regs, h.regs, sizeof(out->regs));
	out->capture_faults = h.faults;
	out->bpf = true;
	if (!user) {
		/* Kernel registers: nothing of user memory is valid. */
		return h.proc_len || h.ustack_len || h.estack_len ? -1 : 0;
	}
	if (h.ustack_len) {
		if (h.ustack_addr != h.regs[XB_PREG_SP] || !span_ok(h.ustack_addr, h.ustack_len))
			return -1;
		out->stack = ust;
		out->stack_size = h.ustack_len;
		out->regions[out->nregions++] = (struct xb_region){ h.ustack_addr, h.ustack_len, ust };
	}
	if (h.slot && !(h.flags & XB_BPF_F_SLOT_FAULT)) {
		if (!span_ok(h.slot, 8))
			return -1;
		out->regions[out->nregions++] =
			(struct xb_region){ h.slot, 8, p + offsetof(struct xb_bpf_rec, c_p) };
	}
	if (h.proc_len) {
		if (!h.slot || (h.flags & XB_BPF_F_SLOT_FAULT) || h.c_p == 0 || h.proc_addr != h.c_p ||
		    !span_ok(h.proc_addr, h.proc_len))
			return -1;
		out->regions[out->nregions++] = (struct xb_region){ h.proc_addr, h.proc_len, proc };
	}
	if (h.estack_len) {
		if (!h.proc_len || !h.estack_addr || !span_ok(h.estack_addr, h.estack_len))
			return -1;
		out->regions[out->nregions++] = (struct xb_region){ h.estack_addr, h.estack_len, est };
	}
	return 0;
}

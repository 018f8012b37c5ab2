/* bpf_capture_check - the BPF capture path against a real VM and kernel.
 *
 * Loads the capture program (xb_bpf_open, before anything else, so that
 * its refusal is what an unprivileged run reports), attaches to the VM,
 * opens one cpu-clock event per VM thread through src/sampling/sampler.c
 * in BPF mode (opts.bpf, opts.attach -> xb_bpf_attach with each
 * scheduler's current_process slot), collects records for -d seconds and
 * prints statistics.  With --pid-term it walks, for every sample whose
 * captured process is that one, its Erlang stack in the captured memory
 * ONLY (no reads of the VM): from E (rsp in JIT code; the interpreter's
 * E register in process_main; else c_p->stop or, in the JIT, rbp when it
 * lies lower in the stack) up to beam_normal_exit, and counts the samples
 * whose whole stack was captured.
 *
 *   bpf_capture_check [-F HZ] [-d S] [--pid-term '<0.N.S>'] [--chain M:F/A,...]
 *                     [--user-stack B] [--estack B] [--margin B] [--discard]
 *                     [--no-stats] [--perf] [--open-only] [--show-bad N] PID
 *
 *   --chain      functions the captured stack must hold, innermost first
 *                (in order, others may sit between them), e.g.
 *                xb_deep:d/1,xb_deep:c/1,xb_deep:b/1,xb_deep:a/1
 *   --discard    count records, analyse nothing (a cost measurement)
 *   --no-stats   leave the kernel's BPF run-time statistics off (they add two
 *                clock reads per run; the cost line then says 0)
 *   --perf       the plain perf path instead (registers + a --user-stack
 *                copy per sample through the perf ring), samples discarded:
 *                the baseline of bench/bpf_bench.py
 *   --open-only  load the program and exit (0: loaded; 2: refused, one line
 *                on stderr saying why)
 *
 * Output: "key: value" lines (see the printf calls at the end); exit 0
 * when records arrived, 1 on errors, 2 when BPF cannot be used. */
#define _GNU_SOURCE
#include "xb/bpf_capture.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/sampler.h"
#include "xb/term.h"
#include "xb/vm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHAIN 16
#define MAX_THREADS 256

struct thr {
	pid_t tid;
	char kind;
	int no;
	uint64_t slot;
	unsigned long long records;
};

struct check {
	struct xb_vm vm;
	struct xb_codemap cm;
	struct xb_bpf *bpf;
	struct thr thr[MAX_THREADS];
	int nthr;
	bool discard;
	char pid_term[64];
	const char *chain[MAX_CHAIN];
	int nchain;
	int show_bad;
	unsigned long long records, user, with_slot, with_cp, with_proc, rsp_in_heap, tail, faults,
		faulty, no_thread, target, complete, chain_ok, chain_ok_in_heap, chain_ok_tail,
		not_captured, regions[XB_MAX_REGIONS + 1], flagc[16];
	uint64_t ustack_bytes, estack_bytes;
	char example[512];
};

static char thread_kind(const void *vm, const char *comm, int *no)
{
	return xb_vm_thread_kind(vm, comm, no);
}

static int attach(void *arg, int fd, const struct xb_thread *t)
{
	struct check *c = arg;
	uint64_t slot = xb_vm_current_process_slot(&c->vm, t->kind, t->sched_no);
	if (c->nthr < MAX_THREADS)
		c->thr[c->nthr++] = (struct thr){ t->tid, t->kind, t->sched_no, slot, 0 };
	/* as erlang-sample hands it (session.c) */
	return xb_bpf_attach(c->bpf, fd, t->tid, slot && t->kind != 's' ? slot | XB_BPF_SLOT_DIRTY : slot);
}

/* A word of captured memory at ADDR (false when not captured). */
static bool captured(const struct xb_sample *s, uint64_t addr, uint64_t *w)
{
	for (unsigned i = 0; i < s->nregions; i++) {
		const struct xb_region *r = &s->regions[i];
		if (addr >= r->addr && addr - r->addr <= r->len && r->len - (addr - r->addr) >= 8) {
			memcpy(w, r->data + (addr - r->addr), 8);
			return true;
		}
	}
	return false;
}

static const struct xb_region *region_at(const struct xb_sample *s, uint64_t addr)
{
	for (unsigned i = 0; i < s->nregions; i++)
		if (addr >= s->regions[i].addr && addr - s->regions[i].addr < s->regions[i].len)
			return &s->regions[i];
	return NULL;
}

static uint64_t proc_field(const struct xb_region *p, int64_t off)
{
	uint64_t v = 0;
	if (off >= 0 && (uint64_t)off + 8 <= p->len)
		memcpy(&v, p->data + off, 8);
	return v;
}

static void on_sample(const struct xb_sample *s, void *arg)
{
	struct check *c = arg;
	c->records++;
	for (int i = 0; i < c->nthr; i++)
		if (c->thr[i].tid == s->tid)
			c->thr[i].records++;
	if (c->discard)
		return;
	c->user += s->user;
	c->faults += s->capture_faults;
	c->faulty += s->capture_faults != 0;
	c->regions[s->nregions < XB_MAX_REGIONS ? s->nregions : XB_MAX_REGIONS]++;
	c->ustack_bytes += s->stack_size;
	struct xb_vm *vm = &c->vm;
	uint64_t slot = 0;
	for (int i = 0; i < c->nthr; i++)
		if (c->thr[i].tid == s->tid)
			slot = c->thr[i].slot;
	if (!slot)
		return;
	c->with_slot++;
	uint64_t c_p;
	if (!captured(s, slot, &c_p) || !c_p)
		return;
	c->with_cp++;
	const struct xb_region *p = region_at(s, c_p);
	if (!p || p->addr != c_p)
		return;
	c->with_proc++;
	uint64_t id = proc_field(p, xb_off(vm, XB_F_PROC_ID));
	uint64_t heap = proc_field(p, xb_off(vm, XB_F_PROC_HEAP));
	uint64_t hend = proc_field(p, xb_off(vm, XB_F_PROC_HEND));
	uint64_t stop = proc_field(p, xb_off(vm, XB_F_PROC_STOP));
	uint64_t sp = s->regs[XB_PREG_SP], ip = s->regs[XB_PREG_IP];
	bool in_heap = sp >= heap && sp <= hend;
	c->rsp_in_heap += in_heap;
	const struct xb_region *tail = s->nregions ? &s->regions[s->nregions - 1] : NULL;
	if (tail && (tail == p || tail->addr == slot || tail->addr == sp))
		tail = NULL;
	if (tail) {
		c->tail++;
		c->estack_bytes += tail->len;
	}
	char pid[64];
	if (!c->pid_term[0] || xb_format_pid(id, vm->pid_num_bits, vm->pid_ser_bits, &vm->pix, pid, sizeof(pid)) < 0 ||
	    strcmp(pid, c->pid_term) != 0)
		return;
	c->target++;
	/* E: rsp in JIT code; otherwise the program's own choice (the
	 * interpreter's E register in process_main, else c_p->stop or the
	 * alternative register when lower).  erlstack.c knows better in one
	 * case: in C code called from the JIT with E in rbp, rbp may have
	 * been reused by then, and only unwinding the C frames gets E back;
	 * this walk then starts at a stale E and may report the sample
	 * incomplete although the capture holds the stack. */
	uint64_t E = stop;
	uint64_t pm = vm->sym.process_main, pmsz = vm->sym.process_main_size;
	int alt_reg = vm->flavor == XB_FLAVOR_EMU ? vm->regs.E : vm->regs.E_saved;
	if (in_heap) {
		E = sp;
	} else if (vm->flavor == XB_FLAVOR_EMU && ip >= pm && ip < pm + pmsz && vm->regs.E >= 0) {
		E = s->regs[vm->regs.E];
	} else if (alt_reg >= 0) {
		uint64_t alt = s->regs[alt_reg];
		if (alt % 8 == 0 && alt >= heap && alt < hend && (alt < stop || stop < heap || stop > hend))
			E = alt;
	}
	/* Walk [E, hend) in the captured memory only. */
	const char *names[64];
	int n = 0;
	bool complete = false, missing = false;
	for (uint64_t a = E; a + 8 <= hend && !complete; a += 8) {
		uint64_t w;
		if (!captured(s, a, &w)) {
			missing = true;
			break;
		}
		if (!xb_is_cp(w))
			continue;
		if (w == c->cm.normal_exit) {
			complete = true;
			break;
		}
		const struct xb_code *code = xb_codemap_find(&c->cm, w - 1);
		if (code && code->kind == XB_CODE_FUNCTION && n < 64)
			names[n++] = code->name;
	}
	c->complete += complete;
	c->not_captured += missing;
	int k = 0;
	for (int i = 0; i < n && k < c->nchain; i++)
		if (strcmp(names[i], c->chain[k]) == 0)
			k++;
	bool ok = complete && k == c->nchain;
	if (ok) {
		c->chain_ok++;
		if (in_heap)
			c->chain_ok_in_heap++;
		else
			c->chain_ok_tail++;
	}
	if ((ok && !c->example[0]) || (!ok && c->show_bad > 0)) {
		char buf[512];
		const struct xb_code *here = xb_codemap_find(&c->cm, ip);
		int len = snprintf(buf, sizeof(buf), "%s%s", here ? here->name : "(native)", "");
		for (int i = 0; i < n && len < (int)sizeof(buf) - 64; i++)
			len += snprintf(buf + len, sizeof(buf) - (size_t)len, " <- %s", names[i]);
		snprintf(buf + len, sizeof(buf) - (size_t)len, "%s", complete ? " <- normal_exit" : missing ? " <- (not captured)" : " <- (hend)");
		if (ok) {
			snprintf(c->example, sizeof(c->example), "%s", buf);
		} else {
			c->show_bad--;
			fprintf(stderr, "bad sample: tid %d ip %#llx sp %#llx E %#llx heap %#llx hend %#llx stop %#llx "
				"regions %u faults %u: %s\n", (int)s->tid, (unsigned long long)ip,
				(unsigned long long)sp, (unsigned long long)E, (unsigned long long)heap,
				(unsigned long long)hend, (unsigned long long)stop, s->nregions,
				s->capture_faults, buf);
			for (unsigned i = 0; i < s->nregions; i++)
				fprintf(stderr, "  region %u: %#llx +%llu\n", i,
					(unsigned long long)s->regions[i].addr,
					(unsigned long long)s->regions[i].len);
		}
	}
}

static void count_drop(const struct xb_sample *s, void *arg)
{
	(void)s;
	((struct check *)arg)->records++;
}

static void usage(void)
{
	fprintf(stderr, "usage: bpf_capture_check [-F HZ] [-d SECONDS] [--pid-term '<0.N.S>'] [--chain M:F/A,...] "
			"[--user-stack B] [--estack B] [--margin B] [--discard] [--no-stats] [--perf] [--open-only] "
			"[--show-bad N] PID\n");
}

int main(int argc, char **argv)
{
	static struct check c;
	struct xb_sampler_opts o = { .freq = 997, .stack_bytes = 16384, .force_software = true,
				     .thread_kind = thread_kind, .thread_kind_arg = &c.vm };
	struct xb_bpf_cfg cfg = { .proc_size = 776, .off_heap = 128, .off_hend = 136, .off_stop = 88,
				  .off_htop = 80, .estack_margin = 2048, .E_reg = -1, .E_alt_reg = -1 };
	double dur = 2;
	int pid = 0;
	bool perf = false, open_only = false, stats = true;
	char *chain = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (strcmp(a, "-F") == 0 && more)
			o.freq = (unsigned)atoi(argv[++i]);
		else if (strcmp(a, "-d") == 0 && more)
			dur = atof(argv[++i]);
		else if (strcmp(a, "--pid-term") == 0 && more)
			snprintf(c.pid_term, sizeof(c.pid_term), "%s", argv[++i]);
		else if (strcmp(a, "--chain") == 0 && more)
			chain = argv[++i];
		else if (strcmp(a, "--user-stack") == 0 && more)
			o.stack_bytes = cfg.ustack_max = (uint32_t)atoi(argv[++i]);
		else if (strcmp(a, "--estack") == 0 && more)
			cfg.estack_max = (uint32_t)atoi(argv[++i]);
		else if (strcmp(a, "--margin") == 0 && more)
			cfg.estack_margin = (uint32_t)atoi(argv[++i]);
		else if (strcmp(a, "--show-bad") == 0 && more)
			c.show_bad = atoi(argv[++i]);
		else if (strcmp(a, "--discard") == 0)
			c.discard = true;
		else if (strcmp(a, "--perf") == 0)
			perf = true;
		else if (strcmp(a, "--no-stats") == 0)
			stats = false;
		else if (strcmp(a, "--open-only") == 0)
			open_only = true;
		else if (strcmp(a, "-v") == 0)
			xb_verbose++;
		else if (a[0] != '-')
			pid = atoi(a);
		else {
			usage();
			return 1;
		}
	}
	if ((pid <= 0 && !open_only) || dur <= 0) {
		usage();
		return 1;
	}
	for (char *t = chain ? strtok(chain, ",") : NULL; t && c.nchain < MAX_CHAIN; t = strtok(NULL, ","))
		c.chain[c.nchain++] = t;

	/* First: can BPF be used at all?  (Placeholder offsets until the VM
	 * is read: the program captures nothing of a process meanwhile, as
	 * no thread is attached.) */
	if (!perf && xb_bpf_open(&c.bpf, &cfg) < 0) {
		fprintf(stderr, "bpf_capture_check: %s\n", xb_err());
		return 2;
	}
	if (open_only) {
		struct xb_bpf_stats st;
		xb_bpf_stats(c.bpf, &st);
		printf("loaded: yes (the verifier went through %llu instructions)\n",
		       (unsigned long long)st.verified_insns);
		xb_bpf_close(c.bpf);
		return 0;
	}
	if (xb_vm_attach(&c.vm, pid) < 0) {
		fprintf(stderr, "bpf_capture_check: %s\n", xb_err());
		return 1;
	}
	struct xb_vm *vm = &c.vm;
	if (!perf) {
		cfg.proc_size = (uint32_t)xb_off(vm, XB_F_PROC_SIZE);
		cfg.off_heap = (int32_t)xb_off(vm, XB_F_PROC_HEAP);
		cfg.off_hend = (int32_t)xb_off(vm, XB_F_PROC_HEND);
		cfg.off_stop = (int32_t)xb_off(vm, XB_F_PROC_STOP);
		cfg.off_htop = (int32_t)xb_off(vm, XB_F_PROC_HTOP);
		if (vm->flavor == XB_FLAVOR_EMU) {
			cfg.pm_lo = vm->sym.process_main;
			cfg.pm_hi = vm->sym.process_main + vm->sym.process_main_size;
			cfg.E_reg = cfg.E_alt_reg = vm->regs.E;
		} else {
			cfg.E_alt_reg = vm->regs.E_saved;
		}
		if (xb_bpf_configure(c.bpf, &cfg) < 0 || (stats && xb_bpf_enable_stats(c.bpf) < 0)) {
			fprintf(stderr, "bpf_capture_check: %s\n", xb_err());
			return 1;
		}
		if (!c.discard && xb_codemap_build(vm, &c.cm, XB_CM_FOLD_PROLOGUE) < 0) {
			fprintf(stderr, "bpf_capture_check: code map: %s\n", xb_err());
			return 1;
		}
		o.bpf = true;
		o.attach = attach;
		o.attach_arg = &c;
	}
	struct xb_sampler s;
	if (xb_sampler_open(&s, pid, &o) < 0 || xb_sampler_enable(&s) < 0) {
		fprintf(stderr, "bpf_capture_check: %s\n", xb_err());
		return 1;
	}
	uint64_t t0 = xb_now_ns(), end = t0 + (uint64_t)(dur * 1e9);
	while (xb_now_ns() < end) {
		bool gone = false;
		/* Waits up to 5 ms on the perf rings (throttle records only
		 * in BPF mode), then drains the BPF ring: a 5 ms drain. */
		if (xb_sampler_poll(&s, 5, count_drop, &c, &gone) < 0 || gone)
			break;
		if (c.bpf && xb_bpf_consume(c.bpf, on_sample, &c, 20 * 1000 * 1000) < 0) {
			fprintf(stderr, "bpf_capture_check: %s\n", xb_err());
			break;
		}
		if (xb_sampler_scan_threads(&s, false) < 0) {
			fprintf(stderr, "bpf_capture_check: %s\n", xb_err());
			break;
		}
	}
	if (c.bpf)
		xb_bpf_consume(c.bpf, on_sample, &c, 1000 * 1000 * 1000);
	double secs = (double)(xb_now_ns() - t0) * 1e-9;
	printf("received %llu samples in %.3f s (%s, %s)\n", c.records, secs, s.event_name,
	       perf ? "perf path" : "BPF path");
	printf("flavor: %s\n", xb_flavor_name(vm->flavor));
	printf("lost: %llu throttled: %llu\n", (unsigned long long)s.lost, (unsigned long long)s.throttled);
	for (int i = 0; i < c.nthr; i++)
		if (c.thr[i].kind != 'o' || c.thr[i].records)
			printf("thread: %d %c%d records %llu slot %#llx\n", (int)c.thr[i].tid, c.thr[i].kind,
			       c.thr[i].no, c.thr[i].records, (unsigned long long)c.thr[i].slot);
	if (c.bpf) {
		struct xb_bpf_stats st;
		xb_bpf_stats(c.bpf, &st);
		printf("bpf: runs %llu records %llu ring_full %llu malformed %llu verified_insns %llu\n",
		       (unsigned long long)st.runs, (unsigned long long)st.records,
		       (unsigned long long)st.ring_full, (unsigned long long)st.malformed,
		       (unsigned long long)st.verified_insns);
		printf("flags:");
		for (unsigned i = 0; xb_bpf_flag_name(i); i++)
			if (st.flags[i])
				printf(" %s %llu", xb_bpf_flag_name(i), (unsigned long long)st.flags[i]);
		printf("\n");
		printf("cost: %.2f us per run (%llu runs, kernel bpf stats)\n",
		       st.run_cnt ? (double)st.run_ns / (double)st.run_cnt / 1000.0 : 0.0,
		       (unsigned long long)st.run_cnt);
	}
	if (c.bpf && !c.discard) {
		printf("samples: user %llu with_slot %llu with_c_p %llu with_proc %llu rsp_in_heap %llu tail %llu\n",
		       c.user, c.with_slot, c.with_cp, c.with_proc, c.rsp_in_heap, c.tail);
		printf("faults: %llu in %llu samples\n", c.faults, c.faulty);
		printf("bytes: ustack %.0f estack %.0f per sample\n",
		       c.records ? (double)c.ustack_bytes / (double)c.records : 0.0,
		       c.tail ? (double)c.estack_bytes / (double)c.tail : 0.0);
		if (c.pid_term[0]) {
			printf("target: %s samples %llu complete %llu chain_ok %llu (in_heap %llu, tail %llu) not_captured %llu\n",
			       c.pid_term, c.target, c.complete, c.chain_ok, c.chain_ok_in_heap, c.chain_ok_tail,
			       c.not_captured);
			printf("example: %s\n", c.example[0] ? c.example : "(none)");
		}
	}
	xb_sampler_close(&s);
	xb_bpf_close(c.bpf);
	if (!perf && !c.discard)
		xb_codemap_free(&c.cm);
	xb_vm_detach(vm);
	return c.records ? 0 : 1;
}

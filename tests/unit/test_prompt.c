/* test_prompt.c - the perf path's copy at the moment of the sample
 * (src/sampling/prompt.c xb_prompt_capture) over recorded memory: what it
 * copies for each kind of sample, as the BPF program does, and that
 * xb_bpf_parse reads its records back. */
#include "unit.h"
#include "xb/bpf_capture.h"
#include "xb/prompt.h"

#include <stdlib.h>
#include <string.h>

/* Fake memory: readable pages (4 KiB) listed in `pages`, each byte's
 * value a function of its address. */
#define NPAGES 64
struct fakemem {
	uint64_t pages[NPAGES];
	unsigned n;
	unsigned reads;
};

static uint8_t byte_at(uint64_t a)
{
	return (uint8_t)(a * 131 + (a >> 12));
}

static void add_range(struct fakemem *m, uint64_t lo, uint64_t hi)
{
	for (uint64_t p = lo & ~4095ull; p < hi && m->n < NPAGES; p += 4096)
		m->pages[m->n++] = p;
}

static void drop_page(struct fakemem *m, uint64_t a)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->pages[i] == (a & ~4095ull))
			m->pages[i] = 1; /* never a page address */
}

static int readable(const struct fakemem *m, uint64_t a)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->pages[i] == (a & ~4095ull))
			return 1;
	return 0;
}

static size_t fake_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct fakemem *m = arg;
	m->reads++;
	size_t k = 0;
	for (; k < len && readable(m, addr + k); k++)
		((uint8_t *)buf)[k] = byte_at(addr + k);
	return k;
}

/* Write the u64 V at A: the fake memory is a function of the address, so
 * words the copy must interpret (the slot, the process fields) are
 * planted through this table instead. */
#define NWORDS 8
static struct {
	uint64_t a, v;
} words[NWORDS];
static unsigned nwords;

static size_t planted_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	size_t k = fake_read(arg, addr, buf, len);
	for (unsigned i = 0; i < nwords; i++)
		if (words[i].a >= addr && words[i].a + 8 <= addr + k)
			memcpy((uint8_t *)buf + (words[i].a - addr), &words[i].v, 8);
	return k;
}

static void plant(uint64_t a, uint64_t v)
{
	words[nwords].a = a;
	words[nwords++].v = v;
}

/* A process layout like OTP 25's (offsets into struct process). */
#define OFF_HTOP 80
#define OFF_STOP 88
#define OFF_HEAP 128
#define OFF_HEND 136
#define PROC_SIZE 480
#define SLOT 0x500000ull
#define CP 0x600000ull
#define HEAP 0x700000ull
#define HEND (HEAP + 0x8000)
#define CSTACK 0x900000ull

static struct xb_bpf_conf conf(int32_t E_reg, int32_t E_alt_reg, uint64_t pm_lo, uint64_t pm_hi)
{
	struct xb_bpf_cfg c = { .proc_size = PROC_SIZE, .off_heap = OFF_HEAP, .off_hend = OFF_HEND,
				.off_stop = OFF_STOP, .off_htop = OFF_HTOP, .ustack_max = 16384,
				.estack_max = 16384, .estack_margin = 2048, .pm_lo = pm_lo, .pm_hi = pm_hi,
				.E_reg = E_reg, .E_alt_reg = E_alt_reg };
	struct xb_bpf_conf k;
	if (xb_bpf_make_conf(&c, 0, &k) < 0)
		memset(&k, 0, sizeof(k));
	return k;
}

/* A VM process at CP with its heap [HEAP, HEND), the slot naming it. */
static void vm_memory(struct fakemem *m, uint64_t htop, uint64_t stop)
{
	memset(m, 0, sizeof(*m));
	nwords = 0;
	add_range(m, SLOT, SLOT + 8);
	add_range(m, CP, CP + PROC_SIZE);
	add_range(m, HEAP, HEND);
	add_range(m, CSTACK, CSTACK + 0x10000);
	plant(SLOT, CP);
	plant(CP + OFF_HEAP, HEAP);
	plant(CP + OFF_HEND, HEND);
	plant(CP + OFF_HTOP, htop);
	plant(CP + OFF_STOP, stop);
}

/* perf's copy of the user stack: SIZE bytes from rsp. */
static uint8_t ustack_copy[65536];
static void sample_at(struct xb_sample *s, uint64_t ip, uint64_t rsp, size_t size)
{
	memset(s, 0, sizeof(*s));
	s->tid = 42;
	s->cpu = 1;
	s->time_ns = 123456789;
	s->user = 1;
	s->ip = ip;
	s->regs[XB_PREG_IP] = ip;
	s->regs[XB_PREG_SP] = rsp;
	for (size_t i = 0; i < size; i++)
		ustack_copy[i] = byte_at(rsp + i);
	s->stack = ustack_copy;
	s->stack_size = size;
}

static uint8_t rec[256 * 1024];

/* Is every byte of region R of the parsed sample what memory holds? */
static int region_true(const struct xb_region *r, uint64_t skip_lo, uint64_t skip_hi)
{
	for (uint64_t i = 0; i < r->len; i++) {
		uint64_t a = r->addr + i;
		if (a >= skip_lo && a < skip_hi)
			continue; /* a planted word */
		if (r->data[i] != byte_at(a))
			return 0;
	}
	return 1;
}

static const struct xb_bpf_rec *hdr(void)
{
	return (const struct xb_bpf_rec *)(const void *)rec;
}

static void t_prompt_jit_erlang_code(void)
{
	/* JIT running Erlang code: rsp in the heap; [rsp, hend) is the
	 * stack, partly in perf's copy, the rest read now. */
	struct fakemem m;
	uint64_t rsp = HEND - 0x3000;
	vm_memory(&m, HEAP + 0x1000, rsp);
	struct xb_bpf_conf k = conf(-1, XB_PREG_BP, 0, 0);
	struct xb_sample s, out;
	sample_at(&s, 0x7f0000001000ull, rsp, 0x1000); /* perf copied 4 KiB of 12 */
	size_t len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0, "no record");
	const struct xb_bpf_rec *h = hdr();
	CHECK(h->flags & XB_BPF_F_RSP_IN_HEAP, "flags 0x%x", h->flags);
	CHECK(h->c_p == CP && h->heap == HEAP && h->hend == HEND, "process fields");
	CHECK(h->ustack_len == 0x3000 && h->estack_len == 0, "ustack %u estack %u", h->ustack_len, h->estack_len);
	CHECK(xb_bpf_parse(rec, len, &out) == 0, "record does not parse");
	CHECK(out.tid == 42 && out.cpu == 1 && out.time_ns == 123456789 && out.ip == s.ip, "header");
	CHECK(out.nregions == 3, "%u regions", out.nregions);
	CHECK(out.regions[0].addr == rsp && out.regions[0].len == 0x3000 && region_true(&out.regions[0], 0, 0),
	      "the stack, perf's part and the part read");
	CHECK(out.regions[1].addr == SLOT && out.regions[2].addr == CP && out.regions[2].len == PROC_SIZE,
	      "slot and process");
}

static void t_prompt_jit_c_code(void)
{
	/* C code called from JIT code: rsp on the C stack (perf's copy is
	 * it); E is rbp when it lies below c_p->stop (stale); all of
	 * [htop, hend) fits the tail, so that is what is copied. */
	struct fakemem m;
	uint64_t htop = HEND - 0x2000, stop = HEND - 0x100, rbp = HEND - 0x400;
	vm_memory(&m, htop, stop);
	struct xb_bpf_conf k = conf(-1, XB_PREG_BP, 0, 0);
	struct xb_sample s, out;
	sample_at(&s, 0x555500001000ull, CSTACK + 0x100, 0x2000);
	s.regs[XB_PREG_BP] = rbp;
	size_t len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && xb_bpf_parse(rec, len, &out) == 0, "no record");
	const struct xb_bpf_rec *h = hdr();
	CHECK((h->flags & XB_BPF_F_E_FROM_ALT) && (h->flags & XB_BPF_F_TAIL_FROM_HTOP) &&
		      !(h->flags & XB_BPF_F_RSP_IN_HEAP),
	      "flags 0x%x", h->flags);
	CHECK(h->E == rbp && h->ustack_len == 0x2000, "E %llx ustack %u", (unsigned long long)h->E, h->ustack_len);
	CHECK(h->estack_addr == htop && h->estack_len == HEND - htop, "tail [%llx +%u)",
	      (unsigned long long)h->estack_addr, h->estack_len);
	CHECK(out.nregions == 4 && region_true(&out.regions[3], CP, CP) && out.regions[3].addr == htop,
	      "the tail is memory");
	CHECK(region_true(&out.regions[0], 0, 0), "the user stack is perf's copy");
}

static void t_prompt_dirty_scheduler(void)
{
	/* The same registers on a dirty scheduler (XB_BPF_SLOT_DIRTY): rbp
	 * is the C code's (a heap pointer during a dirty collection), never
	 * E; c_p->stop is exact there, and the record's slot is the address. */
	struct fakemem m;
	uint64_t htop = HEND - 0x2000, stop = HEND - 0x100, rbp = HEND - 0x400;
	vm_memory(&m, htop, stop);
	struct xb_bpf_conf k = conf(-1, XB_PREG_BP, 0, 0);
	struct xb_sample s, out;
	sample_at(&s, 0x555500001000ull, CSTACK + 0x100, 0x2000);
	s.regs[XB_PREG_BP] = rbp;
	size_t len = xb_prompt_capture(&k, &s, SLOT | XB_BPF_SLOT_DIRTY, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && xb_bpf_parse(rec, len, &out) == 0, "no record");
	const struct xb_bpf_rec *h = hdr();
	CHECK((h->flags & XB_BPF_F_E_FROM_STOP) && !(h->flags & XB_BPF_F_E_FROM_ALT), "flags 0x%x", h->flags);
	CHECK(h->E == stop && h->slot == SLOT && h->c_p != 0, "E %llx slot %llx", (unsigned long long)h->E,
	      (unsigned long long)h->slot);
}

static void t_prompt_interpreter(void)
{
	/* The interpreter: ip in process_main, E in its register: exact,
	 * and the tail starts 2 KiB below it (htop not used). */
	struct fakemem m;
	uint64_t E = HEND - 0x200;
	vm_memory(&m, HEAP + 0x100, HEND - 0x1000);
	struct xb_bpf_conf k = conf(XB_PREG_R15, XB_PREG_R15, 0x400000, 0x480000);
	struct xb_sample s, out;
	sample_at(&s, 0x401000, CSTACK, 0x800);
	s.regs[XB_PREG_R15] = E;
	size_t len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && xb_bpf_parse(rec, len, &out) == 0, "no record");
	const struct xb_bpf_rec *h = hdr();
	CHECK((h->flags & XB_BPF_F_E_FROM_REG) && !(h->flags & XB_BPF_F_TAIL_FROM_HTOP), "flags 0x%x", h->flags);
	CHECK(h->E == E && h->estack_addr == E - 2048 && h->estack_len == HEND - (E - 2048), "tail");
	/* outside process_main the register is not E: c_p->stop is */
	sample_at(&s, 0x501000, CSTACK, 0x800);
	s.regs[XB_PREG_R15] = HEND + 0x10000;
	len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_E_FROM_STOP) && hdr()->E == HEND - 0x1000, "E from stop: 0x%x",
	      hdr()->flags);
}

static void t_prompt_gc_moving_the_stack(void)
{
	/* c_p->stop outside [heap, hend]: a GC copies the stack to the new
	 * heap; the copy starts at stop. */
	struct fakemem m;
	uint64_t newstop = 0xA00000ull + 0x800;
	vm_memory(&m, HEAP + 0x100, newstop);
	add_range(&m, 0xA00000ull, 0xA00000ull + 0x4000);
	struct xb_bpf_conf k = conf(-1, XB_PREG_BP, 0, 0);
	struct xb_sample s, out;
	sample_at(&s, 0x555500001000ull, CSTACK, 0x800);
	size_t len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && xb_bpf_parse(rec, len, &out) == 0, "no record");
	CHECK((hdr()->flags & XB_BPF_F_STOP_MOVED) && hdr()->estack_addr == newstop &&
		      hdr()->estack_len == 0x4000 - 0x800,
	      "flags 0x%x tail [%llx +%u)", hdr()->flags, (unsigned long long)hdr()->estack_addr, hdr()->estack_len);
}

static void t_prompt_faults(void)
{
	struct fakemem m;
	struct xb_bpf_conf k = conf(-1, XB_PREG_BP, 0, 0);
	struct xb_sample s, out;
	/* the slot cannot be read: registers and user stack only */
	vm_memory(&m, HEND - 0x2000, HEND - 0x100);
	drop_page(&m, SLOT);
	sample_at(&s, 0x555500001000ull, CSTACK, 0x800);
	size_t len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_SLOT_FAULT) && hdr()->faults == 1 && hdr()->proc_len == 0,
	      "slot fault: 0x%x", hdr()->flags);
	CHECK(xb_bpf_parse(rec, len, &out) == 0 && out.nregions == 1, "slot fault record");
	/* the process cannot be read */
	vm_memory(&m, HEND - 0x2000, HEND - 0x100);
	drop_page(&m, CP);
	len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_PROC_FAULT) && hdr()->estack_len == 0, "process fault");
	CHECK(xb_bpf_parse(rec, len, &out) == 0 && out.nregions == 2, "process fault record");
	/* a page below E that cannot be read (never touched): the tail
	 * starts after it; one above E: the tail ends there */
	uint64_t stop = HEND - 0xE00; /* E: 0x200 into the last page; the
					* margin reaches into the page before */
	vm_memory(&m, HEAP + 0x100, stop);
	drop_page(&m, stop - 0x1000);
	sample_at(&s, 0x555500001000ull, CSTACK, 0x800);
	len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_MARGIN_FAULT) && !(hdr()->flags & XB_BPF_F_ESTACK_CUT) &&
		      hdr()->estack_addr == (stop & ~4095ull) && hdr()->estack_addr + hdr()->estack_len == HEND,
	      "margin fault: 0x%x tail [%llx +%u)", hdr()->flags, (unsigned long long)hdr()->estack_addr,
	      hdr()->estack_len);
	stop = HEND - 0x2E00;
	vm_memory(&m, HEAP + 0x100, stop);
	drop_page(&m, HEND - 1);
	len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_ESTACK_CUT) && hdr()->faults == 1 &&
		      hdr()->estack_addr + hdr()->estack_len == (HEND - 1) / 4096 * 4096,
	      "cut: 0x%x", hdr()->flags);
	CHECK(xb_bpf_parse(rec, len, &out) == 0, "cut record");
	/* no room for the largest record: nothing written */
	CHECK(xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, xb_prompt_record_max(&k) - 1) == 0,
	      "a buffer too small was written");
	/* no slot (not a scheduler): registers and stack */
	len = xb_prompt_capture(&k, &s, 0, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_NO_THREAD) && xb_bpf_parse(rec, len, &out) == 0 &&
		      out.nregions == 1,
	      "no slot");
	/* kernel registers: nothing else */
	s.user = 0;
	len = xb_prompt_capture(&k, &s, SLOT, planted_read, &m, rec, sizeof(rec));
	CHECK(len > 0 && (hdr()->flags & XB_BPF_F_KERNEL_REGS) && xb_bpf_parse(rec, len, &out) == 0 && !out.user,
	      "kernel registers");
}

void prompt_cases(void)
{
	run_case("prompt_jit_erlang_code", t_prompt_jit_erlang_code);
	run_case("prompt_jit_c_code", t_prompt_jit_c_code);
	run_case("prompt_dirty_scheduler", t_prompt_dirty_scheduler);
	run_case("prompt_interpreter", t_prompt_interpreter);
	run_case("prompt_gc_moving_the_stack", t_prompt_gc_moving_the_stack);
	run_case("prompt_faults", t_prompt_faults);
}

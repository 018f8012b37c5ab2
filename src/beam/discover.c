/* discover.c - find the VM's globals when the binary does not name them.
 *
 * OTP 29 exports only its public API (enif_*, driver_*, erl_*), and a
 * distribution's beam.smp is stripped of .symtab, so __jit_debug_descriptor,
 * erts_atom_table and the scheduler data arrays have no name we can look
 * up.  They are found here by their contents instead, in the beam's own
 * writable data (.data/.bss): each candidate must pass checks that a
 * random word cannot (a JIT registration chain that ends in the emulator
 * record; an atom table whose atoms 0 and 1 are 'false' and 'true'; a
 * scheduler array numbered 1..N).  A global that fails stays unknown: the
 * features that need it say so, nothing guesses. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/term.h"
#include "xb/vm.h"
#include "xb/x86.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DATA (64u << 20)         /* one writable mapping of the beam */
#define MAX_DATA_TOTAL (256u << 20)  /* all of them */
/* Reads of the target one discovery may make: candidates are checked by
 * following pointers, and a hostile (or corrupt) data segment must not
 * turn that into minutes of reads.  A real OTP 29 beam needs ~10,000. */
#define MAX_DISCOVERY_READS 500000u
#define MAX_JIT_CHAIN 100000         /* links followed per candidate descriptor */

static uint64_t reads_at_start;

static bool out_of_effort(struct xb_vm *vm)
{
	return xb_interrupted || vm->mem.reads - reads_at_start > MAX_DISCOVERY_READS;
}

struct region {
	uint64_t start;
	uint8_t *buf;
	size_t len;
};

/* The beam's writable mappings, and the anonymous one right after them
 * (.bss beyond the file). */
static size_t data_regions(struct xb_vm *vm, struct region *out, size_t max)
{
	size_t n = 0, total = 0;
	const struct xb_maps *m = &vm->mem.maps;
	for (size_t i = 0; i < m->n && n < max; i++) {
		const struct xb_map *mp = &m->v[i];
		bool beam = strcmp(mp->path, vm->exe) == 0;
		bool bss = !beam && mp->path[0] == 0 && i > 0 && strcmp(m->v[i - 1].path, vm->exe) == 0 &&
			   m->v[i - 1].end == mp->start;
		if (!mp->readable || !mp->writable || (!beam && !bss))
			continue;
		size_t len = (size_t)(mp->end - mp->start);
		if (len > MAX_DATA || total + len > MAX_DATA_TOTAL)
			continue;
		total += len;
		uint8_t *buf = malloc(len);
		if (!buf || xb_read(&vm->mem, mp->start, buf, len) < 0) {
			free(buf);
			continue;
		}
		out[n++] = (struct region){ mp->start, buf, len };
	}
	return n;
}

/* Field F (N bytes) of a candidate struct lies inside the ROOM bytes
 * read (a table's offset may be missing: -1, or absurd). */
static bool fits(const int64_t *o, enum xb_field f, size_t n, size_t room)
{
	return o[f] >= 0 && (uint64_t)o[f] + n <= room;
}

size_t xb_vm_data_regions(struct xb_vm *vm, struct xb_vm_data_region *out, size_t max)
{
	struct region r[16];
	size_t n = data_regions(vm, r, max < 16 ? max : 16);
	for (size_t i = 0; i < n; i++)
		out[i] = (struct xb_vm_data_region){ r[i].start, r[i].buf, r[i].len };
	return n;
}

void xb_vm_data_regions_free(struct xb_vm_data_region *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].buf);
}

static bool is_ptr(struct xb_vm *vm, uint64_t p)
{
	return p && p % 8 == 0 && xb_remote_readable(&vm->mem, p, 8);
}

/* jit_descriptor: version 1, an action, then a chain of jit_code_entry
 * whose symfiles start with a debug_info header (0 = emulator, 1 = module),
 * one of them the emulator record. */
static bool jit_desc_ok(struct xb_vm *vm, const uint8_t *at, size_t room)
{
	const int64_t *o = vm->off;
	uint32_t version, action;
	uint64_t first;
	if (room < 32 || !fits(o, XB_F_JITDESC_FIRST_ENTRY, 8, room) || !fits(o, XB_F_JITDESC_VERSION, 4, room) ||
	    o[XB_F_JITENTRY_NEXT] < 0 || o[XB_F_JITENTRY_SYMFILE_ADDR] < 0 || o[XB_F_JITENTRY_SYMFILE_SIZE] < 0)
		return false;
	memcpy(&version, at + o[XB_F_JITDESC_VERSION], 4);
	memcpy(&action, at + 4, 4);
	memcpy(&first, at + o[XB_F_JITDESC_FIRST_ENTRY], 8);
	if (version != 1 || action > 3 || !is_ptr(vm, first))
		return false;
	uint64_t e = first;
	struct xb_cycle cyc;
	xb_cycle_init(&cyc, first);
	bool emulator = false;
	for (int k = 0; e && k < MAX_JIT_CHAIN; k++) {
		if ((k && xb_cycle_seen(&cyc, e)) || out_of_effort(vm))
			return false; /* a loop is no registration chain */
		uint64_t next, sym, size;
		uint32_t header;
		if (xb_read_u64(&vm->mem, e + (uint64_t)o[XB_F_JITENTRY_NEXT], &next) < 0 ||
		    xb_read_u64(&vm->mem, e + (uint64_t)o[XB_F_JITENTRY_SYMFILE_ADDR], &sym) < 0 ||
		    xb_read_u64(&vm->mem, e + (uint64_t)o[XB_F_JITENTRY_SYMFILE_SIZE], &size) < 0 ||
		    size < 8 || size > (64u << 20) || xb_read_u32(&vm->mem, sym, &header) < 0 ||
		    header > 1)
			return false;
		emulator |= header == 0;
		e = next;
	}
	/* beamasm_init_late_gdb registers the emulator record once, after
	 * the preloaded modules: exactly where in the chain varies. */
	return emulator && e == 0;
}

/* IndexTable whose atoms 0 and 1 are 'false' and 'true' (atom.names). */
static bool atom_table_ok(struct xb_vm *vm, uint64_t base, const uint8_t *at, size_t room)
{
	const int64_t *o = vm->off;
	int32_t entries;
	uint64_t seg;
	if (!fits(o, XB_F_INDEXTAB_SEG_TABLE, 8, room) || !fits(o, XB_F_INDEXTAB_ENTRIES, 4, room))
		return false;
	memcpy(&entries, at + o[XB_F_INDEXTAB_ENTRIES], 4);
	memcpy(&seg, at + o[XB_F_INDEXTAB_SEG_TABLE], 8);
	if (entries < 256 || entries > (1 << 26) || !is_ptr(vm, seg))
		return false;
	uint64_t saved = vm->sym.atom_table;
	vm->sym.atom_table = base;
	char t0[16], t1[16];
	size_t l0, l1;
	bool ok = xb_vm_atom_raw(vm, 0x0b /* atom 0 */, t0, sizeof(t0), &l0) == 0 &&
		  xb_vm_atom_raw(vm, (1 << 6) | 0x0b, t1, sizeof(t1), &l1) == 0 &&
		  strcmp(t0, "false") == 0 && strcmp(t1, "true") == 0;
	vm->sym.atom_table = saved;
	return ok;
}

/* ErtsPTab (erl_ptab.h) of processes: a slot array whose live entries
 * are processes, the first of them init, <0.0.0>.  (The port table has
 * the same type; its ids are port terms, not pids.) */
static bool proc_tab_ok(struct xb_vm *vm, const uint8_t *at, size_t room)
{
	const int64_t *o = vm->off;
	uint64_t tab, invalid;
	uint32_t max;
	if (!fits(o, XB_F_PTAB_INVALID_ELEMENT, 8, room) || !fits(o, XB_F_PTAB_MAX, 4, room) ||
	    !fits(o, XB_F_PTAB_TAB, 8, room) || o[XB_F_PROC_ID] < 0)
		return false;
	memcpy(&tab, at + o[XB_F_PTAB_TAB], 8);
	memcpy(&max, at + o[XB_F_PTAB_MAX], 4);
	memcpy(&invalid, at + o[XB_F_PTAB_INVALID_ELEMENT], 8);
	if (max < 1024 || max > (1u << 27) || !is_ptr(vm, tab) || !is_ptr(vm, invalid))
		return false;
	uint64_t slots[64];
	if (xb_read(&vm->mem, tab, slots, sizeof(slots)) < 0)
		return false;
	for (int i = 0; i < 64; i++) {
		uint64_t id;
		if (!slots[i] || slots[i] == invalid)
			continue;
		if (xb_read_u64(&vm->mem, slots[i] + (uint64_t)o[XB_F_PROC_ID], &id) < 0 || !xb_is_pid(id))
			return false;
		/* <0.0.0>: number and serial 0 */
		return (id >> 4) == 0;
	}
	return false;
}

/* A pointer to an array of N scheduler data entries numbered 1..N (dirty
 * ones: or all 0) of the given ErtsSchedType (erl_process.h: NORMAL 0,
 * DIRTY_CPU 1, DIRTY_IO 2). */
static bool sched_array_ok(struct xb_vm *vm, uint64_t p, int n, uint32_t type)
{
	const int64_t *o = vm->off;
	if (n < 1 || !is_ptr(vm, p) || p % 64 || o[XB_F_SCHED_STRIDE] <= 0 || o[XB_F_SCHED_NO] < 0 ||
	    o[XB_F_SCHED_TYPE] < 0)
		return false;
	for (int i = 0; i < n && i < 4; i++) {
		uint64_t e = p + (uint64_t)i * (uint64_t)o[XB_F_SCHED_STRIDE];
		uint64_t no;
		uint32_t ty;
		if (xb_read_u64(&vm->mem, e + (uint64_t)o[XB_F_SCHED_NO], &no) < 0 ||
		    xb_read_u32(&vm->mem, e + (uint64_t)o[XB_F_SCHED_TYPE], &ty) < 0)
			return false;
		/* Dirty schedulers number themselves in dirty_no since OTP 26 or
		 * so, leaving no at 0 (seen in OTP 29). */
		if ((no != (uint64_t)i + 1 && !(type != 0 && no == 0)) || ty != type)
			return false;
	}
	return true;
}

void xb_vm_discover(struct xb_vm *vm, int nsched, int ndirty_cpu, int ndirty_io)
{
	struct xb_vm_syms *s = &vm->sym;
	bool want_jit = vm->flavor == XB_FLAVOR_JIT && !s->jit_desc && vm->off[XB_F_JITDESC_FIRST_ENTRY] >= 0;
	bool want_atoms = !s->atom_table && vm->off[XB_F_INDEXTAB_SEG_TABLE] >= 0;
	bool want_sched = !s->sched_data_ptr && nsched > 0 && vm->off[XB_F_SCHED_STRIDE] > 0;
	bool want_dcpu = !s->dirty_cpu_data_ptr && ndirty_cpu > 0 && vm->off[XB_F_SCHED_STRIDE] > 0;
	bool want_dio = !s->dirty_io_data_ptr && ndirty_io > 0 && vm->off[XB_F_SCHED_STRIDE] > 0;
	bool want_ptab = !s->proc_tab && vm->off[XB_F_PTAB_TAB] >= 0 && vm->off[XB_F_PTAB_INVALID_ELEMENT] >= 0;
	if (!want_jit && !want_atoms && !want_sched && !want_dcpu && !want_dio && !want_ptab)
		return;
	reads_at_start = vm->mem.reads;
	struct region r[16];
	size_t nr = data_regions(vm, r, 16);
	bool gave_up = false;
	for (size_t k = 0; k < nr && !gave_up; k++) {
		for (size_t off = 0; off + 8 <= r[k].len; off += 8) {
			if ((off & 4095) == 0 && out_of_effort(vm)) {
				gave_up = true;
				if (!xb_interrupted)
					xb_overrun(XB_OVR_DISCOVERY, "discovery stopped after %llu reads",
						   (unsigned long long)(vm->mem.reads - reads_at_start));
				break;
			}
			const uint8_t *at = r[k].buf + off;
			size_t room = r[k].len - off;
			uint64_t addr = r[k].start + off, w;
			memcpy(&w, at, 8);
			if (want_jit && (w & 0xffffffff) == 1 && jit_desc_ok(vm, at, room)) {
				s->jit_desc = addr;
				s->jit_desc_how = "discovered";
				want_jit = false;
			}
			if (want_atoms && off >= (size_t)vm->off[XB_F_INDEXTAB_SEG_TABLE]) {
				size_t b = off - (size_t)vm->off[XB_F_INDEXTAB_SEG_TABLE];
				if (is_ptr(vm, w) && atom_table_ok(vm, r[k].start + b, r[k].buf + b, r[k].len - b)) {
					s->atom_table = r[k].start + b;
					want_atoms = false;
				}
			}
			if (want_ptab && off >= (size_t)vm->off[XB_F_PTAB_TAB] && is_ptr(vm, w)) {
				size_t b = off - (size_t)vm->off[XB_F_PTAB_TAB];
				if (proc_tab_ok(vm, r[k].buf + b, r[k].len - b)) {
					s->proc_tab = r[k].start + b;
					want_ptab = false;
				}
			}
			if ((want_sched || want_dcpu || want_dio) && w % 64 == 0 && w) {
				if (want_sched && sched_array_ok(vm, w, nsched, 0)) {
					s->sched_data_ptr = addr;
					want_sched = false;
				} else if (want_dcpu && sched_array_ok(vm, w, ndirty_cpu, 1)) {
					s->dirty_cpu_data_ptr = addr;
					want_dcpu = false;
				} else if (want_dio && sched_array_ok(vm, w, ndirty_io, 2)) {
					s->dirty_io_data_ptr = addr;
					want_dio = false;
				}
			}
		}
	}
	if (s->sched_data_ptr && !s->no_schedulers)
		vm->sched_count = (uint64_t)nsched; /* erts_no_schedulers is unnamed too */
	for (size_t k = 0; k < nr; k++)
		free(r[k].buf);
}

/* ---- beam_ranges.c's static `r`, found through the code that uses it ---- */

bool xb_vm_ranges_plausible(struct xb_vm *vm, uint64_t addr)
{
	int64_t rsz = xb_off(vm, XB_F_RANGES_SIZE), rmod = xb_off(vm, XB_F_RANGES_MODULES),
		rn = xb_off(vm, XB_F_RANGES_N), esz = xb_off(vm, XB_F_RANGE_SIZE),
		est = xb_off(vm, XB_F_RANGE_START), een = xb_off(vm, XB_F_RANGE_END);
	if (rsz <= 0 || rmod < 0 || rn < 0 || esz <= 0 || est < 0 || een < 0 || addr % 8)
		return false;
	uint32_t active = 0;
	if (vm->sym.active_code_ix &&
	    (xb_read_u32(&vm->mem, vm->sym.active_code_ix, &active) < 0 ||
	     active >= (uint32_t)vm->num_code_ix))
		return false;
	/* The active code index's ranges must hold; a staging index is
	 * rewritten while a module loads (beam_ranges.c
	 * erts_start_staging_ranges): what it holds then proves nothing,
	 * either way. */
	int good = 0;
	for (int i = 0; i < vm->num_code_ix; i++) {
		bool must = !vm->sym.active_code_ix || (uint32_t)i == active;
		uint64_t base = addr + (uint64_t)(i * rsz), mods, n, allocated;
		if (xb_read_u64(&vm->mem, base + (uint64_t)rmod, &mods) < 0 ||
		    xb_read_u64(&vm->mem, base + (uint64_t)rn, &n) < 0 ||
		    xb_read_u64(&vm->mem, base + (uint64_t)rn + 8, &allocated) < 0)
			return false;
		/* every index's allocation is plausible, staging or not; n
		 * within it only for the active one (a load rewrites the
		 * staging index's modules, allocated and n one by one) */
		if (allocated > (1u << 20) || (must && (n > allocated || (n && !mods))))
			return false;
		if (n > allocated || (n && !mods))
			continue;
		if (n == 0)
			continue;
		uint64_t prev_end = 0;
		bool sorted = true;
		for (uint64_t k = 0; sorted && k < n && k < 16; k++) {
			uint64_t s, e;
			uint64_t ea = mods + k * (uint64_t)esz;
			if (xb_read_u64(&vm->mem, ea + (uint64_t)est, &s) < 0 ||
			    xb_read_u64(&vm->mem, ea + (uint64_t)een, &e) < 0 || s > e || s < prev_end || (s % 4))
				sorted = false;
			prev_end = e;
		}
		if (!sorted && must)
			return false;
		good += sorted && must;
	}
	return good > 0;
}

/* Scan machine code for RIP-relative memory operands (ModRM mod=00,
 * rm=101) of common instructions and return their targets. */
uint64_t xb_vm_find_ranges_by_refs(struct xb_vm *vm)
{
	const char *list = vm->rel ? vm->rel->sym_ranges_refs
				   : "erts_start_staging_ranges,erts_end_staging_ranges,"
				     "erts_update_ranges,erts_lookup_function_info,erts_init_ranges";
	int64_t rsz = xb_off(vm, XB_F_RANGES_SIZE);
	if (rsz <= 0)
		return 0;
	/* Pass 0 trusts only operands that point at r itself (lea r / mov
	 * r.modules); pass 1 also allows r[k].field, for code that the
	 * compiler specialised to one code index. */
	for (int pass = 0; pass < 2; pass++) {
		char names[512];
		snprintf(names, sizeof(names), "%s", list);
		for (char *save, *f = strtok_r(names, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
			uint64_t size = 0, at = xb_symbols_lookup(&vm->syms, vm->beam, f, &size);
			if (!at)
				continue;
			if (size == 0 || size > 4096)
				size = 4096;
			uint8_t code[4096];
			if (xb_read(&vm->mem, at, code, size) < 0)
				continue;
			uint64_t t[256];
			size_t n = xb_x86_rip_targets(code, size, at, t, XB_ARRAY_SIZE(t));
			for (size_t i = 0; i < n; i++) {
				const struct xb_map *m = xb_maps_find(&vm->mem.maps, t[i]);
				if (!m || !m->writable)
					continue;
				if (pass == 0) {
					if (xb_vm_ranges_plausible(vm, t[i]))
						return t[i];
					continue;
				}
				for (int k = 0; k < vm->num_code_ix; k++)
					for (int64_t fo = 0; fo < rsz; fo += 8) {
						uint64_t c = t[i] - (uint64_t)(k * rsz) - (uint64_t)fo;
						if (xb_vm_ranges_plausible(vm, c))
							return c;
					}
			}
		}
	}
	return 0;
}

/* codemap.c - the sorted address -> name map and its JIT and interpreter
 * readers. */
#define _GNU_SOURCE
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/ivset.h"
#include "xb/term.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SYMFILE (64u << 20)       /* one module's symfile (its names and line records) */
#define MAX_MODULE_BYTES (64u << 20)  /* one interpreter module's code */
#define MAX_FUNCTIONS (1u << 20)      /* beam_code.h num_functions of one module */

static const char PROLOGUE[] = "-CodeInfoPrologue";

int xb_codemap_add(struct xb_codemap *cm, uint64_t start, uint64_t end, const char *name,
		   size_t namelen, uint32_t seq)
{
	if (end <= start)
		return 0; /* empty ranges name nothing */
	if (cm->full && !cm->essential)
		return 0;
	if (!cm->full &&
	    (cm->n >= XB_CODEMAP_MAX_ENTRIES || cm->name_bytes + namelen + 1 > XB_CODEMAP_MAX_NAME_BYTES)) {
		cm->full = true;
		if (cm->n >= XB_CODEMAP_MAX_ENTRIES)
			xb_overrun(XB_OVR_CODEMAP_ENTRIES, "the code map stopped at %zu entries", cm->n);
		else
			xb_overrun(XB_OVR_CODEMAP_BYTES, "the code map stopped at %zu bytes of names",
				   cm->name_bytes);
		return 0;
	}
	if (xb_grow((void **)&cm->v, &cm->cap, cm->n + 1, sizeof(*cm->v)) < 0)
		return -1;
	struct xb_code *c = &cm->v[cm->n];
	c->name = strndup(name, namelen);
	if (!c->name)
		return xb_fail("out of memory");
	cm->name_bytes += strlen(c->name) + 1;
	c->start = start;
	c->end = end;
	c->seq = seq;
	c->user = 0;
	/* "M:F/A" is a function; "M::codeHeader", "global::FRAGMENT" are not. */
	c->kind = strstr(c->name, "::") || !strchr(c->name, '/') ? XB_CODE_OTHER : XB_CODE_FUNCTION;
	cm->n++;
	return 0;
}

static int cmp_start(const void *a, const void *b)
{
	const struct xb_code *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

void xb_codemap_finish(struct xb_codemap *cm)
{
	if (cm->n)
		qsort(cm->v, cm->n, sizeof(*cm->v), cmp_start);
	/* Drop ranges overlapped by a newer registration: a purged module's
	 * memory can be reused, and the JIT never unregisters. */
	size_t k = 0;
	for (size_t i = 0; i < cm->n; i++) {
		struct xb_code cur = cm->v[i];
		bool keep = true;
		while (k > 0 && cm->v[k - 1].end > cur.start) {
			if (cm->v[k - 1].seq <= cur.seq) {
				keep = false;
				break;
			}
			free(cm->v[--k].name);
			cm->dropped++;
		}
		if (keep)
			cm->v[k++] = cur;
		else {
			free(cur.name);
			cm->dropped++;
		}
	}
	cm->n = k;
	cm->code_low = k ? cm->v[0].start : 0;
	cm->code_high = k ? cm->v[k - 1].end : 0;
}

void xb_codemap_free(struct xb_codemap *cm)
{
	for (size_t i = 0; i < cm->n; i++)
		free(cm->v[i].name);
	free(cm->v);
	for (size_t i = 0; i < cm->nlmods; i++)
		xb_linemod_free(&cm->lmods[i]);
	free(cm->lmods);
	memset(cm, 0, sizeof(*cm));
}

const struct xb_code *xb_codemap_find(const struct xb_codemap *cm, uint64_t addr)
{
	size_t lo = 0, hi = cm->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < cm->v[mid].start)
			hi = mid;
		else if (addr >= cm->v[mid].end)
			lo = mid + 1;
		else
			return &cm->v[mid];
	}
	return NULL;
}

const struct xb_code *xb_codemap_find_name(const struct xb_codemap *cm, const char *name)
{
	for (size_t i = 0; i < cm->n; i++)
		if (cm->v[i].kind == XB_CODE_FUNCTION && strcmp(cm->v[i].name, name) == 0)
			return &cm->v[i];
	return NULL;
}

/* ---- JIT: GDB JIT interface symfiles ---- */

static bool get(const uint8_t *buf, size_t len, int64_t at, void *out, size_t n)
{
	if (at < 0 || (uint64_t)at + n > len)
		return false;
	memcpy(out, buf + at, n);
	return true;
}

bool xb_codemap_symfile_layout_ok(const int64_t *off)
{
	/* Every field the parsers read, present and inside a small record
	 * (jit/beam_jit_metadata.cpp: debug_info, emulator_info, module_info,
	 * range_info, line_info are a few dozen bytes each). */
	static const enum xb_field need[] = {
		XB_F_DBGINFO_SIZE, XB_F_DBGINFO_PAYLOAD, XB_F_EMUINFO_FRAME_LAYOUT, XB_F_EMUINFO_NORMAL_EXIT,
		XB_F_MODINFO_BASE_ADDRESS, XB_F_MODINFO_RANGE_COUNT, XB_F_MODINFO_NAME_LENGTH,
		XB_F_RANGEINFO_SIZE, XB_F_RANGEINFO_START, XB_F_RANGEINFO_END, XB_F_RANGEINFO_LINE_COUNT,
		XB_F_RANGEINFO_NAME_LENGTH, XB_F_RANGEINFO_NAME, XB_F_LINEINFO_SIZE, XB_F_LINEINFO_FILE_LENGTH,
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(need); i++)
		if (off[need[i]] < 0 || off[need[i]] > 256)
			return false;
	return off[XB_F_RANGEINFO_SIZE] > 0 && off[XB_F_LINEINFO_SIZE] > 0;
}

int xb_codemap_parse_symfile(struct xb_codemap *cm, const int64_t *off, const uint8_t *buf,
			     size_t len, uint32_t seq, unsigned flags)
{
	uint32_t header;
	int64_t pay = off[XB_F_DBGINFO_PAYLOAD];
	if (!xb_codemap_symfile_layout_ok(off))
		return xb_fail("the release table has no JIT symfile layout");
	if (!get(buf, len, 0, &header, 4))
		return xb_fail("symfile too short");
	if (header == 0) { /* DEBUG_INFO_HEADER_EMULATOR */
		int32_t layout;
		uint64_t ne;
		if (get(buf, len, pay + off[XB_F_EMUINFO_FRAME_LAYOUT], &layout, 4) &&
		    get(buf, len, pay + off[XB_F_EMUINFO_NORMAL_EXIT], &ne, 8)) {
			cm->frame_layout = layout;
			cm->normal_exit = ne;
		}
		return 0;
	}
	if (header != 1) /* DEBUG_INFO_HEADER_MODULE */
		return xb_fail("unknown symfile header %u", header);
	uint64_t base;
	uint32_t nranges;
	uint16_t namelen;
	if (!get(buf, len, pay + off[XB_F_MODINFO_BASE_ADDRESS], &base, 8) ||
	    !get(buf, len, pay + off[XB_F_MODINFO_RANGE_COUNT], &nranges, 4) ||
	    !get(buf, len, pay + off[XB_F_MODINFO_NAME_LENGTH], &namelen, 2))
		return xb_fail("truncated module record");
	int64_t p = off[XB_F_DBGINFO_SIZE] + namelen;
	cm->modules++;
	/* the shared code's record (beam_jit_metadata.cpp: module "global") */
	int64_t mn = pay + off[XB_F_MODINFO_NAME];
	if ((namelen == 6 || namelen == 7) && mn >= 0 && (uint64_t)mn + namelen <= len &&
	    memcmp(buf + mn, "global", 6) == 0 && (namelen == 6 || buf[mn + 6] == 0))
		cm->saw_global = true; /* the length counts the NUL */
	/* A pending "-CodeInfoPrologue" range, to fold into the next one. */
	uint64_t pend_start = 0, pend_end = 0;
	char pend_name[1100];
	size_t pend_len = 0;
	bool pending = false;
	for (uint32_t i = 0; i < nranges && !(cm->full && !cm->essential); i++) {
		uint32_t s, e, nlines;
		uint16_t rnl;
		if (!get(buf, len, p + off[XB_F_RANGEINFO_START], &s, 4) ||
		    !get(buf, len, p + off[XB_F_RANGEINFO_END], &e, 4) ||
		    !get(buf, len, p + off[XB_F_RANGEINFO_LINE_COUNT], &nlines, 4) ||
		    !get(buf, len, p + off[XB_F_RANGEINFO_NAME_LENGTH], &rnl, 2) || rnl == 0 ||
		    (uint64_t)(p + off[XB_F_RANGEINFO_NAME]) + rnl > len)
			return xb_fail("truncated range record");
		const char *name = (const char *)buf + p + off[XB_F_RANGEINFO_NAME];
		size_t nl = strnlen(name, rnl);
		p += off[XB_F_RANGEINFO_SIZE] + rnl;
		for (uint32_t l = 0; l < nlines; l++) { /* skip line records */
			uint16_t fl;
			if (!get(buf, len, p + off[XB_F_LINEINFO_FILE_LENGTH], &fl, 2))
				return xb_fail("truncated line record");
			p += off[XB_F_LINEINFO_SIZE] + fl;
			if ((uint64_t)p > len)
				return xb_fail("truncated line record");
		}
		uint64_t start = base + s, end = base + e;
		if (e < s)
			return xb_fail("range with end before start");
		if (flags & XB_CM_FOLD_PROLOGUE) {
			size_t pl = sizeof(PROLOGUE) - 1;
			if (nl > pl && memcmp(name + nl - pl, PROLOGUE, pl) == 0 &&
			    nl - pl < sizeof(pend_name)) {
				if (pending && xb_codemap_add(cm, pend_start, pend_end, pend_name, pend_len, seq) < 0)
					return -1;
				pending = true;
				pend_start = start;
				pend_end = end;
				pend_len = nl - pl;
				memcpy(pend_name, name, pend_len);
				continue;
			}
			if (pending) {
				pending = false;
				if (pend_end == start && pend_len == nl && memcmp(pend_name, name, nl) == 0)
					start = pend_start;
				else if (xb_codemap_add(cm, pend_start, pend_end, pend_name, pend_len, seq) < 0)
					return -1;
			}
		}
		if (xb_codemap_add(cm, start, end, name, nl, seq) < 0)
			return -1;
	}
	if (pending && xb_codemap_add(cm, pend_start, pend_end, pend_name, pend_len, seq) < 0)
		return -1;
	return 0;
}

static int add_linemod(struct xb_codemap *cm, uint64_t start, uint64_t end, uint64_t src,
		       uint64_t srclen, uint32_t seq)
{
	if (xb_grow((void **)&cm->lmods, &cm->caplmods, cm->nlmods + 1, sizeof(*cm->lmods)) < 0)
		return -1;
	struct xb_linemod *lm = &cm->lmods[cm->nlmods++];
	memset(lm, 0, sizeof(*lm));
	lm->start = start;
	lm->end = end;
	lm->src = src;
	lm->srclen = srclen;
	lm->seq = seq;
	return 0;
}

static int cmp_linemod(const void *a, const void *b)
{
	const struct xb_linemod *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Past the budget, the registrations every sample may need are still
 * read: the emulator record and the shared code ("global::FRAGMENT",
 * global::process_main), registered first and so last in the chain.
 * Their header tells (jit/beam_jit_metadata.cpp: debug_info type 0, or a
 * module record named "global"). */
static bool essential_record(const int64_t *off, const uint8_t *b, size_t len)
{
	uint32_t header;
	uint16_t nl;
	int64_t pay = off[XB_F_DBGINFO_PAYLOAD];
	if (!get(b, len, 0, &header, 4))
		return false;
	if (header == 0)
		return true;
	int64_t name = pay + off[XB_F_MODINFO_NAME];
	/* the name's length counts its NUL (beam_jit_metadata.cpp) */
	return header == 1 && get(b, len, pay + off[XB_F_MODINFO_NAME_LENGTH], &nl, 2) && (nl == 6 || nl == 7) &&
	       name >= 0 && (uint64_t)name + nl <= len && memcmp(b + name, "global", 6) == 0 &&
	       (nl == 6 || b[name + 6] == 0);
}

#define ESSENTIAL_PEEK 64           /* bytes of a symfile read to tell */
#define MAX_ESSENTIAL_ENTRIES 65536 /* what the essentials may add past the budget */
#define MAX_ESSENTIAL_BYTES (16u << 20) /* one essential record read past the budget */
#define MAX_ESSENTIAL_TOTAL (64u << 20) /* all of them (a real VM has two, small) */

/* One jit_code_entry's next_entry, symfile_addr and symfile_size: one
 * read of the span that holds them (the chain is walked at every code
 * map build, one read per registration), three if the layout spreads
 * them out. */
static int read_jit_entry(struct xb_vm *vm, uint64_t entry, uint64_t *next, uint64_t *addr, uint64_t *size)
{
	const int64_t *off = vm->off;
	int64_t o[3] = { off[XB_F_JITENTRY_NEXT], off[XB_F_JITENTRY_SYMFILE_ADDR], off[XB_F_JITENTRY_SYMFILE_SIZE] };
	uint64_t *out[3] = { next, addr, size };
	int64_t lo = o[0], hi = o[0];
	for (int i = 1; i < 3; i++) {
		lo = o[i] < lo ? o[i] : lo;
		hi = o[i] > hi ? o[i] : hi;
	}
	uint8_t b[64];
	if (hi - lo + 8 <= (int64_t)sizeof(b)) {
		if (xb_read(&vm->mem, entry + (uint64_t)lo, b, (size_t)(hi - lo + 8)) < 0)
			return -1;
		for (int i = 0; i < 3; i++)
			memcpy(out[i], b + (o[i] - lo), 8);
		return 0;
	}
	for (int i = 0; i < 3; i++)
		if (xb_read_u64(&vm->mem, entry + (uint64_t)o[i], out[i]) < 0)
			return -1;
	return 0;
}

static int build_jit(struct xb_vm *vm, struct xb_codemap *cm, unsigned flags)
{
	const int64_t *off = vm->off;
	uint64_t desc = vm->sym.jit_desc, entry;
	uint32_t version;
	if (!desc)
		return xb_fail("__jit_debug_descriptor not found in this beam (debug level %s); "
			       "JIT code cannot be named",
			       xb_debug_name(vm->debug));
	if (off[XB_F_JITDESC_VERSION] < 0 || off[XB_F_JITDESC_FIRST_ENTRY] < 0 || off[XB_F_JITENTRY_NEXT] < 0 ||
	    off[XB_F_JITENTRY_SYMFILE_ADDR] < 0 || off[XB_F_JITENTRY_SYMFILE_SIZE] < 0 ||
	    !xb_codemap_symfile_layout_ok(off))
		return xb_fail("the release table has no JIT registration layout");
	if (xb_read_u32(&vm->mem, desc + (uint64_t)off[XB_F_JITDESC_VERSION], &version) < 0 ||
	    xb_read_u64(&vm->mem, desc + (uint64_t)off[XB_F_JITDESC_FIRST_ENTRY], &entry) < 0)
		return -1;
	if (version != 1)
		return xb_fail("GDB JIT descriptor version %u (expected 1)", version);
	cm->stamp[0] = entry;
	uint8_t *buf = NULL;
	size_t bufcap = 0;
	uint32_t seq = 0;
	struct xb_ivset named = { 0 };
	size_t essential_limit = 0;
	uint64_t essential_bytes = 0; /* read past the budget (records that add no entry count too) */
	/* the chain is the VM's memory, and a loop in it (corruption, or a
	 * hostile process) must end the walk */
	struct xb_cycle cyc;
	xb_cycle_init(&cyc, entry);
	for (; entry; seq++) {
		if (xb_interrupted) {
			free(buf);
			xb_ivset_free(&named);
			return xb_fail("interrupted");
		}
		if (seq && xb_cycle_seen(&cyc, entry)) {
			xb_overrun(XB_OVR_JIT_CYCLE, "the JIT registration chain loops after %u entries", seq);
			break;
		}
		if (seq >= XB_CODEMAP_MAX_JIT_CHAIN) {
			xb_overrun(XB_OVR_JIT_CHAIN, "the JIT registration chain has more than %u entries",
				   XB_CODEMAP_MAX_JIT_CHAIN);
			break;
		}
		uint64_t next, addr, size;
		/* The chain itself must be readable; one bad symfile only
		 * costs its own names (counted in cm->dropped). */
		if (read_jit_entry(vm, entry, &next, &addr, &size) < 0)
			goto fail;
		entry = next;
		if (size > MAX_SYMFILE) {
			cm->dropped++;
			continue;
		}
		if (!cm->full && cm->bytes_read + size > XB_CODEMAP_MAX_READ) {
			xb_overrun(XB_OVR_CODEMAP_BYTES, "JIT registrations past %llu bytes not read",
				   (unsigned long long)cm->bytes_read);
			cm->full = true;
			essential_limit = cm->n + MAX_ESSENTIAL_ENTRIES;
		}
		if (cm->full) {
			/* past a budget: only what every sample may need */
			uint8_t peek[ESSENTIAL_PEEK];
			size_t pl = size < sizeof(peek) ? (size_t)size : sizeof(peek);
			if (cm->n >= essential_limit || size > MAX_ESSENTIAL_BYTES ||
			    essential_bytes + size > MAX_ESSENTIAL_TOTAL ||
			    xb_read(&vm->mem, addr, peek, pl) < 0 ||
			    !essential_record(off, peek, pl))
				continue;
			cm->essential = true;
			essential_bytes += size;
		}
		cm->bytes_read += size;
		if (xb_grow((void **)&buf, &bufcap, size ? size : 1, 1) < 0 || xb_read(&vm->mem, addr, buf, size) < 0) {
			cm->dropped++;
			cm->essential = false;
			continue;
		}
		size_t before = cm->n, name_before = cm->name_bytes;
		bool was_full = cm->full;
		int pr = xb_codemap_parse_symfile(cm, off, buf, size, seq, flags);
		cm->essential = false;
		if (!was_full && cm->full)
			essential_limit = cm->n + MAX_ESSENTIAL_ENTRIES;
		if (pr < 0) {
			while (cm->n > before) /* drop what the bad record added */
				free(cm->v[--cm->n].name);
			cm->name_bytes = name_before;
			cm->dropped++;
		} else if (cm->n > before) {
			uint64_t lo = cm->v[before].start, hi = cm->v[before].end;
			for (size_t i = before + 1; i < cm->n; i++) {
				lo = cm->v[i].start < lo ? cm->v[i].start : lo;
				hi = cm->v[i].end > hi ? cm->v[i].end : hi;
			}
			if (xb_ivset_covers(&named, lo, hi)) {
				/* an older load of code whose memory newer
				 * registrations name (the JIT never unregisters):
				 * it costs none of the budget */
				while (cm->n > before)
					free(cm->v[--cm->n].name);
				cm->name_bytes = name_before;
				cm->superseded++;
				continue;
			}
			/* Its lines are read from the symfile again if wanted. */
			if (xb_ivset_add(&named, lo, hi) < 0 || add_linemod(cm, lo, hi, addr, size, seq) < 0)
				goto fail;
		}
	}
	free(buf);
	xb_ivset_free(&named);
	if (xb_interrupted)
		return xb_fail("interrupted"); /* not worth sorting */
	/* the VM's own global, where the binary names it; the emulator
	 * record's copy otherwise */
	uint64_t ne;
	if (vm->sym.normal_exit_ptr && xb_read_u64(&vm->mem, vm->sym.normal_exit_ptr, &ne) == 0)
		cm->normal_exit = ne;
	xb_codemap_finish(cm);
	return 0;
fail:
	free(buf);
	xb_ivset_free(&named);
	return -1;
}

/* ---- interpreter: beam_ranges.c + BeamCodeHeader ---- */

static int ranges_head(struct xb_vm *vm, uint64_t *mods, uint64_t *n, uint32_t *ix)
{
	*ix = 0;
	if (xb_off(vm, XB_F_RANGES_SIZE) <= 0 || xb_off(vm, XB_F_RANGES_MODULES) < 0 || xb_off(vm, XB_F_RANGES_N) < 0)
		return xb_fail("the release table has no module range layout");
	if (vm->sym.active_code_ix && xb_read_u32(&vm->mem, vm->sym.active_code_ix, ix) < 0)
		return -1;
	if (*ix >= (uint32_t)vm->num_code_ix)
		return xb_fail("active code index %u out of range", *ix);
	uint64_t r = vm->sym.ranges + (uint64_t)*ix * (uint64_t)xb_off(vm, XB_F_RANGES_SIZE);
	if (xb_read_u64(&vm->mem, r + (uint64_t)xb_off(vm, XB_F_RANGES_MODULES), mods) < 0 ||
	    xb_read_u64(&vm->mem, r + (uint64_t)xb_off(vm, XB_F_RANGES_N), n) < 0)
		return -1;
	if (*n > (1u << 20))
		return xb_fail("implausible module count %llu", (unsigned long long)*n);
	return 0;
}

/* Are the ErtsCodeMFA fields (code_ix.h) there, within its 24 bytes? */
static bool mfa_layout_ok(const struct xb_vm *vm)
{
	int64_t m = xb_off(vm, XB_F_MFA_MODULE), f = xb_off(vm, XB_F_MFA_FUNCTION), a = xb_off(vm, XB_F_MFA_ARITY);
	return m >= 0 && f >= 0 && a >= 0 && m <= 16 && f <= 16 && a <= 16;
}

static int name_mfa(struct xb_vm *vm, const uint8_t *mfa, char *out, size_t len)
{
	uint64_t m, f, a;
	if (!mfa_layout_ok(vm))
		return xb_fail("the release table has no MFA layout");
	memcpy(&m, mfa + xb_off(vm, XB_F_MFA_MODULE), 8);
	memcpy(&f, mfa + xb_off(vm, XB_F_MFA_FUNCTION), 8);
	memcpy(&a, mfa + xb_off(vm, XB_F_MFA_ARITY), 8);
	const char *ms = xb_vm_atom(vm, m), *fs = xb_vm_atom(vm, f);
	if (!ms || !fs || a > 255)
		return xb_fail("bad MFA");
	snprintf(out, len, "%s:%s/%u", ms, fs, (unsigned)a);
	return 0;
}

int xb_codemap_read_mfa(struct xb_vm *vm, uint64_t addr, char *out, size_t len)
{
	uint8_t mfa[64];
	int64_t hi = 0;
	const enum xb_field fields[] = { XB_F_MFA_MODULE, XB_F_MFA_FUNCTION, XB_F_MFA_ARITY };
	for (size_t i = 0; i < XB_ARRAY_SIZE(fields); i++) {
		int64_t o = xb_off(vm, fields[i]);
		if (o < 0)
			return -1;
		if (o + 8 > hi)
			hi = o + 8;
	}
	if (hi > (int64_t)sizeof(mfa) || xb_read(&vm->mem, addr, mfa, (size_t)hi) < 0)
		return -1;
	return name_mfa(vm, mfa, out, len);
}

static int emu_module(struct xb_vm *vm, struct xb_codemap *cm, uint64_t start, uint64_t end)
{
	int64_t nf_off = xb_off(vm, XB_F_CODEHDR_NUM_FUNCTIONS),
		fn_off = xb_off(vm, XB_F_CODEHDR_FUNCTIONS), mfa_off = xb_off(vm, XB_F_CODEINFO_MFA);
	if (nf_off < 0 || fn_off < 0 || mfa_off < 0 || nf_off > 4096 || fn_off > 4096 || mfa_off > 256 ||
	    !mfa_layout_ok(vm))
		return xb_fail("the release table has no code header layout");
	if (end <= start || end - start > MAX_MODULE_BYTES)
		return xb_fail("implausible module range");
	if (cm->bytes_read + (end - start) > XB_CODEMAP_MAX_READ) {
		xb_overrun(XB_OVR_CODEMAP_BYTES, "modules past %llu bytes of code not read",
			   (unsigned long long)cm->bytes_read);
		cm->full = true;
		return 0;
	}
	cm->bytes_read += end - start;
	size_t size = (size_t)(end - start);
	uint8_t *code = malloc(size);
	if (!code)
		return xb_fail("out of memory");
	int rc = -1;
	if (xb_read(&vm->mem, start, code, size) < 0)
		goto out;
	uint64_t nf;
	if ((uint64_t)fn_off + 8 > size || (uint64_t)nf_off + 8 > size)
		goto bad;
	memcpy(&nf, code + nf_off, 8);
	if (nf == 0 || nf > MAX_FUNCTIONS || (uint64_t)fn_off + (nf + 1) * 8 > size)
		goto bad;
	uint64_t prev;
	memcpy(&prev, code + fn_off, 8);
	if (prev < start + (uint64_t)fn_off || prev > end)
		goto bad;
	char modname[1100] = "";
	for (uint64_t i = 0; i < nf && !cm->full; i++) {
		uint64_t ci, next;
		if (xb_interrupted) {
			xb_fail("interrupted");
			goto out;
		}
		memcpy(&ci, code + fn_off + i * 8, 8);
		memcpy(&next, code + fn_off + (i + 1) * 8, 8);
		if (ci < start || next > end || next <= ci ||
		    ci - start + (uint64_t)mfa_off + 24 > size)
			goto bad;
		char name[2300];
		if (name_mfa(vm, code + (ci - start) + mfa_off, name, sizeof(name)) < 0)
			goto out;
		if (i == 0) {
			size_t ml = strcspn(name, ":");
			/* The atom may contain ':' only quoted; take up to the
			 * separator that precedes the function. */
			if (name[0] == '\'') {
				char *q = strstr(name + 1, "':");
				ml = q ? (size_t)(q - name) + 1 : ml;
			}
			snprintf(modname, sizeof(modname), "%.*s::codeHeader", (int)ml, name);
			if (xb_codemap_add(cm, start, ci, modname, strlen(modname), 0) < 0)
				goto out;
		}
		if (xb_codemap_add(cm, ci, next, name, strlen(name), 0) < 0)
			goto out;
	}
	cm->modules++;
	rc = 0;
	goto out;
bad:
	xb_fail("malformed code header at 0x%llx", (unsigned long long)start);
out:
	free(code);
	return rc;
}

static int build_emu(struct xb_vm *vm, struct xb_codemap *cm)
{
	if (!vm->sym.ranges)
		return xb_fail("cannot find beam_ranges.c's module table (`r`) in this beam "
			       "(debug level %s)", xb_debug_name(vm->debug));
	uint64_t mods, n;
	uint32_t ix;
	if (ranges_head(vm, &mods, &n, &ix) < 0)
		return -1;
	cm->stamp[0] = ix;
	cm->stamp[1] = mods;
	cm->stamp[2] = n;
	if (!vm->atoms.n)
		xb_vm_atoms_prefetch(vm);
	int64_t esz = xb_off(vm, XB_F_RANGE_SIZE);
	if (esz < 16 || esz > 64 || xb_off(vm, XB_F_RANGE_START) < 0 || xb_off(vm, XB_F_RANGE_END) < 0 ||
	    xb_off(vm, XB_F_RANGE_START) + 8 > esz || xb_off(vm, XB_F_RANGE_END) + 8 > esz)
		return xb_fail("the release table has no module range layout");
	uint8_t *tab = malloc(n * (uint64_t)esz + 1);
	if (!tab)
		return xb_fail("out of memory");
	if (xb_read(&vm->mem, mods, tab, n * (uint64_t)esz) < 0) {
		free(tab);
		return -1;
	}
	for (uint64_t k = 0; k < n && !cm->full; k++) {
		uint64_t s, e;
		if (xb_interrupted) {
			free(tab);
			return xb_fail("interrupted");
		}
		memcpy(&s, tab + k * esz + xb_off(vm, XB_F_RANGE_START), 8);
		memcpy(&e, tab + k * esz + xb_off(vm, XB_F_RANGE_END), 8);
		if (s == e)
			continue; /* purged: erts_remove_from_ranges sets end = start */
		if (emu_module(vm, cm, s, e) < 0) {
			if (xb_interrupted) {
				free(tab);
				return xb_fail("interrupted");
			}
			/* A module being loaded or purged right now: skip it. */
			xb_debug("skipping module at 0x%llx: %s\n", (unsigned long long)s, xb_err());
			cm->dropped++;
		} else if (add_linemod(cm, s, e, s, e - s, 0) < 0) {
			free(tab);
			return -1;
		}
	}
	free(tab);
	if (xb_interrupted)
		return xb_fail("interrupted"); /* not worth sorting */
	if (vm->sym.normal_exit_ptr)
		xb_read_u64(&vm->mem, vm->sym.normal_exit_ptr, &cm->normal_exit);
	xb_codemap_finish(cm);
	return 0;
}

int xb_codemap_build(struct xb_vm *vm, struct xb_codemap *cm, unsigned flags)
{
	static uint64_t generation;
	memset(cm, 0, sizeof(*cm));
	cm->gen = ++generation;
	int r = vm->flavor == XB_FLAVOR_JIT ? build_jit(vm, cm, flags) : build_emu(vm, cm);
	if (r == 0 && xb_interrupted)
		r = xb_fail("interrupted");
	if (r == 0 && cm->nlmods)
		qsort(cm->lmods, cm->nlmods, sizeof(*cm->lmods), cmp_linemod);
	if (r < 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", xb_err());
		xb_codemap_free(cm);
		return xb_fail("%s", msg);
	}
	return 0;
}

int xb_codemap_stale(struct xb_vm *vm, const struct xb_codemap *cm)
{
	if (vm->flavor == XB_FLAVOR_JIT) {
		uint64_t first;
		if (xb_read_u64(&vm->mem, vm->sym.jit_desc + (uint64_t)xb_off(vm, XB_F_JITDESC_FIRST_ENTRY),
				&first) < 0)
			return -1;
		return first != cm->stamp[0];
	}
	uint64_t mods, n;
	uint32_t ix;
	if (ranges_head(vm, &mods, &n, &ix) < 0)
		return -1;
	return ix != cm->stamp[0] || mods != cm->stamp[1] || n != cm->stamp[2];
}

/* ---- source lines (--lines) ---- */

#define MAX_LINES (1u << 20)   /* line records of one module (16 MiB) */
#define MAX_FILES 256          /* beam_code.h: LOC_FILE is 8 bits */
#define MAX_FILE_CHARS 1024

void xb_linemod_free(struct xb_linemod *lm)
{
	for (size_t i = 0; i < lm->nfiles; i++)
		free(lm->files[i]);
	free(lm->files);
	free(lm->v);
	lm->files = NULL;
	lm->v = NULL;
	lm->n = lm->nfiles = 0;
}

static int add_file(struct xb_linemod *lm, const char *name, size_t len, uint32_t *idx)
{
	for (size_t i = 0; i < lm->nfiles; i++)
		if (strlen(lm->files[i]) == len && memcmp(lm->files[i], name, len) == 0) {
			*idx = (uint32_t)i;
			return 0;
		}
	if (lm->nfiles >= MAX_FILES)
		return xb_fail("too many source files in one module");
	char **v = realloc(lm->files, (lm->nfiles + 1) * sizeof(*v));
	if (!v)
		return xb_fail("out of memory");
	lm->files = v;
	if (!(v[lm->nfiles] = strndup(name, len)))
		return xb_fail("out of memory");
	*idx = (uint32_t)lm->nfiles++;
	return 0;
}

static int add_line(struct xb_linemod *lm, size_t *cap, uint64_t addr, uint32_t line, uint32_t file)
{
	if (lm->n >= MAX_LINES)
		return xb_fail("too many line records in one module");
	if (xb_grow((void **)&lm->v, cap, lm->n + 1, sizeof(*lm->v)) < 0)
		return -1;
	lm->v[lm->n++] = (struct xb_line){ addr, line, file };
	return 0;
}

/* Sort by address, keeping the order of records at the same address, and
 * keep the last of those: it is the one in force from there on (an empty
 * range [a, a) names nothing in lookup_loc, beam_ranges.c). */
static int cmp_line(const void *a, const void *b)
{
	const struct xb_line *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return 0;
}

struct iline {
	struct xb_line l;
	size_t i;
};

static int cmp_iline(const void *a, const void *b)
{
	const struct iline *x = a, *y = b;
	int c = cmp_line(&x->l, &y->l);
	return c ? c : (x->i > y->i) - (x->i < y->i);
}

static void sort_lines(struct xb_linemod *lm)
{
	bool sorted = true;
	for (size_t i = 1; i < lm->n && sorted; i++)
		sorted = lm->v[i - 1].addr <= lm->v[i].addr;
	if (!sorted) {
		/* the index as tie-breaker keeps the order (qsort is not stable) */
		struct iline *t = malloc(lm->n * sizeof(*t));
		if (!t) {
			lm->n = 0;
			return;
		}
		for (size_t i = 0; i < lm->n; i++)
			t[i] = (struct iline){ lm->v[i], i };
		qsort(t, lm->n, sizeof(*t), cmp_iline);
		for (size_t i = 0; i < lm->n; i++)
			lm->v[i] = t[i].l;
		free(t);
	}
	size_t k = 0;
	for (size_t i = 0; i < lm->n; i++) {
		if (k && lm->v[k - 1].addr == lm->v[i].addr)
			k--;
		lm->v[k++] = lm->v[i];
	}
	lm->n = k;
}

int xb_codemap_parse_symfile_lines(const int64_t *off, const uint8_t *buf, size_t len,
				   struct xb_linemod *lm)
{
	uint32_t header, nranges;
	uint64_t base;
	uint16_t namelen;
	size_t cap = 0;
	int64_t pay = off[XB_F_DBGINFO_PAYLOAD];
	if (off[XB_F_LINEINFO_START] < 0 || off[XB_F_LINEINFO_LINE] < 0 || off[XB_F_LINEINFO_FILE] < 0 ||
	    off[XB_F_LINEINFO_START] > 256 || off[XB_F_LINEINFO_LINE] > 256 || off[XB_F_LINEINFO_FILE] > 256 ||
	    !xb_codemap_symfile_layout_ok(off))
		return xb_fail("this release's table has no JIT line records");
	if (!get(buf, len, 0, &header, 4) || header != 1 ||
	    !get(buf, len, pay + off[XB_F_MODINFO_BASE_ADDRESS], &base, 8) ||
	    !get(buf, len, pay + off[XB_F_MODINFO_RANGE_COUNT], &nranges, 4) ||
	    !get(buf, len, pay + off[XB_F_MODINFO_NAME_LENGTH], &namelen, 2))
		return xb_fail("not a module record");
	int64_t p = off[XB_F_DBGINFO_SIZE] + namelen;
	/* The range before this one, when it is this function's
	 * "-CodeInfoPrologue" (its entry, folded into the function). */
	uint64_t prev_start = 0;
	const char *prev_name = "";
	size_t prev_nl = 0;
	for (uint32_t i = 0; i < nranges; i++) {
		uint32_t nlines, rstart;
		uint16_t rnl;
		if (!get(buf, len, p + off[XB_F_RANGEINFO_START], &rstart, 4) ||
		    !get(buf, len, p + off[XB_F_RANGEINFO_LINE_COUNT], &nlines, 4) ||
		    !get(buf, len, p + off[XB_F_RANGEINFO_NAME_LENGTH], &rnl, 2) ||
		    (uint64_t)(p + off[XB_F_RANGEINFO_NAME]) + rnl > len)
			return xb_fail("truncated range record");
		const char *rname = (const char *)buf + p + off[XB_F_RANGEINFO_NAME];
		size_t rnlen = strnlen(rname, rnl);
		/* A function's first line record is its head's line, bound
		 * before the function (at the end of the previous one, which
		 * lists it too: register_metadata in jit/beam_jit_common.cpp
		 * walks func_tab[i] up to the next function's start).  It
		 * belongs to this function: move it to the function's start, so
		 * that it names code of this function only. */
		uint64_t fstart = base + rstart;
		if (prev_nl == rnlen + sizeof(PROLOGUE) - 1 && memcmp(prev_name, rname, rnlen) == 0 &&
		    memcmp(prev_name + rnlen, PROLOGUE, sizeof(PROLOGUE) - 1) == 0)
			fstart = prev_start;
		prev_start = base + rstart;
		prev_name = rname;
		prev_nl = rnlen;
		p += off[XB_F_RANGEINFO_SIZE] + rnl;
		for (uint32_t l = 0; l < nlines; l++) {
			uint32_t start, line, file;
			uint16_t fl;
			if (!get(buf, len, p + off[XB_F_LINEINFO_START], &start, 4) ||
			    !get(buf, len, p + off[XB_F_LINEINFO_LINE], &line, 4) ||
			    !get(buf, len, p + off[XB_F_LINEINFO_FILE_LENGTH], &fl, 2) ||
			    (uint64_t)(p + off[XB_F_LINEINFO_FILE]) + fl > len)
				return xb_fail("truncated line record");
			const char *fname = (const char *)buf + p + off[XB_F_LINEINFO_FILE];
			size_t fnl = strnlen(fname, fl);
			p += off[XB_F_LINEINFO_SIZE] + fl;
			uint64_t addr = base + start;
			if (l == 0 && addr < fstart) {
				/* ... and the copy listed at the end of the previous
				 * function names no code of it (alignment there)
				 * (sort_lines keeps only the last record of an
				 * address: unnaming that one is enough, and stays
				 * O(1) when a hostile symfile lists one address
				 * again and again) */
				if (lm->n && lm->v[lm->n - 1].addr == addr)
					lm->v[lm->n - 1].line = 0;
				addr = fstart;
			}
			if (addr < lm->start || addr >= lm->end || fnl == 0)
				continue; /* outside the module, or no file: not a location */
			if (add_file(lm, fname, fnl, &file) < 0 || add_line(lm, &cap, addr, line, file) < 0)
				return -1;
		}
	}
	sort_lines(lm);
	return 0;
}

static int jit_lines(struct xb_vm *vm, struct xb_linemod *lm)
{
	if (lm->srclen < 8 || lm->srclen > MAX_SYMFILE)
		return xb_fail("implausible symfile size");
	uint8_t *buf = malloc(lm->srclen);
	if (!buf)
		return xb_fail("out of memory");
	int rc = xb_read(&vm->mem, lm->src, buf, lm->srclen);
	if (rc == 0)
		rc = xb_codemap_parse_symfile_lines(vm->off, buf, lm->srclen, lm);
	free(buf);
	return rc;
}

/* A file name as the loader keeps it: a list of code points on the
 * module's literal heap (beam_file.c parse_line_chunk; erl_term.h cons
 * cells: primary tag 1, CAR and CDR), into UTF-8. */
static int read_charlist(struct xb_vm *vm, uint64_t t, char *out, size_t olen, size_t *outn)
{
	size_t n = 0;
	for (unsigned i = 0; t != XB_NIL; i++) {
		uint64_t cell[2];
		if (i >= MAX_FILE_CHARS || (t & XB_TAG_PRIMARY_MASK) != 1 /* TAG_PRIMARY_LIST */ ||
		    xb_read(&vm->mem, t - 1, cell, sizeof(cell)) < 0 || !xb_is_small(cell[0]))
			return xb_fail("file name is not a string");
		int64_t c = xb_small_value(cell[0]);
		if (c <= 0 || c > 0x10ffff || n + 4 >= olen)
			return xb_fail("file name is not a string");
		if (c < 0x80) {
			out[n++] = (char)c;
		} else if (c < 0x800) {
			out[n++] = (char)(0xc0 | (c >> 6));
			out[n++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			out[n++] = (char)(0xe0 | (c >> 12));
			out[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[n++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[n++] = (char)(0xf0 | (c >> 18));
			out[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[n++] = (char)(0x80 | (c & 0x3f));
		}
		t = cell[1];
	}
	*outn = n;
	return 0;
}

/* The interpreter's line table (emu/emu_load.c lays it out): func_tab[0..
 * num_functions] point into line_items[], one code address per line
 * instruction plus a sentinel; then the file names (fname_ptr[0] is the
 * implicit "module.erl"), then loc_tab: (file << 24 | line), 0 = none. */
static int emu_lines(struct xb_vm *vm, struct xb_linemod *lm)
{
	int64_t o_lt = xb_off(vm, XB_F_CODEHDR_LINE_TABLE), o_nf = xb_off(vm, XB_F_CODEHDR_NUM_FUNCTIONS),
		o_fn = xb_off(vm, XB_F_LINETAB_FNAME_PTR), o_ls = xb_off(vm, XB_F_LINETAB_LOC_SIZE),
		o_lc = xb_off(vm, XB_F_LINETAB_LOC_TAB), o_ft = xb_off(vm, XB_F_LINETAB_FUNC_TAB);
	if (o_lt < 0 || o_nf < 0 || o_fn < 0 || o_ls < 0 || o_lc < 0 || o_ft < 0)
		return xb_fail("this release's table has no line table layout");
	uint64_t hdr = lm->src, nf, lt, fname, loctab, items0, itemsN;
	int32_t locsize;
	if (xb_read_u64(&vm->mem, hdr + (uint64_t)o_nf, &nf) < 0 ||
	    xb_read_u64(&vm->mem, hdr + (uint64_t)o_lt, &lt) < 0)
		return -1;
	if (lt == 0)
		return xb_fail("module compiled without line info");
	if (nf == 0 || nf > MAX_FUNCTIONS)
		return xb_fail("implausible function count");
	if (xb_read_u64(&vm->mem, lt + (uint64_t)o_fn, &fname) < 0 ||
	    xb_read(&vm->mem, lt + (uint64_t)o_ls, &locsize, 4) < 0 ||
	    xb_read_u64(&vm->mem, lt + (uint64_t)o_lc, &loctab) < 0 ||
	    xb_read_u64(&vm->mem, lt + (uint64_t)o_ft, &items0) < 0 ||
	    xb_read_u64(&vm->mem, lt + (uint64_t)o_ft + nf * 8, &itemsN) < 0)
		return -1;
	uint64_t n = (itemsN - items0) / 8, nnames = (loctab - fname) / 8;
	/* The layout emu_load.c writes, checked piece by piece. */
	if (items0 != lt + (uint64_t)o_ft + (nf + 1) * 8 || itemsN < items0 || (itemsN - items0) % 8 ||
	    n > MAX_LINES || fname != items0 + (n + 1) * 8 || loctab < fname || (loctab - fname) % 8 ||
	    nnames == 0 || nnames > MAX_FILES || (locsize != 2 && locsize != 4))
		return xb_fail("malformed line table at 0x%llx", (unsigned long long)lt);
	int rc = -1;
	uint64_t *items = malloc((n ? n : 1) * 8), *names = malloc(nnames * 8);
	uint8_t *locs = malloc((n ? n : 1) * (size_t)locsize);
	uint32_t *fmap = malloc(nnames * sizeof(*fmap));
	size_t cap = 0;
	if (!items || !names || !locs || !fmap) {
		xb_fail("out of memory");
		goto out;
	}
	if ((n && xb_read(&vm->mem, items0, items, n * 8) < 0) ||
	    (n && xb_read(&vm->mem, loctab, locs, n * (size_t)locsize) < 0) ||
	    xb_read(&vm->mem, fname, names, nnames * 8) < 0)
		goto out;
	for (uint64_t i = 0; i < nnames; i++)
		fmap[i] = UINT32_MAX; /* read when a line uses it */
	for (uint64_t i = 0; i < n; i++) {
		uint32_t loc;
		if (locsize == 2) {
			uint16_t l16;
			memcpy(&l16, locs + i * 2, 2);
			loc = l16;
		} else {
			memcpy(&loc, locs + i * 4, 4);
		}
		if (items[i] < lm->start || items[i] >= lm->end || (i && items[i] < items[i - 1])) {
			xb_fail("line table out of order at 0x%llx", (unsigned long long)lt);
			goto out;
		}
		uint32_t file = loc >> 24, line = loc & 0xffffff; /* LOC_FILE, LOC_LINE */
		if (loc == 0 /* LINE_INVALID_LOCATION */ || file >= nnames) {
			line = 0;
			file = 0;
		} else if (fmap[file] == UINT32_MAX) {
			char text[4 * MAX_FILE_CHARS + 8];
			size_t tl = 0;
			if (read_charlist(vm, names[file], text, sizeof(text), &tl) < 0 ||
			    add_file(lm, text, tl, &fmap[file]) < 0)
				goto out;
		}
		if (line)
			file = fmap[file];
		if (add_line(lm, &cap, items[i], line, file) < 0)
			goto out;
	}
	sort_lines(lm);
	rc = 0;
out:
	free(items);
	free(names);
	free(locs);
	free(fmap);
	return rc;
}

static struct xb_linemod *linemod_of(struct xb_codemap *cm, const struct xb_code *c, uint64_t addr)
{
	size_t lo = 0, hi = cm->nlmods;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cm->lmods[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Registrations of purged modules may overlap: the one C came from. */
	for (size_t i = lo; i > 0 && lo - i < 16; i--) {
		struct xb_linemod *lm = &cm->lmods[i - 1];
		if (addr < lm->end && lm->seq == c->seq)
			return lm;
	}
	return NULL;
}

int xb_codemap_line(struct xb_vm *vm, struct xb_codemap *cm, const struct xb_code *c, uint64_t addr,
		    const char **file, uint32_t *line)
{
	if (!c || addr < c->start || addr >= c->end)
		return -1;
	struct xb_linemod *lm = linemod_of(cm, c, addr);
	if (!lm)
		return -1;
	if (lm->state == 0 && cm->line_bytes >= XB_CODEMAP_MAX_LINE_BYTES) {
		xb_overrun(XB_OVR_LINES, "line tables past %zu bytes not read", cm->line_bytes);
		lm->state = -1;
	}
	if (lm->state == 0) {
		int r = vm->flavor == XB_FLAVOR_JIT ? jit_lines(vm, lm) : emu_lines(vm, lm);
		cm->line_bytes += lm->n * sizeof(*lm->v) + lm->nfiles * 64;
		if (r < 0) {
			xb_debug("no lines for the module at 0x%llx: %s\n", (unsigned long long)lm->start,
				 xb_err());
			xb_linemod_free(lm);
		}
		lm->state = r < 0 || lm->n == 0 ? -1 : 1;
	}
	if (lm->state != 1)
		return -1;
	size_t lo = 0, hi = lm->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (lm->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The last record at or below ADDR, and only one inside C itself. */
	if (lo == 0)
		return -1;
	const struct xb_line *l = &lm->v[lo - 1];
	if (l->addr < c->start || l->line == 0)
		return -1;
	*file = lm->files[l->file];
	*line = l->line;
	return 0;
}

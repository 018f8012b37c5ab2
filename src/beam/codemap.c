/* codemap.c - the sorted address -> name map and its JIT and interpreter
 * readers. */
#define _GNU_SOURCE
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/term.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SYMFILE (64u << 20)
#define MAX_SYMFILE_TOTAL (1ull << 30) /* all symfiles of a VM together */
#define MAX_MODULE_BYTES (64u << 20)
#define MAX_JIT_ENTRIES 1000000
#define MAX_FUNCTIONS (1u << 20)

static const char PROLOGUE[] = "-CodeInfoPrologue";

int xb_codemap_add(struct xb_codemap *cm, uint64_t start, uint64_t end, const char *name,
		   size_t namelen, uint32_t seq)
{
	if (end <= start)
		return 0; /* empty ranges name nothing */
	if (xb_grow((void **)&cm->v, &cm->cap, cm->n + 1, sizeof(*cm->v)) < 0)
		return -1;
	struct xb_code *c = &cm->v[cm->n];
	c->name = strndup(name, namelen);
	if (!c->name)
		return xb_fail("out of memory");
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

int xb_perfmap_print(const struct xb_codemap *cm, FILE *f)
{
	for (size_t i = 0; i < cm->n; i++)
		if (fprintf(f, "%llx %llx %s\n", (unsigned long long)cm->v[i].start,
			    (unsigned long long)(cm->v[i].end - cm->v[i].start), cm->v[i].name) < 0)
			return xb_fail("write failed: %m");
	return 0;
}

/* ---- JIT: GDB JIT interface symfiles ---- */

static bool get(const uint8_t *buf, size_t len, int64_t at, void *out, size_t n)
{
	if (at < 0 || (uint64_t)at + n > len)
		return false;
	memcpy(out, buf + at, n);
	return true;
}

int xb_codemap_parse_symfile(struct xb_codemap *cm, const int64_t *off, const uint8_t *buf,
			     size_t len, uint32_t seq, unsigned flags)
{
	uint32_t header;
	int64_t pay = off[XB_F_DBGINFO_PAYLOAD];
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
	/* A pending "-CodeInfoPrologue" range, to fold into the next one. */
	uint64_t pend_start = 0, pend_end = 0;
	char pend_name[1100];
	size_t pend_len = 0;
	bool pending = false;
	for (uint32_t i = 0; i < nranges; i++) {
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

static int build_jit(struct xb_vm *vm, struct xb_codemap *cm, unsigned flags)
{
	const int64_t *off = vm->off;
	uint64_t desc = vm->sym.jit_desc, entry;
	uint32_t version;
	if (!desc)
		return xb_fail("__jit_debug_descriptor not found in this beam (debug level %s); "
			       "JIT code cannot be named",
			       xb_debug_name(vm->debug));
	if (xb_read_u32(&vm->mem, desc + (uint64_t)off[XB_F_JITDESC_VERSION], &version) < 0 ||
	    xb_read_u64(&vm->mem, desc + (uint64_t)off[XB_F_JITDESC_FIRST_ENTRY], &entry) < 0)
		return -1;
	if (version != 1)
		return xb_fail("GDB JIT descriptor version %u (expected 1)", version);
	cm->stamp[0] = entry;
	uint8_t *buf = NULL;
	size_t bufcap = 0;
	uint32_t seq = 0;
	uint64_t total = 0;
	for (; entry && seq < MAX_JIT_ENTRIES; seq++) {
		uint64_t next, addr, size;
		/* The chain itself must be readable; one bad symfile only
		 * costs its own names (counted in cm->dropped). */
		if (xb_read_u64(&vm->mem, entry + (uint64_t)off[XB_F_JITENTRY_NEXT], &next) < 0 ||
		    xb_read_u64(&vm->mem, entry + (uint64_t)off[XB_F_JITENTRY_SYMFILE_ADDR], &addr) < 0 ||
		    xb_read_u64(&vm->mem, entry + (uint64_t)off[XB_F_JITENTRY_SYMFILE_SIZE], &size) < 0)
			goto fail;
		entry = next;
		total += size;
		if (total > MAX_SYMFILE_TOTAL) {
			xb_fail("JIT registrations add up to more than %llu bytes: a corrupt chain?",
				(unsigned long long)MAX_SYMFILE_TOTAL);
			goto fail;
		}
		if (size > MAX_SYMFILE || xb_grow((void **)&buf, &bufcap, size ? size : 1, 1) < 0 ||
		    xb_read(&vm->mem, addr, buf, size) < 0) {
			cm->dropped++;
			continue;
		}
		size_t before = cm->n;
		if (xb_codemap_parse_symfile(cm, off, buf, size, seq, flags) < 0) {
			while (cm->n > before) /* drop what the bad record added */
				free(cm->v[--cm->n].name);
			cm->dropped++;
		}
	}
	free(buf);
	if (!cm->normal_exit && vm->sym.normal_exit_ptr)
		xb_read_u64(&vm->mem, vm->sym.normal_exit_ptr, &cm->normal_exit);
	xb_codemap_finish(cm);
	return 0;
fail:
	free(buf);
	return -1;
}

/* ---- interpreter: beam_ranges.c + BeamCodeHeader ---- */

static int ranges_head(struct xb_vm *vm, uint64_t *mods, uint64_t *n, uint32_t *ix)
{
	*ix = 0;
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

static int name_mfa(struct xb_vm *vm, const uint8_t *mfa, char *out, size_t len)
{
	uint64_t m, f, a;
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
	if (end <= start || end - start > MAX_MODULE_BYTES)
		return xb_fail("implausible module range");
	size_t size = (size_t)(end - start);
	uint8_t *code = malloc(size);
	if (!code)
		return xb_fail("out of memory");
	int rc = -1;
	if (xb_read(&vm->mem, start, code, size) < 0)
		goto out;
	uint64_t nf;
	if ((uint64_t)fn_off + 8 > size)
		goto bad;
	memcpy(&nf, code + nf_off, 8);
	if (nf == 0 || nf > MAX_FUNCTIONS || (uint64_t)fn_off + (nf + 1) * 8 > size)
		goto bad;
	uint64_t prev;
	memcpy(&prev, code + fn_off, 8);
	if (prev < start + (uint64_t)fn_off || prev > end)
		goto bad;
	char modname[1100] = "";
	for (uint64_t i = 0; i < nf; i++) {
		uint64_t ci, next;
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
	uint8_t *tab = malloc(n * (uint64_t)esz + 1);
	if (!tab)
		return xb_fail("out of memory");
	if (xb_read(&vm->mem, mods, tab, n * (uint64_t)esz) < 0) {
		free(tab);
		return -1;
	}
	for (uint64_t k = 0; k < n; k++) {
		uint64_t s, e;
		memcpy(&s, tab + k * esz + xb_off(vm, XB_F_RANGE_START), 8);
		memcpy(&e, tab + k * esz + xb_off(vm, XB_F_RANGE_END), 8);
		if (s == e)
			continue; /* purged: erts_remove_from_ranges sets end = start */
		if (emu_module(vm, cm, s, e) < 0) {
			/* A module being loaded or purged right now: skip it. */
			xb_debug("skipping module at 0x%llx: %s\n", (unsigned long long)s, xb_err());
			cm->dropped++;
		}
	}
	free(tab);
	if (vm->sym.normal_exit_ptr)
		xb_read_u64(&vm->mem, vm->sym.normal_exit_ptr, &cm->normal_exit);
	xb_codemap_finish(cm);
	return 0;
}

int xb_codemap_build(struct xb_vm *vm, struct xb_codemap *cm, unsigned flags)
{
	memset(cm, 0, sizeof(*cm));
	int r = vm->flavor == XB_FLAVOR_JIT ? build_jit(vm, cm, flags) : build_emu(vm, cm);
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

/* atoms.c - atom text from the VM's atom table (atom.h: Atom, index.h:
 * IndexTable), cached: atoms are never freed. */
#define _GNU_SOURCE
#include "xb/vm.h"
#include "xb/common.h"
#include "xb/term.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define MAX_ATOM_BYTES 1020 /* atom.h MAX_ATOM_SZ_LIMIT: 255 characters * 4 bytes */
#define INDEX_PAGE_SHIFT 10 /* index.h INDEX_PAGE_SHIFT */
#define MAX_ATOMS (1u << 26) /* more than erl +t allows (atom.c: at most 2^26 per 64-bit term layout) */
/* The cache keeps atom text up to this many bytes (names and table);
 * beyond, atoms are read from the VM each time they are named.  A
 * default VM has ~10,000 atoms (~200 KB); 64 MiB holds a million long
 * ones. */
#define ATOM_CACHE_MAX_BYTES (64u << 20)

/* OTP 29 keeps an atom's text as a binary literal (atom.c,
 * erts_atom_get_name: ERTS_GET_BITSTRING of Atom.u.bin): a heap binary
 * (ErlHeapBits) for short names, a sub-binary (ErlSubBits) otherwise. */
#define HEADER_TAG_MASK 0x3f       /* erl_term.h _TAG_HEADER_MASK */
#define TAG_HEADER_HEAP_BITS 0x20  /* erl_term.h (OTP 27+) HEAP_BITS_SUBTAG */
#define TAG_HEADER_SUB_BITS 0x24   /* erl_term.h (OTP 27+) SUB_BITS_SUBTAG */
#define SUB_BITS_FLAG_MASK 3       /* erl_bits.h ERL_SUB_BITS_FLAG_MASK */

static int atom_text_from_binary(struct xb_vm *vm, uint64_t slot, uint64_t *text)
{
	uint64_t bin, hdr;
	if (xb_off(vm, XB_F_ATOM_BIN) == XB_NOFIELD)
		return xb_fail("release table has no atom text field");
	if (xb_read_u64(&vm->mem, slot + (uint64_t)xb_off(vm, XB_F_ATOM_BIN), &bin) < 0)
		return -1;
	if ((bin & 3) != 2) /* TAG_PRIMARY_BOXED */
		return xb_fail("atom text is not a boxed binary");
	uint64_t p = bin & ~(uint64_t)3;
	if (xb_read_u64(&vm->mem, p, &hdr) < 0)
		return -1;
	if ((hdr & HEADER_TAG_MASK) == TAG_HEADER_HEAP_BITS && xb_off(vm, XB_F_HEAPBITS_DATA) >= 0) {
		*text = p + (uint64_t)xb_off(vm, XB_F_HEAPBITS_DATA);
		return 0;
	}
	if ((hdr & HEADER_TAG_MASK) == TAG_HEADER_SUB_BITS && xb_off(vm, XB_F_SUBBITS_BASE_FLAGS) >= 0) {
		uint64_t base, start;
		if (xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_SUBBITS_BASE_FLAGS), &base) < 0 ||
		    xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_SUBBITS_START), &start) < 0)
			return -1;
		if (start % 8)
			return xb_fail("atom text not byte aligned");
		*text = (base & ~(uint64_t)SUB_BITS_FLAG_MASK) + start / 8;
		return 0;
	}
	return xb_fail("atom text: unexpected binary header 0x%llx", (unsigned long long)hdr);
}

int xb_vm_atom_raw(struct xb_vm *vm, uint64_t term, char *buf, size_t len, size_t *outlen)
{
	if (!xb_is_atom(term) || !vm->sym.atom_table)
		return xb_fail("not an atom: 0x%llx", (unsigned long long)term);
	if (xb_off(vm, XB_F_INDEXTAB_ENTRIES) < 0 || xb_off(vm, XB_F_INDEXTAB_SEG_TABLE) < 0 ||
	    xb_off(vm, XB_F_ATOM_LEN) < 0)
		return xb_fail("the release table has no atom table layout");
	uint64_t ix = xb_atom_index(term);
	uint32_t entries;
	uint64_t seg, slot, name;
	int16_t alen;
	uint64_t tab = vm->sym.atom_table;
	if (xb_read_u32(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_ENTRIES), &entries) < 0)
		return -1;
	if (ix >= entries || entries > MAX_ATOMS)
		return xb_fail("atom index %llu out of range (%u atoms)", (unsigned long long)ix, entries);
	if (xb_read_u64(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_SEG_TABLE), &seg) < 0 ||
	    xb_read_u64(&vm->mem, seg + (ix >> INDEX_PAGE_SHIFT) * 8, &seg) < 0 ||
	    xb_read_u64(&vm->mem, seg + (ix & ((1u << INDEX_PAGE_SHIFT) - 1)) * 8, &slot) < 0 ||
	    xb_read(&vm->mem, slot + (uint64_t)xb_off(vm, XB_F_ATOM_LEN), &alen, sizeof(alen)) < 0)
		return -1;
	if (xb_off(vm, XB_F_ATOM_NAME) != XB_NOFIELD) {
		if (xb_read_u64(&vm->mem, slot + (uint64_t)xb_off(vm, XB_F_ATOM_NAME), &name) < 0)
			return -1;
	} else if (atom_text_from_binary(vm, slot, &name) < 0) {
		return -1;
	}
	if (alen < 0 || alen > MAX_ATOM_BYTES || (size_t)alen >= len)
		return xb_fail("implausible atom length %d", alen);
	if (xb_read(&vm->mem, name, buf, (size_t)alen) < 0)
		return -1;
	buf[alen] = 0;
	if (memchr(buf, 0, (size_t)alen))
		return xb_fail("atom text has a NUL byte");
	if (outlen)
		*outlen = (size_t)alen;
	return 0;
}

/* Fibonacci hashing, high bits (the low bits of the product depend on
 * the key's low bits alone: indices the target's terms choose could all
 * share one probe run).  CAP is a power of two, at least 1024. */
static size_t atom_slot(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(cap)));
}

static const char *atom_cache_put(struct xb_vm *vm, uint64_t key, const char *raw, size_t rl);

const char *xb_vm_atom(struct xb_vm *vm, uint64_t term)
{
	struct xb_atom_cache *c = &vm->atoms;
	if (!xb_is_atom(term))
		return NULL;
	uint64_t key = xb_atom_index(term) + 1;
	if (c->cap) {
		for (size_t i = atom_slot(key, c->cap);; i = (i + 1) & (c->cap - 1)) {
			if (c->keys[i] == key)
				return c->vals[i];
			if (!c->keys[i])
				break;
		}
	}
	char raw[MAX_ATOM_BYTES + 1];
	size_t rl;
	if (xb_vm_atom_raw(vm, term, raw, sizeof(raw), &rl) < 0)
		return NULL;
	return atom_cache_put(vm, key, raw, rl);
}

static const char *atom_cache_put(struct xb_vm *vm, uint64_t key, const char *raw, size_t rl)
{
	struct xb_atom_cache *c = &vm->atoms;
	char quoted[MAX_ATOM_BYTES * 4 + 8];
	xb_atom_quote(raw, rl, quoted, sizeof(quoted));
	size_t ql = strlen(quoted);
	/* Over budget: not kept.  Callers copy the text before they ask for
	 * the fourth atom after this one (name_mfa asks for two). */
	size_t grow = (c->n + 1) * 2 > c->cap ? (c->cap ? c->cap : 512) * 2 * (sizeof(*c->keys) + sizeof(*c->vals)) : 0;
	if (c->bytes + ql + 1 + 16 + grow > ATOM_CACHE_MAX_BYTES) {
		static char ring[4][MAX_ATOM_BYTES * 4 + 8];
		static unsigned next;
		xb_overrun(XB_OVR_ATOM_CACHE, "%zu atoms (%zu bytes) cached; more are read each time they are named",
			   c->n, c->bytes);
		char *slot = ring[next++ % 4];
		memcpy(slot, quoted, ql + 1);
		return slot;
	}
	if ((c->n + 1) * 2 > c->cap) { /* rehash */
		size_t ncap = c->cap ? c->cap * 2 : 1024;
		uint64_t *nk = calloc(ncap, sizeof(*nk));
		char **nv = calloc(ncap, sizeof(*nv));
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return NULL;
		}
		for (size_t i = 0; i < c->cap; i++) {
			if (!c->keys[i])
				continue;
			size_t j = atom_slot(c->keys[i], ncap);
			while (nk[j])
				j = (j + 1) & (ncap - 1);
			nk[j] = c->keys[i];
			nv[j] = c->vals[i];
		}
		free(c->keys);
		free(c->vals);
		c->bytes += (ncap - c->cap) * (sizeof(*nk) + sizeof(*nv));
		c->keys = nk;
		c->vals = nv;
		c->cap = ncap;
	}
	char *v = strdup(quoted);
	if (!v)
		return NULL;
	size_t i = atom_slot(key, c->cap);
	while (c->keys[i])
		i = (i + 1) & (c->cap - 1);
	c->keys[i] = key;
	c->vals[i] = v;
	c->bytes += ql + 1 + 16; /* malloc's overhead, roughly */
	c->n++;
	return c->vals[i];
}

/* Read every atom in a few batched process_vm_readv calls (one iovec per
 * atom) instead of several reads each: naming an interpreter's code needs
 * most of them.  Only where Atom has a plain name pointer (up to OTP 28);
 * atoms that fail here are read one by one later. */
#define BATCH 512

int xb_vm_atoms_prefetch(struct xb_vm *vm)
{
	int64_t o_len = xb_off(vm, XB_F_ATOM_LEN), o_name = xb_off(vm, XB_F_ATOM_NAME);
	uint64_t tab = vm->sym.atom_table, segtab;
	uint32_t entries;
	if (!tab || o_name < 0 || o_len < 0 || o_name < o_len || o_name - o_len > 64 ||
	    xb_off(vm, XB_F_INDEXTAB_ENTRIES) < 0 || xb_off(vm, XB_F_INDEXTAB_SEG_TABLE) < 0)
		return -1;
	if (xb_read_u32(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_ENTRIES), &entries) < 0 ||
	    xb_read_u64(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_SEG_TABLE), &segtab) < 0 ||
	    entries > MAX_ATOMS)
		return -1;
	/* One page of the index at a time (index.h: 1024 atoms each): the
	 * memory used is fixed, whatever the VM says its atom count is. */
	size_t npages = (entries + (1u << INDEX_PAGE_SHIFT) - 1) >> INDEX_PAGE_SHIFT;
	uint64_t slots[1u << INDEX_PAGE_SHIFT];
	size_t span = (size_t)(o_name - o_len) + 8;
	uint8_t *hdr = malloc(BATCH * span);
	char *names = malloc(BATCH * (MAX_ATOM_BYTES + 1));
	int rc = -1;
	if (!hdr || !names)
		goto out;
	for (size_t pg = 0; pg < npages; pg++) {
		if (xb_interrupted || vm->atoms.bytes >= ATOM_CACHE_MAX_BYTES / 2) {
			/* the rest is read when named (within the cache's budget) */
			if (!xb_interrupted)
				xb_overrun(XB_OVR_ATOM_CACHE, "atom prefetch stopped at atom %zu of %u (%zu bytes)",
					   pg << INDEX_PAGE_SHIFT, entries, vm->atoms.bytes);
			break;
		}
		size_t first = pg << INDEX_PAGE_SHIFT;
		size_t inpage = entries - first < (1u << INDEX_PAGE_SHIFT) ? entries - first : (1u << INDEX_PAGE_SHIFT);
		uint64_t page;
		if (xb_read_u64(&vm->mem, segtab + pg * 8, &page) < 0 ||
		    xb_read(&vm->mem, page, slots, inpage * 8) < 0)
			goto out;
		for (size_t sub = 0; sub < inpage; sub += BATCH) {
			size_t base = first + sub;
			size_t n = inpage - sub < BATCH ? inpage - sub : BATCH;
			struct iovec loc[BATCH], rem[BATCH];
			size_t k = 0;
			for (size_t i = 0; i < n; i++) {
				uint64_t a = slots[sub + i] + (uint64_t)o_len;
				if (!slots[sub + i] || !xb_remote_readable(&vm->mem, a, span))
					continue; /* read one by one later, if ever needed */
				loc[k] = (struct iovec){ hdr + i * span, span };
				rem[k] = (struct iovec){ (void *)(uintptr_t)a, span };
				k++;
			}
			memset(hdr, 0xff, n * span);
			if (k && process_vm_readv(vm->pid, loc, k, rem, k, 0) != (ssize_t)(k * span))
				continue;
			size_t m = 0;
			size_t idx[BATCH];
			for (size_t i = 0; i < n; i++) {
				int16_t len;
				uint64_t name;
				memcpy(&len, hdr + i * span, 2);
				memcpy(&name, hdr + i * span + (o_name - o_len), 8);
				if (len < 0 || len > MAX_ATOM_BYTES ||
				    !xb_remote_readable(&vm->mem, name, (size_t)len ? (size_t)len : 1))
					continue;
				loc[m] = (struct iovec){ names + i * (MAX_ATOM_BYTES + 1), (size_t)len };
				rem[m] = (struct iovec){ (void *)(uintptr_t)name, (size_t)len };
				idx[m++] = i;
			}
			ssize_t want = 0;
			for (size_t i = 0; i < m; i++)
				want += (ssize_t)loc[i].iov_len;
			if (m && process_vm_readv(vm->pid, loc, m, rem, m, 0) != want)
				continue;
			for (size_t j = 0; j < m; j++) {
				char *t = loc[j].iov_base;
				size_t len = loc[j].iov_len;
				if (memchr(t, 0, len))
					continue;
				t[len] = 0;
				atom_cache_put(vm, base + idx[j] + 1, t, len);
			}
		}
	}
	rc = 0;
out:
	free(hdr);
	free(names);
	return rc;
}

void xb_vm_atoms_free(struct xb_vm *vm)
{
	for (size_t i = 0; i < vm->atoms.cap; i++)
		free(vm->atoms.vals ? vm->atoms.vals[i] : NULL);
	free(vm->atoms.keys);
	free(vm->atoms.vals);
	memset(&vm->atoms, 0, sizeof(vm->atoms));
}

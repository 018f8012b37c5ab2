/* dwarf_layout.c - read struct layouts from DWARF with libdw. */
#include "xb/dwarf_layout.h"
#include "xb/common.h"

#include <dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strip typedefs and qualifiers. */
static int peel(Dwarf_Die *die)
{
	for (int i = 0; i < 16; i++) {
		int tag = dwarf_tag(die);
		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type &&
		    tag != DW_TAG_volatile_type && tag != DW_TAG_restrict_type &&
		    tag != DW_TAG_atomic_type)
			return 0;
		Dwarf_Attribute a;
		if (!dwarf_attr(die, DW_AT_type, &a) || !dwarf_formref_die(&a, die))
			return -1;
	}
	return -1;
}

static bool is_aggregate(int tag)
{
	return tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
	       tag == DW_TAG_class_type;
}

static bool member_offset(Dwarf_Die *m, int64_t *off)
{
	Dwarf_Attribute a;
	Dwarf_Word w;
	if (!dwarf_attr(m, DW_AT_data_member_location, &a)) {
		*off = 0; /* union members */
		return true;
	}
	if (dwarf_formudata(&a, &w) == 0) {
		*off = (int64_t)w;
		return true;
	}
	return false;
}

/* Find member NAME (length len) in aggregate AGG, descending into
 * anonymous members.  On success *out is the member DIE and *off adds its
 * offset. */
/* Anonymous members nest a few levels in erts (struct process: common.u
 * .alive); the DWARF is the target's file, so the depth is bounded. */
#define MAX_ANON_DEPTH 8
/* ...and not the work either: K anonymous members at each of those levels
 * are K^8 visits for a name that is not there (16^8: minutes per field,
 * so a hostile beam hung attach).  A member of OTP's struct process is
 * found within a few hundred. */
#define MAX_MEMBER_VISITS 10000

static bool find_member(Dwarf_Die *agg, const char *name, size_t len, Dwarf_Die *out,
			int64_t *off, int depth, unsigned *visits)
{
	Dwarf_Die child;
	if (depth > MAX_ANON_DEPTH || dwarf_child(agg, &child) != 0)
		return false;
	do {
		if (++*visits > MAX_MEMBER_VISITS)
			return false;
		if (dwarf_tag(&child) != DW_TAG_member)
			continue;
		const char *n = dwarf_diename(&child);
		int64_t moff;
		if (!member_offset(&child, &moff))
			continue;
		if (n && strlen(n) == len && memcmp(n, name, len) == 0) {
			*out = child;
			*off += moff;
			return true;
		}
		if (!n) { /* anonymous struct/union */
			Dwarf_Attribute a;
			Dwarf_Die t;
			if (dwarf_attr(&child, DW_AT_type, &a) && dwarf_formref_die(&a, &t) &&
			    peel(&t) == 0 && is_aggregate(dwarf_tag(&t))) {
				int64_t sub = *off + moff;
				if (find_member(&t, name, len, out, &sub, depth + 1, visits)) {
					*off = sub;
					return true;
				}
			}
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

static int64_t resolve(Dwarf_Die *type, const char *path)
{
	Dwarf_Die cur = *type;
	if (peel(&cur) < 0)
		return XB_NOFIELD;
	if (!*path) {
		Dwarf_Word sz;
		return dwarf_aggregate_size(&cur, &sz) == 0 ? (int64_t)sz : XB_NOFIELD;
	}
	int64_t off = 0;
	while (*path) {
		size_t len = strcspn(path, ".");
		if (!is_aggregate(dwarf_tag(&cur)))
			return XB_NOFIELD;
		Dwarf_Die m;
		unsigned visits = 0;
		if (!find_member(&cur, path, len, &m, &off, 0, &visits))
			return XB_NOFIELD;
		path += len;
		if (*path == '.')
			path++;
		if (*path) {
			Dwarf_Attribute a;
			if (!dwarf_attr(&m, DW_AT_type, &a) || !dwarf_formref_die(&a, &cur) ||
			    peel(&cur) < 0)
				return XB_NOFIELD;
		}
	}
	return off;
}

/* A complete (non-declaration) definition of TYPE at the top level of a CU
 * (or in a namespace, for C++). */
static bool type_matches(Dwarf_Die *d, const char *type)
{
	int tag = dwarf_tag(d);
	if (!is_aggregate(tag) && tag != DW_TAG_typedef)
		return false;
	const char *n = dwarf_diename(d);
	if (!n)
		return false;
	size_t nl = strlen(n);
	bool named = false;
	for (const char *t = type; *t && !named;) {
		size_t tl = strcspn(t, "|");
		named = tl == nl && memcmp(t, n, nl) == 0;
		t += tl + (t[tl] == '|');
	}
	if (!named)
		return false;
	Dwarf_Attribute a;
	if (dwarf_attr(d, DW_AT_declaration, &a))
		return false;
	return true;
}

/* Largest struct we read a field of (struct process is under 1 KiB; the
 * aligned scheduler data ~40 KiB). */
#define MAX_STRUCT_BYTES (1u << 20)
/* struct process is read 256 at a time, twice (proctab.c, dump.c): 776
 * bytes in OTP 25, 768 in OTP 29; a DWARF that says 1 MiB would have the
 * tools allocate and read 512 MiB a batch. */
#define MAX_PROCESS_BYTES (16u << 10)

int xb_dwarf_validate(int64_t off[XB_F_COUNT], const int64_t *fallback, char *why, size_t wlen)
{
	int bad = 0;
	if (wlen)
		why[0] = 0;
	for (int i = 0; i < XB_F_COUNT; i++) {
		if (off[i] == XB_NOFIELD)
			continue;
		const struct xb_field_spec *f = &xb_field_specs[i];
		bool size_field = !*f->member;
		/* the size of the field's struct, from this DWARF, else the table */
		int64_t size = -1;
		for (int k = 0; k < XB_F_COUNT && !size_field; k++)
			if (!*xb_field_specs[k].member && strcmp(xb_field_specs[k].type, f->type) == 0)
				size = off[k] != XB_NOFIELD ? off[k] : fallback ? fallback[k] : -1;
		bool ok = size_field ? off[i] > 0 &&
					       off[i] <= (i == XB_F_PROC_SIZE ? MAX_PROCESS_BYTES : MAX_STRUCT_BYTES)
				     : off[i] >= 0 && off[i] < MAX_STRUCT_BYTES &&
				       (size <= 0 || off[i] <= size); /* a flexible array may start at the end */
		if (ok)
			continue;
		if (wlen && !why[0])
			snprintf(why, wlen, "%s = %lld%s", xb_field_name((enum xb_field)i), (long long)off[i],
				 size > 0 ? " (outside the struct)" : "");
		off[i] = XB_NOFIELD;
		bad++;
	}
	return bad;
}

int xb_dwarf_layout(Dwarf *dw, int64_t off[XB_F_COUNT])
{
	int found = 0;
	bool done[XB_F_COUNT] = { 0 };
	for (int i = 0; i < XB_F_COUNT; i++)
		off[i] = XB_NOFIELD;

	Dwarf_Off cu = 0, next;
	size_t hsize;
	while (found < XB_F_COUNT && !xb_interrupted && dwarf_nextcu(dw, cu, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cudie, d;
		if (!dwarf_offdie(dw, cu + hsize, &cudie) || dwarf_child(&cudie, &d) != 0) {
			cu = next;
			continue;
		}
		do {
			const char *n = dwarf_diename(&d);
			if (!n)
				continue;
			for (int i = 0; i < XB_F_COUNT; i++) {
				if (done[i] || !type_matches(&d, xb_field_specs[i].type))
					continue;
				int64_t v = resolve(&d, xb_field_specs[i].member);
				if (v != XB_NOFIELD) {
					off[i] = v;
					done[i] = true;
					found++;
				}
			}
		} while (dwarf_siblingof(&d, &d) == 0);
		cu = next;
	}
	return found;
}

static bool find_func(Dwarf *dw, const char *func, Dwarf_Die *out)
{
	Dwarf_Off cu = 0, next;
	size_t hsize;
	while (dwarf_nextcu(dw, cu, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cudie, d;
		if (dwarf_offdie(dw, cu + hsize, &cudie) && dwarf_child(&cudie, &d) == 0) {
			do {
				Dwarf_Attribute a;
				if (dwarf_tag(&d) == DW_TAG_subprogram && dwarf_diename(&d) &&
				    strcmp(dwarf_diename(&d), func) == 0 &&
				    !dwarf_attr(&d, DW_AT_declaration, &a) &&
				    dwarf_hasattr(&d, DW_AT_low_pc)) {
					*out = d;
					return true;
				}
			} while (dwarf_siblingof(&d, &d) == 0);
		}
		cu = next;
	}
	return false;
}

static bool find_var(Dwarf_Die *scope, const char *var, Dwarf_Die *out, int depth)
{
	Dwarf_Die c;
	if (depth > 8 || dwarf_child(scope, &c) != 0)
		return false;
	do {
		int tag = dwarf_tag(&c);
		if (tag == DW_TAG_variable && dwarf_diename(&c) && strcmp(dwarf_diename(&c), var) == 0) {
			*out = c;
			return true;
		}
		if (tag == DW_TAG_lexical_block && find_var(&c, var, out, depth + 1))
			return true;
	} while (dwarf_siblingof(&c, &c) == 0);
	return false;
}

int xb_dwarf_fixed_reg(Dwarf *dw, const char *func, const char *var)
{
	Dwarf_Die f, v;
	if (!find_func(dw, func, &f) || !find_var(&f, var, &v, 0))
		return XB_PREG_NONE;
	Dwarf_Attribute a;
	if (!dwarf_attr(&v, DW_AT_location, &a))
		return XB_PREG_NONE;
	Dwarf_Op *expr;
	size_t len;
	/* A single expression (not a location list) of one DW_OP_regN. */
	if (dwarf_getlocation(&a, &expr, &len) != 0 || len != 1)
		return XB_PREG_NONE;
	if (expr[0].atom >= DW_OP_reg0 && expr[0].atom <= DW_OP_reg31)
		return xb_dwarf_to_preg(expr[0].atom - DW_OP_reg0);
	if (expr[0].atom == DW_OP_regx)
		return xb_dwarf_to_preg((int)expr[0].number);
	return XB_PREG_NONE;
}

/* check.c - consistency checks of our view of the VM against the VM. */
#define _GNU_SOURCE
#include "xb/check.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/dwarf_layout.h"
#include "xb/term.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct ctx {
	FILE *out;
	int failed, passed;
};

static void report(struct ctx *c, bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;
	char raw[2048], text[2048];
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* atom text and such are the VM's bytes: one line, nothing a
	 * terminal acts on */
	xb_sanitize(raw, text, sizeof(text));
	fprintf(c->out, "%-4s %-22s %s\n", ok ? "ok" : "FAIL", name, text);
	if (ok)
		c->passed++;
	else
		c->failed++;
}

/* Where the offsets came from, and the proof of each on this VM. */
static void check_table(struct ctx *c, struct xb_vm *vm)
{
	const struct xb_layout *lay = &vm->lay;
	unsigned bad = lay->needs_checked & ~lay->needs_ok;
	report(c, !bad, "release-table", "VM erts %s (OTP %s, %s, %s); offsets from %s %s, %u discovered; debug info %s%s%s",
	       vm->erts, vm->otp[0] ? vm->otp : "?", vm->otp_version[0] ? vm->otp_version : "?",
	       xb_flavor_name(vm->flavor), lay->origin ? lay->origin : "?", lay->origin_detail, lay->discovered,
	       xb_debug_name(vm->debug), bad ? "; first failure: " : "", bad ? lay->failed : "");
	if (vm->dwarf && vm->rel && vm->rel_exact) {
		int64_t dw[XB_F_COUNT];
		xb_dwarf_layout(vm->dwarf, dw);
		const struct xb_release_flavor *fl = xb_release_flavor(vm->rel, vm->flavor);
		int diffs = 0, compared = 0;
		char first[256] = "";
		for (int i = 0; i < XB_F_COUNT; i++) {
			if (dw[i] == XB_NOFIELD && fl->off[i] == XB_NOFIELD)
				continue;
			compared++;
			if (dw[i] != fl->off[i]) {
				if (!diffs)
					snprintf(first, sizeof(first), "; first: %s table %lld, DWARF %lld",
						 xb_field_name(i), (long long)fl->off[i], (long long)dw[i]);
				diffs++;
			}
		}
		report(c, diffs == 0, "table-vs-dwarf", "%d of %d fields agree with this beam's DWARF%s",
		       compared - diffs, compared, first);
	}
	int failed = xb_layout_report(vm, c->out);
	if (failed)
		c->failed++;
	else
		c->passed++;
}

static void check_atoms(struct ctx *c, struct xb_vm *vm)
{
	if (!vm->sym.atom_table) {
		report(c, false, "atoms", "erts_atom_table not found (symbol or discovery)");
		return;
	}
	char t0[64] = "?", t1[64] = "?";
	size_t l;
	if (xb_vm_atom_raw(vm, 0x0b, t0, sizeof(t0), &l) < 0)
		snprintf(t0, sizeof(t0), "<%s>", xb_err());
	if (xb_vm_atom_raw(vm, (1 << 6) | 0x0b, t1, sizeof(t1), &l) < 0)
		snprintf(t1, sizeof(t1), "<%s>", xb_err());
	report(c, strcmp(t0, "false") == 0 && strcmp(t1, "true") == 0, "atoms-0-1",
	       "atom 0 = '%s', atom 1 = '%s' (expected false, true: atom.names)", t0, t1);
	/* 'erlang' and 'init' are fixed atoms (atom.names): among the first
	 * few thousand. */
	int found_erlang = -1, found_init = -1, bad = 0;
	for (int i = 0; i < 4000 && (found_erlang < 0 || found_init < 0); i++) {
		char t[300];
		if (xb_vm_atom_raw(vm, ((uint64_t)i << 6) | 0x0b, t, sizeof(t), &l) < 0) {
			if (++bad > 10)
				break;
			continue;
		}
		if (strcmp(t, "erlang") == 0)
			found_erlang = i;
		if (strcmp(t, "init") == 0)
			found_init = i;
	}
	report(c, found_erlang >= 0 && found_init >= 0, "atoms-known",
	       "'erlang' is atom %d, 'init' is atom %d (%d unreadable atoms)", found_erlang, found_init, bad);
}

static void check_processes(struct ctx *c, struct xb_vm *vm)
{
	uint64_t pt = vm->sym.proc_tab;
	if (!pt) {
		report(c, false, "process-table", "erts_proc not found (symbol or discovery)");
		return;
	}
	uint64_t tab = 0, invalid = 0;
	uint32_t max = 0;
	if (xb_read_u64(&vm->mem, pt + (uint64_t)xb_off(vm, XB_F_PTAB_TAB), &tab) < 0 ||
	    xb_read_u32(&vm->mem, pt + (uint64_t)xb_off(vm, XB_F_PTAB_MAX), &max) < 0 ||
	    xb_read_u64(&vm->mem, pt + (uint64_t)xb_off(vm, XB_F_PTAB_INVALID_ELEMENT), &invalid) < 0 ||
	    max == 0 || max > (1u << 27)) {
		report(c, false, "process-table", "unreadable or implausible (max %u): %s", max, xb_err());
		return;
	}
	uint64_t *slots = malloc((size_t)max * 8);
	if (!slots || xb_read(&vm->mem, tab, slots, (size_t)max * 8) < 0) {
		free(slots);
		report(c, false, "process-table", "cannot read %u slots at 0x%llx", max, (unsigned long long)tab);
		return;
	}
	int live = 0, good = 0, pid0 = 0, views = 0, views_read = 0;
	char bad[200] = "", bad_views[200] = "";
	/* --by, --schedulers, long calls: u.initial (module and function
	 * atoms, a small arity) and reds (a count, not a term) */
	int64_t o_init = xb_off(vm, XB_F_PROC_INITIAL), o_reds = xb_off(vm, XB_F_PROC_REDS);
	int64_t o_mod = xb_off(vm, XB_F_MFA_MODULE), o_fun = xb_off(vm, XB_F_MFA_FUNCTION),
		o_ar = xb_off(vm, XB_F_MFA_ARITY);
	bool have_views = o_init >= 0 && o_reds >= 0 && o_mod >= 0 && o_fun >= 0 && o_ar >= 0;
	for (uint32_t i = 0; i < max && live < 5000; i++) {
		uint64_t p = slots[i];
		if (!p || p == invalid)
			continue;
		live++;
		uint64_t id, heap, htop, stop, hend;
		if (xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_PROC_ID), &id) < 0 ||
		    xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_PROC_HEAP), &heap) < 0 ||
		    xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_PROC_HTOP), &htop) < 0 ||
		    xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_PROC_STOP), &stop) < 0 ||
		    xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_PROC_HEND), &hend) < 0)
			continue;
		bool ok = xb_is_pid(id) && heap && heap <= htop && htop <= stop && stop <= hend;
		uint64_t m, f, a, reds;
		if (ok && have_views &&
		    xb_read_u64(&vm->mem, p + (uint64_t)(o_init + o_mod), &m) == 0 &&
		    xb_read_u64(&vm->mem, p + (uint64_t)(o_init + o_fun), &f) == 0 &&
		    xb_read_u64(&vm->mem, p + (uint64_t)(o_init + o_ar), &a) == 0 &&
		    xb_read_u64(&vm->mem, p + (uint64_t)o_reds, &reds) == 0) {
			views_read++;
			if (xb_is_atom(m) && xb_is_atom(f) && a <= 255 && reds < (1ull << 48))
				views++;
			else if (!bad_views[0])
				snprintf(bad_views, sizeof(bad_views),
					 "; e.g. slot %u: initial 0x%llx 0x%llx %llu, reds %llu", i,
					 (unsigned long long)m, (unsigned long long)f, (unsigned long long)a,
					 (unsigned long long)reds);
		}
		if (ok) {
			good++;
			char s[32];
			xb_format_pid(id, vm->pid_num_bits, vm->pid_ser_bits, &vm->pix, s, sizeof(s));
			pid0 |= strcmp(s, "<0.0.0>") == 0;
		} else if (!bad[0]) {
			snprintf(bad, sizeof(bad), "; e.g. slot %u: id 0x%llx heap 0x%llx htop 0x%llx stop 0x%llx hend 0x%llx",
				 i, (unsigned long long)id, (unsigned long long)heap, (unsigned long long)htop,
				 (unsigned long long)stop, (unsigned long long)hend);
		}
	}
	free(slots);
	/* Running processes' htop/stop are stale: allow a few. */
	report(c, live > 0 && good >= live - 4, "process-table",
	       "%d of %d live processes look right (pid tag, heap <= htop <= stop <= hend)%s", good, live, bad);
	report(c, pid0, "process-init", "init is <0.0.0>%s", pid0 ? "" : ": not found");
	if (have_views)
		report(c, views_read > 0 && views == views_read, "process-initial-reds",
		       "%d of %d processes have an initial call (atoms, arity) and a reductions count%s", views,
		       views_read, bad_views);
}

static void check_code(struct ctx *c, struct xb_vm *vm)
{
	struct xb_codemap cm;
	if (xb_codemap_build(vm, &cm, XB_CM_FOLD_PROLOGUE) < 0) {
		report(c, false, "code-ranges", "cannot read the code tables: %s", xb_err());
		return;
	}
	bool sorted = true;
	for (size_t i = 1; i < cm.n; i++)
		if (cm.v[i].start < cm.v[i - 1].end)
			sorted = false;
	report(c, cm.n > 1000 && sorted, "code-ranges", "%zu entries from %zu modules, %s",
	       cm.n, cm.modules, sorted ? "sorted, no overlaps" : "OVERLAPPING");
	static const char *const known[] = { "lists:reverse/2", "init:boot/1", "erlang:apply/2",
					     "gen_server:loop/7" };
	int hits = 0;
	char missing[200] = "";
	for (size_t k = 0; k < XB_ARRAY_SIZE(known); k++) {
		bool f = false;
		for (size_t i = 0; i < cm.n && !f; i++)
			f = strcmp(cm.v[i].name, known[k]) == 0;
		hits += f;
		if (!f && !missing[0])
			snprintf(missing, sizeof(missing), "; missing %s", known[k]);
	}
	report(c, hits >= 3, "code-known-functions", "%d of %zu well-known functions named%s", hits,
	       XB_ARRAY_SIZE(known), missing);
	if (vm->flavor == XB_FLAVOR_JIT) {
		const struct xb_code *ne = xb_codemap_find(&cm, cm.normal_exit);
		report(c, ne != NULL, "normal-exit", "beam_normal_exit 0x%llx is %s; frame layout %d",
		       (unsigned long long)cm.normal_exit, ne ? ne->name : "not JIT code", cm.frame_layout);
	}
	xb_codemap_free(&cm);
}

static void check_schedulers(struct ctx *c, struct xb_vm *vm)
{
	/* Scheduler threads as named in the release table. */
	int count[3];
	xb_vm_count_sched_threads(vm, count);
	report(c, count[0] > 0, "scheduler-threads", "%d schedulers, %d dirty CPU, %d dirty I/O (named %s)",
	       count[0], count[1], count[2], vm->thread_fmt[0] ? vm->thread_fmt[0] : "?");
	int ok = 0;
	char first_bad[160] = "";
	for (int i = 1; i <= count[0]; i++) {
		uint64_t e, no = 0;
		uint32_t type = 0;
		if (xb_vm_sched_data(vm, i, &e) < 0 ||
		    xb_read_u64(&vm->mem, e + (uint64_t)xb_off(vm, XB_F_SCHED_NO), &no) < 0 ||
		    xb_read_u32(&vm->mem, e + (uint64_t)xb_off(vm, XB_F_SCHED_TYPE), &type) < 0) {
			if (!first_bad[0])
				snprintf(first_bad, sizeof(first_bad), "; scheduler %d: %s", i, xb_err());
		} else if (no == (uint64_t)i && type == 0) {
			ok++;
		} else if (!first_bad[0]) {
			snprintf(first_bad, sizeof(first_bad), "; scheduler %d: no %llu, type %u", i,
				 (unsigned long long)no, type);
		}
	}
	report(c, count[0] > 0 && ok == count[0], "scheduler-data", "%d of %d scheduler data entries numbered 1..N%s",
	       ok, count[0], first_bad);
}

int xb_check(struct xb_vm *vm, FILE *out)
{
	struct ctx c = { out, 0, 0 };
	check_table(&c, vm);
	check_atoms(&c, vm);
	check_processes(&c, vm);
	check_code(&c, vm);
	check_schedulers(&c, vm);
	fprintf(out, "%d checks passed, %d failed\n", c.passed, c.failed);
	return c.failed;
}

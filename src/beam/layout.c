/* layout.c - the bookkeeping of struct layouts (see layout.h): sources,
 * what each feature reads, the refusal a tool prints when a field cannot
 * be proven, --check's list, layout files and the mutation sweep. */
#define _GNU_SOURCE
#include "xb/layout.h"
#include "xb/common.h"
#include "xb/safefile.h"
#include "xb/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *xb_lsrc_name(enum xb_lsrc s)
{
	static const char *const n[] = { "none", "table", "DWARF", "file", "discovered" };
	return (unsigned)s < XB_ARRAY_SIZE(n) ? n[s] : "?";
}

const char *xb_lproof_name(enum xb_lproof p)
{
	static const char *const n[] = { "unchecked", "proven", "consistent", "FAILED", "unused" };
	return (unsigned)p < XB_ARRAY_SIZE(n) ? n[p] : "?";
}

const char *xb_need_name(unsigned need)
{
	switch (need) {
	case XB_NEED_ATOMS: return "atom names";
	case XB_NEED_PTAB: return "the process table";
	case XB_NEED_CODE: return "naming Erlang code";
	case XB_NEED_LINES: return "--lines";
	case XB_NEED_STACK: return "Erlang stacks";
	case XB_NEED_SCHED: return "scheduler data";
	case XB_NEED_PROCS: return "process figures";
	case XB_NEED_ALLOC: return "--alloc";
	case XB_NEED_CONTENTS: return "--contents";
	}
	return "?";
}

unsigned xb_layout_closure(unsigned needs)
{
	/* what the proofs of each read besides their own fields */
	for (int i = 0; i < 4; i++) {
		if (needs & XB_NEED_CONTENTS)
			needs |= XB_NEED_PROCS;
		if (needs & XB_NEED_PROCS)
			needs |= XB_NEED_STACK;
		if (needs & XB_NEED_ALLOC)
			needs |= XB_NEED_PTAB | XB_NEED_ATOMS;
		if (needs & XB_NEED_STACK)
			needs |= XB_NEED_PTAB | XB_NEED_CODE | XB_NEED_SCHED;
		if (needs & XB_NEED_SCHED)
			needs |= XB_NEED_PTAB;
		if (needs & XB_NEED_LINES)
			needs |= XB_NEED_CODE;
		if (needs & (XB_NEED_CODE | XB_NEED_PTAB))
			needs |= XB_NEED_ATOMS;
	}
	return needs;
}

int xb_layout_mark(struct xb_vm *vm, const int64_t *off, const enum xb_field *fields, size_t n, bool ok,
		   const char *inv, const char *why)
{
	int failed = 0;
	for (size_t k = 0; k < n; k++) {
		enum xb_field f = fields[k];
		struct xb_fstate *s = &vm->lay.f[f];
		s->inv = inv;
		s->seen = 1;
		if (off[f] < 0) {
			s->proof = XB_LP_UNCHECKED;
			continue;
		}
		s->proof = ok ? XB_LP_PROVEN : XB_LP_FAILED;
		s->ok = ok;
		s->bad = !ok;
		snprintf(s->note, sizeof(s->note), "%s", ok || !why ? "" : why);
		failed += !ok;
	}
	return failed;
}

/* "process.htop" or "process size" */
static void field_label(enum xb_field f, char *buf, size_t len)
{
	snprintf(buf, len, "%s", xb_field_name(f));
}

int xb_layout_report(const struct xb_vm *vm, FILE *out)
{
	const struct xb_layout *lay = &vm->lay;
	int failed = 0, proven = 0, consistent = 0, n = 0;
	for (int f = 0; f < XB_F_COUNT; f++) {
		const struct xb_fstate *s = &lay->f[f];
		/* a field some checked feature reads, left unchecked because
		 * what it is read through did not hold, fails too */
		bool orphan = s->proof == XB_LP_UNCHECKED && vm->off[f] >= 0 &&
			      (xb_field_specs[f].needs & lay->needs_checked);
		if ((s->proof == XB_LP_UNCHECKED && !orphan) || s->proof == XB_LP_UNUSED)
			continue;
		char label[96], line[512], text[600];
		field_label((enum xb_field)f, label, sizeof(label));
		if (orphan)
			snprintf(line, sizeof(line), "FAIL field %-40s %6lld  %-10s %-10s not proven: what it is read "
						     "through (the process table, the scheduler data...) did not hold",
				 label, (long long)vm->off[f], xb_lsrc_name((enum xb_lsrc)s->src), "unproven");
		else
			snprintf(line, sizeof(line), "%-4s field %-40s %6lld  %-10s %-10s %s%s%s",
				 s->proof == XB_LP_FAILED ? "FAIL" : "ok", label, (long long)vm->off[f],
				 xb_lsrc_name((enum xb_lsrc)s->src), xb_lproof_name((enum xb_lproof)s->proof),
				 s->inv ? s->inv : "", s->note[0] ? "; " : "", s->note);
		if (s->proof == XB_LP_PROVEN && s->seen > 1)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " (%u of %u objects)", s->ok, s->seen);
		xb_sanitize(line, text, sizeof(text));
		fprintf(out, "%s\n", text);
		n++;
		failed += s->proof == XB_LP_FAILED || orphan;
		proven += s->proof == XB_LP_PROVEN;
		consistent += s->proof == XB_LP_CONSISTENT;
	}
	fprintf(out, "%-4s layout %d fields in use: %d proven, %d consistent (no live evidence, between proven "
		     "ones), %d failed; offsets from %s%s%s; %u discovered; proofs took %.1f ms\n",
		failed ? "FAIL" : "ok", n, proven, consistent, failed, lay->origin ? lay->origin : "?",
		lay->origin_detail[0] ? " " : "", lay->origin_detail, lay->discovered, lay->prove_ns / 1e6);
	return failed;
}

/* ------------------------------------------------------------------ */
/* layout files */

#define LAYOUT_MAGIC "extrospect-beam layout"
#define LAYOUT_FORMAT 1
#define LAYOUT_MAX_BYTES (256u << 10)
#define LAYOUT_MAX_OFFSET (1 << 20) /* dwarf_layout.c MAX_STRUCT_BYTES */

int xb_layout_write(const struct xb_vm *vm, const char *path)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (!f)
		return xb_fail("cannot write the layout to %s: %m; pass a writable path", path);
	fprintf(f, "# %s: struct offsets of a BEAM, proven on a live VM; read it with --layout FILE\n",
		LAYOUT_MAGIC);
	fprintf(f, "%s %d\n", LAYOUT_MAGIC, LAYOUT_FORMAT);
	fprintf(f, "erts %s\n", vm->erts);
	fprintf(f, "flavor %s\n", xb_flavor_name(vm->flavor));
	fprintf(f, "pid %d %d %d\n", vm->pid_num_bits, vm->pid_ser_bits, vm->pid_pixdata);
	fprintf(f, "code_ix %d\n", vm->num_code_ix);
	fprintf(f, "regs %s %s %s %s %s\n", vm->regs.c_p >= 0 ? xb_preg_name(vm->regs.c_p) : "-",
		vm->regs.E >= 0 ? xb_preg_name(vm->regs.E) : "-", vm->regs.I >= 0 ? xb_preg_name(vm->regs.I) : "-",
		vm->regs.E_saved >= 0 ? xb_preg_name(vm->regs.E_saved) : "-",
		vm->regs.fcalls >= 0 ? xb_preg_name(vm->regs.fcalls) : "-");
	for (int k = 0; k < 3; k++)
		fprintf(f, "threads %d %s\n", k, vm->thread_fmt[k] ? vm->thread_fmt[k] : "-");
	int nfields = 0;
	for (int i = 0; i < XB_F_COUNT; i++) {
		const struct xb_fstate *s = &vm->lay.f[i];
		if (vm->off[i] < 0 || !xb_field_specs[i].needs)
			continue;
		fprintf(f, "field %s %lld %s\n", xb_field_specs[i].id + 5, (long long)vm->off[i],
			s->proof == XB_LP_UNCHECKED ? "unchecked" : xb_lproof_name((enum xb_lproof)s->proof));
		nfields++;
	}
	/* the last line: a file cut short (a copy that did not finish) is
	 * refused, not read with the fields it still has */
	fprintf(f, "end %d\n", nfields);
	if (f == stdout)
		return fflush(f) == 0 ? 0 : xb_fail("cannot write the layout to standard output: %m");
	if (fclose(f) != 0)
		return xb_fail("cannot write the layout to %s: %m", path);
	return 0;
}

static bool word_ok(const char *w, size_t max)
{
	size_t n = strlen(w);
	if (!n || n > max)
		return false;
	for (; *w; w++)
		if (!((*w >= 'a' && *w <= 'z') || (*w >= 'A' && *w <= 'Z') || (*w >= '0' && *w <= '9') || *w == '.' ||
		      *w == '_' || *w == '-' || *w == '+' || *w == '%'))
			return false;
	return true;
}

static bool num(const char *s, long long lo, long long hi, long long *v)
{
	if (!*s || strlen(s) > 12)
		return false;
	char *e;
	errno = 0;
	long long x = strtoll(s, &e, 10);
	if (*e || errno || x < lo || x > hi || (s[0] == '0' && s[1]) || s[0] == '+')
		return false;
	*v = x;
	return true;
}

int xb_layout_parse(const char *text, size_t len, struct xb_layout_file *out, char *why, size_t wlen)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < XB_F_COUNT; i++)
		out->off[i] = XB_NOFIELD;
	out->regs = (struct xb_regroles){ XB_PREG_NONE, XB_PREG_NONE, XB_PREG_NONE, XB_PREG_NONE, XB_PREG_NONE };
	if (len > LAYOUT_MAX_BYTES) {
		snprintf(why, wlen, "larger than %u bytes", LAYOUT_MAX_BYTES);
		return -1;
	}
	if (memchr(text, 0, len)) {
		snprintf(why, wlen, "holds a NUL byte: not a layout file");
		return -1;
	}
	bool magic = false, ended = false, seen[XB_F_COUNT] = { 0 };
	int lineno = 0, fields = 0;
	size_t at = 0;
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
		char line[256];
		lineno++;
		if (ll >= sizeof(line)) {
			snprintf(why, wlen, "line %d is longer than %zu bytes", lineno, sizeof(line) - 1);
			return -1;
		}
		memcpy(line, text + at, ll);
		line[ll] = 0;
		at += ll + 1;
		if (!line[0] || line[0] == '#')
			continue;
		char *tok[8];
		int nt = 0;
		for (char *save, *t = strtok_r(line, " ", &save); t && nt < 8; t = strtok_r(NULL, " ", &save))
			tok[nt++] = t;
		long long v[5];
		if (!magic) {
			if (nt != 3 || strcmp(tok[0], "extrospect-beam") != 0 || strcmp(tok[1], "layout") != 0) {
				snprintf(why, wlen, "line %d: not an extrospect-beam layout file", lineno);
				return -1;
			}
			if (!num(tok[2], 0, 1000, &v[0]) || v[0] != LAYOUT_FORMAT) {
				snprintf(why, wlen, "line %d: layout format %s; this tool reads format %d (write the file "
						    "again with this version's --write-layout)", lineno, tok[2], LAYOUT_FORMAT);
				return -1;
			}
			magic = true;
			continue;
		}
		if (nt == 2 && strcmp(tok[0], "erts") == 0 && word_ok(tok[1], sizeof(out->erts) - 1)) {
			snprintf(out->erts, sizeof(out->erts), "%s", tok[1]);
		} else if (nt == 2 && strcmp(tok[0], "flavor") == 0 &&
			   (strcmp(tok[1], "jit") == 0 || strcmp(tok[1], "emu") == 0)) {
			out->flavor = strcmp(tok[1], "jit") == 0 ? XB_FLAVOR_JIT : XB_FLAVOR_EMU;
		} else if (nt == 4 && strcmp(tok[0], "pid") == 0 && num(tok[1], 1, 60, &v[0]) &&
			   num(tok[2], 1, 60, &v[1]) && num(tok[3], 0, 1, &v[2]) && v[0] + v[1] <= 60) {
			out->pid_num_bits = (int)v[0];
			out->pid_ser_bits = (int)v[1];
			out->pid_pixdata = (int)v[2];
			out->have_pid = true;
		} else if (nt == 2 && strcmp(tok[0], "code_ix") == 0 && num(tok[1], 1, 16, &v[0])) {
			out->num_code_ix = (int)v[0];
			out->have_code_ix = true;
		} else if (nt == 6 && strcmp(tok[0], "regs") == 0) {
			int r[5];
			for (int k = 0; k < 5; k++) {
				r[k] = strcmp(tok[k + 1], "-") == 0 ? XB_PREG_NONE : xb_preg_parse(tok[k + 1]);
				if (r[k] == XB_PREG_NONE && strcmp(tok[k + 1], "-") != 0) {
					snprintf(why, wlen, "line %d: unknown register '%.16s'", lineno, tok[k + 1]);
					return -1;
				}
			}
			out->regs = (struct xb_regroles){ r[0], r[1], r[2], r[3], r[4] };
			out->have_regs = true;
		} else if (nt == 3 && strcmp(tok[0], "threads") == 0 && num(tok[1], 0, 2, &v[0]) &&
			   (strcmp(tok[2], "-") == 0 || (word_ok(tok[2], 31) && strstr(tok[2], "%d") &&
							 !strchr(strstr(tok[2], "%d") + 2, '%') &&
							 strchr(tok[2], '%') == strstr(tok[2], "%d")))) {
			snprintf(out->thread_fmt[v[0]], sizeof(out->thread_fmt[0]), "%s",
				 strcmp(tok[2], "-") == 0 ? "" : tok[2]);
		} else if (nt == 2 && strcmp(tok[0], "end") == 0) {
			if (!num(tok[1], 0, XB_F_COUNT, &v[0]) || v[0] != fields) {
				snprintf(why, wlen, "line %d: the end line counts %.20s fields, the file holds %d", lineno,
					 tok[1], fields);
				return -1;
			}
			ended = true;
		} else if (ended) {
			snprintf(why, wlen, "line %d: after the end line", lineno);
			return -1;
		} else if ((nt == 3 || nt == 4) && strcmp(tok[0], "field") == 0) {
			int f = -1;
			for (int i = 0; i < XB_F_COUNT && f < 0; i++)
				if (strcmp(xb_field_specs[i].id + 5, tok[1]) == 0)
					f = i;
			if (f < 0) {
				snprintf(why, wlen, "line %d: unknown field '%.40s' (a layout written by another "
						    "version of the tools?)", lineno, tok[1]);
				return -1;
			}
			if (seen[f]) {
				snprintf(why, wlen, "line %d: field %.40s given twice", lineno, tok[1]);
				return -1;
			}
			if (!num(tok[2], 0, LAYOUT_MAX_OFFSET, &v[0])) {
				snprintf(why, wlen, "line %d: offset '%.20s' of %.40s is not a number in 0..%d", lineno,
					 tok[2], tok[1], LAYOUT_MAX_OFFSET);
				return -1;
			}
			seen[f] = true;
			out->off[f] = v[0];
			fields++;
		} else {
			snprintf(why, wlen, "line %d: not understood", lineno);
			return -1;
		}
	}
	if (!magic) {
		snprintf(why, wlen, "empty: not a layout file");
		return -1;
	}
	if (!fields || !out->erts[0] || !out->flavor || !out->have_pid || !out->have_code_ix) {
		snprintf(why, wlen, "incomplete: it needs erts, flavor, pid, code_ix and field lines");
		return -1;
	}
	if (!ended) {
		snprintf(why, wlen, "cut short: no end line (write it again with --write-layout)");
		return -1;
	}
	return 0;
}

int xb_layout_read(struct xb_vm *vm, const char *path, int64_t off[XB_F_COUNT])
{
	size_t n;
	/* The file is the user's, not the target's: read it as any file,
	 * bounded. */
	char *text = xb_slurp_max(path, LAYOUT_MAX_BYTES + 1, &n);
	if (!text)
		return xb_fail("cannot read the layout file %s: %s; pass a file written by --write-layout", path,
			       errno == EFBIG ? "too large" : strerror(errno));
	struct xb_layout_file lf;
	char why[200];
	int rc = xb_layout_parse(text, n, &lf, why, sizeof(why));
	free(text);
	if (rc < 0)
		return xb_fail("the layout file %s is refused: %s", path, why);
	if (lf.flavor != (int)vm->flavor)
		return xb_fail("the layout file %s describes a %s VM; PID %d runs the %s: write a layout on a "
			       "build of the same flavour", path, lf.flavor == XB_FLAVOR_JIT ? "JIT" : "interpreter",
			       (int)vm->pid, vm->flavor == XB_FLAVOR_JIT ? "JIT" : "interpreter");
	if (strcmp(lf.erts, vm->erts) != 0 && xb_verbose)
		xb_note(stderr, "the layout file %s was written on erts %s; this VM is erts %s: its "
				"offsets are proven again here", path, lf.erts, vm->erts);
	memcpy(off, lf.off, sizeof(lf.off));
	vm->pid_num_bits = lf.pid_num_bits;
	vm->pid_ser_bits = lf.pid_ser_bits;
	vm->pid_pixdata = lf.pid_pixdata;
	vm->num_code_ix = lf.num_code_ix;
	if (lf.have_regs)
		vm->regs = lf.regs;
	static char names[3][32];
	for (int k = 0; k < 3; k++) {
		snprintf(names[k], sizeof(names[k]), "%s", lf.thread_fmt[k]);
		vm->thread_fmt[k] = names[k][0] ? names[k] : NULL;
	}
	return 0;
}


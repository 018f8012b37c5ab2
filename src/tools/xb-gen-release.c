/* xb-gen-release - write a release table (src/beam/releases/erts-V.c) from
 * the DWARF of source-built beams and a few constants of the OTP source.
 * Driven by scripts/gen-release-table; see docs/adding-a-release.md. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/dwarf_layout.h"
#include "xb/regs.h"
#include "xb/release.h"

#include <ctype.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The text of FILE (relative to the OTP source tree), or exit. */
static char *read_src(const char *src, const char *file)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", src, file);
	char *text = xb_slurp(path, NULL);
	if (!text) {
		fprintf(stderr, "xb-gen-release: cannot read %s\n", path);
		exit(1);
	}
	return text;
}

/* The value of `#define NAME EXPR` in FILE, where EXPR is an integer
 * expression of + - * ( ) and other such macros (e.g. erl_term.h's
 * `_PID_DATA_SIZE (ERTS_SIZEOF_TERM*8 - _TAG_IMMED1_SIZE)`).  We build
 * for 64-bit x86 only: ERTS_SIZEOF_TERM is 8. */
static long src_define(const char *src, const char *file, const char *name);

struct expr {
	const char *p, *src, *file;
};

static long expr_sum(struct expr *e);

static long expr_atom(struct expr *e)
{
	while (*e->p == ' ' || *e->p == '\t')
		e->p++;
	if (*e->p == '(') {
		e->p++;
		long v = expr_sum(e);
		while (*e->p == ' ')
			e->p++;
		if (*e->p == ')')
			e->p++;
		return v;
	}
	if (*e->p >= '0' && *e->p <= '9')
		return strtol(e->p, (char **)&e->p, 0);
	char id[128];
	size_t n = 0;
	while ((isalnum((unsigned char)*e->p) || *e->p == '_') && n + 1 < sizeof(id))
		id[n++] = *e->p++;
	id[n] = 0;
	if (strcmp(id, "ERTS_SIZEOF_TERM") == 0)
		return 8;
	if (!n) {
		fprintf(stderr, "xb-gen-release: cannot evaluate '%s'\n", e->p);
		exit(1);
	}
	return src_define(e->src, e->file, id);
}

static long expr_prod(struct expr *e)
{
	long v = expr_atom(e);
	for (;;) {
		while (*e->p == ' ')
			e->p++;
		if (*e->p != '*')
			return v;
		e->p++;
		v *= expr_atom(e);
	}
}

static long expr_sum(struct expr *e)
{
	long v = expr_prod(e);
	for (;;) {
		while (*e->p == ' ')
			e->p++;
		if (*e->p == '+') {
			e->p++;
			v += expr_prod(e);
		} else if (*e->p == '-') {
			e->p++;
			v -= expr_prod(e);
		} else {
			return v;
		}
	}
}

static long src_define(const char *src, const char *file, const char *name)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "erts/emulator/beam/%s", file);
	char *text = read_src(src, rel);
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char n[128];
		int pos = 0;
		if (sscanf(l, " # define %127s %n", n, &pos) == 1 && pos > 0 && strcmp(n, name) == 0) {
			struct expr e = { l + pos, src, file };
			long v = expr_sum(&e);
			free(text);
			return v;
		}
	}
	free(text);
	fprintf(stderr, "xb-gen-release: no #define %s in %s/%s\n", name, src, rel);
	exit(1);
}

/* `const x86::Gp NAME = x86::REG;` in jit/x86/beam_asm.hpp; the first
 * definition wins (the native-stack configuration used on Linux x86-64). */
static int jit_reg(const char *src, const char *var)
{
	char *text = read_src(src, "erts/emulator/beam/jit/x86/beam_asm.hpp");
	int r = XB_PREG_NONE;
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char n[64], reg[16];
		if (sscanf(l, " const x86::Gp %63s = x86::%15[a-z0-9];", n, reg) == 2 &&
		    strcmp(n, var) == 0) {
			r = xb_preg_parse(reg);
			/* "r14d" (OTP 27+ FCALLS): the low half of r14 */
			size_t len = strlen(reg);
			if (r == XB_PREG_NONE && len > 1 && reg[len - 1] == 'd') {
				reg[len - 1] = 0;
				r = xb_preg_parse(reg);
			}
			break;
		}
	}
	free(text);
	return r;
}

/* The scheduler thread name formats: the 2nd..4th
 * `erts_snprintf(opts.name, sizeof(name), "...")` of erl_process.c
 * (after the run-queue supervisor): normal, dirty cpu, dirty io. */
static void thread_formats(const char *src, char fmt[3][64])
{
	char *text = read_src(src, "erts/emulator/beam/erl_process.c");
	int k = 0;
	for (char *p = text; (p = strstr(p, "snprintf(opts.name, sizeof(name), \"")) && k < 4; p++) {
		char *q = strchr(p, '"') + 1, *end = strchr(q, '"');
		if (!end)
			break;
		if (strstr(q, "%") && strstr(q, "%") < end && k < 3) {
			size_t n = (size_t)(end - q) < 63 ? (size_t)(end - q) : 63;
			memcpy(fmt[k], q, n);
			fmt[k][n] = 0;
			char *lu = strstr(fmt[k], "%lu"); /* "%lu_scheduler" */
			if (lu) {
				lu[1] = 'd';
				memmove(lu + 2, lu + 3, strlen(lu + 3) + 1);
			}
			k++;
		}
	}
	free(text);
	if (k < 3) {
		fprintf(stderr, "xb-gen-release: scheduler thread names not found in erl_process.c\n");
		exit(1);
	}
}

/* Does the 64-bit erts_ptab_id2data decode "pixdata" (OTP 27+), or take
 * the low half of the term (huint.hval[ERTS_HUINT_HVAL_LOW], OTP 25)? */
static int pid_pixdata(const char *src)
{
	char *text = read_src(src, "erts/emulator/beam/erl_ptab.h");
	int r = strstr(text, "hval[ERTS_HUINT_HVAL_LOW] >> ERTS_PTAB_ID_DATA_SHIFT") == NULL;
	free(text);
	return r;
}

/* erl_term.h: `#define NAME_SUBTAG (0xN << _TAG_PRIMARY_SIZE)` (to OTP 28)
 * or `__MAKE_SUBTAG(0xN)` (OTP 29): the first hex number on the line. */
static void subtags(const char *src, signed char out[16])
{
	char *text = read_src(src, "erts/emulator/beam/erl_term.h");
	memset(out, 0, 16);
	for (int k = 1; k < XB_ST_COUNT; k++) {
		const char *name = xb_subtag_macro[k];
		char *save = NULL, *copy = strdup(text);
		for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char n[64];
			int pos = 0;
			if (sscanf(l, " # define %63s %n", n, &pos) != 1 || strcmp(n, name) != 0)
				continue;
			char *hex = strstr(l + pos, "0x");
			if (!hex)
				continue;
			long v = strtol(hex, NULL, 16);
			if (v >= 0 && v < 16)
				out[v] = (signed char)k;
			break;
		}
		free(copy);
	}
	free(text);
}

/* erl_alloc.types: `type NAME FIXED_SIZE CLASS DESCR` lines, in order
 * (erl_alloc_types.h numbers the types of an allocator in file order). */
static void fix_types(const char *src, char *out, size_t len)
{
	char *text = read_src(src, "erts/emulator/beam/erl_alloc.types");
	size_t used = 0;
	out[0] = 0;
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char name[64], alloc[64];
		if (sscanf(l, "type %63s %63s", name, alloc) == 2 && strcmp(alloc, "FIXED_SIZE") == 0 &&
		    used + strlen(name) + 2 < len)
			used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "", name);
	}
	free(text);
}

/* PATH's DWARF (its fd in *FD, for close_dwarf); exits on failure. */
static Dwarf *open_dwarf(const char *path, int *fd)
{
	*fd = open(path, O_RDONLY);
	Dwarf *dw = *fd >= 0 ? dwarf_begin(*fd, DWARF_C_READ) : NULL;
	if (!dw) {
		fprintf(stderr, "xb-gen-release: %s: no DWARF (%s)\n", path, dwarf_errmsg(-1));
		exit(1);
	}
	return dw;
}

static void close_dwarf(Dwarf *dw, int fd)
{
	dwarf_end(dw);
	close(fd);
}

static void print_flavor(const char *name, int64_t *off, struct xb_regroles *r)
{
	printf("\t.%s = {\n\t\t.off = {\n", name);
	for (int i = 0; i < XB_F_COUNT; i++) {
		if (off[i] == XB_NOFIELD)
			printf("\t\t\t[%s] = XB_NOFIELD, /* %s */\n", xb_field_specs[i].id, xb_field_name(i));
		else
			printf("\t\t\t[%s] = %lld, /* %s (%s) */\n", xb_field_specs[i].id, (long long)off[i],
			       xb_field_name(i), xb_field_specs[i].source);
	}
	printf("\t\t},\n\t\t.regs = { .c_p = %s, .E = %s, .I = %s, .E_saved = %s, .fcalls = %s },\n\t},\n",
	       xb_preg_enum_name(r->c_p), xb_preg_enum_name(r->E), xb_preg_enum_name(r->I), xb_preg_enum_name(r->E_saved),
	       xb_preg_enum_name(r->fcalls));
}

int main(int argc, char **argv)
{
	const char *erts = NULL, *otp = NULL, *src = NULL, *emu = NULL, *jit = NULL;
	static const struct option opts[] = {
		{ "erts", 1, 0, 'e' }, { "otp", 1, 0, 'o' }, { "src", 1, 0, 's' },
		{ "emu", 1, 0, 'm' },  { "jit", 1, 0, 'j' }, { 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'e': erts = optarg; break;
		case 'o': otp = optarg; break;
		case 's': src = optarg; break;
		case 'm': emu = optarg; break;
		case 'j': jit = optarg; break;
		default: return 2;
		}
	}
	if (!erts || !otp || !src || (!emu && !jit)) {
		fprintf(stderr, "usage: xb-gen-release --erts V --otp N --src OTP_SRC_DIR [--emu BEAM] [--jit BEAM]\n");
		return 2;
	}
	int64_t eoff[XB_F_COUNT], joff[XB_F_COUNT];
	struct xb_regroles eregs = { XB_PREG_NONE, XB_PREG_NONE, XB_PREG_NONE, XB_PREG_NONE, XB_PREG_NONE };
	struct xb_regroles jregs = eregs;
	for (int i = 0; i < XB_F_COUNT; i++)
		eoff[i] = joff[i] = XB_NOFIELD;
	int fd;
	if (emu) {
		Dwarf *dw = open_dwarf(emu, &fd);
		xb_dwarf_layout(dw, eoff);
		/* beam_emu.c: register BeamInstr *I REG_I; register Eterm *E REG_stop */
		eregs.I = xb_dwarf_fixed_reg(dw, "process_main", "I");
		eregs.E = xb_dwarf_fixed_reg(dw, "process_main", "E");
		eregs.c_p = xb_dwarf_fixed_reg(dw, "process_main", "c_p");
		close_dwarf(dw, fd);
	}
	if (jit) {
		Dwarf *dw = open_dwarf(jit, &fd);
		xb_dwarf_layout(dw, joff);
		close_dwarf(dw, fd);
		jregs.c_p = jit_reg(src, "c_p");
		jregs.E = jit_reg(src, "E");
		jregs.E_saved = jit_reg(src, "E_saved");
		jregs.I = XB_PREG_IP; /* the sampled pc is the Erlang pc */
		jregs.fcalls = jit_reg(src, "FCALLS");
	}
	char ident[64];
	snprintf(ident, sizeof(ident), "%s", erts);
	for (char *p = ident; *p; p++)
		if (*p == '.' || *p == '-')
			*p = '_';
	long code_ix = src_define(src, "code_ix.h", "ERTS_NUM_CODE_IX");
	long num = src_define(src, "erl_term.h", "_PID_NUM_SIZE");
	long data = src_define(src, "erl_term.h", "_PID_DATA_SIZE");

	printf("/* Release table for erts %s (OTP %s).\n * Generated by scripts/gen-release-table "
	       "(xb-gen-release) from the DWARF of\n * source builds: do not edit by hand. */\n",
	       erts, otp);
	printf("#include \"xb/release.h\"\n\n");
	printf("const struct xb_release xb_release_erts_%s = {\n", ident);
	printf("\t.erts = \"%s\",\n\t.otp = \"%s\",\n", erts, otp);
	printf("\t.num_code_ix = %ld, /* code_ix.h ERTS_NUM_CODE_IX */\n", code_ix);
	printf("\t.pid_num_bits = %ld, /* erl_term.h _PID_NUM_SIZE */\n", num);
	printf("\t.pid_ser_bits = %ld, /* erl_term.h _PID_DATA_SIZE - _PID_NUM_SIZE */\n", data - num);
	printf("\t.pid_pixdata = %d, /* erl_ptab.h erts_ptab_id2data (64-bit) */\n", pid_pixdata(src));
	print_flavor("emu", eoff, &eregs);
	print_flavor("jit", joff, &jregs);
	char tf[3][64];
	thread_formats(src, tf);
	printf("\t.thread_fmt = { /* erl_process.c: normal, dirty CPU, dirty I/O schedulers */\n"
	       "\t\t[0] = \"%s\",\n\t\t[1] = \"%s\",\n\t\t[2] = \"%s\",\n\t},\n", tf[0], tf[1], tf[2]);
	printf("\t.sym_ranges = \"r\", /* beam_ranges.c: static struct ranges r[] */\n");
	printf("\t.sym_ranges_refs = \"erts_start_staging_ranges,erts_end_staging_ranges,"
	       "erts_update_ranges,erts_lookup_function_info\",\n");
	signed char st[16];
	static const char *const kind_id[XB_ST_COUNT] = {
		"XB_ST_NONE", "XB_ST_TUPLE", "XB_ST_MATCHSTATE", "XB_ST_POS_BIG", "XB_ST_NEG_BIG", "XB_ST_REF",
		"XB_ST_FUN", "XB_ST_FLOAT", "XB_ST_REFC_BIN", "XB_ST_HEAP_BIN", "XB_ST_SUB_BIN", "XB_ST_EXT_PID",
		"XB_ST_EXT_PORT", "XB_ST_EXT_REF", "XB_ST_MAP", "XB_ST_FUN_REF", "XB_ST_HEAP_BITS", "XB_ST_SUB_BITS",
		"XB_ST_BIN_REF", "XB_ST_RECORD",
	};
	subtags(src, st);
	printf("\t.subtag = { /* erl_term.h *_SUBTAG */\n");
	for (int v = 0; v < 16; v++)
		if (st[v])
			printf("\t\t[0x%x] = %s, /* %s */\n", v, kind_id[(int)st[v]], xb_subtag_macro[(int)st[v]]);
	printf("\t},\n");
	char ft[1024];
	fix_types(src, ft, sizeof(ft));
	printf("\t.fix_types = \"%s\", /* erl_alloc.types: FIXED_SIZE types in order */\n", ft);
	printf("};\n");
	return 0;
}

/* test_unit.c - unit tests for the pure code of libxbcore/libxblayout.
 *
 * Prints TAP, which `meson test` reads (protocol 'tap', one subtest per
 * case): "ok NAME" or "not ok NAME" followed by "# NAME: detail", and the
 * plan "1..N" last.  Exit status 1 if any case failed.  Before each case it
 * writes "# case NAME" to stderr, so that a sanitizer report (which aborts
 * the program under XB_SANITIZE=1 ./build.sh) is seen in the test's log
 * right after the case that caused it.
 *
 *   meson test -C build                      every case (tests/run-all.sh)
 *   build/tests/unit/test_unit [SUBSTRING]   only cases whose name
 *                                            contains SUBSTRING
 *
 * Build with XB_SANITIZE=1 ./build.sh to run these under ASan/UBSan: the
 * truncated-buffer cases use exact-size heap buffers so that any read past
 * the end is caught. */
#define _GNU_SOURCE
#include "xb/bpf_capture.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/demangle.h"
#include "xb/output.h"
#include "xb/output_util.h"
#include "xb/perfmap.h"
#include "xb/procmaps.h"
#include "xb/profile.h"
#include "xb/writers.h"
#include "xb/session.h"
#include "xb/sampler.h"
#include "xb/release.h"
#include "xb/term.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "profile.pb-c.h" /* generated from vendor/pprof/profile.proto */

#include "unit.h"

static int n_pass, n_fail;
static const char *filter;
char fail_msg[2048];
int case_failed;

void run_case(const char *name, void (*fn)(void))
{
	if (filter && !strstr(name, filter))
		return;
	case_failed = 0;
	fail_msg[0] = 0;
	/* Sanitizer reports go to stderr: this marker names the case they
	 * come from in the test's log. */
	fprintf(stderr, "# case %s\n", name);
	fflush(stderr);
	fn();
	if (case_failed) {
		printf("not ok %s\n# %s: %s\n", name, name, fail_msg);
		n_fail++;
	} else {
		printf("ok %s\n", name);
		n_pass++;
	}
	fflush(stdout);
}

/* ---- xb_atom_quote ---------------------------------------------------- */

static void expect_quote(const char *in, size_t len, const char *want)
{
	char out[256];
	memset(out, 'X', sizeof(out));
	size_t n = xb_atom_quote(in, len, out, sizeof(out));
	CHECK(strcmp(out, want) == 0, "quote(\"%.*s\") = \"%s\", want \"%s\"", (int)len, in, out, want);
	CHECK(n == strlen(want), "quote(\"%.*s\") returned %zu, want %zu", (int)len, in, n, strlen(want));
}
#define Q(in, want) expect_quote(in, sizeof(in) - 1, want)

static void t_quote_plain(void)
{
	Q("hello", "hello");
	Q("lists", "lists");
	Q("a1_B2", "a1_B2");
	Q("x", "x");
}
static void t_quote_uppercase_first(void)
{
	Q("Hello", "'Hello'");
	Q("ABC", "'ABC'");
}
static void t_quote_underscore_digit_first(void)
{
	Q("_foo", "'_foo'");
	Q("1abc", "'1abc'");
}
static void t_quote_space_and_punct(void)
{
	Q("hello world", "'hello world'");
	Q("foo@bar", "'foo@bar'"); /* erts quotes '@' (io_lib does not) */
	Q("-foo/1-fun-0-", "'-foo/1-fun-0-'");
	Q("a.b", "'a.b'");
}
static void t_quote_escapes(void)
{
	Q("it's", "'it\\'s'");
	Q("a\\b", "'a\\\\b'");
	Q("a\nb", "'a\\nb'");
	Q("t\tab", "'t\\tab'");
	Q("c\001", "'c\\1'");
}
static void t_quote_empty(void)
{
	expect_quote("", 0, "''");
}
static void t_quote_latin1_lowercase_utf8(void)
{
	Q("\xc3\xa9", "\xc3\xa9");           /* é: Latin-1 lowercase, unquoted */
	Q("caf\xc3\xa9", "caf\xc3\xa9");     /* café */
	Q("\xc3\x9f" "x", "\xc3\x9f" "x");   /* ßx: ß counts as lowercase */
	Q("a\xc3\x89", "a\xc3\x89");         /* aÉ: uppercase Latin-1 inside is alnum */
}
static void t_quote_latin1_uppercase_first(void)
{
	Q("\xc3\x89lan", "'\xc3\x89lan'");   /* Élan */
	Q("a\xc3\xb7", "'a\xc3\xb7'");       /* a÷: ÷ is not a letter */
}
static void t_quote_3byte_utf8(void)
{
	Q("a\xe2\x82\xac", "'a\xe2\x82\xac'"); /* a€ */
	Q("\xe2\x82\xac", "'\xe2\x82\xac'");   /* € */
	Q("\xf0\x9f\x98\x80", "'\xf0\x9f\x98\x80'"); /* 4-byte emoji */
}
static void t_quote_c1_control(void)
{
	Q("a\xc2\x85", "'a\\205'"); /* U+0085 printed as octal, like erts */
}
static void t_quote_reserved_words(void)
{
	/* erts (unlike io_lib) does not quote reserved words */
	Q("receive", "receive");
	Q("after", "after");
	Q("end", "end");
	Q("case", "case");
	Q("fun", "fun");
	Q("andalso", "andalso");
}
static void t_quote_truncation(void)
{
	char out[8];
	memset(out, 'X', sizeof(out));
	size_t n = xb_atom_quote("hello", 5, out, 4);
	CHECK(n == 3 && strcmp(out, "hel") == 0, "outlen 4: got %zu \"%s\"", n, out);
	CHECK(out[4] == 'X', "wrote past outlen");
	memset(out, 'X', sizeof(out));
	n = xb_atom_quote("Hello world", 11, out, 6);
	CHECK(n == 5 && strcmp(out, "'Hell") == 0, "quoted, outlen 6: got %zu \"%s\"", n, out);
	CHECK(out[6] == 'X', "wrote past outlen");
	n = xb_atom_quote("hello", 5, out, 0);
	CHECK(n == 0 && out[0] == '\'', "outlen 0 wrote something");
	/* A UTF-8 sequence cut short at the end of the atom must not be read
	 * past (the exact-size heap buffer makes ASan catch a read past it),
	 * and what is there is copied, quoted (a cut sequence is no letter),
	 * nothing invented after it. */
	char *cut = malloc(2);
	memcpy(cut, "a\xe2", 2);
	char big[64];
	memset(big, 'X', sizeof(big));
	n = xb_atom_quote(cut, 2, big, sizeof(big));
	CHECK(n == 4 && strcmp(big, "'a\xe2'") == 0, "cut 3-byte sequence: got %zu \"%s\"", n, big);
	CHECK(big[5] == 'X', "wrote past the terminating NUL");
	free(cut);
	/* Cut after two of three bytes, and a 4-byte sequence cut after one. */
	cut = malloc(3);
	memcpy(cut, "b\xe2\x82", 3);
	n = xb_atom_quote(cut, 3, big, sizeof(big));
	CHECK(n == 5 && strcmp(big, "'b\xe2\x82'") == 0, "cut after 2 of 3 bytes: got %zu \"%s\"", n, big);
	free(cut);
	cut = malloc(1);
	memcpy(cut, "\xf0", 1);
	n = xb_atom_quote(cut, 1, big, sizeof(big));
	CHECK(n == 3 && strcmp(big, "'\xf0'") == 0, "lone 4-byte lead: got %zu \"%s\"", n, big);
	free(cut);
}

/* ---- xb_format_pid ---------------------------------------------------- */

static uint64_t mkpid(uint64_t num, uint64_t ser)
{
	return (num << 4) | (ser << (4 + 15)) | XB_TAG_IMMED1_PID;
}

static void t_format_pid(void)
{
	char buf[64];
	CHECK(xb_format_pid(mkpid(80, 0), 15, 13, NULL, buf, sizeof(buf)) == 0 &&
		      strcmp(buf, "<0.80.0>") == 0, "got %s", buf);
	CHECK(xb_format_pid(mkpid(0, 0), 15, 13, NULL, buf, sizeof(buf)) == 0 &&
		      strcmp(buf, "<0.0.0>") == 0, "got %s", buf);
	CHECK(xb_format_pid(mkpid(32767, 8191), 15, 13, NULL, buf, sizeof(buf)) == 0 &&
		      strcmp(buf, "<0.32767.8191>") == 0, "max: got %s", buf);
	CHECK(xb_format_pid(mkpid(5, 3) | (1ull << 40) | (1ull << 63), 15, 13, NULL, buf, sizeof(buf)) == 0 &&
		      strcmp(buf, "<0.5.3>") == 0, "high bits: got %s", buf);
	CHECK(xb_format_pid((7ull << 6) | XB_TAG_IMMED2_ATOM, 15, 13, NULL, buf, sizeof(buf)) == -1,
	      "an atom formatted as a pid");
	CHECK(xb_format_pid((42ull << 4) | XB_TAG_IMMED1_SMALL, 15, 13, NULL, buf, sizeof(buf)) == -1,
	      "a small formatted as a pid");
	CHECK(xb_format_pid(mkpid(1, 1), 0, 13, NULL, buf, sizeof(buf)) == -1, "num_bits 0 accepted");
	char tiny[4];
	CHECK(xb_format_pid(mkpid(12345, 1), 15, 13, NULL, tiny, sizeof(tiny)) == 0 && strlen(tiny) == 3,
	      "truncation");
}

/* ---- xb_parse_pid ----------------------------------------------------- */

static void t_parse_pid(void)
{
	int pid = -7;
	CHECK(xb_parse_pid("123", &pid) == 0 && pid == 123, "123 -> %d", pid);
	CHECK(xb_parse_pid("2147483647", &pid) == 0 && pid == 2147483647, "INT_MAX");
	const char *bad[] = { "", "abc", "12a", "1.5", "-1", "0", "2147483648",
			      "99999999999999999999", "0x10", "12 " };
	for (size_t i = 0; i < XB_ARRAY_SIZE(bad); i++) {
		pid = -7;
		CHECK(xb_parse_pid(bad[i], &pid) < 0, "\"%s\" accepted as %d", bad[i], pid);
		CHECK(xb_err()[0] != 0, "\"%s\": no message", bad[i]);
	}
	CHECK(xb_parse_pid(NULL, &pid) < 0, "NULL accepted");
}

/* ---- xb_maps_parse ---------------------------------------------------- */

static const char MAPS[] =
	"55d0c0a00000-55d0c0b00000 r-xp 00001000 08:01 1234                       /usr/lib/erlang/erts-13.1.5/bin/beam.smp\n"
	"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	"7f0000001000-7f0000002000 r-xs 00000000 00:01 5678                       /memfd:vmem (deleted)\n"
	"7f0000003000-7f0000004000 r--p 00002000 fd:00 42                         /tmp/dir with spaces/lib x.so\n"
	"7f0000004000-7f0000005000 ---p 00000000 00:00 0\n"
	"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]";

static void t_maps_parse(void)
{
	struct xb_maps m;
	CHECK(xb_maps_parse(MAPS, &m) == 0, "parse failed: %s", xb_err());
	if (case_failed)
		return;
	CHECK(m.n == 6, "n = %zu", m.n);
	if (m.n == 6) {
		const struct xb_map *b = &m.v[0];
		CHECK(b->start == 0x55d0c0a00000ull && b->end == 0x55d0c0b00000ull, "beam range");
		CHECK(b->offset == 0x1000 && b->inode == 1234 && b->dev_major == 8 && b->dev_minor == 1,
		      "beam offset/inode/dev");
		CHECK(b->readable && !b->writable && b->executable && !b->shared, "beam perms");
		CHECK(strcmp(b->path, "/usr/lib/erlang/erts-13.1.5/bin/beam.smp") == 0, "beam path '%s'",
		      b->path);
		CHECK(strcmp(m.v[1].path, "") == 0, "anonymous path '%s'", m.v[1].path);
		CHECK(m.v[1].writable && !m.v[1].executable, "anon perms");
		CHECK(strcmp(m.v[2].path, "/memfd:vmem (deleted)") == 0, "memfd path '%s'", m.v[2].path);
		CHECK(m.v[2].shared && m.v[2].executable, "memfd perms");
		CHECK(strcmp(m.v[3].path, "/tmp/dir with spaces/lib x.so") == 0, "spaces path '%s'",
		      m.v[3].path);
		CHECK(m.v[3].offset == 0x2000 && m.v[3].dev_major == 0xfd, "spaces offset/dev");
		CHECK(strcmp(m.v[4].path, "") == 0 && !m.v[4].readable, "guard page");
		CHECK(strcmp(m.v[5].path, "[stack]") == 0, "stack path '%s' (no final newline)",
		      m.v[5].path);
		CHECK(xb_maps_find(&m, 0x55d0c0a00000ull) == &m.v[0], "find start");
		CHECK(xb_maps_find(&m, 0x55d0c0afffffull) == &m.v[0], "find end-1");
		CHECK(xb_maps_find(&m, 0x55d0c0b00000ull) == NULL, "find end");
		CHECK(xb_maps_find(&m, 0x7f0000002800ull) == NULL, "find gap");
		CHECK(xb_maps_find(&m, 0x7f0000003fffull) == &m.v[3], "find spaces");
		CHECK(xb_maps_find(&m, 0x10) == NULL, "find low");
	}
	xb_maps_free(&m);
	CHECK(m.n == 0 && m.v == NULL, "free");
}

static void t_maps_parse_edge(void)
{
	struct xb_maps m;
	CHECK(xb_maps_parse("", &m) == 0 && m.n == 0, "empty text");
	xb_maps_free(&m);
	CHECK(xb_maps_parse("\n\n", &m) == 0 && m.n == 0, "blank lines");
	xb_maps_free(&m);
	const char *bad[] = {
		"garbage\n",
		"7f0000000000-7f0000001000\n",
		"7f0000001000-7f0000000000 rw-p 00000000 00:00 0\n", /* end < start */
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 0\nnot a line\n",
		"17f00000000000000-17f00000000000001 rw-p 00000000 00:00 0\n", /* 17 digits */
		"7f0000000000-7f0000001000 rw- 00000000 00:00 0\n",           /* 3 perms */
		"7f0000000000-7f0000001000 rw-p 00000000 00:00\n",             /* no inode */
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 99999999999999999999\n",
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 0x\n",
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 /x\n7f",
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(bad); i++) {
		m.n = 99;
		CHECK(xb_maps_parse(bad[i], &m) < 0, "accepted bad input %zu", i);
		CHECK(m.n == 0 && m.v == NULL, "bad input %zu: output not cleared", i);
	}
	/* bounded by the length given, not by a NUL: the path ends there */
	static const char cut[] = "7f0000000000-7f0000001000 r--p 00000000 00:00 0 /lib/x.soXXXX";
	CHECK(xb_maps_parse_n(cut, sizeof(cut) - 5, &m) == 0 && m.n == 1 && strcmp(m.v[0].path, "/lib/x.so") == 0,
	      "length-bounded line");
	xb_maps_free(&m);
	/* past XB_MAPS_MAX_LINES the rest is left out, and said */
	size_t lines = XB_MAPS_MAX_LINES + 3, len = 0;
	char *big = malloc(lines * 64);
	CHECK(big != NULL, "malloc");
	if (!big)
		return;
	size_t at1000 = 0;
	for (size_t i = 0; i < lines; i++, at1000 = i == 1000 ? len : at1000)
		len += (size_t)sprintf(big + len, "%llx-%llx rw-p 00000000 00:00 0 \n",
				       0x10000ull + 0x2000ull * i, 0x11000ull + 0x2000ull * i);
	CHECK(xb_maps_parse_n(big, len, &m) == 0 && m.n == XB_MAPS_MAX_LINES && m.truncated,
	      "cap: n = %zu, truncated %d", m.n, m.truncated);
	xb_maps_free(&m);
	CHECK(xb_maps_parse_n(big, at1000, &m) == 0 && m.n == 1000 && !m.truncated,
	      "1000 lines: n = %zu, truncated %d", m.n, m.truncated);
	xb_maps_free(&m);
	free(big);
}

/* ---- JIT symfiles ----------------------------------------------------- */

static const int64_t *jit_off(void)
{
	const struct xb_release *r = xb_release_find("13.1.5");
	return r ? xb_release_flavor(r, XB_FLAVOR_JIT)->off : NULL;
}

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void b_at(struct buf *b, size_t at, const void *v, size_t n)
{
	if (at + n > b->cap) {
		size_t nc = b->cap ? b->cap : 256;
		while (nc < at + n)
			nc *= 2;
		b->p = realloc(b->p, nc);
		memset(b->p + b->cap, 0, nc - b->cap);
		b->cap = nc;
	}
	memcpy(b->p + at, v, n);
	if (at + n > b->len)
		b->len = at + n;
}
static void b_u16(struct buf *b, size_t at, uint16_t v) { b_at(b, at, &v, 2); }
static void b_u32(struct buf *b, size_t at, uint32_t v) { b_at(b, at, &v, 4); }
static void b_u64(struct buf *b, size_t at, uint64_t v) { b_at(b, at, &v, 8); }

struct rng {
	uint32_t start, end;
	const char *name;
	int lines;
};

/* A module record as beam_jit_metadata.cpp lays it out (records back to
 * back, each sizeof(struct) + name_length), using the release table's
 * offsets. */
static struct buf module_symfile(const int64_t *off, uint64_t base, const char *mod,
				 const struct rng *r, size_t nr)
{
	struct buf b = { 0 };
	int64_t pay = off[XB_F_DBGINFO_PAYLOAD];
	uint16_t ml = (uint16_t)strlen(mod);
	b_u32(&b, 0, 1);
	b_u64(&b, (size_t)(pay + off[XB_F_MODINFO_BASE_ADDRESS]), base);
	b_u32(&b, (size_t)(pay + off[XB_F_MODINFO_RANGE_COUNT]), (uint32_t)nr);
	b_u32(&b, (size_t)(pay + off[XB_F_MODINFO_RANGE_COUNT] + 4), r[nr - 1].end); /* code_size */
	b_u16(&b, (size_t)(pay + off[XB_F_MODINFO_NAME_LENGTH]), ml);
	b_at(&b, (size_t)(pay + off[XB_F_MODINFO_NAME]), mod, ml);
	size_t p = (size_t)off[XB_F_DBGINFO_SIZE] + ml;
	for (size_t i = 0; i < nr; i++) {
		uint16_t nl = (uint16_t)strlen(r[i].name);
		b_u32(&b, p + (size_t)off[XB_F_RANGEINFO_START], r[i].start);
		b_u32(&b, p + (size_t)off[XB_F_RANGEINFO_END], r[i].end);
		b_u32(&b, p + (size_t)off[XB_F_RANGEINFO_LINE_COUNT], (uint32_t)r[i].lines);
		b_u16(&b, p + (size_t)off[XB_F_RANGEINFO_NAME_LENGTH], nl);
		b_at(&b, p + (size_t)off[XB_F_RANGEINFO_NAME], r[i].name, nl);
		p += (size_t)off[XB_F_RANGEINFO_SIZE] + nl;
		for (int l = 0; l < r[i].lines; l++) {
			const char *file = "mymod.erl";
			uint16_t fl = (uint16_t)strlen(file);
			b_u32(&b, p, r[i].start + 4u * (uint32_t)l); /* start */
			b_u32(&b, p + 4, 10u + (uint32_t)l);          /* line */
			b_u16(&b, p + (size_t)off[XB_F_LINEINFO_FILE_LENGTH], fl);
			b_at(&b, p + (size_t)off[XB_F_LINEINFO_FILE], file, fl);
			p += (size_t)off[XB_F_LINEINFO_SIZE] + fl;
		}
	}
	b.len = p;
	return b;
}

static const struct rng MYMOD[] = {
	{ 0x000, 0x040, "mymod::codeHeader", 0 },
	{ 0x040, 0x058, "mymod:f/1-CodeInfoPrologue", 0 },
	{ 0x058, 0x100, "mymod:f/1", 2 },
	{ 0x100, 0x118, "mymod:'g h'/0-CodeInfoPrologue", 0 },
	{ 0x118, 0x180, "mymod:'g h'/0", 1 },
	{ 0x180, 0x190, "mymod::codeFooter", 1 },
};
#define BASE 0x7f0000010000ull

static void t_symfile_offsets_otp25(void)
{
	/* The layout /work/shared/beam-notes.md describes for OTP 25. */
	const int64_t *off = jit_off();
	CHECK(off != NULL, "no release table for erts 13.1.5");
	if (!off)
		return;
	CHECK(off[XB_F_DBGINFO_PAYLOAD] == 8 && off[XB_F_DBGINFO_SIZE] == 32, "debug_info");
	CHECK(off[XB_F_MODINFO_BASE_ADDRESS] == 0 && off[XB_F_MODINFO_RANGE_COUNT] == 8 &&
		      off[XB_F_MODINFO_NAME_LENGTH] == 16 && off[XB_F_MODINFO_NAME] == 18,
	      "module_info");
	CHECK(off[XB_F_RANGEINFO_SIZE] == 16 && off[XB_F_RANGEINFO_START] == 0 &&
		      off[XB_F_RANGEINFO_END] == 4 && off[XB_F_RANGEINFO_LINE_COUNT] == 8 &&
		      off[XB_F_RANGEINFO_NAME_LENGTH] == 12 && off[XB_F_RANGEINFO_NAME] == 14,
	      "range_info");
	CHECK(off[XB_F_LINEINFO_SIZE] == 12 && off[XB_F_LINEINFO_FILE_LENGTH] == 8 &&
		      off[XB_F_LINEINFO_FILE] == 10, "line_info");
	CHECK(off[XB_F_EMUINFO_FRAME_LAYOUT] == 0 && off[XB_F_EMUINFO_NORMAL_EXIT] == 8,
	      "emulator_info");
}

static int expect_entries(struct xb_codemap *cm, const struct rng *want, size_t n, uint32_t seq)
{
	CHECK(cm->n == n, "%zu entries, want %zu", cm->n, n);
	if (cm->n != n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		CHECK(cm->v[i].start == BASE + want[i].start && cm->v[i].end == BASE + want[i].end &&
			      strcmp(cm->v[i].name, want[i].name) == 0 && cm->v[i].seq == seq,
		      "entry %zu: %llx-%llx %s seq %u, want %llx-%llx %s seq %u", i,
		      (unsigned long long)cm->v[i].start, (unsigned long long)cm->v[i].end,
		      cm->v[i].name, cm->v[i].seq, (unsigned long long)(BASE + want[i].start),
		      (unsigned long long)(BASE + want[i].end), want[i].name, seq);
	}
	return 0;
}

static void t_symfile_nofold(void)
{
	const int64_t *off = jit_off();
	if (!off) {
		CHECK(0, "no table");
		return;
	}
	struct buf b = module_symfile(off, BASE, "mymod", MYMOD, XB_ARRAY_SIZE(MYMOD));
	struct xb_codemap cm = { 0 };
	CHECK(xb_codemap_parse_symfile(&cm, off, b.p, b.len, 3, 0) == 0, "parse: %s", xb_err());
	expect_entries(&cm, MYMOD, XB_ARRAY_SIZE(MYMOD), 3);
	CHECK(cm.modules == 1, "modules = %zu", cm.modules);
	if (cm.n == XB_ARRAY_SIZE(MYMOD)) {
		CHECK(cm.v[0].kind == XB_CODE_OTHER, "codeHeader kind %u", cm.v[0].kind);
		CHECK(cm.v[2].kind == XB_CODE_FUNCTION, "f/1 kind %u", cm.v[2].kind);
		CHECK(cm.v[5].kind == XB_CODE_OTHER, "codeFooter kind %u", cm.v[5].kind);
	}
	xb_codemap_free(&cm);
	free(b.p);
}

static void t_symfile_fold(void)
{
	const int64_t *off = jit_off();
	if (!off) {
		CHECK(0, "no table");
		return;
	}
	static const struct rng folded[] = {
		{ 0x000, 0x040, "mymod::codeHeader", 0 },
		{ 0x040, 0x100, "mymod:f/1", 0 },
		{ 0x100, 0x180, "mymod:'g h'/0", 0 },
		{ 0x180, 0x190, "mymod::codeFooter", 0 },
	};
	struct buf b = module_symfile(off, BASE, "mymod", MYMOD, XB_ARRAY_SIZE(MYMOD));
	struct xb_codemap cm = { 0 };
	CHECK(xb_codemap_parse_symfile(&cm, off, b.p, b.len, 0, XB_CM_FOLD_PROLOGUE) == 0,
	      "parse: %s", xb_err());
	expect_entries(&cm, folded, XB_ARRAY_SIZE(folded), 0);
	xb_codemap_free(&cm);
	free(b.p);
}

static void t_symfile_fold_unpaired(void)
{
	/* A prologue not followed by its own function (or with a gap) is not
	 * merged into the next entry; both address ranges stay named. */
	const int64_t *off = jit_off();
	if (!off) {
		CHECK(0, "no table");
		return;
	}
	static const struct rng r[] = {
		{ 0x000, 0x010, "m:a/0-CodeInfoPrologue", 0 },
		{ 0x010, 0x020, "m:b/0", 0 },                 /* different function */
		{ 0x020, 0x030, "m:c/0-CodeInfoPrologue", 0 },
		{ 0x038, 0x040, "m:c/0", 0 },                 /* gap */
		{ 0x040, 0x050, "m:d/0-CodeInfoPrologue", 0 }, /* last */
	};
	struct buf b = module_symfile(off, BASE, "m", r, XB_ARRAY_SIZE(r));
	struct xb_codemap cm = { 0 };
	CHECK(xb_codemap_parse_symfile(&cm, off, b.p, b.len, 0, XB_CM_FOLD_PROLOGUE) == 0,
	      "parse: %s", xb_err());
	CHECK(cm.n == XB_ARRAY_SIZE(r), "%zu entries, want %zu", cm.n, XB_ARRAY_SIZE(r));
	for (size_t i = 0; i < cm.n && i < XB_ARRAY_SIZE(r); i++) {
		CHECK(cm.v[i].start == BASE + r[i].start && cm.v[i].end == BASE + r[i].end,
		      "entry %zu (%s): %llx-%llx", i, cm.v[i].name,
		      (unsigned long long)cm.v[i].start, (unsigned long long)cm.v[i].end);
		CHECK(strncmp(cm.v[i].name, r[i].name, strcspn(r[i].name, "-")) == 0,
		      "entry %zu named %s, want %s", i, cm.v[i].name, r[i].name);
	}
	xb_codemap_free(&cm);
	free(b.p);
}

static void t_symfile_emulator_record(void)
{
	const int64_t *off = jit_off();
	if (!off) {
		CHECK(0, "no table");
		return;
	}
	struct buf b = { 0 };
	int64_t pay = off[XB_F_DBGINFO_PAYLOAD];
	b_u32(&b, 0, 0);
	b_u32(&b, (size_t)(pay + off[XB_F_EMUINFO_FRAME_LAYOUT]), 1);
	b_u64(&b, (size_t)(pay + off[XB_F_EMUINFO_NORMAL_EXIT]), 0x7f00deadbe00ull);
	b.len = (size_t)off[XB_F_DBGINFO_SIZE];
	struct xb_codemap cm = { 0 };
	CHECK(xb_codemap_parse_symfile(&cm, off, b.p, b.len, 0, 0) == 0, "parse: %s", xb_err());
	CHECK(cm.n == 0, "%zu entries from an emulator record", cm.n);
	CHECK(cm.frame_layout == 1, "frame_layout %d", cm.frame_layout);
	CHECK(cm.normal_exit == 0x7f00deadbe00ull, "normal_exit %llx",
	      (unsigned long long)cm.normal_exit);
	xb_codemap_free(&cm);
	b_u32(&b, 0, 7);
	CHECK(xb_codemap_parse_symfile(&cm, off, b.p, b.len, 0, 0) < 0, "header 7 accepted");
	xb_codemap_free(&cm);
	free(b.p);
}

static void t_symfile_truncated(void)
{
	/* Every proper prefix of a valid module record is malformed: -1, never
	 * a crash or a read past the end (exact-size heap copies; run under
	 * ASan to be sure). */
	const int64_t *off = jit_off();
	if (!off) {
		CHECK(0, "no table");
		return;
	}
	struct buf b = module_symfile(off, BASE, "mymod", MYMOD, XB_ARRAY_SIZE(MYMOD));
	int accepted = 0;
	size_t first_accepted = 0;
	for (unsigned flags = 0; flags <= XB_CM_FOLD_PROLOGUE; flags += XB_CM_FOLD_PROLOGUE) {
		for (size_t len = 0; len < b.len; len++) {
			uint8_t *copy = malloc(len ? len : 1);
			memcpy(copy, b.p, len);
			struct xb_codemap cm = { 0 };
			int rc = xb_codemap_parse_symfile(&cm, off, copy, len, 0, flags);
			if (rc != -1 && !accepted++)
				first_accepted = len;
			xb_codemap_free(&cm);
			free(copy);
		}
	}
	CHECK(accepted == 0,
	      "%d truncated records accepted (returned 0), first: %zu of %zu bytes", accepted,
	      first_accepted, b.len);
	free(b.p);
}

static void t_symfile_garbage(void)
{
	/* Random bytes after a module header: no crash, no hang. */
	const int64_t *off = jit_off();
	if (!off) {
		CHECK(0, "no table");
		return;
	}
	uint32_t x = 12345;
	for (int iter = 0; iter < 2000; iter++) {
		size_t len = 4 + (size_t)(iter % 300);
		uint8_t *p = malloc(len);
		for (size_t i = 0; i < len; i++) {
			x = x * 1103515245u + 12345u;
			p[i] = (uint8_t)(x >> 16);
		}
		uint32_t one = 1;
		memcpy(p, &one, 4);
		struct xb_codemap cm = { 0 };
		int rc = xb_codemap_parse_symfile(&cm, off, p, len, 0, (unsigned)iter & 1);
		CHECK(rc == 0 || rc == -1, "iteration %d: rc %d", iter, rc);
		for (size_t i = 0; i < cm.n; i++)
			CHECK(cm.v[i].end > cm.v[i].start, "iteration %d: empty entry", iter);
		xb_codemap_free(&cm);
		free(p);
	}
}

/* ---- xb_codemap_finish ------------------------------------------------ */

static void add(struct xb_codemap *cm, uint64_t s, uint64_t e, const char *name, uint32_t seq)
{
	CHECK(xb_codemap_add(cm, s, e, name, strlen(name), seq) == 0, "add %s", name);
}

static void t_codemap_finish_overlaps(void)
{
	struct xb_codemap cm = { 0 };
	/* Added in no particular order; seq 0 = newest. */
	add(&cm, 500, 600, "e", 0);
	add(&cm, 100, 200, "a-old", 1);
	add(&cm, 150, 250, "b-new", 0);       /* overlaps a-old: a-old dropped */
	add(&cm, 300, 400, "c-old", 2);
	add(&cm, 300, 400, "c", 0);           /* same range: newer wins */
	add(&cm, 550, 560, "f-old-inside", 3); /* inside newer e: dropped */
	add(&cm, 700, 800, "g-old", 5);
	add(&cm, 720, 730, "h-newer-inside", 1); /* newer inside older: older dropped */
	add(&cm, 900, 1000, "i", 4);
	add(&cm, 1000, 1100, "j", 4);         /* adjacent, no overlap: both kept */
	add(&cm, 1200, 1200, "empty", 0);     /* empty: never added */
	add(&cm, 1300, 1250, "backwards", 0); /* end < start: never added */
	CHECK(cm.n == 10, "%zu entries added, want 10 (empty ranges must be ignored)", cm.n);
	xb_codemap_finish(&cm);
	static const struct {
		uint64_t s, e;
		const char *name;
	} want[] = { { 150, 250, "b-new" }, { 300, 400, "c" }, { 500, 600, "e" },
		     { 720, 730, "h-newer-inside" }, { 900, 1000, "i" }, { 1000, 1100, "j" } };
	CHECK(cm.n == XB_ARRAY_SIZE(want), "%zu entries after finish, want %zu", cm.n,
	      XB_ARRAY_SIZE(want));
	for (size_t i = 0; i < cm.n && i < XB_ARRAY_SIZE(want); i++)
		CHECK(cm.v[i].start == want[i].s && cm.v[i].end == want[i].e &&
			      strcmp(cm.v[i].name, want[i].name) == 0,
		      "entry %zu: %llu-%llu %s, want %llu-%llu %s", i,
		      (unsigned long long)cm.v[i].start, (unsigned long long)cm.v[i].end, cm.v[i].name,
		      (unsigned long long)want[i].s, (unsigned long long)want[i].e, want[i].name);
	CHECK(cm.dropped == 4, "dropped %zu, want 4", cm.dropped);
	CHECK(cm.code_low == 150 && cm.code_high == 1100, "span %llu-%llu",
	      (unsigned long long)cm.code_low, (unsigned long long)cm.code_high);
	for (size_t i = 1; i < cm.n; i++)
		CHECK(cm.v[i].start >= cm.v[i - 1].end, "overlap left at %zu", i);
	const struct xb_code *c;
	CHECK((c = xb_codemap_find(&cm, 150)) && strcmp(c->name, "b-new") == 0, "find 150");
	CHECK((c = xb_codemap_find(&cm, 249)) && strcmp(c->name, "b-new") == 0, "find 249");
	CHECK(xb_codemap_find(&cm, 250) == NULL, "find 250 (end is exclusive)");
	CHECK(xb_codemap_find(&cm, 120) == NULL, "find 120 (dropped a-old)");
	CHECK((c = xb_codemap_find(&cm, 555)) && strcmp(c->name, "e") == 0, "find 555");
	CHECK(xb_codemap_find(&cm, 750) == NULL, "find 750 (dropped g-old)");
	CHECK((c = xb_codemap_find(&cm, 1000)) && strcmp(c->name, "j") == 0, "find 1000");
	CHECK(xb_codemap_find(&cm, 0) == NULL && xb_codemap_find(&cm, 5000) == NULL, "find outside");
	xb_codemap_free(&cm);
	CHECK(cm.n == 0 && cm.v == NULL, "free");
}

static void t_codemap_finish_empty(void)
{
	struct xb_codemap cm = { 0 };
	xb_codemap_finish(&cm);
	CHECK(cm.n == 0 && cm.code_low == 0 && cm.code_high == 0, "empty map");
	CHECK(xb_codemap_find(&cm, 1) == NULL, "find in empty map");
	xb_codemap_free(&cm);
}

char *perfmap_text(const struct xb_codemap *cm, size_t *len)
{
	char *text = NULL;
	*len = 0;
	FILE *f = open_memstream(&text, len);
	if (!f)
		return NULL;
	int r = xb_perfmap_print(cm, f);
	fclose(f);
	if (r < 0) {
		free(text);
		return NULL;
	}
	return text;
}

static void t_perfmap_print(void)
{
	struct xb_codemap cm = { 0 };
	add(&cm, 0x7f0000001000ull, 0x7f0000001040ull, "m:'a b'/1", 0);
	add(&cm, 0x10, 0x20, "m::codeHeader", 0);
	xb_codemap_finish(&cm);
	size_t len;
	char *text = perfmap_text(&cm, &len);
	CHECK(text, "print failed");
	CHECK(text && strcmp(text, "10 10 m::codeHeader\n7f0000001000 40 m:'a b'/1\n") == 0,
	      "got \"%s\"", text ? text : "(null)");
	free(text);
	xb_codemap_free(&cm);
}


/* ---- thread names (release tables), --blame matching ------------------ */

static void t_thread_name_match(void)
{
	int no = -1;
	CHECK(xb_thread_name_match("%d_scheduler", "1_scheduler", &no) && no == 1, "1_scheduler");
	CHECK(xb_thread_name_match("%d_scheduler", "12_scheduler\n", &no) && no == 12, "with newline");
	/* the kernel keeps 15 characters of a thread name */
	CHECK(xb_thread_name_match("%d_dirty_cpu_scheduler", "3_dirty_cpu_sch", &no) && no == 3,
	      "truncated dirty cpu name");
	CHECK(xb_thread_name_match("%d_dirty_io_scheduler", "10_dirty_io_sch", &no) && no == 10,
	      "truncated dirty io name");
	CHECK(xb_thread_name_match("erts_sched_%d", "erts_sched_7", &no) && no == 7, "OTP 27 name");
	CHECK(!xb_thread_name_match("erts_sched_%d", "erts_sched_", &no), "no number");
	CHECK(!xb_thread_name_match("%d_scheduler", "1_schedulerX", &no), "trailing junk");
	CHECK(!xb_thread_name_match("%d_scheduler", "1_sched", &no), "short but not truncated");
	CHECK(!xb_thread_name_match("%d_scheduler", "1_dirty_cpu_sch", &no), "other kind");
	CHECK(!xb_thread_name_match("erts_dcpus_%d", "erts_sched_1", &no), "other kind, OTP 27");
}

/* Names made to collide in FNV-1a's low bits (what indexed the name
 * table): 16 steps, each a choice between two 3-byte blocks that take the
 * hash's low 18 bits from the same state to the same state (FNV's low
 * bits depend on the low bits alone), so all 2^16 names, and the tag
 * hashed after them, share those bits.  Unseeded, unmixed, they were one
 * probe chain: 65,536 names cost 2^31 comparisons.  Now a short walk. */
static uint64_t fnv_low(uint64_t h, const char *b, size_t n, uint64_t mask)
{
	for (size_t i = 0; i < n; i++)
		h = ((h ^ (uint8_t)b[i]) * 0x100000001b3ull) & mask;
	return h;
}

static void t_profile_hash_flood(void)
{
	enum { STEPS = 16, BITS = 18, BLK = 3 };
	const uint64_t mask = (1ull << BITS) - 1;
	char blocks[STEPS][2][BLK];
	uint64_t st = 0xcbf29ce484222325ull & mask;
	uint32_t *seen = malloc((mask + 1) * sizeof(*seen)); /* state -> block + 1 */
	CHECK(seen, "out of memory");
	if (!seen)
		return;
	for (int j = 0; j < STEPS; j++) {
		memset(seen, 0, (mask + 1) * sizeof(*seen));
		bool found = false;
		/* (two bytes never collide: FNV's step is a bijection of the
		 * low bits for a fixed byte, and two of them stay one) */
		for (int a = 'A'; a <= 'z' && !found; a++)
			for (int b = 'A'; b <= 'z' && !found; b++)
				for (int c = 'A'; c <= 'Z' && !found; c++) {
					char blk[BLK] = { (char)a, (char)b, (char)c };
					uint64_t to = fnv_low(st, blk, BLK, mask);
					if (seen[to]) {
						uint32_t o = seen[to] - 1;
						blocks[j][0][0] = (char)(o >> 16), blocks[j][0][1] = (char)(o >> 8 & 0xff),
						blocks[j][0][2] = (char)(o & 0xff);
						memcpy(blocks[j][1], blk, BLK);
						st = to;
						found = true;
					} else {
						seen[to] = ((uint32_t)a << 16 | (uint32_t)b << 8 | (uint32_t)c) + 1;
					}
				}
		CHECK(found, "step %d: no two blocks collide", j);
		if (!found)
			goto out;
	}
	struct xb_profile p;
	xb_profile_init(&p);
	char name[BLK * STEPS + 1];
	uint64_t want = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	for (uint32_t bits = 0; bits < (1u << STEPS); bits++) {
		for (int j = 0; j < STEPS; j++)
			memcpy(name + BLK * j, blocks[j][(bits >> j) & 1], BLK);
		name[BLK * STEPS] = 0;
		if (bits == 0)
			want = fnv_low(0xcbf29ce484222325ull & mask, name, BLK * STEPS, mask);
		/* (the construction: every name has the first's low bits) */
		if (bits < 64)
			CHECK(fnv_low(0xcbf29ce484222325ull & mask, name, BLK * STEPS, mask) == want, "name %u does not "
			      "collide", bits);
		xb_profile_intern(&p, name, "[Erlang]", XB_FK_ERLANG);
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	size_t probe = xb_profile_longest_probe(&p);
	CHECK(p.nnames == 1u << STEPS, "%zu distinct names interned", p.nnames);
	CHECK(probe < 200 && s < 2.0, "65,536 names sharing FNV's low 18 bits: longest probe %zu, %.2f s of CPU",
	      probe, s);
	xb_profile_free(&p);
out:
	free(seen);
}

/* --blame's close names: edits, FN's start, arity, order, and the
 * longest-start fallback. */
/* The close names xb_close_text gives for FN after NAMES were offered. */
static const char *closest(const char *fn, const char *const *names, size_t n, char *buf, size_t len)
{
	struct xb_close c = { 0 };
	for (size_t i = 0; i < n; i++)
		xb_close_offer(&c, fn, names[i]);
	xb_close_text(&c, buf, len);
	return buf;
}

static void t_blame_close(void)
{
	char buf[512];
	const char *names[] = { "copy_struct_x", "copy_shallow", "copy_struct", "erts_garbage_collect",
				"xb_ctl:eval/1", "xb_ctl:handle/1", "Demo.Hot.spin/1", "size_object_x" };
	size_t nn = XB_ARRAY_SIZE(names);
	/* copy_struct: one edit, copy_struct_x: its start, one; then the
	 * longest shared start (copy_shallow: "copy_s") */
	closest("copy_struc", names, nn, buf, sizeof(buf));
	CHECK(strcmp(buf, "copy_struct, copy_struct_x, copy_shallow") == 0, "copy_struc: %s", buf);
	closest("xb_ctl:evl", names, nn, buf, sizeof(buf));
	CHECK(strncmp(buf, "xb_ctl:eval/1", 13) == 0, "xb_ctl:evl (no arity): %s", buf);
	closest("Demo.Hot.spn", names, nn, buf, sizeof(buf));
	CHECK(strcmp(buf, "Demo.Hot.spin/1") == 0, "Demo.Hot.spn: %s", buf);
	/* a typo at the start (no shared start) is still found */
	closest("ertz_garbage_collect", names, nn, buf, sizeof(buf));
	CHECK(strcmp(buf, "erts_garbage_collect") == 0, "ertz_garbage_collect: %s", buf);
	/* nothing near: nothing named; a short FN names nothing */
	closest("no_such_function_xyz", names, nn, buf, sizeof(buf));
	CHECK(buf[0] == 0, "unrelated names offered: %s", buf);
	closest("cop", names, nn, buf, sizeof(buf));
	CHECK(buf[0] == 0, "a 3-character FN named: %s", buf);
	/* at most XB_NCLOSE, nearest kept whatever the order offered (of
	 * equals, the shorter, then the first offered) */
	const char *many[] = { "abcdefgh_4", "abcdefgh_3x", "abcdefgh", "abcdefgh_2", "abcdefgx" };
	closest("abcdefgh", many, XB_ARRAY_SIZE(many), buf, sizeof(buf));
	CHECK(strcmp(buf, "abcdefgh, abcdefgx, abcdefgh_4") == 0, "order: %s", buf);
}

static void t_blame_match(void)
{
	CHECK(xb_blame_match("copy_struct", "copy_struct"), "exact");
	CHECK(xb_blame_match("copy_struct", "copy_struct_x"), "_x suffix");
	CHECK(!xb_blame_match("copy_struct", "copy_structure"), "longer word is not a suffix");
	CHECK(!xb_blame_match("copy_struct", "copy_struct_"), "bare underscore");
	CHECK(xb_blame_match("erts_garbage_collect", "erts_garbage_collect_nobump"), "nobump");
	CHECK(xb_blame_match("erts_garbage_collect", "global::garbage_collect"), "JIT GC fragment alias");
	CHECK(!xb_blame_match("copy_struct", "global::garbage_collect"), "alias only for GC");
	CHECK(xb_blame_match("copy_*", "copy_shallow_x"), "glob");
	CHECK(!xb_blame_match("copy_*", "size_object_x"), "glob mismatch");
}

/* ---- perf sample records ---------------------------------------------- */

static size_t put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
	return 8;
}

static void t_sampler_parse(void)
{
	uint8_t rec[512];
	size_t n = 0;
	n += put64(rec + n, 0x1234);                      /* ip */
	n += put64(rec + n, (uint64_t)77 << 32 | 66);     /* pid 66, tid 77 */
	n += put64(rec + n, 999);                         /* time */
	n += put64(rec + n, 1);                           /* cpu 1, res 0 */
	n += put64(rec + n, 2);                           /* PERF_SAMPLE_REGS_ABI_64 */
	for (int r = 0; r < 17; r++)                      /* AX..IP, R8..R15 */
		n += put64(rec + n, 100 + (uint64_t)r);
	n += put64(rec + n, 16);                          /* stack size */
	for (int i = 0; i < 16; i++)
		rec[n++] = (uint8_t)i;
	n += put64(rec + n, 8);                           /* dyn_size */
	struct xb_sample smp;
	CHECK(xb_sampler_parse(rec, n, false, &smp) == 0, "parse failed");
	CHECK(smp.ip == 0x1234 && smp.tid == 77 && smp.time_ns == 999 && smp.cpu == 1, "header fields");
	CHECK(smp.user && smp.regs[XB_PREG_AX] == 100 && smp.regs[XB_PREG_IP] == 108, "AX..IP");
	CHECK(smp.regs[XB_PREG_R8] == 109 && smp.regs[XB_PREG_R15] == 116, "R8..R15");
	CHECK(smp.regs[XB_PREG_FLAGS] == 0, "registers not sampled stay 0");
	CHECK(smp.stack_size == 8 && smp.stack && smp.stack[7] == 7, "stack: dyn_size bytes");
	for (size_t cut = 0; cut < n; cut += 7)
		CHECK(xb_sampler_parse(rec, cut, false, &smp) < 0, "truncated record at %zu accepted", cut);
}

/* ---- xb_bpf_parse: records of the BPF capture program ---------------- */

enum { T_PROC = 776, T_USTACK = 100, T_ESTACK = 64 };
#define T_SP 0x7f0000001000ull
#define T_SLOT 0x55550000a8ull
#define T_CP 0x5555aaaa00ull
#define T_ESTACK_AT 0x7f1000002000ull

/* A well-formed record (as capture.bpf.c writes it) in an exact-size heap
 * buffer, so that ASan catches any read past its end.  Lengths 0 leave a
 * part out. */
static uint8_t *bpf_rec(struct xb_bpf_rec *h, uint32_t proc, uint32_t ust, uint32_t est, size_t *len)
{
	memset(h, 0, sizeof(*h));
	h->magic = XB_BPF_MAGIC;
	h->version = XB_BPF_VERSION;
	h->hdr_size = sizeof(*h);
	h->tid = 4242;
	h->pid = 4200;
	h->cpu = 1;
	h->time_ns = 123456789;
	for (int r = 0; r < XB_BPF_NREGS; r++)
		h->regs[r] = 0x1000 + (uint64_t)r;
	h->regs[XB_PREG_SP] = T_SP;
	h->regs[XB_PREG_IP] = 0x400123;
	h->slot = T_SLOT;
	h->c_p = T_CP;
	h->proc_addr = proc ? T_CP : 0;
	h->ustack_addr = T_SP;
	h->estack_addr = est ? T_ESTACK_AT : 0;
	h->proc_len = proc;
	h->ustack_len = ust;
	h->estack_len = est;
	h->faults = 2;
	h->total_len = (uint32_t)(sizeof(*h) + proc + ust + est);
	*len = h->total_len;
	uint8_t *b = malloc(*len);
	memcpy(b, h, sizeof(*h));
	for (size_t i = sizeof(*h); i < *len; i++)
		b[i] = (uint8_t)(i * 7);
	return b;
}

/* Copy of B with the header replaced by H (exact size LEN). */
static uint8_t *bpf_rec_with(const uint8_t *b, size_t len, const struct xb_bpf_rec *h)
{
	uint8_t *c = malloc(len);
	memcpy(c, b, len);
	memcpy(c, h, sizeof(*h) <= len ? sizeof(*h) : len);
	return c;
}

static bool regions_inside(const struct xb_sample *s, const uint8_t *b, size_t len)
{
	for (unsigned i = 0; i < s->nregions; i++) {
		const struct xb_region *r = &s->regions[i];
		if (r->data < b || r->len > len || (size_t)(r->data - b) > len - r->len)
			return false;
	}
	return !s->stack || (s->stack >= b && s->stack_size <= len && (size_t)(s->stack - b) <= len - s->stack_size);
}

static void t_bpf_parse_roundtrip(void)
{
	struct xb_bpf_rec h;
	size_t len;
	uint8_t *b = bpf_rec(&h, T_PROC, T_USTACK, T_ESTACK, &len);
	struct xb_sample s;
	memset(&s, 0xa5, sizeof(s));
	CHECK(xb_bpf_parse(b, len, &s) == 0, "well-formed record rejected");
	CHECK(s.tid == 4242 && s.cpu == 1 && s.time_ns == 123456789 && s.ip == 0x400123, "header fields");
	CHECK(s.user && s.bpf && s.thread == -1 && s.capture_faults == 2, "flags");
	CHECK(s.regs[XB_PREG_AX] == 0x1000 && s.regs[XB_PREG_R15] == 0x1000 + XB_PREG_R15 &&
	      s.regs[XB_PREG_SP] == T_SP, "registers");
	const uint8_t *data = b + sizeof(h);
	CHECK(s.stack == data + T_PROC && s.stack_size == T_USTACK, "stack = the user-stack copy");
	CHECK(s.nregions == 4, "%u regions, want 4", s.nregions);
	CHECK(s.regions[0].addr == T_SP && s.regions[0].len == T_USTACK && s.regions[0].data == s.stack,
	      "regions[0]: user stack");
	uint64_t cp = 0;
	if (s.nregions == 4)
		memcpy(&cp, s.regions[1].data, 8);
	CHECK(s.regions[1].addr == T_SLOT && s.regions[1].len == 8 && cp == T_CP, "regions[1]: slot -> c_p");
	CHECK(s.regions[2].addr == T_CP && s.regions[2].len == T_PROC && s.regions[2].data == data,
	      "regions[2]: process");
	CHECK(s.regions[3].addr == T_ESTACK_AT && s.regions[3].len == T_ESTACK &&
	      s.regions[3].data == data + T_PROC + T_USTACK, "regions[3]: Erlang-stack tail");
	CHECK(regions_inside(&s, b, len), "a region points outside the record");
	/* A longer buffer (the ring rounds records up) is fine. */
	uint8_t *big = calloc(1, len + 8);
	memcpy(big, b, len);
	CHECK(xb_bpf_parse(big, len + 8, &s) == 0 && s.nregions == 4, "record in a longer buffer");
	free(big);
	free(b);
}

static void t_bpf_parse_shapes(void)
{
	struct xb_bpf_rec h;
	size_t len;
	struct xb_sample s;
	/* JIT running Erlang code: the user stack is the Erlang stack, no tail. */
	uint8_t *b = bpf_rec(&h, T_PROC, T_USTACK, 0, &len);
	CHECK(xb_bpf_parse(b, len, &s) == 0 && s.nregions == 3 && s.regions[2].addr == T_CP, "no tail");
	free(b);
	/* A thread that is no scheduler: no slot, no process. */
	b = bpf_rec(&h, 0, T_USTACK, 0, &len);
	h.slot = h.c_p = 0;
	uint8_t *c = bpf_rec_with(b, len, &h);
	CHECK(xb_bpf_parse(c, len, &s) == 0 && s.nregions == 1 && s.stack_size == T_USTACK, "no slot");
	free(c);
	/* Scheduler idle (c_p 0): the slot, nothing else. */
	h.slot = T_SLOT;
	h.c_p = 0;
	c = bpf_rec_with(b, len, &h);
	CHECK(xb_bpf_parse(c, len, &s) == 0 && s.nregions == 2 && s.regions[1].addr == T_SLOT, "idle");
	free(c);
	/* The slot could not be read: no slot region. */
	h.flags = XB_BPF_F_SLOT_FAULT;
	c = bpf_rec_with(b, len, &h);
	CHECK(xb_bpf_parse(c, len, &s) == 0 && s.nregions == 1, "slot fault");
	free(c);
	free(b);
	/* Kernel registers (an event without exclude_kernel): no user data. */
	b = bpf_rec(&h, 0, 0, 0, &len);
	h.flags = XB_BPF_F_KERNEL_REGS;
	c = bpf_rec_with(b, len, &h);
	CHECK(xb_bpf_parse(c, len, &s) == 0 && !s.user && s.nregions == 0 && !s.stack &&
	      s.regs[XB_PREG_SP] == 0, "kernel registers");
	free(c);
	free(b);
	/* Empty user stack (the copy failed at once). */
	b = bpf_rec(&h, T_PROC, 0, T_ESTACK, &len);
	CHECK(xb_bpf_parse(b, len, &s) == 0 && !s.stack && s.nregions == 3 && s.regions[0].addr == T_SLOT,
	      "no user stack");
	free(b);
}

/* Damage number I to a good header: what it breaks, or NULL past the last. */
static const char *bpf_damage(int i, struct xb_bpf_rec *r)
{
	switch (i) {
	case 0: r->magic ^= 1; return "wrong magic";
	case 1: r->version++; return "wrong version";
	case 2: r->hdr_size += 8; return "header size";
	case 3: r->total_len += 8; return "total_len past the end";
	case 4: r->total_len -= 8; return "total_len short of the parts";
	case 5: r->ustack_len += 1u << 20; r->total_len += 1u << 20; return "ustack_len past the end";
	case 6: r->proc_len = 0xffffffff; return "proc_len past the end";
	case 7: r->estack_len = r->total_len = 0x80000000u; return "estack_len past the end";
	case 8: r->proc_len = 0xfffffff0u; r->ustack_len = 0x20; return "lengths that wrap";
	case 9: r->proc_len += 2048; r->total_len += 2048; return "proc_len over the maximum";
	case 10: r->ustack_addr += 8; return "ustack not at SP";
	case 11: r->proc_addr += 8; return "process not at c_p";
	case 12: r->slot = 0; return "process without a slot";
	case 13: r->c_p = r->proc_addr = 0; return "process with c_p 0";
	case 14: r->flags |= XB_BPF_F_SLOT_FAULT; return "process after a slot fault";
	case 15: r->estack_addr = 0; return "estack at 0";
	case 16: r->estack_addr = ~0ull - 16; return "estack wraps";
	case 17: r->ustack_addr = r->regs[XB_PREG_SP] = ~0ull - 16; return "ustack wraps";
	case 18: r->slot = ~0ull - 3; return "slot wraps";
	case 19: r->tid = 0; return "tid 0";
	case 20: r->flags |= XB_BPF_F_KERNEL_REGS; return "kernel registers with user data";
	default: return NULL;
	}
}

static void t_bpf_parse_malformed(void)
{
	struct xb_bpf_rec h, m;
	size_t len;
	struct xb_sample s;
	uint8_t *b = bpf_rec(&h, T_PROC, T_USTACK, T_ESTACK, &len);
	/* Truncated anywhere: exact-size copies. */
	for (size_t cut = 0; cut < len; cut += cut < 400 ? 1 : 37) {
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, b, cut);
		CHECK(xb_bpf_parse(c, cut, &s) < 0, "record truncated to %zu bytes accepted", cut);
		free(c);
	}
	CHECK(xb_bpf_parse(NULL, 0, &s) < 0, "NULL accepted");
	/* Each header change below must be refused. */
	for (int i = 0;; i++) {
		m = h;
		const char *what = bpf_damage(i, &m);
		if (!what)
			break;
		uint8_t *c = bpf_rec_with(b, len, &m);
		CHECK(xb_bpf_parse(c, len, &s) < 0, "%s: accepted", what);
		free(c);
	}
	/* An estack without a process. */
	uint8_t *e = bpf_rec(&m, 0, T_USTACK, T_ESTACK, &len);
	CHECK(xb_bpf_parse(e, len, &s) < 0, "Erlang-stack tail without a process: accepted");
	free(e);
	free(b);
}

/* Random damage to a good record: never a read outside it (ASan), and
 * what is accepted points inside it. */
static void t_bpf_parse_fuzz(void)
{
	struct xb_bpf_rec h;
	size_t len;
	uint8_t *b = bpf_rec(&h, T_PROC, T_USTACK, T_ESTACK, &len);
	uint64_t x = 0x9E3779B97F4A7C15ull;
	unsigned accepted = 0;
	for (int i = 0; i < 20000; i++) {
		uint8_t *c = malloc(len);
		memcpy(c, b, len);
		int flips = 1 + (int)(x % 4);
		for (int f = 0; f < flips; f++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			size_t at = (size_t)(x % sizeof(h)); /* the header decides everything */
			c[at] ^= (uint8_t)(1u << (x >> 40) % 8);
		}
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t n = x % 5 == 0 ? (size_t)(x >> 32) % len : len;
		struct xb_sample s;
		if (xb_bpf_parse(c, n, &s) == 0) {
			accepted++;
			CHECK(regions_inside(&s, c, n), "fuzz case %d: a region points outside the record", i);
			CHECK(s.nregions <= XB_MAX_REGIONS, "fuzz case %d: %u regions", i, s.nregions);
		}
		free(c);
	}
	CHECK(accepted > 0, "no damaged record accepted at all (damage to registers is harmless)");
	free(b);
}

/* ---- aggregation and percentiles ------------------------------------- */

static void t_profile_flat_and_blame(void)
{
	struct xb_profile p;
	xb_profile_init(&p);
	uint32_t cs = xb_profile_intern(&p, "copy_struct_x", "[beam.smp]", XB_FK_NATIVE);
	uint32_t snd = xb_profile_intern(&p, "m:send_loop/2", "[Erlang]", XB_FK_ERLANG);
	uint32_t top = xb_profile_intern(&p, "m:run/0", "[Erlang]", XB_FK_ERLANG);
	uint32_t hot = xb_profile_intern(&p, "m:hot/1", "[Erlang]", XB_FK_ERLANG);
	CHECK(xb_profile_intern(&p, "copy_struct_x", "[beam.smp]", XB_FK_NATIVE) == cs, "interning");
	uint32_t s1[] = { cs, snd, top }, s2[] = { hot, top };
	for (int i = 0; i < 3; i++)
		xb_profile_add(&p, s1, 3, 1);
	for (int i = 0; i < 5; i++)
		xb_profile_add(&p, s2, 2, 0);
	struct xb_row *rows;
	uint64_t counted, matched, noerl;
	size_t n = xb_profile_flat(&p, XB_FLAT_LEAF, &rows, &counted);
	CHECK(n == 2 && counted == 8 && rows[0].id == hot && rows[0].count == 5 && rows[1].id == cs,
	      "leaf rows");
	free(rows);
	n = xb_profile_flat(&p, XB_FLAT_ERLANG, &rows, &counted);
	CHECK(n == 2 && rows[0].id == hot && rows[1].id == snd && rows[1].count == 3, "Erlang rows");
	free(rows);
	n = xb_profile_blame(&p, "copy_struct", &rows, &matched, &noerl);
	CHECK(n == 1 && matched == 3 && noerl == 0 && rows[0].id == snd, "blame rows");
	free(rows);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	xb_write_folded(f, &p);
	fclose(f);
	CHECK(strstr(buf, "m:run/0;m:send_loop/2;copy_struct_x 3\n") &&
	      strstr(buf, "m:run/0;m:hot/1 5\n"), "folded output: %s", buf);
	free(buf);
	xb_profile_free(&p);
}

/* OTP 27, 2 schedulers: erts_proc's pix_mask 0xfffff, pix_cl_mask 0x1ffff,
 * pix_cl_shift 3, pix_cli_mask 7, pix_cli_shift 17 (read from a live VM);
 * the VM printed <0.83.0> for the pid term whose pixdata is 83 << 3. */
static void t_format_pid_pixdata(void)
{
	struct xb_pix pix = { 0xfffff, 0x1ffff, 7, 3, 17, true };
	char buf[32];
	uint64_t term = ((uint64_t)(83 << 3) << 4) | XB_TAG_IMMED1_PID;
	CHECK(xb_format_pid(term, 28, 32, &pix, buf, sizeof(buf)) == 0 && strcmp(buf, "<0.83.0>") == 0,
	      "got %s", buf);
	/* serial bits above the table index are kept */
	term = (((uint64_t)1 << 28 | (uint64_t)(5 << 3)) << 4) | XB_TAG_IMMED1_PID;
	CHECK(xb_format_pid(term, 28, 32, &pix, buf, sizeof(buf)) == 0 && strcmp(buf, "<0.5.1>") == 0,
	      "got %s", buf);
	pix.valid = false;
	term = ((uint64_t)(83 << 3) << 4) | XB_TAG_IMMED1_PID;
	CHECK(xb_format_pid(term, 28, 32, &pix, buf, sizeof(buf)) == 0 && strcmp(buf, "<0.664.0>") == 0,
	      "without the table's parameters the data is taken as is: %s", buf);
}

static void t_skid_histogram(void)
{
	static struct xb_skid h;
	memset(&h, 0, sizeof(h));
	CHECK(xb_skid_percentile(&h, 50) == 0, "empty");
	for (uint64_t v = 1; v <= 1000; v++)
		xb_skid_add(&h, v);
	uint64_t p50 = xb_skid_percentile(&h, 50), p90 = xb_skid_percentile(&h, 90);
	uint64_t p99 = xb_skid_percentile(&h, 99), mx = xb_skid_percentile(&h, 100);
	/* 8 buckets per power of two: within 12.5 % above the true value */
	CHECK(p50 >= 500 && p50 <= 563, "p50 %llu", (unsigned long long)p50);
	CHECK(p90 >= 900 && p90 <= 1000, "p90 %llu", (unsigned long long)p90);
	CHECK(p99 >= 990 && p99 <= 1000, "p99 %llu", (unsigned long long)p99);
	CHECK(mx == 1000 && h.max_us == 1000 && h.n == 1000, "max %llu", (unsigned long long)mx);
	CHECK(p50 <= p90 && p90 <= p99 && p99 <= mx, "order");
	xb_skid_add(&h, UINT64_MAX / 2); /* lands in the last bucket, no overflow */
	CHECK(xb_skid_percentile(&h, 100) == UINT64_MAX / 2, "huge value");
	memset(&h, 0, sizeof(h));
	xb_skid_add(&h, 3);
	CHECK(xb_skid_percentile(&h, 0) == 3 && xb_skid_percentile(&h, 100) == 3, "one small value exact");
}

/* ---- xb_demangle ------------------------------------------------------- */

static void t_demangle_trim(void)
{
	static const char *const cases[][2] = {
		{ "BeamModuleAssembler::emit_i_move(ArgSource const&, ArgRegister const&)",
		  "BeamModuleAssembler::emit_i_move" },
		{ "foo()", "foo" },
		{ "Foo::operator()(int) const", "Foo::operator()" },
		{ "Foo::bar(int) const &&", "Foo::bar" },
		{ "(anonymous namespace)::helper(char*) [clone .isra.0] [clone .cold]",
		  "(anonymous namespace)::helper" },
		{ "std::vector<int, std::allocator<int> >::push_back(int&&)",
		  "std::vector<int, std::allocator<int> >::push_back" },
		{ "void sort<int>(int*, int*)", "void sort<int>" },
		{ "plain_c_name", "plain_c_name" },
		{ "unbalanced)", "unbalanced)" },
		{ "", "" },
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(cases); i++) {
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", cases[i][0]);
		xb_demangle_trim(buf);
		CHECK(strcmp(buf, cases[i][1]) == 0, "trim(\"%s\") = \"%s\", want \"%s\"", cases[i][0],
		      buf, cases[i][1]);
	}
}

static void t_demangle(void)
{
	char buf[256];
	/* Symbols of OTP 25's JIT beam.smp (nm -C agrees). */
	const char *d = xb_demangle("_ZN19BeamModuleAssembler11emit_i_moveERK9ArgSourceRK11ArgRegister",
				    buf, sizeof(buf));
	CHECK(strcmp(d, "BeamModuleAssembler::emit_i_move") == 0, "got \"%s\"", d);
	d = xb_demangle("_Z17beam_jit_call_nifP7processPKvPmPFmP18enif_environment_tiS3_EP14erl_module_nif",
			buf, sizeof(buf));
	CHECK(strcmp(d, "beam_jit_call_nif") == 0, "got \"%s\"", d);
	/* Not C++, or not valid: the name itself, not a copy. */
	const char *c = "erts_garbage_collect_nobump";
	CHECK(xb_demangle(c, buf, sizeof(buf)) == c, "a C name was rewritten");
	const char *bad = "_Zgarbage";
	CHECK(xb_demangle(bad, buf, sizeof(buf)) == bad, "an invalid name was rewritten");
	/* A short buffer truncates, never overflows. */
	char tiny[8];
	d = xb_demangle("_ZN19BeamModuleAssembler11emit_i_moveERK9ArgSourceRK11ArgRegister", tiny,
			sizeof(tiny));
	CHECK(d == tiny && strlen(tiny) == 7, "short buffer: \"%s\"", d);
}

/* ---- output formats (src/output/, src/profile/blame_filter.c) -------- */

static void t_utf8_next(void)
{
	static const struct {
		const char *s;
		size_t len, took;
		uint32_t cp;
	} cases[] = {
		{ "A", 1, 1, 'A' },
		{ "\xc3\xa9", 2, 2, 0xe9 },
		{ "\xe2\x82\xac", 3, 3, 0x20ac },
		{ "\xf0\x9f\x98\x80", 4, 4, 0x1f600 },
		{ "\xc0\x80", 2, 1, 0xfffd },         /* overlong NUL */
		{ "\xe0\x80\x80", 3, 1, 0xfffd },     /* overlong */
		{ "\xed\xa0\x80", 3, 1, 0xfffd },     /* a surrogate */
		{ "\xf4\x90\x80\x80", 4, 1, 0xfffd }, /* > U+10FFFF */
		{ "\xe2\x82", 2, 2, 0xfffd },         /* truncated: its valid prefix */
		{ "\xe2\x82" "A", 3, 2, 0xfffd },
		{ "\xff", 1, 1, 0xfffd },
		{ "\x80", 1, 1, 0xfffd },
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(cases); i++) {
		uint32_t cp = 0;
		size_t took = xb_utf8_next(cases[i].s, cases[i].len, &cp);
		CHECK(took == cases[i].took && cp == cases[i].cp, "case %zu: took %zu cp U+%04X, want %zu U+%04X",
		      i, took, (unsigned)cp, cases[i].took, (unsigned)cases[i].cp);
	}
}

static void expect_display(const char *in, const char *want)
{
	char *d = xb_display_name(in);
	CHECK(d && strcmp(d, want) == 0, "display(\"%s\") = \"%s\", want \"%s\"", in, d ? d : "(null)", want);
	free(d);
}

static void t_display_name(void)
{
	expect_display("app:leaf/1", "app:leaf/1");
	expect_display("a\tb\nc\r\x01\x7f", "a\\tb\\nc\\r\\x01\\x7f");
	expect_display("bad\xff\xfe" "name", "bad\xef\xbf\xbd\xef\xbf\xbdname");
	expect_display("nel\xc2\x85", "nel\\u0085"); /* a C1 control */
	expect_display("'\xc3\xbcn\xc3\xaf':f/0", "'\xc3\xbcn\xc3\xaf':f/0");
	expect_display("", "");
	/* bidi controls and zero-width characters: shown escaped */
	expect_display("evil\xe2\x80\xae" "1/f:m", "evil\\u202e1/f:m");       /* RIGHT-TO-LEFT OVERRIDE */
	expect_display("a\xe2\x81\xa6" "b\xe2\x81\xa9", "a\\u2066b\\u2069"); /* isolates */
	expect_display("lists\xe2\x80\x8b:map/2", "lists\\u200b:map/2");        /* ZERO WIDTH SPACE */
	expect_display("x\xef\xbb\xbf\xc2\xad", "x\\ufeff\\u00ad");          /* BOM, soft hyphen */
	expect_display("t\xf3\xa0\x80\x81", "t\\U000e0001");                    /* a tag character */
	expect_display("\xe4\xb8\xad\xe6\x96\x87", "\xe4\xb8\xad\xe6\x96\x87"); /* wide, but visible */
}

/* --live's lines: display columns, not code points */
static void t_display_fit(void)
{
	static const char cjk[] = "\xe4\xb8\xad\xe6\x96\x87:f/1"; /* two wide characters, then 4 narrow */
	int used = -1;
	CHECK(xb_display_fit(cjk, strlen(cjk), 80, &used) == strlen(cjk) && used == 8, "all of it: %d columns", used);
	CHECK(xb_display_fit(cjk, strlen(cjk), 3, &used) == 3 && used == 2, "3 columns: one wide character (%d)",
	      used);
	CHECK(xb_display_fit(cjk, strlen(cjk), 1, &used) == 0 && used == 0, "1 column: no half of a wide one");
	static const char comb[] = "e\xcc\x81x"; /* e + COMBINING ACUTE, x */
	CHECK(xb_display_fit(comb, strlen(comb), 2, &used) == strlen(comb) && used == 2,
	      "a combining mark takes no column (%d)", used);
	CHECK(xb_cp_width('a') == 1 && xb_cp_width(0x4e2d) == 2 && xb_cp_width(0x301) == 0, "widths");
}

/* Names in the table and in folded stacks (xb_text_clean): display text,
 * and in folded output ';' (the frame separator) as ':', so that a name
 * can neither split a frame nor, with a newline, forge a line. */
/* Without a line, a frame's file is an attribute, not its identity: one
 * function is one frame whether its module's file was read or not (pprof
 * showed it twice); with a line, file and line are part of it. */
static void t_intern_file_attribute(void)
{
	struct xb_profile p;
	xb_profile_init(&p);
	uint32_t a = xb_profile_intern_at(&p, "m:f/1", "[Erlang]", XB_FK_ERLANG, NULL, 0);
	uint32_t b = xb_profile_intern_at(&p, "m:f/1", "[Erlang]", XB_FK_ERLANG, "src/m.erl", 0);
	uint32_t c = xb_profile_intern_at(&p, "m:f/1", "[Erlang]", XB_FK_ERLANG, "other.erl", 0);
	CHECK(a == b && b == c, "one function, three frames: %u %u %u", a, b, c);
	CHECK(p.names[a].file && strcmp(p.names[a].file, "src/m.erl") == 0, "the first file known is kept: %s",
	      p.names[a].file ? p.names[a].file : "(none)");
	uint32_t d = xb_profile_intern_at(&p, "m:f/1", "[Erlang]", XB_FK_ERLANG, "src/m.erl", 7);
	uint32_t e = xb_profile_intern_at(&p, "m:f/1", "[Erlang]", XB_FK_ERLANG, "src/m.erl", 9);
	CHECK(d != a && e != d, "lines are frames of their own: %u %u %u", a, d, e);
	xb_profile_free(&p);
}

static void t_text_clean(void)
{
	char b[64];
	CHECK(strcmp(xb_text_clean("m:f;g/1", true, b, sizeof(b)), "m:f:g/1") == 0, "folded: got %s", b);
	CHECK(strcmp(xb_text_clean("m:f;g/1", false, b, sizeof(b)), "m:f;g/1") == 0, "table: got %s", b);
	CHECK(strcmp(xb_text_clean("a;b\nc 7;d", true, b, sizeof(b)), "a:b\\nc 7:d") == 0, "folded: got %s", b);
	CHECK(strchr(xb_text_clean(";;;", true, b, sizeof(b)), ';') == NULL, "a ';' left: %s", b);
}

static char *capture(void (*fn)(FILE *, const char *), const char *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fn(f, arg);
	fclose(f);
	return buf;
}

static void put_xml_all(FILE *f, const char *s)
{
	xb_put_xml(f, s, strlen(s));
}

static void t_xml_escape(void)
{
	char *x = capture(put_xml_all, "a<b>&\"'c");
	CHECK(strcmp(x, "a&lt;b&gt;&amp;&quot;&apos;c") == 0, "got %s", x);
	free(x);
	x = capture(put_xml_all, "plain");
	CHECK(strcmp(x, "plain") == 0, "got %s", x);
	free(x);
}

static void t_json_string(void)
{
	char *j = capture(xb_put_json_string, "q\"\\\n\x01\x7f\xff\xc3\xa9/");
	CHECK(strcmp(j, "\"q\\\"\\\\\\u000a\\u0001\\u007f\xef\xbf\xbd\xc3\xa9/\"") == 0, "got %s", j);
	free(j);
	j = capture(xb_put_json_string, "");
	CHECK(strcmp(j, "\"\"") == 0, "got %s", j);
	free(j);
	j = capture(xb_put_json_string, "\xe2\x82"); /* truncated at the end */
	CHECK(strcmp(j, "\"\xef\xbf\xbd\"") == 0, "got %s", j);
	free(j);
}

static void t_fit_text(void)
{
	bool cut;
	CHECK(xb_fit_text("app:leaf/1", 20, &cut) == 10 && !cut, "fits");
	CHECK(xb_fit_text("app:leaf/1", 10, &cut) == 10 && !cut, "fits exactly");
	CHECK(xb_fit_text("app:leaf/1", 9, &cut) == 7 && cut, "cut to 7 + ..");
	CHECK(xb_fit_text("app:leaf/1", 3, &cut) == 1 && cut, "a..");
	CHECK(xb_fit_text("app:leaf/1", 2, &cut) == 0 && !cut, "nothing under 3 characters");
	CHECK(xb_fit_text("ab", 2, &cut) == 2 && !cut, "short names still fit");
	/* Characters, not bytes: "ünïcødé" is 7 characters, 11 bytes. */
	const char *u = "\xc3\xbcn\xc3\xaf" "c\xc3\xb8" "d\xc3\xa9";
	CHECK(xb_fit_text(u, 7, &cut) == strlen(u) && !cut, "7 characters fit in 7");
	CHECK(xb_fit_text(u, 5, &cut) == 5 && cut, "3 characters (5 bytes) + ..: %zu",
	      xb_fit_text(u, 5, &cut));
}

/* Intern in reverse alphabetical order: the writers must not care. */
static void t_output_order(void)
{
	struct xb_profile p;
	xb_profile_init(&p);
	uint32_t c = xb_profile_intern(&p, "c", "[Erlang]", XB_FK_ERLANG);
	uint32_t b = xb_profile_intern(&p, "b", "[Erlang]", XB_FK_ERLANG);
	uint32_t a = xb_profile_intern(&p, "a", "[Erlang]", XB_FK_ERLANG);
	uint32_t s0[] = { c, a }, s1[] = { b, a }, s2[] = { a }, s3[] = { a, c };
	xb_profile_add(&p, s0, 2, 0); /* a;c */
	xb_profile_add(&p, s1, 2, 0); /* a;b */
	xb_profile_add(&p, s2, 1, 0); /* a */
	xb_profile_add(&p, s3, 2, 0); /* c;a */
	uint32_t *rank, *order;
	CHECK(xb_out_order(&p, &rank, &order) == 0, "order failed");
	CHECK(rank[a] == 0 && rank[b] == 1 && rank[c] == 2, "ranks %u %u %u", rank[a], rank[b], rank[c]);
	CHECK(order[0] == 2 && order[1] == 1 && order[2] == 0 && order[3] == 3,
	      "order %u %u %u %u (want a, a;b, a;c, c;a)", order[0], order[1], order[2], order[3]);
	free(rank);
	free(order);
	xb_profile_free(&p);
}

static void add_n(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative, int count)
{
	for (int i = 0; i < count; i++)
		xb_profile_add(p, ids, n, nnative);
}

static void t_flame_merge_narrow(void)
{
	struct xb_profile p;
	xb_profile_init(&p);
	uint32_t e = xb_profile_intern(&p, "e", "[Erlang]", XB_FK_ERLANG);
	uint32_t d = xb_profile_intern(&p, "d", "[Erlang]", XB_FK_ERLANG);
	uint32_t c = xb_profile_intern(&p, "c", "[Erlang]", XB_FK_ERLANG);
	uint32_t b = xb_profile_intern(&p, "b", "[Erlang]", XB_FK_ERLANG);
	uint32_t a = xb_profile_intern(&p, "a", "[Erlang]", XB_FK_ERLANG);
	uint32_t sa[] = { a }, sab[] = { b, a }, sac[] = { c, a }, sd[] = { d }, sde[] = { e, d };
	add_n(&p, sac, 2, 0, 5);
	add_n(&p, sd, 1, 0, 1);
	add_n(&p, sab, 2, 0, 3);
	add_n(&p, sde, 2, 0, 1);
	add_n(&p, sa, 1, 0, 2);
	/* 12 samples; at 10 % (1.2 samples) e (1) goes, d (2) stays. */
	struct xb_flame fl;
	CHECK(xb_flame_build(&p, 0.1, &fl) == 0, "build failed");
	static const struct {
		const char *name;
		uint32_t depth;
		uint64_t x, total;
	} want[] = { { "all", 0, 0, 12 }, { "a", 1, 0, 10 }, { "b", 2, 0, 3 }, { "c", 2, 3, 5 },
		     { "d", 1, 10, 2 } };
	CHECK(fl.n == XB_ARRAY_SIZE(want), "%zu nodes, want %zu", fl.n, XB_ARRAY_SIZE(want));
	for (size_t i = 0; i < fl.n && i < XB_ARRAY_SIZE(want); i++) {
		const struct xb_flame_node *nd = &fl.nodes[i];
		const char *name = nd->frame == XB_FLAME_ROOT ? "all" : p.names[nd->frame].name;
		CHECK(strcmp(name, want[i].name) == 0 && nd->depth == want[i].depth && nd->x == want[i].x &&
			      nd->total == want[i].total,
		      "node %zu: %s depth %u x %llu total %llu, want %s %u %llu %llu", i, name, nd->depth,
		      (unsigned long long)nd->x, (unsigned long long)nd->total, want[i].name, want[i].depth,
		      (unsigned long long)want[i].x, (unsigned long long)want[i].total);
	}
	CHECK(fl.total == 12 && fl.maxdepth == 2 && fl.merged_frames == 1 && fl.merged_samples == 1,
	      "total %llu maxdepth %u merged %zu frames %llu samples", (unsigned long long)fl.total,
	      fl.maxdepth, fl.merged_frames, (unsigned long long)fl.merged_samples);
	xb_flame_free(&fl);
	/* At 20 % (2.4 samples) d goes too, with e inside it: 2 frames, whose
	 * 2 samples are now drawn as the root's. */
	CHECK(xb_flame_build(&p, 0.2, &fl) == 0, "build failed");
	CHECK(fl.n == 4 && fl.merged_frames == 2 && fl.merged_samples == 2 && fl.maxdepth == 2,
	      "%zu nodes, merged %zu frames %llu samples", fl.n, fl.merged_frames,
	      (unsigned long long)fl.merged_samples);
	xb_flame_free(&fl);
	/* Exactly at the minimum (25 % = 3 samples) stays: b. */
	CHECK(xb_flame_build(&p, 0.25, &fl) == 0, "build failed");
	CHECK(fl.n == 4 && fl.merged_frames == 2, "at the minimum: %zu nodes, merged %zu", fl.n,
	      fl.merged_frames);
	xb_flame_free(&fl);
	/* Nothing narrow: the whole tree. */
	CHECK(xb_flame_build(&p, 0, &fl) == 0 && fl.n == 6 && fl.merged_frames == 0, "%zu nodes", fl.n);
	xb_flame_free(&fl);
	xb_profile_free(&p);
}

static void t_blame_filter(void)
{
	struct xb_profile p, q;
	xb_profile_init(&p);
	uint32_t cs = xb_profile_intern(&p, "copy_struct_x", "[beam.smp]", XB_FK_NATIVE);
	uint32_t snd = xb_profile_intern(&p, "m:send_loop/2", "[Erlang]", XB_FK_ERLANG);
	uint32_t run = xb_profile_intern(&p, "m:run/0", "[Erlang]", XB_FK_ERLANG);
	uint32_t hot = xb_profile_intern(&p, "m:hot/1", "[Erlang]", XB_FK_ERLANG);
	uint32_t gcj = xb_profile_intern(&p, "global::garbage_collect", "[JIT]", XB_FK_JIT);
	uint32_t gc = xb_profile_intern(&p, "m:gc/1", "[Erlang]", XB_FK_ERLANG);
	uint32_t grp = xb_profile_intern(&p, "<0.80.0>", "[group]", XB_FK_GROUP);
	p.names[run].file = strdup("m.erl");
	p.names[run].line = 7;
	uint32_t s1[] = { cs, snd, run, grp }, s2[] = { hot, run, grp }, s3[] = { gcj, gc, grp };
	uint32_t s4[] = { cs, run }; /* copy_struct_x outside the native part: not a match */
	add_n(&p, s1, 4, 1, 3);
	add_n(&p, s2, 3, 0, 5);
	add_n(&p, s3, 3, 1, 2);
	add_n(&p, s4, 2, 0, 4);
	CHECK(xb_profile_filter_blame(&p, "copy_struct", &q) == 0, "filter failed");
	CHECK(q.nstacks == 1 && q.total == 3 && q.stacks[0].count == 3 && q.stacks[0].n == 4 &&
		      q.stacks[0].nnative == 1,
	      "copy_struct: %zu stacks, %llu samples", q.nstacks, (unsigned long long)q.total);
	if (q.nstacks == 1) {
		const struct xb_stack *s = &q.stacks[0];
		CHECK(strcmp(q.names[s->ids[0]].name, "copy_struct_x") == 0 &&
			      strcmp(q.names[s->ids[2]].name, "m:run/0") == 0 &&
			      q.names[s->ids[3]].kind == XB_FK_GROUP,
		      "the whole stack, innermost first");
		CHECK(q.names[s->ids[2]].file && strcmp(q.names[s->ids[2]].file, "m.erl") == 0 &&
			      q.names[s->ids[2]].line == 7,
		      "file and line copied");
	}
	struct xb_row *rows;
	uint64_t matched, noerl;
	xb_profile_blame(&p, "copy_struct", &rows, &matched, &noerl);
	CHECK(matched == q.total, "the same samples as xb_profile_blame: %llu vs %llu",
	      (unsigned long long)matched, (unsigned long long)q.total);
	free(rows);
	xb_profile_free(&q);
	/* The JIT alias of erts_garbage_collect. */
	CHECK(xb_profile_filter_blame(&p, "erts_garbage_collect", &q) == 0 && q.nstacks == 1 &&
		      q.total == 2,
	      "erts_garbage_collect: %zu stacks, %llu samples", q.nstacks, (unsigned long long)q.total);
	xb_profile_free(&q);
	CHECK(xb_profile_filter_blame(&p, "no_such_fn", &q) == 0 && q.nstacks == 0 && q.total == 0 &&
		      q.nnames == 0,
	      "no match: an empty profile");
	xb_profile_free(&q);
	xb_profile_free(&p);
}

/* A profile with names that need escaping in every format. */
static void nasty_profile(struct xb_profile *p)
{
	xb_profile_init(p);
	uint32_t w = xb_profile_intern(p, "app:'we;ird<&>\"\n\t'/0", "[Erlang]", XB_FK_ERLANG);
	uint32_t bad = xb_profile_intern(p, "bad\xff\x01]]>name", "[Erlang]", XB_FK_ERLANG);
	uint32_t gc = xb_profile_intern(p, "erts_garbage_collect_nobump", "[beam.smp]", XB_FK_NATIVE);
	uint32_t sw = xb_profile_intern(p, "sweep_one_heap", "[beam.smp]", XB_FK_NATIVE);
	p->names[sw].file = strdup("erl_gc.c");
	p->names[sw].line = 1234;
	uint32_t s1[] = { w, bad }, s2[] = { sw, gc, bad };
	add_n(p, s1, 2, 0, 3);
	add_n(p, s2, 3, 2, 2);
}

static void t_writers_full_disk(void)
{
	struct xb_profile p;
	nasty_profile(&p);
	struct xb_out_meta m = { .title = "t", .period_ns = 1000000 };
	int (*const fns[])(FILE *, const struct xb_profile *, const struct xb_out_meta *) = {
		xb_write_flamegraph, xb_write_speedscope, xb_write_pprof
	};
	for (size_t i = 0; i < XB_ARRAY_SIZE(fns); i++) {
		FILE *f = fopen("/dev/full", "w");
		CHECK(f != NULL, "cannot open /dev/full");
		if (!f)
			break;
		int rc = fns[i](f, &p, &m);
		fclose(f);
		CHECK(rc == -1 && strstr(xb_err(), "writing the") && strstr(xb_err(), "No space left"),
		      "writer %zu: rc %d, message \"%s\"", i, rc, xb_err());
	}
	xb_profile_free(&p);
}

static char *write_mem(int (*fn)(FILE *, const struct xb_profile *, const struct xb_out_meta *),
		       const struct xb_profile *p, const struct xb_out_meta *m, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	int rc = fn(f, p, m);
	fclose(f);
	if (rc < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void t_flamegraph_escaped(void)
{
	struct xb_profile p;
	nasty_profile(&p);
	struct xb_out_meta m = { .title = "title <&> \x02", .blame = "erts_gc<" };
	size_t n1, n2;
	char *a = write_mem(xb_write_flamegraph, &p, &m, &n1);
	char *b = write_mem(xb_write_flamegraph, &p, &m, &n2);
	CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "two writes differ");
	if (a) {
		for (size_t i = 0; i < n1; i++) {
			unsigned char c = (unsigned char)a[i];
			CHECK(c >= 0x20 || c == '\n', "raw control 0x%02x at byte %zu", c, i);
			CHECK(c != 0xff, "invalid UTF-8 at byte %zu", i);
		}
		CHECK(strstr(a, "app:&apos;we;ird&lt;&amp;&gt;&quot;\\n\\t&apos;/0 (3 samples"),
		      "escaped name missing");
		CHECK(strstr(a, "bad\xef\xbf\xbd\\x01]]&gt;name"), "invalid UTF-8 not replaced");
		CHECK(!strstr(a, "<&>") && !strstr(a, "href") && !strstr(a, "url("),
		      "raw name or an external reference");
		CHECK(strstr(a, "title &lt;&amp;&gt; \\x02"), "title not escaped");
		/* Only the script's CDATA section ends with "]]>". */
		const char *s = strstr(a, "]]>"), *t = s ? strstr(s + 3, "]]>") : NULL;
		CHECK(s && t && !strstr(t + 3, "]]>"), "a name closed a CDATA section");
	}
	free(a);
	free(b);
	xb_profile_free(&p);
}

static int gunzip(const char *in, size_t n, unsigned char **out, size_t *outlen)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return -1;
	size_t cap = 1 << 16;
	*out = malloc(cap);
	*outlen = 0;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)n;
	int rc;
	do {
		if (*outlen == cap)
			*out = realloc(*out, cap *= 2);
		zs.next_out = *out + *outlen;
		zs.avail_out = (uInt)(cap - *outlen);
		rc = inflate(&zs, Z_NO_FLUSH);
		*outlen = cap - zs.avail_out;
	} while (rc == Z_OK);
	inflateEnd(&zs);
	return rc == Z_STREAM_END ? 0 : -1;
}

static void t_pprof_round_trip(void)
{
	struct xb_profile p;
	nasty_profile(&p);
	struct xb_out_meta m = { .title = "t", .period_ns = 1003009, .start_unix_ns = 17, .duration_ns = 5 };
	size_t n;
	char *gz = write_mem(xb_write_pprof, &p, &m, &n);
	unsigned char *raw = NULL;
	size_t rawlen = 0;
	CHECK(gz && n > 18 && (unsigned char)gz[0] == 0x1f && (unsigned char)gz[1] == 0x8b, "not gzip");
	CHECK(gz && gunzip(gz, n, &raw, &rawlen) == 0, "gunzip failed");
	Perftools__Profiles__Profile *pb =
		raw ? perftools__profiles__profile__unpack(NULL, rawlen, raw) : NULL;
	CHECK(pb != NULL, "protobuf-c cannot unpack it");
	if (pb) {
		char **st = pb->string_table;
		CHECK(pb->n_string_table > 0 && strcmp(st[0], "") == 0, "string_table[0] is not \"\"");
		CHECK(pb->n_sample_type == 2 && strcmp(st[pb->sample_type[0]->type], "samples") == 0 &&
			      strcmp(st[pb->sample_type[0]->unit], "count") == 0 &&
			      strcmp(st[pb->sample_type[1]->type], "cpu") == 0 &&
			      strcmp(st[pb->sample_type[1]->unit], "nanoseconds") == 0,
		      "sample types");
		CHECK(pb->period_type && strcmp(st[pb->period_type->type], "cpu") == 0 && pb->period == 1003009 &&
			      pb->time_nanos == 17 && pb->duration_nanos == 5,
		      "period, time");
		CHECK(pb->n_sample == 2 && pb->n_location == 4 && pb->n_function == 4, "%zu samples %zu locations",
		      pb->n_sample, pb->n_location);
		for (size_t i = 0; i < pb->n_sample; i++) {
			Perftools__Profiles__Sample *s = pb->sample[i];
			CHECK(s->n_value == 2 && s->value[1] == s->value[0] * 1003009, "values");
			/* leaf first: the first location's function is the leaf */
			uint64_t loc = s->location_id[0];
			const char *leaf = NULL, *file = NULL;
			for (size_t k = 0; k < pb->n_location; k++)
				if (pb->location[k]->id == loc)
					for (size_t j = 0; j < pb->n_function; j++)
						if (pb->function[j]->id == pb->location[k]->line[0]->function_id) {
							leaf = st[pb->function[j]->name];
							file = st[pb->function[j]->filename];
						}
			if (s->value[0] == 2)
				CHECK(leaf && strcmp(leaf, "sweep_one_heap") == 0 && strcmp(file, "erl_gc.c") == 0,
				      "GC sample's leaf %s (%s)", leaf ? leaf : "?", file ? file : "?");
			else
				CHECK(leaf && strcmp(leaf, "app:'we;ird<&>\"\\n\\t'/0") == 0 && strcmp(file, "") == 0,
				      "other sample's leaf %s", leaf ? leaf : "?");
		}
		for (size_t j = 0; j < pb->n_function; j++)
			if (strcmp(st[pb->function[j]->name], "erts_garbage_collect_nobump") == 0)
				CHECK(strcmp(st[pb->function[j]->filename], "beam.smp") == 0,
				      "a native frame's filename is its module");
		perftools__profiles__profile__free_unpacked(pb, NULL);
	}
	free(raw);
	free(gz);
	xb_profile_free(&p);
}

int main(int argc, char **argv)
{
	filter = argc > 1 ? argv[1] : NULL;
	run_case("atom_quote_plain", t_quote_plain);
	run_case("atom_quote_uppercase_first", t_quote_uppercase_first);
	run_case("atom_quote_underscore_digit_first", t_quote_underscore_digit_first);
	run_case("atom_quote_space_and_punctuation", t_quote_space_and_punct);
	run_case("atom_quote_escapes", t_quote_escapes);
	run_case("atom_quote_empty", t_quote_empty);
	run_case("atom_quote_latin1_lowercase_utf8", t_quote_latin1_lowercase_utf8);
	run_case("atom_quote_latin1_uppercase_first", t_quote_latin1_uppercase_first);
	run_case("atom_quote_3byte_utf8", t_quote_3byte_utf8);
	run_case("atom_quote_c1_control", t_quote_c1_control);
	run_case("atom_quote_reserved_words", t_quote_reserved_words);
	run_case("atom_quote_truncation", t_quote_truncation);
	run_case("format_pid", t_format_pid);
	run_case("parse_pid", t_parse_pid);
	run_case("maps_parse", t_maps_parse);
	run_case("maps_parse_edge_cases", t_maps_parse_edge);
	run_case("symfile_offsets_otp25", t_symfile_offsets_otp25);
	run_case("symfile_nofold", t_symfile_nofold);
	run_case("symfile_fold", t_symfile_fold);
	run_case("symfile_fold_unpaired_prologue", t_symfile_fold_unpaired);
	run_case("symfile_emulator_record", t_symfile_emulator_record);
	run_case("symfile_truncated", t_symfile_truncated);
	run_case("symfile_garbage", t_symfile_garbage);
	run_case("codemap_finish_overlaps", t_codemap_finish_overlaps);
	run_case("codemap_finish_empty", t_codemap_finish_empty);
	run_case("perfmap_print", t_perfmap_print);
	run_case("thread_name_match", t_thread_name_match);
	run_case("blame_match", t_blame_match);
	run_case("blame_close_names", t_blame_close);
	run_case("sampler_parse", t_sampler_parse);
	run_case("bpf_parse_roundtrip", t_bpf_parse_roundtrip);
	run_case("bpf_parse_shapes", t_bpf_parse_shapes);
	run_case("bpf_parse_malformed", t_bpf_parse_malformed);
	run_case("bpf_parse_fuzz", t_bpf_parse_fuzz);
	run_case("profile_flat_and_blame", t_profile_flat_and_blame);
	run_case("profile_hash_flood", t_profile_hash_flood);
	run_case("skid_histogram", t_skid_histogram);
	run_case("format_pid_pixdata", t_format_pid_pixdata);
	run_case("demangle_trim", t_demangle_trim);
	run_case("demangle", t_demangle);
	run_case("utf8_next", t_utf8_next);
	run_case("display_name", t_display_name);
	run_case("display_fit", t_display_fit);
	run_case("text_clean_folded", t_text_clean);
	run_case("intern_file_attribute", t_intern_file_attribute);
	run_case("xml_escape", t_xml_escape);
	run_case("json_string", t_json_string);
	run_case("fit_text", t_fit_text);
	run_case("output_order", t_output_order);
	run_case("flame_merge_narrow", t_flame_merge_narrow);
	run_case("blame_filter", t_blame_filter);
	run_case("writers_full_disk", t_writers_full_disk);
	run_case("flamegraph_escaped_deterministic", t_flamegraph_escaped);
	run_case("pprof_round_trip", t_pprof_round_trip);
	erlstack_cases();
	names_cases();
	heapsample_cases();
	sched_cases();
	hostile_cases();
	prompt_cases();
	layout_cases();
	printf("1..%d\n", n_pass + n_fail);
	return n_fail ? 1 : 0;
}

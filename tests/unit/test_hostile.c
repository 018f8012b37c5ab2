/* test_hostile.c - unit cases of "safe to point at any process":
 * files opened inside a root (safefile.c), strict numbers (cli.c),
 * terminal-safe messages, perf map escaping, DWARF offset validation and
 * the code map's budgets. */
#define _GNU_SOURCE
#include "xb/alloc.h"
#include "xb/cli.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/dwarf_layout.h"
#include "xb/ivset.h"
#include "xb/perfmap.h"
#include "xb/release.h"
#include "xb/safefile.h"
#include "xb/unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

/* ---- safefile ---- */

static char tmp[64];

static void mkfile(const char *rel, const char *text)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void rmtree(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "rm -rf %s failed\n", dir);
}

/* xb_safe_slurp of PATH on behalf of WHO: read (OK) or refused with EACCES. */
static void slurp_as(int root, const char *path, const struct xb_cred *who, bool ok, const char *why)
{
	char *t = xb_safe_slurp(root, path, 4096, 0, who, NULL);
	if (ok)
		CHECK(t != NULL, "%s: %s", why, xb_err());
	else
		CHECK(!t && errno == EACCES, "%s", why);
	free(t);
}

static void t_safefile(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/xbunit-safe-XXXXXX");
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	char p[256];
	snprintf(p, sizeof(p), "%s/root", tmp);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/root/rel", tmp);
	mkdir(p, 0755);
	mkfile("root/rel/ok", "25.2.3\n");
	mkfile("secret", "SECRET\n");
	snprintf(p, sizeof(p), "%s/root/rel/fifo", tmp);
	mkfifo(p, 0644);
	snprintf(p, sizeof(p), "%s/root/rel/link", tmp);
	CHECK(symlink("ok", p) == 0, "symlink");
	snprintf(p, sizeof(p), "%s/root/rel/abs", tmp);
	char target[256];
	snprintf(target, sizeof(target), "%s/secret", tmp);
	CHECK(symlink(target, p) == 0, "symlink");
	/* an absolute symlink in the middle: inside the root it names
	 * ROOT/TMP/secret, which does not exist */
	snprintf(p, sizeof(p), "%s/root/dir", tmp);
	CHECK(symlink(tmp, p) == 0, "symlink");
	snprintf(p, sizeof(p), "%s/root/up", tmp);
	CHECK(symlink("../..", p) == 0, "symlink");
	snprintf(p, sizeof(p), "%s/root/big", tmp);
	FILE *f = fopen(p, "w");
	if (f) {
		for (int i = 0; i < 10000; i++)
			fputc('x', f);
		fclose(f);
	}
	snprintf(p, sizeof(p), "%s/root", tmp);
	int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(root >= 0, "open root");

	size_t len = 0;
	char *t = xb_safe_slurp(root, "/rel/ok", 4096, XB_SAFE_NOFOLLOW, NULL, &len);
	CHECK(t && len == 7 && strcmp(t, "25.2.3\n") == 0, "regular file: %s", t ? t : xb_err());
	free(t);
	t = xb_safe_slurp(root, "rel/fifo", 4096, XB_SAFE_NOFOLLOW, NULL, NULL);
	CHECK(!t && errno == EINVAL, "a FIFO must be refused (errno %d)", errno);
	free(t);
	t = xb_safe_slurp(root, "rel/link", 4096, XB_SAFE_NOFOLLOW, NULL, NULL);
	CHECK(!t && errno == ELOOP, "a final symlink must be refused with NOFOLLOW (errno %d)", errno);
	free(t);
	t = xb_safe_slurp(root, "rel/link", 4096, 0, NULL, NULL);
	CHECK(t && strcmp(t, "25.2.3\n") == 0, "a symlink inside the root may be followed without NOFOLLOW");
	free(t);
	t = xb_safe_slurp(root, "rel/abs", 4096, 0, NULL, NULL);
	CHECK(!t, "an absolute symlink must resolve inside the root, not to the host's file: %s", t ? t : "");
	free(t);
	char rel[300];
	snprintf(rel, sizeof(rel), "dir/secret");
	t = xb_safe_slurp(root, rel, 4096, 0, NULL, NULL);
	CHECK(!t, "a symlinked directory must resolve inside the root");
	free(t);
	t = xb_safe_slurp(root, "up/secret", 4096, 0, NULL, NULL);
	CHECK(!t, "'..' must not leave the root");
	free(t);
	t = xb_safe_slurp(root, "../secret", 4096, 0, NULL, NULL);
	CHECK(!t, "'..' must not leave the root");
	free(t);
	t = xb_safe_slurp(root, "big", 4096, 0, NULL, NULL);
	CHECK(!t && errno == EFBIG, "a file over the size limit must be refused (errno %d)", errno);
	free(t);
	t = xb_safe_slurp(root, "/dev/zero", 4096, 0, NULL, NULL);
	CHECK(!t, "a device must be refused");
	free(t);
	/* read as another user: a root-only file is refused */
	struct xb_cred nobody = { .uid = 65534, .gid = 65534 };
	snprintf(p, sizeof(p), "%s/root/rel/ok", tmp);
	chmod(p, 0600);
	slurp_as(root, "rel/ok", &nobody, false, "a file its reader could not read must be refused");
	chmod(p, 0644);
	slurp_as(root, "rel/ok", &nobody, true, "a world-readable file is readable for anyone");
	/* ... but not in a directory its reader cannot search */
	snprintf(p, sizeof(p), "%s/root/rel", tmp);
	chmod(p, 0700);
	slurp_as(root, "rel/ok", &nobody, false, "a 0644 file in a 0700 directory of another user must be refused");
	slurp_as(root, "/rel//ok", &nobody, false, "the same, spelled with extra slashes");
	chmod(p, 0711);
	slurp_as(root, "rel/ok", &nobody, true, "a searchable (x, not r) directory is enough");
	snprintf(p, sizeof(p), "%s/root", tmp);
	chmod(p, 0700);
	slurp_as(root, "rel/ok", &nobody, false, "the root directory itself must be searchable");
	chmod(p, 0755);
	/* a directory reached through a symlink: the one it passes through
	 * must be searchable too (the kernel decides, as the reader) */
	snprintf(p, sizeof(p), "%s/root/priv", tmp);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/root/priv/app", tmp);
	mkdir(p, 0755);
	mkfile("root/priv/app/ver", "25.2.3\n");
	snprintf(p, sizeof(p), "%s/root/pub", tmp);
	CHECK(symlink("priv/app", p) == 0, "symlink");
	slurp_as(root, "pub/ver", &nobody, false, "a file behind a symlink into another user's 0700 directory");
	snprintf(p, sizeof(p), "%s/root/priv", tmp);
	chmod(p, 0711);
	slurp_as(root, "pub/ver", &nobody, true, "the same once that directory is searchable");
	snprintf(p, sizeof(p), "%s/root/rel", tmp);
	chmod(p, 0755);
	if (root >= 0)
		close(root);
	rmtree(tmp);
}

static void t_cred_can_read(void)
{
	struct stat st = { .st_uid = 0, .st_gid = 0, .st_mode = S_IFREG | 0640 };
	struct xb_cred c = { .uid = 1000, .gid = 1000, .groups = { 4, 0 }, .ngroups = 2 };
	CHECK(xb_cred_can_read(&c, &st), "member of group 0: 0640 readable");
	c.ngroups = 1;
	CHECK(!xb_cred_can_read(&c, &st), "not a member: 0640 not readable");
	st.st_uid = 1000;
	st.st_mode = S_IFREG | 0044;
	CHECK(!xb_cred_can_read(&c, &st), "owner without u+r: not readable (the owner bits decide)");
	c.uid = 0;
	CHECK(xb_cred_can_read(&c, &st), "uid 0 reads anything");
	struct stat d = { .st_uid = 0, .st_gid = 0, .st_mode = S_IFDIR | 0751 };
	struct xb_cred n = { .uid = 65534, .gid = 65534 };
	CHECK(xb_cred_can_search(&n, &d), "0751: others may search");
	d.st_mode = S_IFDIR | 0754;
	CHECK(!xb_cred_can_search(&n, &d), "0754: others may read the names, not search");
}

/* ---- strict numbers ---- */

static void t_parse_numbers(void)
{
	uint64_t u;
	double d;
	static const char *const bad_u[] = { "", "-1", "+1", " 1", "1 ", "0x10", "1e3", "1.0", "18446744073709551616",
					     "99999999999999999999999", "nan", "inf", "1k", NULL };
	for (const char *const *b = bad_u; *b; b++)
		CHECK(xb_parse_u64(*b, 0, UINT64_MAX, &u) < 0, "'%s' must not parse as a whole number", *b);
	CHECK(xb_parse_u64("18446744073709551615", 0, UINT64_MAX, &u) == 0 && u == UINT64_MAX, "max");
	CHECK(xb_parse_u64("4294967808", 0, 65528, &u) < 0, "out of bounds");
	static const char *const bad_d[] = { "", "nan", "NaN", "inf", "-inf", "infinity", "-1", "+1", "0x1p3", "1e999",
					     "1e-999", ".", "e5", "1.2.3", "1,5", " 1", "1 ", NULL };
	for (const char *const *b = bad_d; *b; b++)
		CHECK(xb_parse_double(*b, 0, 1e300, &d) < 0, "'%s' must not parse as a number", *b);
	CHECK(xb_parse_double("0.5", 0, 1, &d) == 0 && d == 0.5, "0.5");
	CHECK(xb_parse_double("1e2", 0, 1000, &d) == 0 && d == 100, "1e2");
	CHECK(xb_parse_double("2", 0, 1, &d) < 0, "above max");
}

/* ---- messages and names ---- */

static void t_sanitize(void)
{
	char out[256];
	xb_sanitize("a\nb\x1b[31mc\x7f\xc2\x9b" "d\xff\xc3\xa9", out, sizeof(out));
	CHECK(strcmp(out, "a\\x0ab\\x1b[31mc\\x7f\\xc2\\x9bd\\xff\xc3\xa9") == 0, "got '%s'", out);
	xb_fail("path %s", "x\r\ny");
	CHECK(strcmp(xb_err(), "path x\\x0d\\x0ay") == 0, "xb_fail sanitizes: '%s'", xb_err());
	char small[6];
	xb_sanitize("\x01\x02\x03", small, sizeof(small));
	CHECK(strcmp(small, "\\x01") == 0, "cut at a whole escape: '%s'", small);
}

static void t_perfmap_escape(void)
{
	struct xb_codemap cm = { 0 };
	xb_codemap_add(&cm, 0x1000, 0x1010, "m:'a\nb'/1", 9, 0);
	xb_codemap_add(&cm, 0x2000, 0x2010, "m:'\xff\x01'/0", 9, 0);
	xb_codemap_add(&cm, 0x3000, 0x3010, "m:'tab\there'/0", 15, 0);
	xb_codemap_finish(&cm);
	size_t len;
	char *text = perfmap_text(&cm, &len);
	CHECK(text, "print failed");
	int lines = 0;
	for (size_t i = 0; text && i < len; i++) {
		lines += text[i] == '\n';
		CHECK(text[i] == '\n' || (unsigned char)text[i] >= 0x20, "control character 0x%02x in the map",
		      (unsigned char)text[i]);
	}
	CHECK(lines == 3, "%d lines for 3 entries: a name forged a line", lines);
	CHECK(text && strstr(text, "1000 10 m:'a\\nb'/1\n") && strstr(text, "3000 10 m:'tab\\there'/0\n") &&
		      strstr(text, "2000 10 m:'\xef\xbf\xbd\\x01'/0\n"),
	      "got \"%s\"", text ? text : "");
	/* and it reads back as the same three entries */
	FILE *in = text ? fmemopen(text, len, "r") : NULL;
	struct xb_codemap back;
	CHECK(in && xb_perfmap_parse(in, "map", &back) == 0 && back.n == 3, "read back");
	if (in) {
		fclose(in);
		xb_codemap_free(&back);
	}
	free(text);
	xb_codemap_free(&cm);
}

/* ---- DWARF offsets ---- */

static void t_dwarf_validate(void)
{
	int64_t off[XB_F_COUNT];
	for (int i = 0; i < XB_F_COUNT; i++)
		off[i] = XB_NOFIELD;
	off[XB_F_PROC_SIZE] = 776;
	off[XB_F_PROC_HEAP] = 128;
	off[XB_F_PROC_HEND] = 9000;             /* outside struct process */
	off[XB_F_PROC_STOP] = -5;               /* nonsense */
	off[XB_F_SCHED_STRIDE] = 1ll << 40;     /* absurd size */
	off[XB_F_SCHED_NO] = 184;               /* no size for its type: bounded only */
	off[XB_F_MODINFO_NAME] = 18;
	char why[200];
	int bad = xb_dwarf_validate(off, NULL, why, sizeof(why));
	CHECK(bad == 3, "%d offsets refused, expected 3 (%s)", bad, why);
	CHECK(off[XB_F_PROC_HEND] == XB_NOFIELD && off[XB_F_PROC_STOP] == XB_NOFIELD &&
		      off[XB_F_SCHED_STRIDE] == XB_NOFIELD,
	      "the bad ones are dropped");
	CHECK(off[XB_F_PROC_HEAP] == 128 && off[XB_F_SCHED_NO] == 184 && off[XB_F_PROC_SIZE] == 776,
	      "the good ones stay");
	/* the struct's size from the table when the DWARF lacks it */
	int64_t tab[XB_F_COUNT];
	for (int i = 0; i < XB_F_COUNT; i++)
		tab[i] = XB_NOFIELD;
	tab[XB_F_PROC_SIZE] = 100;
	for (int i = 0; i < XB_F_COUNT; i++)
		off[i] = XB_NOFIELD;
	off[XB_F_PROC_CURRENT] = 472;
	CHECK(xb_dwarf_validate(off, tab, why, sizeof(why)) == 1, "outside the table's struct size");
	/* struct process is read 256 at a time: 16 KiB at most, though
	 * other structs may have up to 1 MiB */
	for (int i = 0; i < XB_F_COUNT; i++)
		off[i] = XB_NOFIELD;
	off[XB_F_PROC_SIZE] = 65000;
	CHECK(xb_dwarf_validate(off, NULL, why, sizeof(why)) == 1 && off[XB_F_PROC_SIZE] == XB_NOFIELD,
	      "a 65000-byte struct process kept");
	off[XB_F_PROC_SIZE] = 16384;
	CHECK(xb_dwarf_validate(off, NULL, why, sizeof(why)) == 0, "a 16 KiB struct process refused");
	/* attach.c validates the table merged with the DWARF again: every
	 * compiled-in table must pass it as it is (nothing dropped) */
	for (const struct xb_release *const *r = xb_releases; *r; r++)
		for (int fl = 0; fl < 2; fl++) {
			memcpy(off, xb_release_flavor(*r, fl ? XB_FLAVOR_JIT : XB_FLAVOR_EMU)->off, sizeof(off));
			int n = xb_dwarf_validate(off, NULL, why, sizeof(why));
			CHECK(n == 0, "the table for erts %s (%s) fails the merged check: %d (%s)", (*r)->erts,
			      fl ? "jit" : "emu", n, why);
		}
	/* the allocator layout's sums and arrays inside Allctr_t: every
	 * table that has one passes; a pool array or the carrier stats
	 * moved to the struct's end do not */
	int alloc_tables = 0;
	for (const struct xb_release *const *r = xb_releases; *r; r++)
		for (int fl = 0; fl < 2; fl++) {
			const int64_t *t = xb_release_flavor(*r, fl ? XB_FLAVOR_JIT : XB_FLAVOR_EMU)->off;
			if (t[XB_F_ALLCTR_SIZEOF] == XB_NOFIELD)
				continue;
			alloc_tables++;
			CHECK(xb_alloc_layout_ok(t), "the table for erts %s (%s): Allctr_t layout refused", (*r)->erts,
			      fl ? "jit" : "emu");
			memcpy(off, t, sizeof(off));
			off[XB_F_ALLCTR_CPOOL_NO_BLOCKS] = off[XB_F_ALLCTR_SIZEOF] - 8;
			CHECK(!xb_alloc_layout_ok(off), "erts %s: a pool array from the last word of Allctr_t accepted",
			      (*r)->erts);
			memcpy(off, t, sizeof(off));
			off[XB_F_ALLCTR_MBCS] = off[XB_F_ALLCTR_SIZEOF] - 16;
			CHECK(!xb_alloc_layout_ok(off), "erts %s: carrier stats past Allctr_t accepted", (*r)->erts);
		}
	CHECK(alloc_tables >= 3, "only %d tables with an allocator layout", alloc_tables);
	/* a DWARF struct size with the table's members: a member past the
	 * smaller struct is dropped (its buffer is that size) */
	memcpy(off, xb_release_flavor(xb_releases[0], XB_FLAVOR_JIT)->off, sizeof(off));
	off[XB_F_PROC_SIZE] = 64;
	CHECK(xb_dwarf_validate(off, NULL, why, sizeof(why)) > 0 && off[XB_F_PROC_HEAP] == XB_NOFIELD,
	      "process.heap past a 64-byte struct process kept (%s)", why);
}

/* ---- code map budgets ---- */

static void t_codemap_budget(void)
{
	struct xb_codemap cm = { 0 };
	uint64_t before = xb_overruns[XB_OVR_CODEMAP_ENTRIES];
	char name[32];
	for (uint32_t i = 0; i < XB_CODEMAP_MAX_ENTRIES + 10; i++) {
		int n = snprintf(name, sizeof(name), "m:f%u/0", i);
		xb_codemap_add(&cm, 0x1000 + (uint64_t)i * 16, 0x1000 + (uint64_t)i * 16 + 16, name, (size_t)n, 0);
	}
	CHECK(cm.n == XB_CODEMAP_MAX_ENTRIES && cm.full, "%zu entries kept", cm.n);
	CHECK(xb_overruns[XB_OVR_CODEMAP_ENTRIES] == before + 1, "the overrun counted once per build");
	xb_codemap_free(&cm);
}

/* ---- the code map's set of named ranges (ivset.c) ---- */

/* Against a bitmap of [0, 4096): random ranges added (past several merges
 * of the pending ones), random ranges asked, the answer of the bitmap
 * (a range is covered when every address of it is in the set; an empty
 * one when its address is in a range or at a range's end). */
static void t_ivset_model(void)
{
	enum { SPACE = 4096 };
	static bool in[SPACE + 1];
	static bool at_end[SPACE + 1];
	memset(in, 0, sizeof(in));
	memset(at_end, 0, sizeof(at_end));
	struct xb_ivset s = { 0 };
	unsigned seed = 12345;
	int wrong = 0;
	for (long round = 0; round < 3L * XB_IVSET_PENDING && wrong < 5; round++) {
		uint64_t lo = (uint64_t)(rand_r(&seed) % SPACE), len = (uint64_t)(rand_r(&seed) % 8);
		uint64_t hi = lo + len > SPACE ? SPACE : lo + len;
		if (xb_ivset_add(&s, lo, hi) < 0) {
			CHECK(0, "add: %s", xb_err());
			break;
		}
		for (uint64_t a = lo; a < hi; a++)
			in[a] = true;
		at_end[lo] = at_end[hi] = true; /* the ends of a range, empty or not */
		for (int q = 0; q < 8; q++) {
			uint64_t qlo = (uint64_t)(rand_r(&seed) % SPACE), qlen = (uint64_t)(rand_r(&seed) % 24);
			uint64_t qhi = qlo + qlen > SPACE ? SPACE : qlo + qlen;
			bool want = true;
			for (uint64_t a = qlo; a < qhi; a++)
				want &= in[a];
			if (qlo == qhi)
				want = in[qlo] || at_end[qlo] || (qlo && in[qlo - 1]);
			bool got = xb_ivset_covers(&s, qlo, qhi);
			if (got != want) {
				CHECK(0, "after %ld additions: [%llu, %llu) covered %d, the bitmap says %d", round + 1,
				      (unsigned long long)qlo, (unsigned long long)qhi, got, want);
				wrong++;
			}
		}
	}
	/* merged: no two ranges touch */
	for (size_t i = 1; i < s.n; i++)
		CHECK(s.v[i - 1][1] < s.v[i][0], "ranges %zu and %zu touch", i - 1, i);
	xb_ivset_free(&s);
	/* a range covered by one merged and one pending range together:
	 * [100, 110) merged in with XB_IVSET_PENDING - 1 others, then
	 * [110, 120) and [120, 130) pending */
	struct xb_ivset t = { 0 };
	xb_ivset_add(&t, 100, 110);
	for (uint64_t i = 1; i < XB_IVSET_PENDING; i++)
		xb_ivset_add(&t, 1000 + 10 * i, 1005 + 10 * i);
	CHECK(t.np == 0 && t.n == XB_IVSET_PENDING, "%zu merged, %zu pending", t.n, t.np);
	xb_ivset_add(&t, 120, 130);
	xb_ivset_add(&t, 110, 120);
	CHECK(xb_ivset_covers(&t, 105, 125), "[105, 125) across a merged and a pending range");
	CHECK(xb_ivset_covers(&t, 100, 130), "[100, 130)");
	CHECK(!xb_ivset_covers(&t, 100, 131), "[100, 131)");
	xb_ivset_free(&t);
	/* a question that steps between the arrays many times merges the
	 * pending ranges in (a hostile chain asks it again and again):
	 * merged [2k, 2k + 1), pending [2k + 1, 2k + 2) */
	struct xb_ivset u = { 0 };
	for (uint64_t k = 0; k < XB_IVSET_PENDING - 64; k++)
		xb_ivset_add(&u, 2 * k + 100000, 2 * k + 100001); /* (far away: to fill the pending array) */
	for (uint64_t k = 0; k < 64; k++)
		xb_ivset_add(&u, 2 * k, 2 * k + 1); /* (the last one merges them all in) */
	CHECK(u.np == 0, "%zu pending after %d additions", u.np, XB_IVSET_PENDING);
	for (uint64_t k = 0; k < 64; k++)
		xb_ivset_add(&u, 2 * k + 1, 2 * k + 2);
	CHECK(u.np == 64, "%zu pending", u.np);
	CHECK(xb_ivset_covers(&u, 0, 128), "[0, 128) across 128 ranges of both arrays");
	CHECK(u.np == 0 && xb_ivset_covers(&u, 0, 128) && !xb_ivset_covers(&u, 0, 129),
	      "after a long walk: %zu pending", u.np);
	xb_ivset_free(&u);
}

/* 100,000 ranges, each below the last (a VM that loads modules at rising
 * addresses, seen through a newest-first chain): with one sorted array,
 * each is a memmove of all before it, n^2/2 = 5 * 10^9 ranges moved in
 * all (2 * 10^12 bytes for the 512 Ki ranges a code map may name: minutes);
 * the set moves about 6 * 10^7. */
static void t_ivset_front_inserts(void)
{
	struct xb_ivset s = { 0 };
	const uint64_t n = 100000;
	for (uint64_t i = n; i-- > 0;)
		if (xb_ivset_add(&s, 0x10000 + i * 64, 0x10000 + i * 64 + 32) < 0) {
			CHECK(0, "add: %s", xb_err());
			break;
		}
	CHECK(s.n + s.np == n, "%zu + %zu ranges for %llu apart", s.n, s.np, (unsigned long long)n);
	/* each addition moves half the pending array; each of the n / P
	 * merges moves both arrays twice: about n * P / 2 + n^2 / P, 607
	 * per range here (P = 1024); one array: n / 2 = 50,000 per range */
	const uint64_t bound = n * 1000;
	CHECK(s.moved <= bound, "%llu ranges moved to add %llu (bound %llu): quadratic",
	      (unsigned long long)s.moved, (unsigned long long)n, (unsigned long long)bound);
	CHECK(xb_ivset_covers(&s, 0x10000 + 1234 * 64, 0x10000 + 1234 * 64 + 32), "a range added");
	CHECK(!xb_ivset_covers(&s, 0x10000 + 1234 * 64, 0x10000 + 1234 * 64 + 33), "past its end");
	CHECK(!xb_ivset_covers(&s, 0x10000 + 1234 * 64 + 32, 0x10000 + 1235 * 64), "the gap");
	/* and one that spans them all merges them into one */
	CHECK(xb_ivset_add(&s, 0x10000, 0x10000 + n * 64) == 0, "add");
	CHECK(xb_ivset_covers(&s, 0x10000, 0x10000 + n * 64), "the whole");
	xb_ivset_free(&s);
}

/* ---- the stack copy's bounds (unwind.c memory_read) ---- */

static void t_copy_holds(void)
{
	const uint64_t sp = 0x7ffc00001000ull, size = 16384;
	CHECK(xb_copy_holds(sp, size, sp, 8), "the first word");
	CHECK(xb_copy_holds(sp, size, sp + size - 8, 8), "the last word");
	CHECK(!xb_copy_holds(sp, size, sp + size - 7, 8), "a word across the end");
	CHECK(!xb_copy_holds(sp, size, sp - 8, 8), "below rsp");
	/* an address a frame without CFI made up: addr + 8 wraps to 7,
	 * below sp + size, where the sum-based check took it (UBSan:
	 * pointer index overflow in memory_read, seen in the suite) */
	CHECK(!xb_copy_holds(sp, size, UINT64_MAX - 0, 8), "2^64 - 1");
	CHECK(!xb_copy_holds(sp, size, UINT64_MAX - 6, 8), "2^64 - 7");
	CHECK(!xb_copy_holds(UINT64_MAX - 15, 16, UINT64_MAX - 7, 16), "a copy at the top, read past it");
	CHECK(xb_copy_holds(UINT64_MAX - 15, 16, UINT64_MAX - 7, 8), "the top word of a copy at the top");
	CHECK(!xb_copy_holds(sp, 4, sp, 8), "a copy shorter than the word");
	CHECK(!xb_copy_holds(sp, 0, sp, 8), "no copy");
}

/* ---- DWARF: anonymous members fanned out ---- */

/* A beam's DWARF whose struct process has 8 anonymous members of a struct
 * with 8 anonymous members, 8 levels down, none named (gcc
 * -fms-extensions, empty structs: no member name repeats): every field
 * looked up and not there walked all 8^8 of them, over a minute of
 * attach for this file, hours for 16 a level.  Now each lookup stops
 * after MAX_MEMBER_VISITS (dwarf_layout.c). */
static void t_dwarf_fanout(void)
{
	char dir[] = "/tmp/xb-unit-fanout-XXXXXX", src[64], obj[64], cmd[256];
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(src, sizeof(src), "%s/fan.c", dir);
	snprintf(obj, sizeof(obj), "%s/fan.so", dir); /* linked: a .o's strp names are unrelocated */
	FILE *f = fopen(src, "w");
	CHECK(f, "%s: %s", src, strerror(errno));
	if (!f)
		goto out;
	fprintf(f, "struct L8 { };\n");
	for (int i = 7; i >= 0; i--) {
		fprintf(f, i ? "struct L%d {" : "struct process {", i);
		for (int k = 0; k < 8; k++)
			fprintf(f, " struct L%d;", i + 1);
		fprintf(f, " };\n");
	}
	fprintf(f, "struct process xb_fanout;\n");
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -g -fms-extensions -shared -nostdlib -o '%s' '%s'", obj, src);
	CHECK(system(cmd) == 0, "%s failed", cmd);
	int fd = open(obj, O_RDONLY);
	Dwarf *dw = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
	CHECK(dw, "no DWARF in %s", obj);
	if (dw) {
		struct timespec a, b;
		int64_t off[XB_F_COUNT];
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
		int found = xb_dwarf_layout(dw, off);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
		double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
		/* (struct process's size, 0, is all it has) */
		CHECK(found <= 1 && off[XB_F_PROC_I] == XB_NOFIELD, "%d fields found in a struct with no member "
		      "names", found);
		CHECK(s < 2.0, "the layout of a fanned-out struct process took %.1f s of CPU", s);
		dwarf_end(dw);
	}
	if (fd >= 0)
		close(fd);
out:
	rmtree(dir);
}

void hostile_cases(void)
{
	run_case("stack_copy_bounds", t_copy_holds);
	run_case("safefile_rules", t_safefile);
	run_case("cred_can_read", t_cred_can_read);
	run_case("parse_numbers_strict", t_parse_numbers);
	run_case("sanitize_messages", t_sanitize);
	run_case("perfmap_escape", t_perfmap_escape);
	run_case("dwarf_validate_offsets", t_dwarf_validate);
	run_case("dwarf_anonymous_fanout_bounded", t_dwarf_fanout);
	run_case("codemap_entry_budget", t_codemap_budget);
	run_case("ivset_against_a_bitmap", t_ivset_model);
	run_case("ivset_front_inserts", t_ivset_front_inserts);
}

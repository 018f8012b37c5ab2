/* test_layout.c - layout files (--layout FILE): what a good one holds
 * comes back; a corrupt, truncated or hostile one is refused with a
 * reason, never half-used. */
#define _GNU_SOURCE
#include "unit.h"
#include "xb/layout.h"

#include <stdlib.h>
#include <string.h>

static const char good[] = "# extrospect-beam layout: comment\n"
			   "extrospect-beam layout 1\n"
			   "erts 13.1.5.77\n"
			   "flavor jit\n"
			   "pid 15 13 0\n"
			   "code_ix 3\n"
			   "regs r13 rsp rip rbp r14\n"
			   "threads 0 %d_scheduler\n"
			   "threads 1 -\n"
			   "field PROC_SIZE 840 proven\n"
			   "field PROC_HEAP 152 proven\n"
			   "field SCHED_STRIDE 41792\n"
			   "end 3\n";

static int parse(const char *text, struct xb_layout_file *lf, char *why)
{
	return xb_layout_parse(text, strlen(text), lf, why, 200);
}

static void case_layout_file_round_trip(void)
{
	struct xb_layout_file lf;
	char why[200];
	CHECK(parse(good, &lf, why) == 0, "a good file refused: %s", why);
	CHECK(lf.off[XB_F_PROC_SIZE] == 840 && lf.off[XB_F_PROC_HEAP] == 152 && lf.off[XB_F_SCHED_STRIDE] == 41792,
	      "offsets not read back");
	CHECK(lf.off[XB_F_PROC_HTOP] == XB_NOFIELD, "a field the file does not name must be absent");
	CHECK(strcmp(lf.erts, "13.1.5.77") == 0 && lf.flavor == XB_FLAVOR_JIT, "erts or flavour not read");
	CHECK(lf.pid_num_bits == 15 && lf.pid_ser_bits == 13 && lf.pid_pixdata == 0 && lf.num_code_ix == 3,
	      "pid layout or code indices not read");
	CHECK(lf.have_regs && lf.regs.c_p == XB_PREG_R13 && lf.regs.E == XB_PREG_SP && lf.regs.fcalls == XB_PREG_R14,
	      "register roles not read");
	CHECK(strcmp(lf.thread_fmt[0], "%d_scheduler") == 0 && lf.thread_fmt[1][0] == 0, "thread names not read");
}

static void case_layout_file_refusals(void)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "", "empty" },
		{ "erts 1\n", "not an extrospect-beam layout" },
		{ "extrospect-beam layout 2\n", "format 2" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\n", "incomplete" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield NO_SUCH 8\n",
		  "unknown field" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP -8\n",
		  "not a number" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 99999999999\n",
		  "not a number" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 0x98\n",
		  "not a number" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 8\n"
		  "field PROC_HEAP 16\n",
		  "given twice" },
		{ "extrospect-beam layout 1\nerts ../../etc\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 8\n",
		  "not understood" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 60 60 0\ncode_ix 3\nfield PROC_HEAP 8\n",
		  "not understood" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nregs rax rbx rcx foo rdx\n"
		  "field PROC_HEAP 8\n",
		  "unknown register" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nthreads 0 %s%n\n"
		  "field PROC_HEAP 8\n",
		  "not understood" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nthreads 0 %d_%d\n"
		  "field PROC_HEAP 8\n",
		  "not understood" },
		/* cut short, or the end line wrong */
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 8\n",
		  "cut short" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 8\nend 2\n",
		  "the end line counts 2 fields, the file holds 1" },
		{ "extrospect-beam layout 1\nerts 1\nflavor jit\npid 15 13 0\ncode_ix 3\nfield PROC_HEAP 8\nend 1\n"
		  "field PROC_HTOP 16\n",
		  "after the end line" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct xb_layout_file lf;
		char why[200] = "";
		CHECK(parse(bad[i].text, &lf, why) < 0, "case %zu accepted", i);
		CHECK(strstr(why, bad[i].why), "case %zu: reason '%s', expected '%s'", i, why, bad[i].why);
	}
	/* a long line, a NUL inside, a file too large */
	char *big = malloc(300000);
	memset(big, 'a', 299999);
	big[299999] = 0;
	struct xb_layout_file lf;
	char why[200];
	CHECK(xb_layout_parse(big, strlen(big), &lf, why, sizeof(why)) < 0 && strstr(why, "larger than"),
	      "a 300 kB file: %s", why);
	memcpy(big, "extrospect-beam layout 1\n", 25);
	big[1000] = 0;
	CHECK(xb_layout_parse(big, strlen(big), &lf, why, sizeof(why)) < 0 && strstr(why, "longer than"),
	      "a 1000-byte line: %s", why);
	CHECK(xb_layout_parse("extrospect-beam layout 1\n\0x", 27, &lf, why, sizeof(why)) < 0 && strstr(why, "NUL"),
	      "a NUL byte: %s", why);
	free(big);
}

void layout_cases(void)
{
	run_case("layout_file_round_trip", case_layout_file_round_trip);
	run_case("layout_file_refusals", case_layout_file_refusals);
}

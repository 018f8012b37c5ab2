/* erlang-sample - sampling profiler for a running BEAM.
 *
 *   erlang-sample [options] PID              flat profile
 *   erlang-sample --pstack PID               one stack per scheduler, now
 *   erlang-sample --blame copy_struct PID    Erlang code under a native fn
 *   erlang-sample --check PID                our assumptions, checked
 *
 * main parses the options (one table: parsing, --help and validation),
 * attaches a session (src/session/), wires the mode to its sink and
 * writes the result.  The pipeline itself lives in the session.
 */
#define _GNU_SOURCE
#include "xb/check.h"
#include "xb/cli.h"
#include "xb/common.h"
#include "xb/demangle.h"
#include "xb/names.h"
#include "xb/outfile.h"
#include "xb/outputs.h"
#include "xb/profile.h"
#include "xb/schedulers.h"
#include "xb/session.h"
#include "xb/version.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "erlang-sample"
#define MAX_OUTPUTS 6

struct opts {
	double duration;
	size_t top;
	bool only_erlang, skid_summary, pstack, idle_stacks, check, help, version, no_realtime, dump;
	bool lines, erlang_names, live;
	const char *layout, *write_layout;
	double live_interval, live_window;
	double pstack_wait;
	const char *blame, *format, *capture, *perf_read;
	bool capture_given;
	/* --by, --schedulers, --long-calls */
	const char *by;
	bool schedulers, long_calls, long_calls_ms_given;
	/* --wall */
	bool wall, freq_given, wall_max_given;
	size_t wall_max;
	double wall_hz;
	double long_calls_ms;
	struct xb_strlist outputs;
	int force_reg[3];
	struct xb_session_opts s;
};

static int parse_reg(const char *arg, void *dst)
{
	int r = xb_preg_parse(arg);
	if (r == XB_PREG_NONE || r == XB_PREG_IP || r == XB_PREG_SP)
		return xb_fail("not a general x86-64 register (rax..rdi, rbp, r8..r15)");
	*(int *)dst = r;
	return 0;
}

static const char *const captures[] = { "auto", "bpf", "perf", NULL };
static const char *const perf_reads[] = { "sample", "later", NULL };

static struct opts o = {
	.top = 40,
	.pstack_wait = 1.0,
	.live_interval = 1.0,
	.live_window = 10.0,
	.format = NULL,
	.capture = "auto",
	.perf_read = "sample",
	.long_calls_ms = 2.0,
	.wall_max = 10000,
	.force_reg = { -1, -1, -1 },
	.s = { .freq = 997, .user_stack = 16384, .max_depth = 128, .max_skid_ms = 10 },
};

static const struct xb_opt options[] = {
	{ "check", 0, XB_OPT_FLAG, &o.check, NULL,
	  "verify the release table, offsets and globals in use\n"
	  "against the running VM; one line per check, exit 1\n"
	  "on any FAIL", .group = "Modes:" },
	{ "write-layout", 0, XB_OPT_STR, &o.write_layout, "FILE",
	  "prove this VM's struct offsets (as --check does) and\n"
	  "write them to FILE ('-': standard output), for\n"
	  "--layout on another machine running the same build\n"
	  "(e.g. written on a build with debug info, used on its\n"
	  "stripped copy in production)" },
	{ "pstack", 0, XB_OPT_FLAG, &o.pstack, NULL,
	  "one mixed native+Erlang stack per running scheduler, now\n"
	  "(dirty schedulers: those working for a process)" },
	{ "dump", 0, XB_OPT_FLAG, &o.dump, NULL,
	  "the Erlang stack of every process, running or not (or\n"
	  "of the PROCESSes named after the PID: pids <0.N.S> or\n"
	  "registered names), with pid, name, status, current\n"
	  "function and message queue length; --format json" },
	{ "blame", 0, XB_OPT_STR, &o.blame, "FN",
	  "for samples whose native stack contains FN, count the\n"
	  "nearest Erlang function above it.  FN matches a symbol\n"
	  "exactly, or with any '_suffix' (copy_struct matches\n"
	  "copy_struct_x; erts_garbage_collect matches\n"
	  "erts_garbage_collect_nobump), or as a glob ('copy_*');\n"
	  "an Erlang function FN (m:f/a, m:f, Foo.Bar.f/a or\n"
	  "'Elixir.Foo.Bar':f/a) counts its callers;\n"
	  "in a stack format: the whole stacks of those samples" },
	{ "schedulers", 0, XB_OPT_FLAG, &o.schedulers, NULL,
	  "per scheduler: utilization (share of wall time on a CPU,\n"
	  "from the kernel's accounting), what it did (Erlang code,\n"
	  "NIFs, BIFs, GC, copying, ports, I/O polling, scheduling\n"
	  "and spinning), its top processes and migrations; the\n"
	  "long NIF/BIF calls; per CPU, the scheduler threads on it" },
	{ "long-calls", 0, XB_OPT_FLAG, &o.long_calls, NULL,
	  "NIF and BIF calls that held a normal scheduler for at\n"
	  "least --long-calls-ms across samples (or off the CPU,\n"
	  "blocked: seen every 2 ms): bounds of their length,\n"
	  "function, Erlang caller, process, scheduler" },
	{ "wall", 0, XB_OPT_FLAG, &o.wall, NULL,
	  "a wall-clock profile of the Erlang processes: -F times\n"
	  "a second (default 20) every process is counted once,\n"
	  "with its state as the root frame ([running],\n"
	  "[runnable], [waiting], [suspended], [garbage\n"
	  "collecting], [exiting]) and its Erlang stack below it\n"
	  "(from its saved state; a running process's from its\n"
	  "latest CPU sample); the table, the stack formats and\n"
	  "--by process" },
	{ "wall-max-processes", 0, XB_OPT_SIZE, &o.wall_max, "N",
	  "with --wall: above N processes (default 10000), each\n"
	  "tick reads a random subset of N and scales it (a note\n"
	  "gives the error it implies)", 1, 1e9, .given = &o.wall_max_given },
	{ "duration", 'd', XB_OPT_DOUBLE, &o.duration, "SECONDS",
	  "how long to sample (default and 0: until ^C)", 0, 31536000, .group = "Sampling:" },
	{ "frequency", 'F', XB_OPT_UINT, &o.s.freq, "HZ", "samples per second per thread (default 997); with\n"
	  "--wall, ticks per second (default 20, at most 1000)", 1, 100000, .given = &o.freq_given },
	{ "period", 0, XB_OPT_U64, &o.s.period, "N", "sample every N events instead of a frequency", 1,
	  1e15 },
	{ "user-stack", 0, XB_OPT_UINT, &o.s.user_stack, "BYTES",
	  "user stack copied per sample (default 16384)", 512, 65528 },
	{ "include-kernel", 0, XB_OPT_FLAG, &o.s.include_kernel, NULL, "also sample kernel frames" },
	{ "software-event", 0, XB_OPT_FLAG, &o.s.software_event, NULL,
	  "use cpu-clock even where a hardware PMU exists" },
	{ "wakeup", 0, XB_OPT_UINT, &o.s.wakeup, "N",
	  "be woken every N samples of a thread to read them;\n"
	  "0 (default) reads all buffers on a timer instead\n"
	  "(2 ms; 5 ms for a JIT VM; 10 ms with BPF capture),\n"
	  "which disturbs the VM less and does not bias where\n"
	  "samples land on a busy machine (see bench/, README)", 0, 64,
	  .given = &o.s.wakeup_given },
	{ "drain-ms", 0, XB_OPT_UINT, &o.s.drain_ms, "MS",
	  "the timer's interval when --wakeup is 0: shorter reads\n"
	  "live state sooner (on the perf path, fewer samples whose\n"
	  "process moved on) for more wakeups", 1, 1000,
	  .given = &o.s.drain_given },
	{ "capture", 0, XB_OPT_CHOICE, &o.capture, "auto|bpf|perf",
	  "how a sample's memory is captured: bpf copies the\n"
	  "process and its Erlang stack at the moment of the\n"
	  "sample, in the kernel; perf copies the registers and\n"
	  "the user stack, and the rest is read (--perf-read);\n"
	  "auto (default): bpf when the kernel allows it (root,\n"
	  "or CAP_BPF and CAP_PERFMON; Linux >= 5.8), else perf", .choices = captures,
	  .given = &o.capture_given },
	{ "perf-read", 0, XB_OPT_CHOICE, &o.perf_read, "sample|later",
	  "on the perf path, when the process and its Erlang\n"
	  "stack are read: sample (default where SCHED_FIFO is\n"
	  "allowed): by a reader on the sampled thread's CPU,\n"
	  "which the thread waits for (microseconds) before it\n"
	  "runs on, so the read is exact; later: by the drain\n"
	  "loop a moment later, never waited for (a process that\n"
	  "moved on meanwhile keeps only what the sample proves)", .choices = perf_reads },
	{ "no-realtime", 0, XB_OPT_FLAG, &o.no_realtime, NULL,
	  "do not run the drain loop at SCHED_FIFO priority (by\n"
	  "default it does when allowed, so that a saturated\n"
	  "machine does not delay it)" },
	{ "top", 't', XB_OPT_SIZE, &o.top, "N",
	  "rows to print (default 40); with --by, also groups;\n"
	  "in --schedulers tables, long calls and migrating\n"
	  "processes (JSON has them all)", 1, 1e9, .group = "Output:" },
	{ "max-callchain-depth", 0, XB_OPT_UINT, &o.s.max_depth, "N",
	  "frames kept per stack, native and Erlang each\n"
	  "(default 128; native stacks are cut at 128 at most);\n"
	  "a cut stack has a '[truncated]' root", 1, 1024 },
	{ "only-erlang", 0, XB_OPT_FLAG, &o.only_erlang, NULL, "count the innermost Erlang frame of each sample" },
	{ "by", 0, XB_OPT_CHOICE, &o.by, "process|scheduler|cpu|thread",
	  "group the samples: by Erlang process (pid and registered\n"
	  "name, or initial call), by scheduler (normal, dirty CPU,\n"
	  "dirty I/O; other threads by name), by the CPU the kernel\n"
	  "recorded, or by OS thread.  The table: a block per group\n"
	  "(its share, then its top rows); stack formats: the group\n"
	  "is the outermost frame; --live: the rows are the groups", .choices = xb_by_names },
	{ "long-calls-ms", 0, XB_OPT_DOUBLE, &o.long_calls_ms, "MS",
	  "with --schedulers or --long-calls: report calls whose\n"
	  "length is at least MS for sure (default 2)", 0.001, 1e6,
	  .given = &o.long_calls_ms_given },
	{ "format", 0, XB_OPT_CHOICE, &o.format, "FORMAT",
	  "table (default), folded ('root;...;leaf COUNT' lines for\n"
	  "flame graph tools), flamegraph (a self-contained SVG:\n"
	  "zoom, search), speedscope (JSON for speedscope.app),\n"
	  "pprof (gzipped profile.proto for go tool pprof), or\n"
	  "json (--dump and the --schedulers and --long-calls\n"
	  "reports, which are also a table)", .choices = xb_format_names },
	{ "output", 'o', XB_OPT_LIST, &o.outputs, "FILE",
	  "write the result to FILE (written in full, then renamed\n"
	  "into place; a symbolic link there is refused); its\n"
	  "extension picks the format: .svg, .json or\n"
	  ".speedscope.json, .pb.gz or .pprof, .folded or .txt\n"
	  "(others: --format, else the table); with --schedulers\n"
	  "and --long-calls: .json is JSON, .txt the table.\n"
	  "Repeat -o to write several formats of the same samples" },
	{ "lines", 0, XB_OPT_FLAG, &o.lines, NULL,
	  "add the source file and line to Erlang frames:\n"
	  "'name (file.erl:LINE)'; a caller's line is the line of\n"
	  "its call (from the JIT's line records or the\n"
	  "interpreter's line tables; none where a module was\n"
	  "compiled without line info)" },
	{ "erlang-names", 0, XB_OPT_FLAG, &o.erlang_names, NULL,
	  "print Elixir modules as the raw atoms\n"
	  "('Elixir.Foo.Bar':baz/2), not as Foo.Bar.baz/2" },
	{ "live", 0, XB_OPT_FLAG, &o.live, NULL,
	  "a live top view on the terminal: the hottest functions\n"
	  "over the last --live-window seconds and since the\n"
	  "start (with --blame: the blamed rows); keys: q quit,\n"
	  "p pause, s switch the sort between the window and the\n"
	  "whole run" },
	{ "live-interval", 0, XB_OPT_DOUBLE, &o.live_interval, "SECONDS",
	  "how often --live redraws (default 1)", 0.1, 3600 },
	{ "live-window", 0, XB_OPT_DOUBLE, &o.live_window, "SECONDS",
	  "the recent window --live shows (default 10)", 1, 3600 },
	{ "skid-summary", 0, XB_OPT_FLAG, &o.skid_summary, NULL,
	  "print the delay between a sample and our live reads of\n"
	  "the VM's memory (p50/p90/p99/max, microseconds), and\n"
	  "how many samples needed none" },
	{ "max-skid-ms", 0, XB_OPT_DOUBLE, &o.s.max_skid_ms, "MS",
	  "a sample whose live reads came later than this keeps\n"
	  "only what it proves itself (default 10)", 0.001, 1e6 },
	{ "pstack-wait", 0, XB_OPT_DOUBLE, &o.pstack_wait, "SECONDS",
	  "how long --pstack (and --dump) waits for a scheduler\n"
	  "to run (default 1); one that does not, or that\n"
	  "sleeps for 100 ms, is reported idle", 0.001, 3600 },
	{ "idle-scheduler-stacks", 0, XB_OPT_FLAG, &o.idle_stacks, NULL,
	  "with --pstack, show where idle schedulers wait" },
	{ "layout", 0, XB_OPT_STR, &o.layout, "FILE",
	  "struct offsets from FILE (written by --write-layout on\n"
	  "a build of the same release with debug info) instead of\n"
	  "a release table; proven on the VM before use, like any",
	  .group = "VM layout (default: the release table, DWARF, then discovery):" },
	{ "force-c_p-register", 0, XB_OPT_FN, &o.force_reg[0], "REG", "register holding c_p (the current Process*)",
	  .parse = parse_reg,
	  .group = "Interpreter register overrides (default: from DWARF / release table):" },
	{ "force-E-register", 0, XB_OPT_FN, &o.force_reg[1], "REG", "register holding E (the Erlang stack top)",
	  .parse = parse_reg },
	{ "force-I-register", 0, XB_OPT_FN, &o.force_reg[2], "REG", "register holding I (the instruction pointer)",
	  .parse = parse_reg },
	{ "verbose", 'v', XB_OPT_COUNT, &xb_verbose, NULL,
	  "diagnostics on stderr (event used, capture path, drop\n"
	  "reasons); alone, '-v' prints the version", .group = "" },
	{ "help", 'h', XB_OPT_FLAG, &o.help, NULL, "this help" },
	{ "version", 0, XB_OPT_FLAG, &o.version, NULL, "print the version" },
};

static const struct xb_cli cli = {
	.prog = PROG,
	.usage = "[OPTIONS] PID",
	.summary = "Sample a running Erlang VM: which Erlang and native functions burn CPU.\n"
		   "The VM is never paused; nothing is loaded into it.\n",
	.opts = options,
	.nopts = XB_ARRAY_SIZE(options),
};

/* Is there any function FN matches (xb_blame_match) in the VM's modules
 * or the JIT's named code?  If not, the names closest to FN (Erlang
 * functions and native symbols: xb_close_offer) go to CLOSE, best first. */
static bool blame_target_exists(struct xb_session *s, const char *fn, char *close, size_t clen)
{
	struct xb_close best = { 0 };
	char d[512], e[1200];
	close[0] = 0;
	for (size_t i = 0; i < s->cm.n; i++)
		if (xb_blame_match(fn, s->cm.v[i].name))
			return true;
	for (size_t mi = 0; mi < s->vm.syms.nmods; mi++) {
		struct xb_modsyms *m = s->vm.syms.mods[mi];
		if (m->gone)
			continue;
		xb_symbols_lookup(&s->vm.syms, m, fn, NULL); /* loads the table */
		for (size_t i = 0; i < m->naddr; i++) {
			const char *name = xb_demangle(m->byaddr[i].name, d, sizeof(d));
			if (xb_blame_match(fn, name))
				return true;
			xb_close_offer(&best, fn, name);
		}
	}
	/* Erlang functions, as the profile spells them (Elixir's Foo.bar/1) */
	for (size_t i = 0; i < s->cm.n; i++)
		xb_close_offer(&best, fn, xb_elixir_name(s->cm.v[i].name, e, sizeof(e)));
	xb_close_text(&best, close, clen);
	return false;
}

/* One fd per VM thread is what sampling costs (a perf event each): take
 * the hard limit, as perf does, so that a VM with thousands of threads
 * (dirty I/O schedulers) is not refused at the default soft limit of
 * 1024.  Threads past the hard limit are reported by the sampler. */
static void raise_nofile_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int fail(struct xb_session *s, int code)
{
	xb_report_failure(PROG, code);
	xb_session_close(s);
	return code;
}

/* ---- which options go together ----------------------------------------
 *
 * What the command line asks for, as bits, and the rules about them: the
 * first rule that applies refuses the command line with its line.  A rule
 * applies when every option of WHEN is given, none of UNLESS, and (when
 * DROP lists any) one of DROP's entries, tried in order: "{opt}" in the
 * line is that entry's option, "{format}" the value of --format. */
enum {
	A_PSTACK = 1u << 0,
	A_CHECK = 1u << 1,
	A_DUMP = 1u << 2,
	A_BLAME = 1u << 3,
	A_LIVE = 1u << 4,
	A_SCHEDULERS = 1u << 5,
	A_LONG_CALLS = 1u << 6,
	A_BY = 1u << 7,
	A_ONLY_ERLANG = 1u << 8,
	A_LONG_CALLS_MS = 1u << 9,
	A_OUTPUT = 1u << 10,    /* -o */
	A_OUTPUTS = 1u << 11,   /* more than one -o */
	A_FMT_TABLE = 1u << 12, /* --format table */
	A_FMT_JSON = 1u << 13,  /* --format json */
	A_FMT_STACK = 1u << 14, /* --format folded, flamegraph, speedscope or pprof */
	A_NO_TTY = 1u << 15,    /* standard output is not a terminal */
	A_WRITE_LAYOUT = 1u << 16,
	A_WALL = 1u << 17,
	A_LINES = 1u << 18,
	A_BY_NOT_PROCESS = 1u << 19, /* --by other than process */
	A_FORMAT = A_FMT_TABLE | A_FMT_JSON | A_FMT_STACK,
	A_SCHED = A_SCHEDULERS | A_LONG_CALLS,
};

/* The option of each bit, as a line names it (bit order). */
static const char *const asked_names[] = { "--pstack", "--check", "--dump", "--blame", "--live",
					   "--schedulers", "--long-calls", "--by", "--only-erlang",
					   "--long-calls-ms", "--output", "-o", "--format", "--format",
					   "--format", "", "--write-layout", "--wall", "--lines", "--by" };

struct rule {
	unsigned when, unless;
	unsigned drop[8]; /* 0-terminated */
	const char *why;
};

#define BY_WITH "--by groups the samples of a profile; "
static const struct rule rules[] = {
	{ A_WALL, 0, { A_PSTACK, A_CHECK, A_DUMP, A_BLAME, A_LIVE, A_SCHED, A_WRITE_LAYOUT, A_LINES },
	  "--wall is a profile of its own; drop {opt}" },
	{ A_WALL | A_FMT_JSON, 0, { 0 },
	  "--wall writes a profile (table, folded, flamegraph, speedscope or pprof), not json" },
	{ A_WALL | A_BY_NOT_PROCESS, 0, { 0 }, "--wall groups by process only; drop --by or use --by process" },
	{ A_PSTACK | A_BLAME, 0, { 0 }, "--pstack and --blame are separate modes; pick one" },
	{ A_DUMP, 0, { A_PSTACK, A_BLAME, A_CHECK, A_LIVE, A_SCHEDULERS, A_LONG_CALLS, A_BY },
	  "--dump is a mode of its own; drop {opt}" },
	{ A_DUMP | A_FMT_STACK, 0, { 0 }, "--dump writes text (table) or json, not {format}" },
	{ A_CHECK, 0, { A_PSTACK | A_BLAME }, "--check is a mode of its own; drop --pstack/--blame" },
	{ A_PSTACK, 0, { A_FMT_JSON | A_FMT_STACK }, "--pstack prints text; drop --format {format}" },
	{ A_CHECK, 0, { A_FMT_JSON | A_FMT_STACK }, "--check prints text; drop --format {format}" },
	{ A_LIVE, 0, { A_PSTACK, A_CHECK, A_FORMAT, A_OUTPUT }, "--live draws on the terminal; drop {opt}" },
	{ A_LIVE | A_NO_TTY, 0, { 0 },
	  "--live draws on a terminal, and standard output is not one; use the table or --format folded -o "
	  "FILE instead" },
	{ A_SCHEDULERS | A_LONG_CALLS, 0, { 0 },
	  "--schedulers reports the long calls too; pick one of --schedulers and --long-calls" },
	{ A_BY | A_PSTACK, 0, { 0 },
	  BY_WITH "--pstack already shows one stack per scheduler, with the process it runs: drop --by" },
	{ A_BY | A_CHECK, 0, { 0 }, BY_WITH "--check samples nothing: drop --by" },
	{ A_BY | A_SCHEDULERS, 0, { 0 }, BY_WITH "--schedulers already reports per scheduler, process and CPU: drop --by" },
	{ A_BY | A_LONG_CALLS, 0, { 0 }, BY_WITH "--long-calls already reports per scheduler, process and CPU: drop --by" },
	{ A_SCHEDULERS, 0, { A_PSTACK, A_CHECK, A_BLAME, A_ONLY_ERLANG, A_LIVE },
	  "--schedulers is a report of its own; drop {opt}" },
	{ A_LONG_CALLS, 0, { A_PSTACK, A_CHECK, A_BLAME, A_ONLY_ERLANG, A_LIVE },
	  "--long-calls is a report of its own; drop {opt}" },
	{ A_LONG_CALLS_MS, A_SCHED, { 0 }, "--long-calls-ms goes with --schedulers or --long-calls" },
	{ A_FMT_JSON, A_SCHED | A_DUMP, { 0 },
	  "--format json is for --dump and the reports of --schedulers and --long-calls; a profile as JSON "
	  "is --format speedscope" },
	{ A_SCHEDULERS | A_FMT_STACK, 0, { 0 }, "--schedulers writes a table or JSON; drop --format {format}" },
	{ A_LONG_CALLS | A_FMT_STACK, 0, { 0 }, "--long-calls writes a table or JSON; drop --format {format}" },
	{ A_WRITE_LAYOUT, 0, { A_PSTACK | A_CHECK | A_DUMP | A_BLAME | A_LIVE | A_SCHED | A_BY | A_OUTPUT },
	  "--write-layout is a mode of its own; drop {opt}" },
	{ A_WRITE_LAYOUT, 0, { A_FORMAT }, "--write-layout writes a layout file; drop --format {format}" },
	{ A_PSTACK | A_OUTPUTS, 0, { 0 }, "--pstack writes one result; pass one -o" },
	{ A_CHECK | A_OUTPUTS, 0, { 0 }, "--check writes one result; pass one -o" },
	{ A_DUMP | A_OUTPUTS, 0, { 0 }, "--dump writes one result; pass one -o" },
};

static unsigned options_asked(void)
{
	const struct {
		bool given;
		unsigned bit;
	} v[] = {
		{ o.pstack, A_PSTACK },
		{ o.check, A_CHECK },
		{ o.dump, A_DUMP },
		{ o.blame, A_BLAME },
		{ o.live, A_LIVE },
		{ o.schedulers, A_SCHEDULERS },
		{ o.long_calls, A_LONG_CALLS },
		{ o.by, A_BY },
		{ o.only_erlang, A_ONLY_ERLANG },
		{ o.long_calls_ms_given, A_LONG_CALLS_MS },
		{ o.outputs.n > 0, A_OUTPUT },
		{ o.outputs.n > 1, A_OUTPUTS },
		{ o.format && !strcmp(o.format, "table"), A_FMT_TABLE },
		{ o.format && !strcmp(o.format, "json"), A_FMT_JSON },
		{ o.format && strcmp(o.format, "table") && strcmp(o.format, "json"), A_FMT_STACK },
		{ !isatty(STDOUT_FILENO), A_NO_TTY },
		{ o.write_layout != NULL, A_WRITE_LAYOUT },
		{ o.wall, A_WALL },
		{ o.lines, A_LINES },
		{ o.by && strcmp(o.by, "process"), A_BY_NOT_PROCESS },
	};
	unsigned asked = 0;
	for (size_t i = 0; i < XB_ARRAY_SIZE(v); i++)
		asked |= v[i].given ? v[i].bit : 0;
	return asked;
}

/* Print a rule's line, "{opt}" and "{format}" filled in. */
static void refuse(const char *why, unsigned found)
{
	const char *opt = "";
	for (size_t b = 0; b < XB_ARRAY_SIZE(asked_names); b++)
		if (found & (1u << b)) {
			opt = asked_names[b];
			break;
		}
	fputs(PROG ": ", stderr);
	for (const char *p = why; *p; p++) {
		if (strncmp(p, "{opt}", 5) == 0) {
			fputs(opt, stderr);
			p += 4;
		} else if (strncmp(p, "{format}", 8) == 0) {
			fputs(o.format ? o.format : "", stderr);
			p += 7;
		} else {
			fputc(*p, stderr);
		}
	}
	fputc('\n', stderr);
}

/* Options that do not go together: 0, or 2 after one line on stderr. */
static int refused_combination(void)
{
	unsigned asked = options_asked();
	for (size_t i = 0; i < XB_ARRAY_SIZE(rules); i++) {
		const struct rule *r = &rules[i];
		if ((asked & r->when) != r->when || (asked & r->unless))
			continue;
		unsigned found = r->drop[0] ? 0 : r->when;
		for (size_t k = 0; !found && k < XB_ARRAY_SIZE(r->drop) && r->drop[k]; k++)
			found = asked & r->drop[k];
		if (found) {
			refuse(r->why, found);
			return 2;
		}
	}
	return 0;
}

/* ---- outputs ------------------------------------------------------------ */

/* One result: where it goes and in which format. */
struct output {
	const char *path; /* NULL: standard output */
	enum xb_format fmt;
	struct xb_outfile of;
	FILE *f;
};

/* --schedulers or --long-calls: a report of its own (schedulers.h). */
static bool sched_mode(void)
{
	return o.schedulers || o.long_calls;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcmp(s + n - m, suffix) == 0;
}

/* The format -o PATH's extension asks for in this mode: a format, -1 when
 * it asks for none (--format, else the table), or -2 after one line on
 * stderr (an extension the mode cannot write). */
static int format_of_path(const char *path)
{
	int ext = xb_format_by_extension(path);
	if (ext < 0 || o.pstack || o.check)
		return -1;
	if (o.dump) /* a .json file is JSON, others text */
		return ends_with(path, ".json") ? (int)XB_FMT_JSON : -1;
	if (sched_mode()) { /* a table (.txt) or JSON (.json) */
		if (ends_with(path, ".txt"))
			return -1;
		if (ends_with(path, ".json") && !ends_with(path, ".speedscope.json"))
			return XB_FMT_JSON;
		xb_say(stderr, "-o %s: --%s writes a table or JSON (.json), not %s", path,
			o.schedulers ? "schedulers" : "long-calls", xb_format_names[ext]);
		return -2;
	}
	return ext;
}

/* The outputs the options ask for: every -o FILE (its format from its
 * extension, else --format, else the table), or standard output.  0, or 2
 * after one line on stderr. */
static int plan_outputs(struct output *outs, size_t *nouts)
{
	enum xb_format fmt = o.format ? (enum xb_format)xb_format_by_name(o.format) : XB_FMT_TABLE;
	*nouts = 0;
	if (!o.outputs.n) {
		outs[(*nouts)++] = (struct output){ .fmt = fmt, .f = stdout };
		return 0;
	}
	if (o.outputs.n > MAX_OUTPUTS) {
		xb_say(stderr, "at most %d -o outputs", MAX_OUTPUTS);
		return 2;
	}
	for (size_t i = 0; i < o.outputs.n; i++) {
		const char *path = o.outputs.v[i];
		int by_ext = format_of_path(path);
		if (by_ext == -2)
			return 2;
		if (by_ext >= 0 && o.format && by_ext != (int)fmt) {
			xb_say(stderr, "--format %s does not match -o %s (a %s file); drop one or make them "
					     "agree", o.format, path, xb_format_names[by_ext]);
			return 2;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(o.outputs.v[j], path) == 0) {
				xb_say(stderr, "-o %s given twice", path);
				return 2;
			}
		outs[(*nouts)++] = (struct output){ .path = path, .fmt = by_ext >= 0 ? (enum xb_format)by_ext : fmt };
	}
	return 0;
}

static void abort_outputs(struct output *outs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (outs[i].path && outs[i].f)
			xb_outfile_abort(&outs[i].of);
}

/* Outputs are opened once the VM is attached and sampling can start (bad
 * input never leaves a file behind) and each is written in full before it
 * replaces anything.  From here on ^C writes the results. */
static int open_outputs(struct output *outs, size_t nouts)
{
	/* once the outputs are open, ^C ends the run and the results are
	 * written; before (attaching, reading the code tables, loading the
	 * BPF program) it ends the tool at once, with one line */
	xb_signals_graceful();
	for (size_t i = 0; i < nouts; i++) {
		if (!outs[i].path)
			continue;
		if (xb_outfile_open(&outs[i].of, outs[i].path, 0644, 0) < 0) {
			abort_outputs(outs, i);
			return -1;
		}
		outs[i].f = outs[i].of.f;
	}
	return 0;
}

/* Write every result in full, then put them in place; -1 on the first error. */
static int commit_outputs(struct output *outs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = outs[i].path ? xb_outfile_commit(&outs[i].of) : xb_flush_check(stdout, "standard output");
		outs[i].f = NULL;
		if (r < 0) {
			abort_outputs(outs + i + 1, n - i - 1);
			return -1;
		}
	}
	return 0;
}

/* ---- the run ------------------------------------------------------------ */

/* The command line's operands: the VM's PID (and, with --dump, the
 * processes to show).  0, or 2 after one line on stderr. */
static int parse_operands(int argc, char **argv, int first, int *pid)
{
	if (first >= argc || (first != argc - 1 && !o.dump)) {
		fprintf(stderr, PROG ": %s; usage: " PROG " [options] PID (--dump: PID [PROCESS...]; see --help)\n",
			first >= argc ? "missing PID" : "too many arguments");
		return 2;
	}
	if (xb_parse_pid(argv[first], pid) < 0) {
		xb_say(stderr, "%s", xb_err());
		return 2;
	}
	return 0;
}

/* The session's options from the command line (and EXTROSPECT_CAPTURE). */
static void session_options(enum xb_by by)
{
	memcpy(o.s.force_reg, o.force_reg, sizeof(o.force_reg));
	o.s.want_identity = o.pstack || o.dump || (by == XB_BY_PROCESS && !o.wall) || sched_mode(); /* pid and name of every process */
	o.s.by = o.wall ? XB_BY_NONE : by; /* --wall groups its own samples */
	/* Long calls: what is read live of a call's identity counts from the
	 * next sample on (longcalls.h); drained every ms, a call loses about
	 * a millisecond at its edges instead of a drain interval of 2-5 ms. */
	if (sched_mode() && !o.s.drain_given)
		o.s.drain_ms = 1;
	o.s.keep_old_maps = o.pstack || o.dump; /* its captured frames live until it prints */
	/* The test suite's knob: the default capture path of a whole pass
	 * (pytest --capture-path, --asan-capture); ignored with file capabilities. */
	const char *env_capture = secure_getenv("EXTROSPECT_CAPTURE");
	if (!o.capture_given && env_capture && (!strcmp(env_capture, "perf") || !strcmp(env_capture, "bpf")))
		o.capture = env_capture;
	o.s.capture = strcmp(o.capture, "bpf") == 0 ? XB_CAPTURE_BPF
		      : strcmp(o.capture, "perf") == 0 ? XB_CAPTURE_PERF : XB_CAPTURE_AUTO;
	o.s.realtime = !o.no_realtime;
	o.s.perf_read_later = strcmp(o.perf_read, "later") == 0;
	/* --wall: -F is the tick rate; the CPU samples (the stacks of running
	 * processes) keep the default rate and go to the wall sink only */
	if (o.wall) {
		o.wall_hz = o.freq_given ? o.s.freq : 20;
		o.s.freq = 997;
		o.s.sinks_only = true;
	}
}

/* --wall's own checks: 0, or 2 after one line on stderr. */
static int wall_refused(void)
{
	if (o.wall_max_given && !o.wall) {
		fprintf(stderr, PROG ": --wall-max-processes goes with --wall\n");
		return 2;
	}
	if (o.wall && o.freq_given && o.s.freq > 1000) {
		fprintf(stderr, PROG ": --wall ticks at most 1000 times a second (-F %u)\n", o.s.freq);
		return 2;
	}
	if (o.wall && o.s.period) {
		fprintf(stderr, PROG ": --wall ticks at -F HZ; drop --period\n");
		return 2;
	}
	return 0;
}

/* --check: one line per check, exit 1 on any FAIL. */
static int run_check(struct xb_session *s, struct output *outs, size_t nouts)
{
	if (open_outputs(outs, nouts) < 0)
		return fail(s, 1);
	int rc;
	/* tests only: every offset in use moved by +-8 and +-16 must fail */
	/* (1: every field; "stack": what sampling, --pstack and --dump's
	 * stacks read, whose proofs are re-run per field) */
	const char *sweep = secure_getenv("EXTROSPECT_LAYOUT_MUTATIONS");
	unsigned sweep_needs = !sweep ? 0
			       : !strcmp(sweep, "1") ? XB_NEED_ALL
			       : !strcmp(sweep, "stack")
				       ? XB_NEED_ATOMS | XB_NEED_PTAB | XB_NEED_CODE | XB_NEED_STACK | XB_NEED_SCHED
				       : 0;
	if (sweep_needs)
		rc = xb_layout_mutation_sweep(&s->vm, sweep_needs, outs[0].f) ? 1 : 0;
	else
		rc = xb_check(&s->vm, outs[0].f) ? 1 : 0;
	xb_overruns_report(stderr, PROG);
	if (commit_outputs(outs, nouts) < 0)
		rc = fail(s, 1);
	else
		xb_session_close(s);
	return rc;
}

/* --write-layout FILE: what this VM proved, for --layout elsewhere;
 * refused when what sampling reads does not hold. */
static int write_layout(struct xb_session *s)
{
	if (xb_layout_require(&s->vm, XB_NEED_STACK, "--write-layout") < 0 ||
	    xb_layout_write(&s->vm, o.write_layout) < 0)
		return fail(s, 1);
	if (xb_verbose)
		xb_say(stderr, "wrote the layout of PID %d (erts %s, %s) to %s", (int)s->vm.pid, s->vm.erts,
			xb_flavor_name(s->vm.flavor), o.write_layout);
	xb_session_close(s);
	return 0;
}

/* --blame FN where no function of the VM matches: one line (close
 * matches, the release), exit 2. */
static int blame_refused(struct xb_session *s)
{
	char close[512];
	if (!o.blame || blame_target_exists(s, o.blame, close, sizeof(close)))
		return 0;
	/* The close matches are symbol names from the target's own files
	 * (a NIF library's included): one line, through xb_sanitize, as
	 * every message that carries the target's text. */
	char raw[2048], line[4 * sizeof(raw)];
	snprintf(raw, sizeof(raw), "no function of this VM (OTP %s, erts %s, %s, debug info: %s) matches '%s'%s%s%s",
		 s->vm.otp[0] ? s->vm.otp : "?", s->vm.erts, xb_flavor_name(s->vm.flavor), xb_debug_name(s->vm.debug),
		 o.blame, close[0] ? "; close: " : "", close,
		 s->vm.debug == XB_DEBUG_DYNSYM ? "; a stripped beam names only its exported functions: install "
						  "its debug symbols, or set DEBUGINFOD_URLS to fetch them, to "
						  "blame internal ones"
						: "");
	xb_sanitize(raw, line, sizeof(line));
	xb_say(stderr, "%s", line);
	return 2;
}

/* The sink that writes one output in this mode; NULL when memory runs out. */
static struct xb_sink *output_sink(struct xb_session *s, const struct output *out, enum xb_by by,
				   const char *title, char **only, size_t nonly, const struct xb_sink *wall)
{
	if (o.live) {
		struct xb_live_opts lo = { .interval = o.live_interval, .window = o.live_window, .blame = o.blame,
					   .only_erlang = o.only_erlang, .by = by != XB_BY_NONE ? o.by : NULL,
					   .title = title };
		return xb_live_sink_new(&lo, &s->prof);
	}
	if (o.pstack) {
		struct xb_pstack_opts po = { .idle_stacks = o.idle_stacks };
		return xb_pstack_sink_new(&po);
	}
	if (o.dump) {
		struct xb_dump_opts dop = { .json = out->fmt == XB_FMT_JSON, .only = (const char *const *)only,
					    .nonly = nonly };
		return xb_dump_sink_new(&dop);
	}
	if (sched_mode()) {
		struct xb_sched_opts so = { .json = out->fmt == XB_FMT_JSON, .long_calls_only = o.long_calls,
					    .long_calls_ms = o.long_calls_ms, .top = o.top };
		return xb_schedulers_sink_new(&so);
	}
	struct xb_profile_sink_opts po = { .format = out->fmt, .title = title, .blame = o.blame, .top = o.top,
					   .only_erlang = o.only_erlang, .grouped = by != XB_BY_NONE,
					   .wall_hz = o.wall ? o.wall_hz : 0, .wall = wall };
	return xb_profile_sink_new(&po);
}

/* One sink per output, in the order of the outputs (sinks[i] writes
 * outs[i]); then the progress line, where someone watches a run that
 * writes to files.  0, or -1 (out of memory). */
static int add_sinks(struct xb_session *s, int pid, const struct output *outs, size_t nouts, enum xb_by by,
		     char **only, size_t nonly)
{
	static char title[256]; /* the sinks keep it until they write */
	if (o.live)
		snprintf(title, sizeof(title), PROG " --live: PID %d (OTP %s, erts %s, %s)", pid,
			 s->vm.otp[0] ? s->vm.otp : "?", s->vm.erts, xb_flavor_name(s->vm.flavor));
	else
		snprintf(title, sizeof(title), PROG " %d (OTP %s, %s)%s%s%s%s%s", pid, s->vm.otp[0] ? s->vm.otp : "?",
			 xb_flavor_name(s->vm.flavor), o.wall ? ", --wall (wall-clock)" : "", o.blame ? ", --blame " : "",
			 o.blame ? o.blame : "", by != XB_BY_NONE ? ", --by " : "", by != XB_BY_NONE ? o.by : "");
	struct xb_sink *wall = NULL;
	if (o.wall) {
		struct xb_wall_opts wo = { .hz = o.wall_hz, .max_procs = o.wall_max, .by_process = by == XB_BY_PROCESS };
		wall = xb_wall_sink_new(&wo, (size_t)xb_off(&s->vm, XB_F_PROC_SIZE));
		if (!wall)
			return xb_fail("out of memory");
	}
	for (size_t i = 0; i < nouts; i++) {
		struct xb_sink *k = output_sink(s, &outs[i], by, title, only, nonly, wall);
		if (!k) {
			if (wall)
				wall->ops->free(wall);
			return xb_fail("out of memory");
		}
		xb_session_add_sink(s, k);
	}
	if (wall) /* after the outputs (sinks[i] writes outs[i]): its note goes to stderr */
		xb_session_add_sink(s, wall);
	/* (a file: -o, or stdout sent to one by the shell, `> out.folded`;
	 * not a pipe, whose reader may be drawing on the same terminal) */
	struct stat st;
	bool to_file = o.outputs.n || (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode));
	if (to_file && !o.pstack && !o.check && !o.dump && isatty(STDERR_FILENO)) {
		struct xb_sink *pg = xb_progress_sink_new(PROG, o.duration);
		if (pg)
			xb_session_add_sink(s, pg);
	}
	return 0;
}

static void print_start_line(const struct xb_session *s, int pid)
{
	fprintf(stderr, PROG " %s: PID %d: OTP %s (erts %s), %s, debug info %s; event %s at %s; "
			 "%zu threads; %zu code entries; capture %s (%s); drain loop %s\n",
		XB_VERSION, pid, s->vm.otp[0] ? s->vm.otp : "?", s->vm.erts, xb_flavor_name(s->vm.flavor),
		xb_debug_name(s->vm.debug), s->smp.event_name, o.s.period ? "a fixed period" : "a frequency",
		s->smp.nthreads, s->cm.n, s->capture_name, s->capture_why ? s->capture_why : "in use",
		s->priority_name);
}

/* Every sink writes its result (sinks[i] into outs[i]), then the skid
 * summary and the run's statistics.  0, or -1 on a write error. */
static int write_results(struct xb_session *s, int pid, struct output *outs, size_t nouts)
{
	for (size_t i = 0; i < s->nsinks; i++)
		if (s->sinks[i]->ops->write && s->sinks[i]->ops->write(s->sinks[i], s, i < nouts ? outs[i].f : stderr) < 0) {
			if (i < nouts && outs[i].path) { /* which of the -o files */
				char why[512];
				snprintf(why, sizeof(why), "%s", xb_err());
				xb_fail("-o %s: %s%s", outs[i].path, why,
					strstr(why, "No space") ? "; free some space or pass another path" : "");
			}
			return -1;
		}
	if (o.skid_summary) {
		/* after the table, or on stderr when the result is not text */
		FILE *sf = stderr;
		for (size_t i = 0; i < nouts; i++)
			if (outs[i].fmt == XB_FMT_TABLE) {
				sf = outs[i].f;
				break;
			}
		xb_session_report_skid(s, sf);
	}
	xb_session_report_stats(s, stderr);
	xb_overruns_report(stderr, PROG);
	if (s->vm_exited)
		xb_note(stderr, "VM %d exited after %.1f s; the results above cover the time until then",
			pid, s->elapsed_s);
	return 0;
}

/* Every mode but --check: start sampling, run until done, write. */
static int run_sampling(struct xb_session *s, int pid, enum xb_by by, struct output *outs, size_t nouts,
			char **only, size_t nonly)
{
	if (xb_session_start(s, &o.s) < 0)
		return fail(s, 1);
	s->fr.lines = o.lines;
	for (size_t i = 0; i < nouts; i++)
		s->fr.files |= xb_formats[outs[i].fmt].files && !o.wall; /* --wall names frames without files */
	s->fr.erlang_names = o.erlang_names;
	if (blame_refused(s)) {
		xb_session_close(s);
		return 2;
	}
	if (open_outputs(outs, nouts) < 0)
		return fail(s, 1);
	if (add_sinks(s, pid, outs, nouts, by, only, nonly) < 0)
		goto failed;
	if (xb_verbose)
		print_start_line(s, pid);
	if (xb_session_run(s, o.pstack || o.dump ? o.pstack_wait : o.duration, &xb_stop_requested) < 0)
		xb_say(stderr, "%s; the results below cover the time until then", xb_err());
	/* Signals from here on end the program the usual way. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (write_results(s, pid, outs, nouts) < 0)
		goto failed;
	if (commit_outputs(outs, nouts) < 0)
		return fail(s, 1);
	xb_session_close(s);
	return 0;
failed:
	abort_outputs(outs, nouts);
	return fail(s, 1);
}

int main(int argc, char **argv)
{
	int first = xb_cli_parse(&cli, argc, argv);
	if (first < 0)
		return 2;
	if (o.help)
		xb_cli_help(&cli, stdout);
	else if (o.version || (first == argc && xb_verbose))
		printf(PROG " %s\n", XB_VERSION);
	if (o.help || o.version || (first == argc && xb_verbose))
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;

	int pid;
	struct output outs[MAX_OUTPUTS];
	size_t nouts;
	int rc = parse_operands(argc, argv, first, &pid);
	if (!rc)
		rc = refused_combination();
	if (!rc)
		rc = wall_refused();
	if (!rc)
		rc = plan_outputs(outs, &nouts);
	if (rc)
		return rc;
	enum xb_by by = xb_by_parse(o.by);
	session_options(by);
	/* ^C and SIGTERM are honoured from here on (common.h) */
	xb_catch_signals(PROG);
	raise_nofile_limit();

	struct xb_session s;
	/* What this run reads, proven at attach (layout.h). */
	struct xb_attach_opts ao = { XB_NEED_STACK, o.layout };
	if (o.lines)
		ao.needs |= XB_NEED_LINES;
	if (o.dump || o.schedulers || o.long_calls || o.wall)
		ao.needs |= XB_NEED_PROCS;
	if (o.check || o.write_layout)
		ao.needs = XB_NEED_ALL;
	if (xb_session_attach(&s, pid, &ao) < 0) {
		if (!o.check)
			return fail(&s, 1);
		/* a table that does not fit is a check that fails */
		printf("FAIL attach                 %s\n0 checks passed, 1 failed\n", xb_err());
		xb_session_close(&s);
		return 1;
	}
	if (o.check)
		return run_check(&s, outs, nouts);
	if (o.write_layout)
		return write_layout(&s);
	if (xb_layout_require(&s.vm, ao.needs, o.dump ? "--dump" : o.wall ? "--wall" : o.lines ? "--lines" : "sampling") < 0)
		return fail(&s, 1);
	return run_sampling(&s, pid, by, outs, nouts, argv + first + 1, (size_t)(argc - first - 1));
}

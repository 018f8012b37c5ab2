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
#include <unistd.h>

#define PROG "erlang-sample"
#define MAX_OUTPUTS 6

static volatile sig_atomic_t stop_requested;
/* Set once the outputs are open: from then on ^C ends the run and the
 * results are written.  Before (attaching, reading the code tables,
 * loading the BPF program) nothing is worth keeping and no file exists:
 * ^C ends the tool at once, with one line. */
static volatile sig_atomic_t graceful;
static void on_signal(int sig)
{
	(void)sig;
	if (!graceful) {
		static const char msg[] = PROG ": interrupted; nothing written\n";
		ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)w;
		_exit(130);
	}
	stop_requested = 1;
	xb_interrupted = 1; /* long reads of the VM's tables stop too */
}

struct opts {
	double duration;
	size_t top;
	bool only_erlang, skid_summary, pstack, idle_stacks, check, help, version, no_realtime, dump;
	bool lines, erlang_names, live;
	double live_interval, live_window;
	double pstack_wait;
	const char *blame, *format, *capture;
	/* --by, --schedulers, --long-calls (issue 13) */
	const char *by;
	bool schedulers, long_calls, long_calls_ms_given;
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

static struct opts o = {
	.top = 40,
	.pstack_wait = 1.0,
	.live_interval = 1.0,
	.live_window = 10.0,
	.format = NULL,
	.capture = "auto",
	.long_calls_ms = 2.0,
	.force_reg = { -1, -1, -1 },
	.s = { .freq = 997, .user_stack = 16384, .max_depth = 128, .max_skid_ms = 10 },
};

static const struct xb_opt options[] = {
	{ "check", 0, XB_OPT_FLAG, &o.check, NULL,
	  "verify the release table, offsets and globals in use\n"
	  "against the running VM; one line per check, exit 1\n"
	  "on any FAIL", .group = "Modes:" },
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
	{ "duration", 'd', XB_OPT_DOUBLE, &o.duration, "SECONDS",
	  "how long to sample (default and 0: until ^C)", 0, 31536000, .group = "Sampling:" },
	{ "frequency", 'F', XB_OPT_UINT, &o.s.freq, "HZ", "samples per second per thread (default 997)", 1,
	  100000 },
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
	  "sample (no skid); perf copies the user stack and the\n"
	  "rest is read a moment later; auto (default): bpf when\n"
	  "the kernel allows it (root, or CAP_BPF and CAP_PERFMON;\n"
	  "Linux >= 5.8), else perf", .choices = captures },
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
 * or the JIT's named code?  If not, the names that share the longest
 * prefix with FN (at least 4 characters) go to CLOSE, best first. */
static bool blame_target_exists(struct xb_session *s, const char *fn, char *close, size_t clen)
{
	enum { NCLOSE = 3 };
	struct {
		char name[128];
		size_t lcp;
	} best[NCLOSE] = { 0 };
	char d[512];
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
			size_t l = 0;
			while (fn[l] && fn[l] == name[l])
				l++;
			if (l < 4 || strlen(name) >= sizeof(best[0].name))
				continue;
			for (int k = 0; k < NCLOSE; k++) {
				if (strcmp(best[k].name, name) == 0)
					break;
				if (l > best[k].lcp) {
					memmove(&best[k + 1], &best[k], (NCLOSE - 1 - (size_t)k) * sizeof(best[0]));
					snprintf(best[k].name, sizeof(best[k].name), "%s", name);
					best[k].lcp = l;
					break;
				}
			}
		}
	}
	size_t used = 0;
	for (int k = 0; k < NCLOSE && best[k].lcp && used < clen; k++)
		used += (size_t)snprintf(close + used, clen - used, "%s%s", k ? ", " : "", best[k].name);
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
	fprintf(stderr, PROG ": %s\n", xb_err());
	xb_session_close(s);
	return code;
}

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

/* Options that do not go together; 0, or 2 after one line on stderr. */
static int check_modes(enum xb_by by)
{
	const char *mode = o.pstack ? "--pstack" : o.check ? "--check" : o.schedulers ? "--schedulers"
			   : o.long_calls ? "--long-calls" : NULL;
	if (o.schedulers && o.long_calls) {
		fprintf(stderr, PROG ": --schedulers reports the long calls too; pick one of --schedulers and "
				    "--long-calls\n");
		return 2;
	}
	if (by != XB_BY_NONE && mode) {
		fprintf(stderr, PROG ": --by groups the samples of a profile; %s %s: drop --by\n", mode,
			o.pstack ? "already shows one stack per scheduler, with the process it runs"
			: o.check ? "samples nothing"
				  : "already reports per scheduler, process and CPU");
		return 2;
	}
	if (sched_mode() && (o.pstack || o.check || o.blame || o.only_erlang || o.live)) {
		fprintf(stderr, PROG ": %s is a report of its own; drop %s\n", o.schedulers ? "--schedulers" : "--long-calls",
			o.pstack ? "--pstack" : o.check ? "--check" : o.blame ? "--blame" : o.only_erlang ? "--only-erlang"
			: "--live");
		return 2;
	}
	if (o.long_calls_ms_given && !sched_mode()) {
		fprintf(stderr, PROG ": --long-calls-ms goes with --schedulers or --long-calls\n");
		return 2;
	}
	if (o.format && strcmp(o.format, "json") == 0 && !sched_mode() && !o.dump) {
		fprintf(stderr, PROG ": --format json is for --dump and the reports of --schedulers and "
				    "--long-calls; a profile as JSON is --format speedscope\n");
		return 2;
	}
	if (sched_mode() && o.format && strcmp(o.format, "json") != 0 && strcmp(o.format, "table") != 0) {
		fprintf(stderr, PROG ": %s writes a table or JSON; drop --format %s\n",
			o.schedulers ? "--schedulers" : "--long-calls", o.format);
		return 2;
	}
	return 0;
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
	if ((o.pstack || o.check || o.dump) && o.outputs.n > 1) {
		fprintf(stderr, PROG ": --%s writes one result; pass one -o\n",
			o.pstack ? "pstack" : o.check ? "check" : "dump");
		return 2;
	}
	if (o.outputs.n > MAX_OUTPUTS) {
		fprintf(stderr, PROG ": at most %d -o outputs\n", MAX_OUTPUTS);
		return 2;
	}
	for (size_t i = 0; i < o.outputs.n; i++) {
		const char *path = o.outputs.v[i];
		int by_ext = xb_format_by_extension(path);
		enum xb_format f = fmt;
		if (o.dump && by_ext >= 0) /* a .json file is JSON, others text */
			by_ext = strlen(path) > 5 && strcmp(path + strlen(path) - 5, ".json") == 0 ? (int)XB_FMT_JSON
										       : -1;
		if (sched_mode() && by_ext >= 0) {
			/* The scheduler report is a table (.txt) or JSON (.json). */
			size_t len = strlen(path);
			bool json = by_ext == XB_FMT_SPEEDSCOPE && len > 5 && strcmp(path + len - 5, ".json") == 0 &&
				    !(len > 16 && strcmp(path + len - 16, ".speedscope.json") == 0);
			bool txt = len > 4 && strcmp(path + len - 4, ".txt") == 0;
			if (txt) {
				by_ext = -1; /* --format, else the table */
			} else if (!json) {
				fprintf(stderr, PROG ": -o %s: --%s writes a table or JSON (.json), not %s\n", path,
					o.schedulers ? "schedulers" : "long-calls", xb_format_names[by_ext]);
				return 2;
			} else {
				by_ext = XB_FMT_JSON;
			}
		}
		if (by_ext >= 0 && !o.pstack && !o.check) {
			if (o.format && by_ext != (int)fmt) {
				fprintf(stderr, PROG ": --format %s does not match -o %s (a %s file); drop one or "
						    "make them agree\n", o.format, path, xb_format_names[by_ext]);
				return 2;
			}
			f = (enum xb_format)by_ext;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(o.outputs.v[j], path) == 0) {
				fprintf(stderr, PROG ": -o %s given twice\n", path);
				return 2;
			}
		outs[(*nouts)++] = (struct output){ .path = path, .fmt = f };
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
	graceful = 1;
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

int main(int argc, char **argv)
{
	int first = xb_cli_parse(&cli, argc, argv);
	if (first < 0)
		return 2;
	if (o.help) {
		xb_cli_help(&cli, stdout);
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;
	}
	if (o.version || (first == argc && xb_verbose)) {
		printf(PROG " %s\n", XB_VERSION);
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;
	}
	if (first >= argc || (first != argc - 1 && !o.dump)) {
		fprintf(stderr, PROG ": %s; usage: " PROG " [options] PID (--dump: PID [PROCESS...]; see --help)\n",
			first >= argc ? "missing PID" : "too many arguments");
		return 2;
	}
	int pid;
	if (xb_parse_pid(argv[first], &pid) < 0) {
		fprintf(stderr, PROG ": %s\n", xb_err());
		return 2;
	}
	if (o.pstack && o.blame) {
		fprintf(stderr, PROG ": --pstack and --blame are separate modes; pick one\n");
		return 2;
	}
	if (o.dump && (o.pstack || o.blame || o.check || o.live || sched_mode() || o.by)) {
		fprintf(stderr, PROG ": --dump is a mode of its own; drop --%s\n",
			o.pstack ? "pstack" : o.blame ? "blame" : o.check ? "check" : o.live ? "live"
			: o.schedulers ? "schedulers" : o.long_calls ? "long-calls" : "by");
		return 2;
	}
	if (o.dump && o.format && strcmp(o.format, "table") != 0 && strcmp(o.format, "json") != 0) {
		fprintf(stderr, PROG ": --dump writes text (table) or json, not %s\n", o.format);
		return 2;
	}
	if (o.check && (o.pstack || o.blame)) {
		fprintf(stderr, PROG ": --check is a mode of its own; drop --pstack/--blame\n");
		return 2;
	}
	if ((o.pstack || o.check) && o.format && strcmp(o.format, "table") != 0) {
		fprintf(stderr, PROG ": --%s prints text; drop --format %s\n", o.pstack ? "pstack" : "check",
			o.format);
		return 2;
	}
	if (o.live && (o.pstack || o.check || o.format || o.outputs.n)) {
		fprintf(stderr, PROG ": --live draws on the terminal; drop %s\n",
			o.pstack ? "--pstack" : o.check ? "--check" : o.format ? "--format" : "--output");
		return 2;
	}
	if (o.live && !isatty(STDOUT_FILENO)) {
		fprintf(stderr, PROG ": --live draws on a terminal, and standard output is not one; "
				"use the table or --format folded -o FILE instead\n");
		return 2;
	}
	enum xb_by by = xb_by_parse(o.by);
	if (check_modes(by))
		return 2;
	struct output outs[MAX_OUTPUTS];
	size_t nouts;
	int prc = plan_outputs(outs, &nouts);
	if (prc)
		return prc;
	o.s.force_reg[0] = o.force_reg[0];
	o.s.force_reg[1] = o.force_reg[1];
	o.s.force_reg[2] = o.force_reg[2];
	o.s.want_identity = o.pstack || o.dump || by == XB_BY_PROCESS || sched_mode(); /* pid and name of every process */
	o.s.by = by;
	/* Long calls: what is read live of a call's identity counts from the
	 * next sample on (longcalls.h); drained every ms, a call loses about
	 * a millisecond at its edges instead of a drain interval of 2-5 ms. */
	if (sched_mode() && !o.s.drain_given)
		o.s.drain_ms = 1;
	o.s.keep_old_maps = o.pstack || o.dump; /* its captured frames live until it prints */
	o.s.capture = strcmp(o.capture, "bpf") == 0 ? XB_CAPTURE_BPF
		      : strcmp(o.capture, "perf") == 0 ? XB_CAPTURE_PERF : XB_CAPTURE_AUTO;
	o.s.realtime = !o.no_realtime;

	/* ^C and SIGTERM are honoured from here on: while attaching and
	 * starting they end the tool at once with one line (no file exists
	 * yet); while sampling they end the run, and the results are written. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	raise_nofile_limit();

	struct xb_session s;
	if (xb_session_attach(&s, pid) < 0) {
		if (!o.check)
			return fail(&s, 1);
		/* a table that does not fit is a check that fails */
		printf("FAIL attach                 %s\n0 checks passed, 1 failed\n", xb_err());
		xb_session_close(&s);
		return 1;
	}

	int rc = 0;
	if (o.check) {
		if (open_outputs(outs, nouts) < 0)
			return fail(&s, 1);
		rc = xb_check(&s.vm, outs[0].f) ? 1 : 0;
		xb_overruns_report(stderr, PROG);
		goto write;
	}
	if (xb_session_start(&s, &o.s) < 0)
		goto failed;
	s.fr.lines = o.lines;
	for (size_t i = 0; i < nouts; i++)
		s.fr.files |= outs[i].fmt == XB_FMT_PPROF || outs[i].fmt == XB_FMT_SPEEDSCOPE;
	s.fr.erlang_names = o.erlang_names;
	if (o.blame) {
		char close[512];
		if (!blame_target_exists(&s, o.blame, close, sizeof(close))) {
			fprintf(stderr, PROG ": no function of this VM (OTP %s, erts %s, %s, debug info: %s) "
					"matches '%s'%s%s%s\n",
				s.vm.otp[0] ? s.vm.otp : "?", s.vm.erts, xb_flavor_name(s.vm.flavor),
				xb_debug_name(s.vm.debug), o.blame, close[0] ? "; close: " : "", close,
				s.vm.debug == XB_DEBUG_DYNSYM
					? "; a stripped beam names only its exported functions: install "
					  "its debug symbols to blame internal ones"
					: "");
			abort_outputs(outs, nouts);
			xb_session_close(&s);
			return 2;
		}
	}
	if (open_outputs(outs, nouts) < 0)
		return fail(&s, 1);
	static char title[256]; /* the sinks keep it until they write */
	if (o.live)
		snprintf(title, sizeof(title), PROG " --live: PID %d (OTP %s, erts %s, %s)", pid,
			 s.vm.otp[0] ? s.vm.otp : "?", s.vm.erts, xb_flavor_name(s.vm.flavor));
	else
		snprintf(title, sizeof(title), PROG " %d (OTP %s, %s)%s%s%s%s", pid, s.vm.otp[0] ? s.vm.otp : "?",
			 xb_flavor_name(s.vm.flavor), o.blame ? ", --blame " : "", o.blame ? o.blame : "",
			 by != XB_BY_NONE ? ", --by " : "", by != XB_BY_NONE ? o.by : "");
	/* One sink per output, in the order of the outputs (sinks[i] writes
	 * outs[i]); then the sinks that only show how the run goes. */
	for (size_t i = 0; i < nouts; i++) {
		struct xb_sink *k;
		if (o.live) {
			struct xb_live_opts lo = { .interval = o.live_interval, .window = o.live_window,
						   .blame = o.blame, .only_erlang = o.only_erlang,
						   .by = by != XB_BY_NONE ? o.by : NULL, .title = title };
			k = xb_live_sink_new(&lo, &s.prof);
		} else if (o.pstack) {
			struct xb_pstack_opts po = { .idle_stacks = o.idle_stacks };
			k = xb_pstack_sink_new(&po);
		} else if (o.dump) {
			struct xb_dump_opts dop = { .json = outs[i].fmt == XB_FMT_JSON,
						    .only = (const char *const *)argv + first + 1,
						    .nonly = (size_t)(argc - first - 1) };
			k = xb_dump_sink_new(&dop);
		} else if (sched_mode()) {
			struct xb_sched_opts so = { .json = outs[i].fmt == XB_FMT_JSON, .long_calls_only = o.long_calls,
						    .long_calls_ms = o.long_calls_ms, .top = o.top };
			k = xb_schedulers_sink_new(&so);
		} else {
			struct xb_profile_sink_opts po = { .format = outs[i].fmt, .title = title, .blame = o.blame,
							   .top = o.top, .only_erlang = o.only_erlang,
							   .grouped = by != XB_BY_NONE };
			k = xb_profile_sink_new(&po);
		}
		if (!k) {
			xb_fail("out of memory");
			goto failed;
		}
		xb_session_add_sink(&s, k);
	}
	/* A run writing to files shows how it goes, where someone watches. */
	if (o.outputs.n && !o.pstack && !o.check && isatty(STDERR_FILENO)) {
		struct xb_sink *pg = xb_progress_sink_new(PROG, o.duration);
		if (pg)
			xb_session_add_sink(&s, pg);
	}
	if (xb_verbose)
		fprintf(stderr, PROG " %s: PID %d: OTP %s (erts %s), %s, debug info %s; event %s at %s; "
				 "%zu threads; %zu code entries; capture %s (%s); drain loop %s\n",
			XB_VERSION, pid, s.vm.otp[0] ? s.vm.otp : "?", s.vm.erts, xb_flavor_name(s.vm.flavor),
			xb_debug_name(s.vm.debug), s.smp.event_name, o.s.period ? "a fixed period" : "a frequency",
			s.smp.nthreads, s.cm.n, s.capture_name, s.capture_why ? s.capture_why : "in use",
			s.priority_name);

	if (xb_session_run(&s, o.pstack || o.dump ? o.pstack_wait : o.duration, &stop_requested) < 0)
		fprintf(stderr, PROG ": %s; the results below cover the time until then\n", xb_err());
	/* Signals from here on end the program the usual way. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);

	for (size_t i = 0; i < s.nsinks; i++)
		if (s.sinks[i]->ops->write &&
		    s.sinks[i]->ops->write(s.sinks[i], &s, i < nouts ? outs[i].f : stderr) < 0)
			goto failed;
	if (o.skid_summary) {
		/* after the table, or on stderr when the result is not text */
		FILE *sf = stderr;
		for (size_t i = 0; i < nouts; i++)
			if (outs[i].fmt == XB_FMT_TABLE) {
				sf = outs[i].f;
				break;
			}
		xb_session_report_skid(&s, sf);
	}
	xb_session_report_stats(&s, stderr);
	xb_overruns_report(stderr, PROG);
	if (s.vm_exited)
		fprintf(stderr, PROG ": note: VM %d exited after %.1f s; the results above cover the time until then\n",
			pid, s.elapsed_s);
write:
	if (commit_outputs(outs, nouts) < 0) {
		fprintf(stderr, PROG ": %s\n", xb_err());
		xb_session_close(&s);
		return 1;
	}
	xb_session_close(&s);
	return rc;
failed:
	fprintf(stderr, PROG ": %s\n", xb_err());
	abort_outputs(outs, nouts);
	xb_session_close(&s);
	return 1;
}

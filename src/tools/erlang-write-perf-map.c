/* erlang-write-perf-map - write /tmp/perf-PID.map for a running BEAM so
 * that stock perf can name its Erlang code.
 *
 *   erlang-write-perf-map [-o PATH|-] [--watch] [--no-fold] PID
 *   perf script | erlang-write-perf-map --symbolize [PID|MAP]
 */
#define _GNU_SOURCE
#include "xb/cli.h"
#include "xb/codemap.h"
#include "xb/outfile.h"
#include "xb/common.h"
#include "xb/perfmap.h"
#include "xb/version.h"
#include "xb/vm.h"

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *out_path, *layout;
static bool watch, no_fold, help, version, symbolize;
static unsigned interval_ms = 200;

static const struct xb_opt options[] = {
	{ "output", 'o', XB_OPT_STR, &out_path, "PATH", "write to PATH instead of /tmp/perf-PID.map ('-' = stdout)" },
	{ "watch", 'w', XB_OPT_FLAG, &watch, NULL,
	  "rewrite the map whenever the VM loads code; stop when the\n"
	  "VM exits or on ^C" },
	{ "interval", 0, XB_OPT_UINT, &interval_ms, "MS", "how often --watch looks for new code (default 200)", 1,
	  3600000 },
	{ "no-fold", 0, XB_OPT_FLAG, &no_fold, NULL,
	  "keep the JIT's separate 'M:F/A-CodeInfoPrologue' entries\n"
	  "(a line-for-line copy of the VM's own +JPperf map)" },
	{ "symbolize", 0, XB_OPT_FLAG, &symbolize, NULL,
	  "read `perf script` output on stdin and write it to\n"
	  "stdout with the JIT addresses perf left [unknown]\n"
	  "named (samples and callchains), from the VM PID's\n"
	  "code map or from a perf map file MAP; no operand: the\n"
	  "VM of the first sample whose thread runs a beam" },
	{ "layout", 0, XB_OPT_STR, &layout, "FILE",
	  "struct offsets from FILE, proven on the VM before use\n"
	  "(write FILE with erlang-sample --write-layout on a\n"
	  "build of the same release with debug info)" },
	{ "verbose", 'v', XB_OPT_COUNT, &xb_verbose, NULL, "say what was found on stderr" },
	{ "help", 'h', XB_OPT_FLAG, &help, NULL, "this help" },
	{ "version", 0, XB_OPT_FLAG, &version, NULL, "print the version" },
};

static const struct xb_cli cli = {
	.prog = "erlang-write-perf-map",
	.usage = "[OPTIONS] PID\n       erlang-write-perf-map --symbolize [PID|MAP] < perf-script-output",
	.summary = "Write a perf map (/tmp/perf-PID.map) naming the Erlang code of a running BEAM.\n",
	.opts = options,
	.nopts = XB_ARRAY_SIZE(options),
	.epilog = "Works on JIT and interpreter VMs, with or without debug info.  The VM is\n"
		  "never paused: its memory is read with process_vm_readv(2).\n",
};

/* Does the VM write PATH itself (+JPperf map)?  It keeps the file open:
 * look for it among the VM's file descriptors, which works whether or not
 * erts_jit_perf_support is a symbol we can read (OTP 29 hides it). */
static bool vm_writes_map(struct xb_vm *vm, const char *path)
{
	uint64_t ps = xb_symbols_lookup(&vm->syms, vm->beam, "erts_jit_perf_support", NULL);
	uint32_t modes = 0;
	if (ps && xb_read_u32(&vm->mem, ps, &modes) == 0 && (modes & 2))
		return true;
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)vm->pid);
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;
	while (d && !found && (de = readdir(d))) {
		char link[320], target[4096];
		snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = 0;
			found = strcmp(target, path) == 0;
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* The VM of the first sample in `perf script` output whose thread runs a
 * beam: perf prints "COMM TID ..." (or "COMM PID/TID") first on a sample's
 * line.  The lines read meanwhile are kept in *HEAD for the output. */
static int first_beam_pid(FILE *in, char **head, size_t *headlen)
{
	char *line = NULL;
	size_t cap = 0, hcap = 0;
	ssize_t len;
	int pid = -1;
	*head = NULL;
	*headlen = 0;
	while (pid < 0 && (len = getline(&line, &cap, in)) > 0) {
		if (xb_grow((void **)head, &hcap, *headlen + (size_t)len + 1, 1) < 0)
			break;
		memcpy(*head + *headlen, line, (size_t)len);
		*headlen += (size_t)len;
		if (line[0] == '\t' || line[0] == '#')
			continue;
		/* COMM may hold spaces: take the first number token after it */
		for (char *p = line; *p && pid < 0; p++) {
			if (p == line || p[-1] != ' ' || *p < '1' || *p > '9')
				continue;
			char *end;
			long v = strtol(p, &end, 10);
			if (*end == '/')
				v = strtol(end + 1, &end, 10); /* PID/TID: the tid */
			if ((*end != ' ' && *end != '\t') || v <= 0 || v > 4194304)
				continue;
			char exe[64], target[4096];
			snprintf(exe, sizeof(exe), "/proc/%ld/exe", v);
			ssize_t n = readlink(exe, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = 0;
				const char *b = strrchr(target, '/');
				if (strncmp(b ? b + 1 : target, "beam", 4) == 0)
					pid = (int)v;
			}
			break;
		}
	}
	free(line);
	return pid;
}

static int run_symbolize(int argc, char **argv, int first)
{
	struct xb_codemap cm;
	struct xb_vm vm;
	bool attached = false;
	char *head = NULL;
	size_t headlen = 0;
	int pid = -1;
	if (first < argc - 1) {
		xb_say(stderr, "--symbolize takes one PID or MAP file at most");
		return 2;
	}
	const char *arg = first == argc - 1 ? argv[first] : NULL;
	if (arg && strspn(arg, "0123456789") != strlen(arg)) {
		if (xb_perfmap_read(arg, &cm) < 0) {
			xb_say(stderr, "%s", xb_err());
			return 1;
		}
	} else {
		if (arg && xb_parse_pid(arg, &pid) < 0) {
			xb_say(stderr, "%s", xb_err());
			return 2;
		}
		if (!arg && (pid = first_beam_pid(stdin, &head, &headlen)) < 0) {
			xb_say(stderr, "--symbolize: no sample of a running beam in the "
					"input; pass the VM's PID or a perf map file");
			if (headlen)
				fwrite(head, 1, headlen, stdout);
			free(head);
			return 1;
		}
		attached = true;
		struct xb_attach_opts ao = { XB_NEED_CODE, layout };
		if (xb_vm_attach_with(&vm, pid, &ao) < 0 || xb_layout_require(&vm, XB_NEED_CODE, "--symbolize") < 0 ||
		    xb_codemap_build(&vm, &cm, XB_CM_FOLD_PROLOGUE) < 0) {
			xb_say(stderr, "%s", xb_err());
			xb_vm_detach(&vm);
			free(head);
			return 1;
		}
	}
	/* executable mappings of the JIT's memfd: perf prints callchain
	 * addresses there relative to it */
	struct xb_reloc rel[8];
	size_t nrel = 0;
	for (size_t i = 0; attached && i < vm.mem.maps.n && nrel < XB_ARRAY_SIZE(rel); i++) {
		const struct xb_map *m = &vm.mem.maps.v[i];
		if (m->executable && strncmp(m->path, "/memfd:", 7) == 0 && m->start >= m->offset)
			rel[nrel++] = (struct xb_reloc){ m->path, m->start - m->offset };
	}
	struct xb_symbolize_stats st = { 0 }, st2;
	int rc = 0;
	if (headlen) {
		FILE *h = fmemopen(head, headlen, "r");
		rc = h ? xb_symbolize(h, stdout, &cm, rel, nrel, &st) : xb_fail("fmemopen: %m");
		if (h)
			fclose(h);
	}
	if (rc == 0)
		rc = xb_symbolize(stdin, stdout, &cm, rel, nrel, &st2);
	if (rc == 0)
		rc = xb_flush_check(stdout, "standard output");
	st.lines += st2.lines;
	st.unknown += st2.unknown;
	st.named += st2.named;
	if (rc < 0)
		xb_say(stderr, "%s", xb_err());
	else if (xb_verbose)
		xb_say(stderr, "--symbolize: %llu lines, %llu unnamed addresses, %llu "
				"named from %s (%zu code entries)",
			(unsigned long long)st.lines, (unsigned long long)st.unknown, (unsigned long long)st.named,
			arg && pid < 0 ? arg : "the VM", cm.n);
	xb_codemap_free(&cm);
	if (attached)
		xb_vm_detach(&vm);
	free(head);
	return rc < 0 ? 1 : 0;
}

static int write_once(struct xb_vm *vm, const char *out, unsigned flags, struct xb_codemap *cm)
{
	if (xb_codemap_build(vm, cm, flags) < 0)
		return -1;
	/* the first map is about to be written: from here on ^C stops
	 * --watch after the current rewrite (exit 0) */
	xb_signals_graceful();
	int rc;
	if (strcmp(out, "-") == 0) {
		rc = xb_perfmap_print(cm, stdout);
		if (rc == 0)
			rc = xb_flush_check(stdout, "standard output");
	} else {
		rc = xb_perfmap_write_file(cm, out);
	}
	if (rc == 0 && xb_verbose)
		xb_say(stderr, "%zu entries from %zu modules -> %s", cm->n,
			cm->modules, out);
	if (rc < 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", xb_err());
		xb_codemap_free(cm);
		xb_fail("%s", msg);
	}
	return rc;
}

int main(int argc, char **argv)
{
	int first = xb_cli_parse(&cli, argc, argv);
	if (first < 0)
		return 2;
	if (help) {
		xb_cli_help(&cli, stdout);
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;
	}
	if (version) {
		printf("erlang-write-perf-map %s\n", XB_VERSION);
		return xb_flush_check(stdout, "standard output") < 0 ? 1 : 0;
	}
	if (symbolize) {
		if (out_path || watch) {
			xb_say(stderr, "--symbolize writes to stdout; drop %s",
				out_path ? "-o" : "--watch");
			return 2;
		}
		return run_symbolize(argc, argv, first);
	}
	unsigned flags = no_fold ? 0 : XB_CM_FOLD_PROLOGUE;
	const char *out = out_path;
	int optind = first;
	if (optind != argc - 1) {
		xb_say(stderr, "%s; usage: erlang-write-perf-map [-o PATH|-] [--watch] PID",
			optind >= argc ? "missing PID" : "too many arguments");
		return 2;
	}
	int pid;
	if (xb_parse_pid(argv[optind], &pid) < 0) {
		xb_say(stderr, "%s", xb_err());
		return 2;
	}
	/* ^C and SIGTERM: honoured while attaching and reading the code
	 * tables too (one line, nothing written), and between rewrites. */
	xb_catch_signals("erlang-write-perf-map");
	struct xb_vm vm;
	struct xb_attach_opts ao = { XB_NEED_CODE, layout };
	if (xb_vm_attach_with(&vm, pid, &ao) < 0 || xb_layout_require(&vm, XB_NEED_CODE, "naming code") < 0) {
		xb_report_failure("erlang-write-perf-map", 1);
		xb_vm_detach(&vm);
		return 1;
	}
	if (xb_verbose)
		xb_say(stderr, "PID %d: OTP %s (erts %s), %s, debug info: %s; "
			"module table at 0x%llx (found via %s)",
			pid, vm.otp[0] ? vm.otp : "?", vm.erts, xb_flavor_name(vm.flavor),
			xb_debug_name(vm.debug), (unsigned long long)vm.sym.ranges,
			vm.sym.ranges_how ? vm.sym.ranges_how : "-");
	char defpath[64];
	if (!out) {
		snprintf(defpath, sizeof(defpath), "/tmp/perf-%d.map", pid);
		out = defpath;
		/* With +JPperf map the VM appends to this very file itself. */
		if (vm_writes_map(&vm, out)) {
			xb_say(stderr, "the VM writes %s itself (started with "
					"+JPperf map); pass -o PATH to write ours elsewhere", out);
			xb_vm_detach(&vm);
			return 1;
		}
	}
	struct xb_codemap cm;
	int rc = write_once(&vm, out, flags, &cm);
	if (rc < 0) {
		if (vm.mem.pidfd >= 0 && !xb_interrupted)
			poll(&(struct pollfd){ .fd = vm.mem.pidfd, .events = POLLIN }, 1, 50);
		if (!xb_remote_alive(&vm.mem))
			xb_fail("the VM (PID %d) exited before its code tables were read", pid);
		else if (xb_interrupted)
			xb_fail("interrupted; nothing written");
		xb_report_failure("erlang-write-perf-map", 1);
		xb_vm_detach(&vm);
		return 1;
	}
	/* A rewrite that fails (a full disk) leaves the last map in place and
	 * is tried again at each interval: said once when it starts failing,
	 * once when it works again, and if the map is still behind when the
	 * watch ends, that is the run's result (exit 1), not a warning lost
	 * in a scroll-back. */
	char behind[512] = "";
	while (watch && !xb_stop_requested) {
		usleep((useconds_t)interval_ms * 1000);
		if (!xb_vm_alive(&vm)) {
			if (xb_verbose)
				xb_say(stderr, "VM %d exited; stopping", pid);
			break;
		}
		int st = xb_codemap_stale(&vm, &cm);
		if (st <= 0)
			continue;
		struct xb_codemap next;
		if (write_once(&vm, out, flags, &next) < 0) {
			if (!xb_vm_alive(&vm) || xb_interrupted)
				break;
			if (!behind[0])
				xb_warn(stderr, "%s; the map keeps its last "
						"contents, retrying", xb_err());
			snprintf(behind, sizeof(behind), "%s", xb_err());
			continue;
		}
		if (behind[0])
			xb_say(stderr, "%s is up to date again", out);
		behind[0] = 0;
		xb_codemap_free(&cm);
		cm = next;
	}
	xb_codemap_free(&cm);
	xb_vm_detach(&vm);
	xb_overruns_report(stderr, "erlang-write-perf-map");
	if (behind[0]) {
		xb_fail("the map is behind the VM's code: its last rewrite failed: %s", behind);
		xb_report_failure("erlang-write-perf-map", 1);
		return 1;
	}
	return 0;
}

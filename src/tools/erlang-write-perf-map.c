/* erlang-write-perf-map - write /tmp/perf-PID.map for a running BEAM so
 * that stock perf can name its Erlang code.
 *
 *   erlang-write-perf-map [-o PATH|-] [--watch] [--no-fold] PID
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *out_path;
static bool watch, no_fold, help, version;
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
	{ "verbose", 'v', XB_OPT_COUNT, &xb_verbose, NULL, "say what was found on stderr" },
	{ "help", 'h', XB_OPT_FLAG, &help, NULL, "this help" },
	{ "version", 0, XB_OPT_FLAG, &version, NULL, "print the version" },
};

static const struct xb_cli cli = {
	.prog = "erlang-write-perf-map",
	.usage = "[OPTIONS] PID",
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

static int write_once(struct xb_vm *vm, const char *out, unsigned flags, struct xb_codemap *cm)
{
	if (xb_codemap_build(vm, cm, flags) < 0)
		return -1;
	int rc;
	if (strcmp(out, "-") == 0) {
		rc = xb_perfmap_print(cm, stdout);
		if (rc == 0)
			rc = xb_flush_check(stdout, "standard output");
	} else {
		rc = xb_perfmap_write_file(cm, out);
	}
	if (rc == 0 && xb_verbose)
		fprintf(stderr, "erlang-write-perf-map: %zu entries from %zu modules -> %s\n", cm->n,
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
	unsigned flags = no_fold ? 0 : XB_CM_FOLD_PROLOGUE;
	const char *out = out_path;
	int optind = first;
	if (optind != argc - 1) {
		fprintf(stderr, "erlang-write-perf-map: %s; usage: erlang-write-perf-map [-o PATH|-] [--watch] PID\n",
			optind >= argc ? "missing PID" : "too many arguments");
		return 2;
	}
	int pid;
	if (xb_parse_pid(argv[optind], &pid) < 0) {
		fprintf(stderr, "erlang-write-perf-map: %s\n", xb_err());
		return 2;
	}
	struct xb_vm vm;
	if (xb_vm_attach(&vm, pid) < 0) {
		fprintf(stderr, "erlang-write-perf-map: %s\n", xb_err());
		xb_vm_detach(&vm);
		return 1;
	}
	if (xb_verbose)
		fprintf(stderr, "erlang-write-perf-map: PID %d: OTP %s (erts %s), %s, debug info: %s; "
			"module table at 0x%llx (found via %s)\n",
			pid, vm.otp[0] ? vm.otp : "?", vm.erts, xb_flavor_name(vm.flavor),
			xb_debug_name(vm.debug), (unsigned long long)vm.sym.ranges,
			vm.sym.ranges_how ? vm.sym.ranges_how : "-");
	char defpath[64];
	if (!out) {
		snprintf(defpath, sizeof(defpath), "/tmp/perf-%d.map", pid);
		out = defpath;
		/* With +JPperf map the VM appends to this very file itself. */
		if (vm_writes_map(&vm, out)) {
			fprintf(stderr, "erlang-write-perf-map: the VM writes %s itself (started with "
					"+JPperf map); pass -o PATH to write ours elsewhere\n", out);
			xb_vm_detach(&vm);
			return 1;
		}
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct xb_codemap cm;
	int rc = write_once(&vm, out, flags, &cm);
	if (rc < 0) {
		fprintf(stderr, "erlang-write-perf-map: %s\n", xb_err());
		xb_vm_detach(&vm);
		return 1;
	}
	while (watch && !stop) {
		usleep((useconds_t)interval_ms * 1000);
		if (!xb_vm_alive(&vm)) {
			if (xb_verbose)
				fprintf(stderr, "erlang-write-perf-map: VM %d exited; stopping\n", pid);
			break;
		}
		int st = xb_codemap_stale(&vm, &cm);
		if (st <= 0)
			continue;
		struct xb_codemap next;
		if (write_once(&vm, out, flags, &next) < 0) {
			if (!xb_vm_alive(&vm))
				break;
			fprintf(stderr, "erlang-write-perf-map: warning: %s (will retry)\n", xb_err());
			continue;
		}
		xb_codemap_free(&cm);
		cm = next;
	}
	xb_codemap_free(&cm);
	xb_vm_detach(&vm);
	return 0;
}

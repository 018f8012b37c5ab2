/* attach.c - identify a running BEAM and bind it to a release table:
 * executable, erts/OTP version, flavour, debug info, field offsets,
 * register roles and the globals we read.  Read-only: nothing is written
 * to the VM. */
#define _GNU_SOURCE
#include "xb/vm.h"
#include "xb/common.h"
#include "xb/priv.h"
#include "xb/dwarf_layout.h"
#include "xb/layout.h"
#include "xb/safefile.h"
#include "xb/term.h"
#include "xb/tasks.h"

#include <dirent.h>
#include <linux/capability.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static int perm_error(pid_t pid, const char *what)
{
	if (geteuid() == 0 || xb_have_cap(CAP_SYS_PTRACE))
		return xb_fail("permission denied reading %s of process %d even with %s: it belongs to "
			       "another PID or user namespace, or a security module (Yama ptrace_scope "
			       "3, SELinux, AppArmor) forbids ptrace access; run from the VM's namespace",
			       what, (int)pid, geteuid() == 0 ? "root" : "CAP_SYS_PTRACE");
	return xb_fail("permission denied reading %s of process %d: this tool lacks CAP_SYS_PTRACE "
		       "(ptrace access to the VM is what process_vm_readv needs); run as root, as the "
		       "VM's user, or give it CAP_SYS_PTRACE",
		       what, (int)pid);
}

static bool plain_word(const char *w);

/* "…/erts-13.1.5/bin/beam.smp" -> "13.1.5" */
static bool erts_from_path(const char *path, char *out, size_t len)
{
	const char *p = strstr(path, "/erts-");
	if (!p)
		return false;
	p += 6;
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= len)
		return false;
	memcpy(out, p, n);
	out[n] = 0;
	if (!plain_word(out)) {
		out[0] = 0;
		return false;
	}
	return true;
}

/* -root DIR from the VM's command line (erlexec always passes it).  The
 * kernel bounds the command line; we bound it again. */
static void root_from_cmdline(pid_t pid, char *out, size_t len)
{
	char path[64];
	size_t n;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	char *buf = xb_slurp_max(path, 1u << 20, &n);
	if (!buf)
		return;
	for (size_t i = 0; i < n;) {
		const char *arg = buf + i;
		size_t al = strnlen(arg, n - i);
		if (strcmp(arg, "-root") == 0 && i + al + 1 < n) {
			const char *dir = buf + i + al + 1;
			if (strnlen(dir, n - i - al - 1) < len)
				snprintf(out, len, "%s", dir);
			break;
		}
		i += al + 1;
	}
	free(buf);
}

/* A release name or version as the files hold it: nothing that could
 * walk a path or need escaping on a terminal. */
static bool plain_word(const char *w)
{
	if (!*w)
		return false;
	for (; *w; w++)
		if (!((*w >= 'a' && *w <= 'z') || (*w >= 'A' && *w <= 'Z') || (*w >= '0' && *w <= '9') ||
		      *w == '.' || *w == '-' || *w == '_' || *w == '+'))
			return false;
	return true;
}

#define MAX_RELEASE_FILE 4096 /* start_erl.data, OTP_VERSION: one short line each */

/* A file of the target's -root directory, read by the rules of
 * safefile.h (inside its root, no symlink at the end, a regular file of
 * at most 4 KiB, one the target's own user could read); -v says why one
 * is refused. */
static char *release_file(struct xb_vm *vm, const char *rel)
{
	char path[PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/%s", vm->root, rel);
	char *data = xb_safe_slurp(vm->syms.rootfd, path, MAX_RELEASE_FILE, XB_SAFE_NOFOLLOW,
				   vm->cred_ok ? &vm->cred : NULL, NULL);
	if (!data && xb_verbose)
		xb_note(stderr, "not reading the VM's %s: %s", rel, xb_err());
	return data;
}

/* releases/start_erl.data holds "ERTS_VSN REL_VSN"; releases/REL/OTP_VERSION
 * the full OTP version (erts/etc/common/erlexec.c, the release handler). */
static void otp_from_root(struct xb_vm *vm)
{
	if (vm->syms.rootfd < 0 || !vm->cred_ok)
		return; /* who may read them unknown: read nothing */
	char *data = release_file(vm, "releases/start_erl.data");
	char erts[32] = "", rel[32] = "";
	if (data && sscanf(data, "%31s %31s", erts, rel) == 2 && plain_word(erts) && plain_word(rel)) {
		if (!vm->erts[0])
			snprintf(vm->erts, sizeof(vm->erts), "%s", erts);
		if (strcmp(erts, vm->erts) == 0)
			snprintf(vm->otp, sizeof(vm->otp), "%s", rel);
	}
	free(data);
	if (vm->otp[0]) {
		char rp[96];
		snprintf(rp, sizeof(rp), "releases/%s/OTP_VERSION", vm->otp);
		char *v = release_file(vm, rp);
		if (v) {
			v[strcspn(v, "\r\n")] = 0;
			if (strlen(v) < sizeof(vm->otp_version) && plain_word(v))
				snprintf(vm->otp_version, sizeof(vm->otp_version), "%s", v);
			free(v);
		}
	}
}

/* A JIT VM has executable code outside any file: the JIT's dual-mapped
 * memfd, or anonymous executable memory with +JPperf.  The interpreter has
 * none.  This works when the binary names nothing (OTP 29 stripped). */
static enum xb_flavor flavor_from_maps(const struct xb_maps *maps)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct xb_map *m = &maps->v[i];
		if (!m->executable)
			continue;
		if (strncmp(m->path, "/memfd:", 7) == 0 || m->path[0] == 0)
			return XB_FLAVOR_JIT;
	}
	return XB_FLAVOR_EMU;
}

static uint64_t sym(struct xb_vm *vm, const char *name)
{
	return xb_symbols_lookup(&vm->syms, vm->beam, name, NULL);
}

static void resolve_symbols(struct xb_vm *vm)
{
	struct xb_vm_syms *s = &vm->sym;
	s->atom_table = sym(vm, "erts_atom_table");
	s->proc_tab = sym(vm, "erts_proc");
	s->sched_data_ptr = sym(vm, "erts_aligned_scheduler_data");
	s->no_schedulers = sym(vm, "erts_no_schedulers");
	s->dirty_cpu_data_ptr = sym(vm, "erts_aligned_dirty_cpu_scheduler_data");
	s->dirty_io_data_ptr = sym(vm, "erts_aligned_dirty_io_scheduler_data");
	s->jit_desc = sym(vm, "__jit_debug_descriptor");
	s->jit_desc_how = s->jit_desc ? "symbol" : NULL;
	s->active_code_ix = sym(vm, "the_active_code_index");
	s->normal_exit_ptr = sym(vm, "beam_normal_exit");
	s->frame_layout = sym(vm, "erts_frame_layout");
	s->process_main = xb_symbols_lookup(&vm->syms, vm->beam, "process_main", &s->process_main_size);
	const char *rname = vm->rel ? vm->rel->sym_ranges : "r";
	/* EXTROSPECT_RANGES_BY_REFS=1 skips the symbol table, so tests can
	 * prove the code-reference search on a binary that has both. */
	const char *by_refs = secure_getenv("EXTROSPECT_RANGES_BY_REFS");
	s->ranges = by_refs && *by_refs == '1' ? 0 : sym(vm, rname);
	if (s->ranges && xb_vm_ranges_plausible(vm, s->ranges)) {
		s->ranges_how = vm->debug == XB_DEBUG_DYNSYM ? "dynsym" : "symtab";
	} else {
		s->ranges = xb_vm_find_ranges_by_refs(vm);
		s->ranges_how = s->ranges ? "code references" : "not found";
	}
}

/* Scheduler threads by kind, named as the release table says. */
/* Compare dotted versions numerically ("13.1.5" < "13.1.5.99" < "15.2"). */
static int version_cmp(const char *a, const char *b)
{
	while (*a || *b) {
		char *ea, *eb;
		unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
		if (x != y)
			return x < y ? -1 : 1;
		if (ea == a && eb == b)
			break;
		a = *ea == '.' ? ea + 1 : ea;
		b = *eb == '.' ? eb + 1 : eb;
		if (!*ea && !*eb)
			break;
		if (!*ea)
			return -1;
		if (!*eb)
			return 1;
	}
	return 0;
}

/* The release whose scheduler thread names the VM's threads have (most
 * matches), else FALLBACK. */
static const struct xb_release *thread_names_release(const struct xb_vm *vm, const struct xb_release *fallback)
{
	struct xb_task *tasks;
	int n = xb_tasks_list(vm->pid, &tasks);
	const struct xb_release *best = fallback;
	int best_hits = 0;
	for (const struct xb_release *const *r = xb_releases; *r && n > 0; r++) {
		int hits = 0, no;
		for (int i = 0; i < n; i++)
			for (int k = 0; k < 3; k++)
				hits += (*r)->thread_fmt[k] && xb_thread_name_match((*r)->thread_fmt[k], tasks[i].comm, &no);
		if (hits > best_hits) {
			best_hits = hits;
			best = *r;
		}
	}
	if (n > 0)
		free(tasks);
	return best;
}

/* The compiled-in table nearest ERTS that has FLAVOR's layout (the
 * others have only what both flavours share), else any nearest. */
static const struct xb_release *nearest_of_flavor(const char *erts, enum xb_flavor flavor)
{
	const struct xb_release *best = NULL;
	for (int pass = 0; pass < 2 && !best; pass++) {
		const struct xb_release *below = NULL, *above = NULL;
		for (const struct xb_release *const *r = xb_releases; *r; r++) {
			if (pass == 0 && xb_release_flavor(*r, flavor)->off[XB_F_PROC_SIZE] == XB_NOFIELD)
				continue;
			if (version_cmp((*r)->erts, erts) <= 0) {
				if (!below || version_cmp((*r)->erts, below->erts) > 0)
					below = *r;
			} else if (!above || version_cmp((*r)->erts, above->erts) < 0) {
				above = *r;
			}
		}
		best = below ? below : above;
	}
	return best;
}

static void take_table(struct xb_vm *vm, const struct xb_release *r)
{
	const struct xb_release_flavor *fl = xb_release_flavor(r, vm->flavor);
	if (fl->off[XB_F_PROC_SIZE] == XB_NOFIELD) /* only the other flavour's: the structs are the same */
		fl = xb_release_flavor(r, vm->flavor == XB_FLAVOR_JIT ? XB_FLAVOR_EMU : XB_FLAVOR_JIT);
	memcpy(vm->off, fl->off, sizeof(vm->off));
	/* the register roles are the flavour's own; the other flavour's mean nothing */
	vm->regs = xb_release_flavor(r, vm->flavor)->regs;
	vm->num_code_ix = r->num_code_ix;
	vm->pid_num_bits = r->pid_num_bits;
	vm->pid_ser_bits = r->pid_ser_bits;
	vm->pid_pixdata = r->pid_pixdata;
	memcpy(vm->thread_fmt, r->thread_fmt, sizeof(vm->thread_fmt));
	vm->rel = r;
	for (int i = 0; i < XB_F_COUNT; i++)
		vm->lay.f[i].src = vm->off[i] == XB_NOFIELD ? XB_LSRC_NONE : XB_LSRC_TABLE;
}

/* Where the offsets start from, in this order: a layout file the user
 * gave; the table of this very erts version (EXTROSPECT_FORCE_RELEASE
 * names another, for tests of --check; EXTROSPECT_NO_EXACT_TABLE=1
 * pretends there is none, for tests of discovery); the beam's own DWARF
 * over that or the nearest table; the nearest table.  Whatever the
 * source, every offset in use is then proven on the live VM (prove.c). */
static int pick_table(struct xb_vm *vm, const char *layout_file)
{
	const char *force = secure_getenv("EXTROSPECT_FORCE_RELEASE");
	const char *noexact = secure_getenv("EXTROSPECT_NO_EXACT_TABLE");
	const struct xb_release *exact = NULL;
	if (force && *force) {
		exact = xb_release_find(force);
		if (!exact)
			return xb_fail("EXTROSPECT_FORCE_RELEASE=%s names no compiled-in release table", force);
	} else if (!(noexact && *noexact == '1')) {
		exact = xb_release_find(vm->erts);
	}
	const struct xb_release *base = exact ? exact : nearest_of_flavor(vm->erts, vm->flavor);
	take_table(vm, base);
	vm->rel_exact = exact != NULL;
	vm->lay.forced = force && *force;
	vm->lay.origin = exact ? (force && *force ? "a forced table" : "the table of this release")
			       : "the nearest table";
	snprintf(vm->lay.origin_detail, sizeof(vm->lay.origin_detail), "(erts %s)", base->erts);

	if (layout_file) {
		int64_t off[XB_F_COUNT];
		if (xb_layout_read(vm, layout_file, off) < 0)
			return -1;
		memcpy(vm->off, off, sizeof(off));
		for (int i = 0; i < XB_F_COUNT; i++)
			vm->lay.f[i].src = off[i] == XB_NOFIELD ? XB_LSRC_NONE : XB_LSRC_FILE;
		vm->lay.origin = "a layout file";
		snprintf(vm->lay.origin_detail, sizeof(vm->lay.origin_detail), "%s", layout_file);
		return 0;
	}

	int64_t dw[XB_F_COUNT];
	int have_dwarf = vm->dwarf ? xb_dwarf_layout(vm->dwarf, dw) : 0;
	if (!have_dwarf)
		return 0;
	/* The DWARF is the target's file: offsets outside their struct are
	 * not used (the table's value stays). */
	char why[200];
	int bad = xb_dwarf_validate(dw, vm->off, why, sizeof(why));
	if (bad)
		xb_warn(stderr, "this beam's DWARF gives %d implausible offsets (e.g. %s); not used", bad,
			why);
	/* DWARF describes this very binary: it wins.  A table of the same
	 * version that disagrees is reported (a differently configured
	 * build); the nearest table of another version is expected to. */
	for (int i = 0; i < XB_F_COUNT; i++) {
		if (dw[i] == XB_NOFIELD)
			continue;
		if (vm->off[i] != dw[i] && exact && vm->off[i] != XB_NOFIELD)
			xb_warn(stderr, "%s: table for erts %s says %lld, this beam's DWARF says %lld; using DWARF",
				xb_field_name(i), base->erts, (long long)vm->off[i], (long long)dw[i]);
		vm->off[i] = dw[i];
		vm->lay.f[i].src = XB_LSRC_DWARF;
	}
	/* Each source was checked alone; the mix too. */
	bad = xb_dwarf_validate(vm->off, NULL, why, sizeof(why));
	if (bad)
		xb_warn(stderr, "this beam's DWARF and the table for erts %s together give %d offsets "
				"outside their struct (e.g. %s); not used", base->erts, bad, why);
	vm->table_from_dwarf = !exact;
	vm->lay.origin = exact ? "DWARF over the table of this release" : "DWARF over the nearest table";
	const struct xb_release *names = thread_names_release(vm, base);
	memcpy(vm->thread_fmt, names->thread_fmt, sizeof(vm->thread_fmt));
	if (vm->flavor == XB_FLAVOR_EMU) {
		/* beam_emu.c: register ... c_p, E REG_stop, I REG_I */
		int r;
		if ((r = xb_dwarf_fixed_reg(vm->dwarf, "process_main", "I")) != XB_PREG_NONE)
			vm->regs.I = r;
		if ((r = xb_dwarf_fixed_reg(vm->dwarf, "process_main", "E")) != XB_PREG_NONE)
			vm->regs.E = r;
		if ((r = xb_dwarf_fixed_reg(vm->dwarf, "process_main", "c_p")) != XB_PREG_NONE)
			vm->regs.c_p = r;
	}
	return 0;
}

/* erts_proc's pid interleaving parameters (erl_ptab.h ErtsPTabReadOnlyData;
 * Uint32 or Uint by release, values < 2^32: the low 4 bytes suffice). */
static void read_pix(struct xb_vm *vm)
{
	static const enum xb_field f[5] = { XB_F_PTAB_PIX_MASK, XB_F_PTAB_PIX_CL_MASK,
					    XB_F_PTAB_PIX_CL_SHIFT, XB_F_PTAB_PIX_CLI_MASK,
					    XB_F_PTAB_PIX_CLI_SHIFT };
	uint32_t v[5];
	if (!vm->sym.proc_tab || !vm->pid_pixdata)
		return;
	for (int i = 0; i < 5; i++)
		if (xb_off(vm, f[i]) < 0 ||
		    xb_read_u32(&vm->mem, vm->sym.proc_tab + (uint64_t)xb_off(vm, f[i]), &v[i]) < 0)
			return;
	vm->pix = (struct xb_pix){ v[0], v[1], v[3], v[2], v[4], v[2] < 64 && v[4] < 64 };
}

/* The invoking user's right to read PID's memory, checked by us when the
 * tool is not run by root: installed with file capabilities
 * (CAP_SYS_PTRACE, CAP_PERFMON), it could otherwise read any process.
 * The rule is the kernel's for an unprivileged tracer (ptrace(2),
 * "Ptrace access mode checking"): the target's real, effective and saved
 * uids and gids are the caller's real ones, and it is dumpable (its /proc
 * entries are owned by its user, not root). */
/* Does this process hold any effective capability (file capabilities,
 * or an ambient set)?  Without one the kernel's own checks apply. */
static bool privileged(void)
{
	char *st = xb_slurp("/proc/self/status", NULL);
	const char *p = st ? strstr(st, "\nCapEff:") : NULL;
	bool any = p && strtoull(p + 8, NULL, 16) != 0;
	free(st);
	return any;
}

static int may_trace(struct xb_vm *vm)
{
	uid_t me = getuid();
	gid_t mg = getgid();
	if (me == 0 || !privileged())
		return 0;
	if (!vm->cred_ok)
		return xb_fail("cannot read the credentials of process %d: %s", (int)vm->pid, xb_err());
	const struct xb_cred *c = &vm->cred;
	/* Not /proc/PID itself: the kernel keeps a directory of mode 0555
	 * owned by the task's user even when it is not dumpable
	 * (fs/proc/base.c task_dump_owner); its files turn root's. */
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)vm->pid);
	bool dumpable = stat(path, &st) == 0 && st.st_uid == me;
	if (c->ruid != me || c->euid != me || c->suid != me || c->rgid != mg || c->egid != mg ||
	    c->sgid != mg || !dumpable)
		return xb_fail("refusing process %d: its real/effective/saved uids are %u/%u/%u, gids "
			       "%u/%u/%u%s, and you (uid %u, gid %u) may not trace it; with file capabilities "
			       "this tool reads only processes of the user running it (run it as root for others)",
			       (int)vm->pid, (unsigned)c->ruid, (unsigned)c->euid, (unsigned)c->suid,
			       (unsigned)c->rgid, (unsigned)c->egid, (unsigned)c->sgid,
			       dumpable ? "" : ", it is not dumpable", (unsigned)me, (unsigned)mg);
	return 0;
}

static int attach(struct xb_vm *vm, pid_t pid, const struct xb_attach_opts *o)
{
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return xb_fail("no such process: PID %d does not exist; find the VM with "
			       "`pgrep -a beam.smp`", (int)pid);
	/* Pin the process first (pidfd): from here on, whatever we read of
	 * PID is checked to have come from this very process. */
	int ro = xb_remote_open(&vm->mem, pid);
	vm->pinned = vm->mem.pidfd >= 0;
	if (ro < 0) {
		if (errno == EACCES || errno == EPERM)
			return perm_error(pid, "the memory map");
		return -1;
	}
	vm->cred_ok = xb_proc_cred(pid, &vm->cred) == 0;
	if (may_trace(vm) < 0)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, vm->exe, sizeof(vm->exe) - 1);
	if (n < 0) {
		if (errno == EACCES || errno == EPERM)
			return perm_error(pid, "the executable");
		if (errno == ENOENT)
			return xb_fail("PID %d is a kernel thread or has exited, not a BEAM VM; "
				       "pass the PID of beam.smp (`pgrep -a beam.smp`)", (int)pid);
		return xb_fail("cannot read %s: %m", path);
	}
	vm->exe[n] = 0;
	const char *base = strrchr(vm->exe, '/');
	base = base ? base + 1 : vm->exe;
	if (xb_symbols_open(&vm->syms, pid, &vm->mem.maps) < 0)
		return -1;
	vm->beam = xb_symbols_module(&vm->syms, vm->exe);
	bool looks_beam = strncmp(base, "beam", 4) == 0;
	if (vm->beam && !looks_beam)
		looks_beam = sym(vm, "enif_make_atom") && sym(vm, "driver_alloc");
	if (!vm->beam || !looks_beam)
		return xb_fail("PID %d is not a BEAM VM: its executable is %s; pass the PID of the "
			       "Erlang VM (beam.smp; `pgrep -a beam.smp` lists them)",
			       (int)pid, vm->exe);

	/* Can we actually read its memory?  (ptrace access mode check) */
	uint64_t probe;
	if (process_vm_readv(pid, &(struct iovec){ &probe, 8 }, 1,
			     &(struct iovec){ (void *)(uintptr_t)vm->beam->low, 8 }, 1, 0) != 8) {
		if (errno == EPERM || errno == EACCES)
			return perm_error(pid, "the memory");
		if (errno == ESRCH)
			return xb_fail("process %d exited while attaching", (int)pid);
		return xb_fail("process_vm_readv on process %d failed: %m", (int)pid);
	}

	erts_from_path(vm->exe, vm->erts, sizeof(vm->erts));
	root_from_cmdline(pid, vm->root, sizeof(vm->root));
	if (vm->root[0])
		otp_from_root(vm);

	vm->debug = xb_symbols_debug_level(&vm->syms, vm->beam, &vm->dwarf, &vm->dwarf_bias);
	vm->flavor = flavor_from_maps(&vm->mem.maps);
	if (sym(vm, "__jit_debug_descriptor"))
		vm->flavor = XB_FLAVOR_JIT;
	if (!vm->erts[0])
		return xb_fail("cannot tell the erts version of PID %d (%s): its path has no "
			       "erts-VERSION directory and -root has no releases/start_erl.data",
			       (int)pid, vm->exe);
	if (pick_table(vm, o->layout_file) < 0)
		return -1;
	resolve_symbols(vm);
	if (!vm->sym.atom_table || !vm->sym.sched_data_ptr || !vm->sym.proc_tab ||
	    (vm->flavor == XB_FLAVOR_JIT && !vm->sym.jit_desc)) {
		int nth[3];
		xb_vm_count_sched_threads(vm, nth);
		xb_vm_discover(vm, nth[0], nth[1], nth[2]);
	}
	/* Every offset the tool's features read, proven on the live VM;
	 * searched for where it does not hold. */
	xb_layout_prove(vm, o->needs, !vm->lay.forced && !xb_layout_unproven_ok());
	if (vm->lay.discovered && !vm->lay.mutating) {
		/* sizes and globals found with the offsets that did not hold */
		if (!vm->sym.atom_table || !vm->sym.sched_data_ptr || !vm->sym.proc_tab) {
			int nth[3];
			xb_vm_count_sched_threads(vm, nth);
			xb_vm_discover(vm, nth[0], nth[1], nth[2]);
		}
		if (xb_verbose)
			xb_note(stderr, "%u struct offsets of this VM (erts %s) differ from %s %s: discovered "
					"in its data in %.0f ms (erlang-sample --check lists them)",
				vm->lay.discovered, vm->erts, vm->lay.origin, vm->lay.origin_detail,
				vm->lay.discover_ns / 1e6);
	}
	read_pix(vm);
	return 0;
}

int xb_vm_attach(struct xb_vm *vm, pid_t pid)
{
	struct xb_attach_opts o = { XB_NEED_CODE | XB_NEED_ATOMS, NULL };
	return xb_vm_attach_with(vm, pid, &o);
}

int xb_vm_attach_with(struct xb_vm *vm, pid_t pid, const struct xb_attach_opts *o)
{
	memset(vm, 0, sizeof(*vm));
	vm->pid = pid;
	vm->syms.rootfd = -1;
	vm->mem.pidfd = -1;
	int rc = attach(vm, pid, o);
	/* The VM exiting at any moment of attaching ends it with one line
	 * that says so (whatever read failed first), and so does ^C.  A
	 * process being killed loses its memory and /proc/PID/exe before its
	 * last thread is gone (and its pidfd says so): on a failure, give it
	 * a moment to finish dying. */
	if (rc < 0 && vm->pinned && vm->mem.pidfd >= 0 && !xb_interrupted)
		poll(&(struct pollfd){ .fd = vm->mem.pidfd, .events = POLLIN }, 1, 50);
	if (vm->pinned && !xb_remote_alive(&vm->mem))
		return xb_fail("the VM (PID %d) exited while attaching", (int)pid);
	if (rc < 0 && xb_interrupted)
		return xb_fail("interrupted while attaching");
	return rc;
}

bool xb_vm_alive(struct xb_vm *vm)
{
	if (vm->mem.gone)
		return false;
	uint64_t now = xb_now_ns();
	if (now - vm->alive_checked_ns < 50ull * 1000 * 1000)
		return true;
	vm->alive_checked_ns = now;
	if (!xb_remote_alive(&vm->mem))
		return false;
	/* A zombie has no memory left to read. */
	char path[64], *st;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)vm->pid);
	if ((st = xb_slurp(path, NULL))) {
		char *p = strrchr(st, ')');
		bool zombie = p && (p[2] == 'Z' || p[2] == 'X');
		free(st);
		if (zombie) {
			vm->mem.gone = true;
			return false;
		}
	}
	return true;
}

void xb_vm_detach(struct xb_vm *vm)
{
	xb_layout_drop_codemap(vm);
	xb_vm_atoms_free(vm);
	xb_symbols_close(&vm->syms);
	xb_remote_close(&vm->mem);
}

/* vm.c - identify a running BEAM and bind it to a release table. */
#define _GNU_SOURCE
#include "xb/vm.h"
#include "xb/common.h"
#include "xb/dwarf_layout.h"
#include "xb/term.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

const char *xb_flavor_name(enum xb_flavor f)
{
	return f == XB_FLAVOR_JIT ? "jit" : f == XB_FLAVOR_EMU ? "emu" : "unknown";
}

static int perm_error(pid_t pid, const char *what)
{
	if (geteuid() == 0)
		return xb_fail("permission denied reading %s of process %d even as root: it belongs to "
			       "another PID or user namespace, or a security module (Yama ptrace_scope "
			       "3, SELinux, AppArmor) forbids ptrace access; run from the VM's namespace",
			       what, (int)pid);
	return xb_fail("permission denied reading %s of process %d: run as root, or give this "
		       "tool CAP_SYS_PTRACE (ptrace access is what process_vm_readv needs) and "
		       "CAP_PERFMON (or lower kernel.perf_event_paranoid)",
		       what, (int)pid);
}

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
	return true;
}

/* -root DIR from the VM's command line (erlexec always passes it). */
static void root_from_cmdline(pid_t pid, char *out, size_t len)
{
	char path[64];
	size_t n;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	char *buf = xb_slurp(path, &n);
	if (!buf)
		return;
	for (size_t i = 0; i < n;) {
		const char *arg = buf + i;
		size_t al = strnlen(arg, n - i);
		if (strcmp(arg, "-root") == 0 && i + al + 1 < n) {
			snprintf(out, len, "%s", buf + i + al + 1);
			break;
		}
		i += al + 1;
	}
	free(buf);
}

/* releases/start_erl.data holds "ERTS_VSN REL_VSN"; releases/REL/OTP_VERSION
 * the full OTP version. */
static void otp_from_root(struct xb_vm *vm)
{
	char path[PATH_MAX + 128];
	snprintf(path, sizeof(path), "/proc/%d/root%s/releases/start_erl.data", (int)vm->pid, vm->root);
	char *data = xb_slurp(path, NULL);
	char erts[32] = "", rel[32] = "";
	if (data && sscanf(data, "%31s %31s", erts, rel) == 2) {
		if (!vm->erts[0])
			snprintf(vm->erts, sizeof(vm->erts), "%s", erts);
		if (strcmp(erts, vm->erts) == 0)
			snprintf(vm->otp, sizeof(vm->otp), "%s", rel);
	}
	free(data);
	if (vm->otp[0]) {
		snprintf(path, sizeof(path), "/proc/%d/root%s/releases/%s/OTP_VERSION", (int)vm->pid,
			 vm->root, vm->otp);
		char *v = xb_slurp(path, NULL);
		if (v) {
			v[strcspn(v, "\n")] = 0;
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
	const char *by_refs = getenv("EXTROSPECT_RANGES_BY_REFS");
	s->ranges = by_refs && *by_refs == '1' ? 0 : sym(vm, rname);
	if (s->ranges && xb_vm_ranges_plausible(vm, s->ranges)) {
		s->ranges_how = vm->debug == XB_DEBUG_DYNSYM ? "dynsym" : "symtab";
	} else {
		s->ranges = xb_vm_find_ranges_by_refs(vm);
		s->ranges_how = s->ranges ? "code references" : "not found";
	}
}

/* Scheduler threads by kind, named as the release table says. */
char xb_vm_thread_kind(const struct xb_vm *vm, const char *comm, int *no)
{
	static const char kinds[3] = { 's', 'c', 'i' };
	for (int k = 0; k < 3; k++)
		if (vm->thread_fmt[k] && xb_thread_name_match(vm->thread_fmt[k], comm, no))
			return kinds[k];
	*no = 0;
	return 'o';
}

int xb_vm_threads(const struct xb_vm *vm, struct xb_vm_thread **out)
{
	*out = NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)vm->pid);
	DIR *d = opendir(path);
	if (!d)
		return xb_fail("process %d exited", (int)vm->pid);
	struct dirent *de;
	size_t n = 0, cap = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (xb_grow((void **)out, &cap, n + 1, sizeof(**out)) < 0)
			break;
		char cp[320];
		snprintf(cp, sizeof(cp), "/proc/%d/task/%s/comm", (int)vm->pid, de->d_name);
		char *comm = xb_slurp(cp, NULL);
		struct xb_vm_thread *t = &(*out)[n++];
		t->tid = (pid_t)atoi(de->d_name);
		t->no = 0;
		t->kind = comm ? xb_vm_thread_kind(vm, comm, &t->no) : 'o';
		free(comm);
	}
	closedir(d);
	return (int)n;
}

void xb_vm_count_sched_threads(const struct xb_vm *vm, int n[3])
{
	n[0] = n[1] = n[2] = 0;
	struct xb_vm_thread *t;
	int nt = xb_vm_threads(vm, &t);
	for (int i = 0; i < nt; i++) {
		n[0] += t[i].kind == 's';
		n[1] += t[i].kind == 'c';
		n[2] += t[i].kind == 'i';
	}
	free(t);
}

static int pick_table(struct xb_vm *vm)
{
	const char *force = getenv("EXTROSPECT_FORCE_RELEASE");
	const char *want = force && *force ? force : vm->erts;
	vm->rel = xb_release_find(want);
	if (force && *force && !vm->rel)
		return xb_fail("EXTROSPECT_FORCE_RELEASE=%s names no compiled-in release table", force);

	int64_t dw[XB_F_COUNT];
	int have_dwarf = vm->dwarf ? xb_dwarf_layout(vm->dwarf, dw) : 0;

	if (vm->rel) {
		const struct xb_release_flavor *fl = xb_release_flavor(vm->rel, vm->flavor);
		memcpy(vm->off, fl->off, sizeof(vm->off));
		vm->regs = fl->regs;
		vm->num_code_ix = vm->rel->num_code_ix;
		vm->pid_num_bits = vm->rel->pid_num_bits;
		vm->pid_ser_bits = vm->rel->pid_ser_bits;
		vm->pid_pixdata = vm->rel->pid_pixdata;
		memcpy(vm->thread_fmt, vm->rel->thread_fmt, sizeof(vm->thread_fmt));
		if (have_dwarf) {
			/* DWARF describes this very binary: it wins, and a
			 * disagreement is reported (the table may be for a
			 * differently configured build). */
			for (int i = 0; i < XB_F_COUNT; i++) {
				if (dw[i] == XB_NOFIELD)
					continue;
				if (vm->off[i] != dw[i])
					fprintf(stderr, "warning: %s: table for erts %s says %lld, this beam's DWARF says %lld; using DWARF\n",
						xb_field_name(i), vm->rel->erts, (long long)vm->off[i], (long long)dw[i]);
				vm->off[i] = dw[i];
			}
		}
		return 0;
	}
	if (have_dwarf) {
		/* No table, but the binary describes itself. */
		memcpy(vm->off, dw, sizeof(vm->off));
		vm->table_from_dwarf = true;
		const struct xb_release *latest = xb_releases[0];
		const struct xb_release_flavor *fl = xb_release_flavor(latest, vm->flavor);
		vm->regs = fl->regs;
		vm->num_code_ix = latest->num_code_ix;
		vm->pid_num_bits = latest->pid_num_bits;
		vm->pid_ser_bits = latest->pid_ser_bits;
		vm->pid_pixdata = latest->pid_pixdata;
		memcpy(vm->thread_fmt, latest->thread_fmt, sizeof(vm->thread_fmt));
		if (vm->flavor == XB_FLAVOR_EMU) {
			int r;
			if ((r = xb_dwarf_fixed_reg(vm->dwarf, "process_main", "I")) != XB_PREG_NONE)
				vm->regs.I = r;
			if ((r = xb_dwarf_fixed_reg(vm->dwarf, "process_main", "E")) != XB_PREG_NONE)
				vm->regs.E = r;
		}
		if (xb_verbose)
			fprintf(stderr, "note: no release table for erts %s; using this beam's DWARF "
					"(register roles as in erts %s)\n", vm->erts, latest->erts);
		return 0;
	}
	char list[512];
	xb_release_list(list, sizeof(list));
	return xb_fail("unsupported release: OTP %s (erts %s) has no table here and this beam.smp "
		       "has no DWARF; supported: %s; install the VM's debug symbols (its -dbgsym "
		       "package) or build it with -g",
		       vm->otp[0] ? vm->otp : "?", vm->erts[0] ? vm->erts : "?", list);
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

int xb_vm_attach(struct xb_vm *vm, pid_t pid)
{
	memset(vm, 0, sizeof(*vm));
	vm->pid = pid;
	snprintf(vm->otp, sizeof(vm->otp), "%s", "");

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return xb_fail("no such process: PID %d does not exist; find the VM with "
			       "`pgrep -a beam.smp`", (int)pid);
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

	if (xb_remote_open(&vm->mem, pid) < 0) {
		if (errno == EACCES || errno == EPERM)
			return perm_error(pid, "the memory map");
		return -1;
	}
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
	if (pick_table(vm) < 0)
		return -1;
	if (vm->off[XB_F_PROC_SIZE] == XB_NOFIELD)
		return xb_fail("release table for erts %s lacks struct process; regenerate it", vm->erts);
	resolve_symbols(vm);
	if (!vm->sym.atom_table || !vm->sym.sched_data_ptr || !vm->sym.proc_tab ||
	    (vm->flavor == XB_FLAVOR_JIT && !vm->sym.jit_desc)) {
		int nth[3];
		xb_vm_count_sched_threads(vm, nth);
		xb_vm_discover(vm, nth[0], nth[1], nth[2]);
	}
	read_pix(vm);
	return 0;
}

bool xb_vm_alive(struct xb_vm *vm)
{
	if (vm->mem.gone)
		return false;
	uint64_t now = xb_now_ns();
	if (now - vm->alive_checked_ns < 50ull * 1000 * 1000)
		return true;
	vm->alive_checked_ns = now;
	if (kill(vm->pid, 0) < 0 && errno == ESRCH) {
		vm->mem.gone = true;
		return false;
	}
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
	for (size_t i = 0; i < vm->atoms.cap; i++)
		free(vm->atoms.vals ? vm->atoms.vals[i] : NULL);
	free(vm->atoms.keys);
	free(vm->atoms.vals);
	xb_symbols_close(&vm->syms);
	xb_remote_close(&vm->mem);
}

/* ---- atoms (atom.h: Atom, index.h: IndexTable) ---- */

#define MAX_ATOM_BYTES 1020 /* MAX_ATOM_SZ_LIMIT: 255 characters * 4 bytes */
#define INDEX_PAGE_SHIFT 10 /* index.h */

/* OTP 29 keeps an atom's text as a binary literal (atom.c,
 * erts_atom_get_name: ERTS_GET_BITSTRING of Atom.u.bin): a heap binary
 * (ErlHeapBits) for short names, a sub-binary (ErlSubBits) otherwise. */
#define HEADER_TAG_MASK 0x3f       /* erl_term.h _TAG_HEADER_MASK */
#define TAG_HEADER_HEAP_BITS 0x20  /* erl_term.h (OTP 27+) HEAP_BITS_SUBTAG */
#define TAG_HEADER_SUB_BITS 0x24   /* erl_term.h (OTP 27+) SUB_BITS_SUBTAG */
#define SUB_BITS_FLAG_MASK 3       /* erl_bits.h ERL_SUB_BITS_FLAG_MASK */

static int atom_text_from_binary(struct xb_vm *vm, uint64_t slot, uint64_t *text)
{
	uint64_t bin, hdr;
	if (xb_off(vm, XB_F_ATOM_BIN) == XB_NOFIELD)
		return xb_fail("release table has no atom text field");
	if (xb_read_u64(&vm->mem, slot + (uint64_t)xb_off(vm, XB_F_ATOM_BIN), &bin) < 0)
		return -1;
	if ((bin & 3) != 2) /* TAG_PRIMARY_BOXED */
		return xb_fail("atom text is not a boxed binary");
	uint64_t p = bin & ~(uint64_t)3;
	if (xb_read_u64(&vm->mem, p, &hdr) < 0)
		return -1;
	if ((hdr & HEADER_TAG_MASK) == TAG_HEADER_HEAP_BITS && xb_off(vm, XB_F_HEAPBITS_DATA) >= 0) {
		*text = p + (uint64_t)xb_off(vm, XB_F_HEAPBITS_DATA);
		return 0;
	}
	if ((hdr & HEADER_TAG_MASK) == TAG_HEADER_SUB_BITS && xb_off(vm, XB_F_SUBBITS_BASE_FLAGS) >= 0) {
		uint64_t base, start;
		if (xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_SUBBITS_BASE_FLAGS), &base) < 0 ||
		    xb_read_u64(&vm->mem, p + (uint64_t)xb_off(vm, XB_F_SUBBITS_START), &start) < 0)
			return -1;
		if (start % 8)
			return xb_fail("atom text not byte aligned");
		*text = (base & ~(uint64_t)SUB_BITS_FLAG_MASK) + start / 8;
		return 0;
	}
	return xb_fail("atom text: unexpected binary header 0x%llx", (unsigned long long)hdr);
}

int xb_vm_atom_raw(struct xb_vm *vm, uint64_t term, char *buf, size_t len, size_t *outlen)
{
	if (!xb_is_atom(term) || !vm->sym.atom_table)
		return xb_fail("not an atom: 0x%llx", (unsigned long long)term);
	uint64_t ix = xb_atom_index(term);
	uint32_t entries;
	uint64_t seg, slot, name;
	int16_t alen;
	uint64_t tab = vm->sym.atom_table;
	if (xb_read_u32(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_ENTRIES), &entries) < 0)
		return -1;
	if (ix >= entries || entries > (1u << 26))
		return xb_fail("atom index %llu out of range (%u atoms)", (unsigned long long)ix, entries);
	if (xb_read_u64(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_SEG_TABLE), &seg) < 0 ||
	    xb_read_u64(&vm->mem, seg + (ix >> INDEX_PAGE_SHIFT) * 8, &seg) < 0 ||
	    xb_read_u64(&vm->mem, seg + (ix & ((1u << INDEX_PAGE_SHIFT) - 1)) * 8, &slot) < 0 ||
	    xb_read(&vm->mem, slot + (uint64_t)xb_off(vm, XB_F_ATOM_LEN), &alen, sizeof(alen)) < 0)
		return -1;
	if (xb_off(vm, XB_F_ATOM_NAME) != XB_NOFIELD) {
		if (xb_read_u64(&vm->mem, slot + (uint64_t)xb_off(vm, XB_F_ATOM_NAME), &name) < 0)
			return -1;
	} else if (atom_text_from_binary(vm, slot, &name) < 0) {
		return -1;
	}
	if (alen < 0 || alen > MAX_ATOM_BYTES || (size_t)alen >= len)
		return xb_fail("implausible atom length %d", alen);
	if (xb_read(&vm->mem, name, buf, (size_t)alen) < 0)
		return -1;
	buf[alen] = 0;
	if (memchr(buf, 0, (size_t)alen))
		return xb_fail("atom text has a NUL byte");
	if (outlen)
		*outlen = (size_t)alen;
	return 0;
}

static const char *atom_cache_put(struct xb_vm *vm, uint64_t key, const char *raw, size_t rl);

const char *xb_vm_atom(struct xb_vm *vm, uint64_t term)
{
	struct xb_atom_cache *c = &vm->atoms;
	if (!xb_is_atom(term))
		return NULL;
	uint64_t key = xb_atom_index(term) + 1;
	if (c->cap) {
		for (size_t i = (key * 0x9E3779B97F4A7C15ull) & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
			if (c->keys[i] == key)
				return c->vals[i];
			if (!c->keys[i])
				break;
		}
	}
	char raw[MAX_ATOM_BYTES + 1];
	size_t rl;
	if (xb_vm_atom_raw(vm, term, raw, sizeof(raw), &rl) < 0)
		return NULL;
	return atom_cache_put(vm, key, raw, rl);
}

static const char *atom_cache_put(struct xb_vm *vm, uint64_t key, const char *raw, size_t rl)
{
	struct xb_atom_cache *c = &vm->atoms;
	char quoted[MAX_ATOM_BYTES * 4 + 8];
	xb_atom_quote(raw, rl, quoted, sizeof(quoted));
	if ((c->n + 1) * 2 > c->cap) { /* rehash */
		size_t ncap = c->cap ? c->cap * 2 : 1024;
		uint64_t *nk = calloc(ncap, sizeof(*nk));
		char **nv = calloc(ncap, sizeof(*nv));
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return NULL;
		}
		for (size_t i = 0; i < c->cap; i++) {
			if (!c->keys[i])
				continue;
			size_t j = (c->keys[i] * 0x9E3779B97F4A7C15ull) & (ncap - 1);
			while (nk[j])
				j = (j + 1) & (ncap - 1);
			nk[j] = c->keys[i];
			nv[j] = c->vals[i];
		}
		free(c->keys);
		free(c->vals);
		c->keys = nk;
		c->vals = nv;
		c->cap = ncap;
	}
	size_t i = (key * 0x9E3779B97F4A7C15ull) & (c->cap - 1);
	while (c->keys[i])
		i = (i + 1) & (c->cap - 1);
	c->keys[i] = key;
	c->vals[i] = strdup(quoted);
	c->n++;
	return c->vals[i];
}

/* Read every atom in a few batched process_vm_readv calls (one iovec per
 * atom) instead of several reads each: naming an interpreter's code needs
 * most of them.  Only where Atom has a plain name pointer (up to OTP 28);
 * atoms that fail here are read one by one later. */
#define BATCH 512

int xb_vm_atoms_prefetch(struct xb_vm *vm)
{
	int64_t o_len = xb_off(vm, XB_F_ATOM_LEN), o_name = xb_off(vm, XB_F_ATOM_NAME);
	uint64_t tab = vm->sym.atom_table, segtab;
	uint32_t entries;
	if (!tab || o_name < 0 || o_len < 0 || o_name < o_len || o_name - o_len > 64)
		return -1;
	if (xb_read_u32(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_ENTRIES), &entries) < 0 ||
	    xb_read_u64(&vm->mem, tab + (uint64_t)xb_off(vm, XB_F_INDEXTAB_SEG_TABLE), &segtab) < 0 ||
	    entries > (1u << 24))
		return -1;
	size_t npages = (entries + (1u << INDEX_PAGE_SHIFT) - 1) >> INDEX_PAGE_SHIFT;
	uint64_t *pages = calloc(npages ? npages : 1, 8);
	uint64_t *slots = calloc((size_t)entries + 1, 8);
	size_t span = (size_t)(o_name - o_len) + 8;
	uint8_t *hdr = malloc(BATCH * span);
	char *names = malloc(BATCH * (MAX_ATOM_BYTES + 1));
	int rc = -1;
	if (!pages || !slots || !hdr || !names || xb_read(&vm->mem, segtab, pages, npages * 8) < 0)
		goto out;
	for (size_t pg = 0; pg < npages; pg++) {
		size_t first = pg << INDEX_PAGE_SHIFT;
		size_t n = entries - first < (1u << INDEX_PAGE_SHIFT) ? entries - first : (1u << INDEX_PAGE_SHIFT);
		if (xb_read(&vm->mem, pages[pg], slots + first, n * 8) < 0)
			goto out;
	}
	for (size_t base = 0; base < entries; base += BATCH) {
		size_t n = entries - base < BATCH ? entries - base : BATCH;
		struct iovec loc[BATCH], rem[BATCH];
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t a = slots[base + i] + (uint64_t)o_len;
			if (!slots[base + i] || !xb_remote_readable(&vm->mem, a, span))
				continue; /* read one by one later, if ever needed */
			loc[k] = (struct iovec){ hdr + i * span, span };
			rem[k] = (struct iovec){ (void *)(uintptr_t)a, span };
			k++;
		}
		memset(hdr, 0xff, n * span);
		if (k && process_vm_readv(vm->pid, loc, k, rem, k, 0) != (ssize_t)(k * span))
			continue;
		size_t m = 0;
		size_t idx[BATCH];
		for (size_t i = 0; i < n; i++) {
			int16_t len;
			uint64_t name;
			memcpy(&len, hdr + i * span, 2);
			memcpy(&name, hdr + i * span + (o_name - o_len), 8);
			if (len < 0 || len > MAX_ATOM_BYTES || !xb_remote_readable(&vm->mem, name, (size_t)len ? (size_t)len : 1))
				continue;
			loc[m] = (struct iovec){ names + i * (MAX_ATOM_BYTES + 1), (size_t)len };
			rem[m] = (struct iovec){ (void *)(uintptr_t)name, (size_t)len };
			idx[m++] = i;
		}
		ssize_t want = 0;
		for (size_t i = 0; i < m; i++)
			want += (ssize_t)loc[i].iov_len;
		if (m && process_vm_readv(vm->pid, loc, m, rem, m, 0) != want)
			continue;
		for (size_t j = 0; j < m; j++) {
			char *t = loc[j].iov_base;
			size_t len = loc[j].iov_len;
			if (memchr(t, 0, len))
				continue;
			t[len] = 0;
			uint64_t key = base + idx[j] + 1;
			atom_cache_put(vm, key, t, len);
		}
	}
	rc = 0;
out:
	free(pages);
	free(slots);
	free(hdr);
	free(names);
	return rc;
}

/* ---- scheduler data (erl_process.h: ErtsAlignedSchedulerData) ---- */

int xb_vm_sched_data(struct xb_vm *vm, int no, uint64_t *addr)
{
	/* Both are set once at boot (erl_process.c init_scheduler_data). */
	uint64_t base = vm->sched_base, nsched = vm->sched_count;
	if (!vm->sym.sched_data_ptr || (!vm->sym.no_schedulers && !nsched))
		return xb_fail("scheduler data not found");
	if (!base && ((!nsched && xb_read_u64(&vm->mem, vm->sym.no_schedulers, &nsched) < 0) ||
		      xb_read_u64(&vm->mem, vm->sym.sched_data_ptr, &base) < 0))
		return -1;
	if (base && nsched && nsched <= 4096) {
		vm->sched_base = base;
		vm->sched_count = nsched;
	}
	if (no < 1 || (uint64_t)no > nsched || nsched > 4096)
		return xb_fail("scheduler %d out of range (1..%llu)", no, (unsigned long long)nsched);
	*addr = base + (uint64_t)(no - 1) * (uint64_t)xb_off(vm, XB_F_SCHED_STRIDE);
	return 0;
}

int xb_vm_dirty_sched_data(struct xb_vm *vm, char kind, int no, uint64_t *addr)
{
	uint64_t ptr = kind == 'c' ? vm->sym.dirty_cpu_data_ptr : vm->sym.dirty_io_data_ptr, base;
	if (!ptr)
		return xb_fail("dirty scheduler data symbols not found");
	if (no < 1 || no > 4096)
		return xb_fail("dirty scheduler %d out of range", no);
	if (xb_read_u64(&vm->mem, ptr, &base) < 0)
		return -1;
	*addr = base + (uint64_t)(no - 1) * (uint64_t)xb_off(vm, XB_F_SCHED_STRIDE);
	return 0;
}

/* ---- locating beam_ranges.c's static `r` without symbols ---- */

bool xb_vm_ranges_plausible(struct xb_vm *vm, uint64_t addr)
{
	int64_t rsz = xb_off(vm, XB_F_RANGES_SIZE), rmod = xb_off(vm, XB_F_RANGES_MODULES),
		rn = xb_off(vm, XB_F_RANGES_N), esz = xb_off(vm, XB_F_RANGE_SIZE),
		est = xb_off(vm, XB_F_RANGE_START), een = xb_off(vm, XB_F_RANGE_END);
	if (rsz <= 0 || rmod < 0 || rn < 0 || esz <= 0 || est < 0 || een < 0 || addr % 8)
		return false;
	uint32_t active = 0;
	if (vm->sym.active_code_ix &&
	    (xb_read_u32(&vm->mem, vm->sym.active_code_ix, &active) < 0 ||
	     active >= (uint32_t)vm->num_code_ix))
		return false;
	int good = 0;
	for (int i = 0; i < vm->num_code_ix; i++) {
		uint64_t base = addr + (uint64_t)(i * rsz), mods, n, allocated;
		if (xb_read_u64(&vm->mem, base + (uint64_t)rmod, &mods) < 0 ||
		    xb_read_u64(&vm->mem, base + (uint64_t)rn, &n) < 0 ||
		    xb_read_u64(&vm->mem, base + (uint64_t)rn + 8, &allocated) < 0)
			return false;
		if (n > allocated || allocated > (1u << 20) || (n && !mods))
			return false;
		if (n == 0)
			continue;
		uint64_t prev_end = 0;
		for (uint64_t k = 0; k < n && k < 16; k++) {
			uint64_t s, e;
			uint64_t ea = mods + k * (uint64_t)esz;
			if (xb_read_u64(&vm->mem, ea + (uint64_t)est, &s) < 0 ||
			    xb_read_u64(&vm->mem, ea + (uint64_t)een, &e) < 0)
				return false;
			if (s > e || s < prev_end || (s % 4))
				return false;
			prev_end = e;
		}
		if (!vm->sym.active_code_ix || (uint32_t)i == active)
			good++;
	}
	return good > 0;
}

/* Scan machine code for RIP-relative memory operands (ModRM mod=00,
 * rm=101) of common instructions and return their targets. */
static size_t rip_targets(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i + 6 <= len && n < max; i++) {
		size_t j = i;
		if ((code[j] & 0xf0) == 0x40)
			j++; /* REX */
		if (j + 6 > len)
			break;
		uint8_t op = code[j], modrm = code[j + 1];
		size_t imm = 0;
		switch (op) {
		case 0x8b: case 0x8d: case 0x89: case 0x03: case 0x3b: case 0x39: case 0x63:
		case 0x2b: case 0x33: case 0x85:
			break;
		case 0xc7: imm = 4; break;
		case 0x83: case 0x80: case 0xc6: imm = 1; break;
		default:
			continue;
		}
		if ((modrm & 0xc7) != 0x05)
			continue;
		int32_t disp;
		memcpy(&disp, code + j + 2, 4);
		uint64_t end = pc + j + 6 + imm;
		out[n++] = end + (uint64_t)(int64_t)disp;
	}
	return n;
}

uint64_t xb_vm_find_ranges_by_refs(struct xb_vm *vm)
{
	const char *list = vm->rel ? vm->rel->sym_ranges_refs
				   : "erts_start_staging_ranges,erts_end_staging_ranges,"
				     "erts_update_ranges,erts_lookup_function_info,erts_init_ranges";
	int64_t rsz = xb_off(vm, XB_F_RANGES_SIZE);
	if (rsz <= 0)
		return 0;
	/* Pass 0 trusts only operands that point at r itself (lea r / mov
	 * r.modules); pass 1 also allows r[k].field, for code that the
	 * compiler specialised to one code index. */
	for (int pass = 0; pass < 2; pass++) {
		char names[512];
		snprintf(names, sizeof(names), "%s", list);
		for (char *save, *f = strtok_r(names, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
			uint64_t size = 0, at = xb_symbols_lookup(&vm->syms, vm->beam, f, &size);
			if (!at)
				continue;
			if (size == 0 || size > 4096)
				size = 4096;
			uint8_t code[4096];
			if (xb_read(&vm->mem, at, code, size) < 0)
				continue;
			uint64_t t[256];
			size_t n = rip_targets(code, size, at, t, XB_ARRAY_SIZE(t));
			for (size_t i = 0; i < n; i++) {
				const struct xb_map *m = xb_maps_find(&vm->mem.maps, t[i]);
				if (!m || !m->writable)
					continue;
				if (pass == 0) {
					if (xb_vm_ranges_plausible(vm, t[i]))
						return t[i];
					continue;
				}
				for (int k = 0; k < vm->num_code_ix; k++)
					for (int64_t fo = 0; fo < rsz; fo += 8) {
						uint64_t c = t[i] - (uint64_t)(k * rsz) - (uint64_t)fo;
						if (xb_vm_ranges_plausible(vm, c))
							return c;
					}
			}
		}
	}
	return 0;
}

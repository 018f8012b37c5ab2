/* symbols.c - symbol tables of the target's modules via libdwfl. */
#define _GNU_SOURCE
#include "xb/symbols.h"
#include "xb/common.h"

#include "xb/safefile.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#ifdef XB_HAVE_DEBUGINFOD
#include <elfutils/debuginfod.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

const char *xb_debug_name(enum xb_debug d)
{
	switch (d) {
	case XB_DEBUG_DWARF:
		return "dwarf";
	case XB_DEBUG_SYMTAB:
		return "symtab";
	default:
		return "dynsym";
	}
}

/* libdwfl's find_elf callback has no user pointer we control before the
 * module exists; one target per process is all the tools need. */
static pid_t report_pid;

/* The vDSO has no file: copy its image with process_vm_readv (libdwfl's
 * own callback would read /proc/PID/mem). */
static uint64_t vdso_lo, vdso_hi;
static void *vdso_image;

static int vdso_elf(Dwarf_Addr base, char **file_name, Elf **elfp)
{
	(void)base;
	if (!vdso_lo || vdso_hi - vdso_lo > (1u << 20))
		return -1;
	size_t len = (size_t)(vdso_hi - vdso_lo);
	free(vdso_image);
	vdso_image = malloc(len);
	if (!vdso_image)
		return -1;
	struct iovec l = { vdso_image, len }, r = { (void *)(uintptr_t)vdso_lo, len };
	if (process_vm_readv(report_pid, &l, 1, &r, 1, 0) != (ssize_t)len)
		return -1;
	*elfp = elf_memory(vdso_image, len);
	if (*elfp)
		*file_name = strdup("[vdso]");
	return -1;
}

/* The symbols being reported (one target per process, see report_pid). */
static struct xb_symbols *cur;

/* Largest ELF or debug file we open: libelf maps it, libdw parses it. */
#define MAX_ELF_BYTES (4ull << 30)

static void refuse(const char *what)
{
	if (!cur)
		return;
	cur->refused++;
	if (!cur->refusal[0]) /* cut to fit, said with a precision (-O3 warns otherwise) */
		snprintf(cur->refusal, sizeof(cur->refusal), "%.*s", (int)sizeof(cur->refusal) - 1, what);
	if (xb_verbose) { /* (paths from the target's maps file) */
		char safe[600];
		xb_sanitize(what, safe, sizeof(safe));
		xb_note(stderr, "%s", safe);
	}
}

/* Open module files inside the target's root (containers and chroots
 * see their own files), by the rules of xb/safefile.h, and only the file
 * the maps line at BASE names: same path, same device and inode.  A file
 * replaced since it was mapped, or a path that resolves elsewhere, names
 * nothing (no host fallback). */
static bool inflates_within(int fd, const char *name);

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	(void)mod;
	(void)userdata;
	*elfp = NULL;
	if (strncmp(modname, "[vdso", 5) == 0)
		return vdso_elf(base, file_name, elfp);
	if (modname[0] != '/' || !cur || cur->rootfd < 0 || !cur->maps)
		return -1;
	const struct xb_map *m = xb_maps_find(cur->maps, base);
	for (size_t i = 0; m && strcmp(m->path, modname) != 0 && i < cur->maps->n; i++)
		m = strcmp(cur->maps->v[i].path, modname) == 0 ? &cur->maps->v[i] : m;
	if (!m || strcmp(m->path, modname) != 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%.150s: no longer mapped; not opened", modname);
		refuse(msg);
		return -1;
	}
	/* maps names files as we see them: a target chrooted into a
	 * directory we can reach has its root's path in front */
	const char *inroot = modname;
	size_t pl = strlen(cur->root_prefix);
	if (pl && strncmp(modname, cur->root_prefix, pl) == 0 && modname[pl] == '/')
		inroot = modname + pl;
	struct stat st;
	int fd = xb_safe_open(cur->rootfd, inroot, MAX_ELF_BYTES, XB_SAFE_NOFOLLOW, &st);
	if (fd < 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "symbols: %s", xb_err());
		refuse(msg);
		return -1;
	}
	if (st.st_ino != m->inode || major(st.st_dev) != m->dev_major || minor(st.st_dev) != m->dev_minor) {
		close(fd);
		char msg[256];
		snprintf(msg, sizeof(msg), "symbols: %.150s is not the file the process maps (device or "
			 "inode differ): not used", modname);
		refuse(msg);
		return -1;
	}
	if (!inflates_within(fd, modname)) {
		close(fd);
		return -1;
	}
	*file_name = strdup(modname);
	return fd;
}

/* libdw inflates a file's compressed debug sections (SHF_COMPRESSED, and
 * the older .zdebug form) in memory as soon as it reads the DWARF, to the
 * size each section's header gives: the file's word.  A few MB of zlib
 * can say and hold gigabytes.  Their total is summed from the headers
 * (nothing inflated) before libdw sees the file; past the limit the file
 * is not used.  (OTP 29's beam.smp holds ~60 MB of debug sections.) */
#define MAX_INFLATED_BYTES (1ull << 30)

static bool inflates_within(int fd, const char *name)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return true; /* not an ELF: libdwfl says so itself */
	size_t shstrndx;
	bool named = elf_getshdrstrndx(e, &shstrndx) == 0;
	uint64_t total = 0;
	for (Elf_Scn *scn = NULL; total <= MAX_INFLATED_BYTES && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;
			if (gelf_getchdr(scn, &ch))
				total += ch.ch_size;
			continue;
		}
		const char *n = named ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
		Elf_Data *d = n && strncmp(n, ".zdebug", 7) == 0 ? elf_rawdata(scn, NULL) : NULL;
		if (d && d->d_size >= 12 && memcmp(d->d_buf, "ZLIB", 4) == 0) {
			uint64_t size = 0; /* "ZLIB", then the size, big-endian */
			for (int i = 4; i < 12; i++)
				size = size << 8 | ((const unsigned char *)d->d_buf)[i];
			total += size < MAX_INFLATED_BYTES ? size : MAX_INFLATED_BYTES + 1;
		}
	}
	elf_end(e);
	if (total <= MAX_INFLATED_BYTES)
		return true;
	char msg[300];
	snprintf(msg, sizeof(msg), "symbols: %.150s: its compressed sections say %llu MB or more once inflated "
		 "(limit %llu): not used", name, (unsigned long long)(total >> 20),
		 (unsigned long long)(MAX_INFLATED_BYTES >> 20));
	refuse(msg);
	return false;
}

/* Does the ELF file open on FD carry build-id ID? */
static bool same_build_id(int fd, const unsigned char *id, int len)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *got = NULL;
	ssize_t n = e ? dwelf_elf_gnu_build_id(e, &got) : -1;
	bool same = n == len && got && memcmp(got, id, (size_t)len) == 0;
	if (e)
		elf_end(e);
	return same;
}

/* The system's debug directory: separate debug files by build-id
 * (.build-id/xx/rest.debug, as Debian's -dbgsym packages and dh_dwz
 * install them). */
#define DEBUG_DIR "/usr/lib/debug"

/* A debug file with build-id ID, under the system's debug directory
 * (resolved beneath it: relative symlinks inside it are followed, as
 * other distributions lay them out) and, for a target in another root
 * (a container), under its own (inside its root).  Regular files of
 * bounded size whose build-id is ID; never a name the file itself chose
 * (.gnu_debuglink, a dwz file name). */
static int debug_by_build_id(const unsigned char *id, int len, char **name)
{
	if (len < 3 || len > 64)
		return -1;
	char rel[160];
	int n = snprintf(rel, sizeof(rel), ".build-id/%02x/", id[0]);
	for (int i = 1; i < len; i++)
		n += snprintf(rel + n, sizeof(rel) - (size_t)n, "%02x", id[i]);
	snprintf(rel + n, sizeof(rel) - (size_t)n, ".debug");
	char full[200];
	snprintf(full, sizeof(full), "%s/%s", DEBUG_DIR, rel);
	int fd = -1;
	int dfd = open(DEBUG_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fd = xb_safe_open(dfd, rel, MAX_ELF_BYTES, XB_SAFE_BENEATH, NULL);
		close(dfd);
	}
	/* A target in another root (a container): its own debug directory,
	 * resolved inside its root. */
	struct stat a, b;
	if (fd < 0 && cur && cur->rootfd >= 0 && fstat(cur->rootfd, &a) == 0 && stat("/", &b) == 0 &&
	    (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		fd = xb_safe_open(cur->rootfd, full, MAX_ELF_BYTES, 0, NULL);
	if (fd < 0)
		return -1;
	if (!same_build_id(fd, id, len)) {
		char msg[300];
		snprintf(msg, sizeof(msg), "symbols: %s does not have the build-id it is named by: not used",
			 full);
		refuse(msg);
		close(fd);
		return -1;
	}
	if (!inflates_within(fd, full)) {
		close(fd);
		return -1;
	}
	*name = strdup(full);
	return fd;
}

#ifdef XB_HAVE_DEBUGINFOD
#include <stdarg.h>
/* -v: what debuginfod gave (one line each). */
static void note(const char *fmt, ...) XB_PRINTF(1, 2);
static void note(const char *fmt, ...)
{
	if (!xb_verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("debuginfod: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* The VM's executable (only its debug info is fetched: a stripped beam
 * names none of its internal functions; the system libraries' exported
 * names are enough, and fetching all of them would slow every start). */
static bool is_target_exe(const char *modname)
{
	char link[64], exe[4096];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)report_pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = 0;
	return strcmp(exe, modname) == 0;
}

/* Ask the debuginfod servers of DEBUGINFOD_URLS (elfutils' client: it
 * caches what it fetched, in $DEBUGINFOD_CACHE_PATH or
 * ~/.cache/debuginfod_client) for MOD's debug info by its build-id, and
 * keep it only if it has that very build-id. */
static int debuginfod_fetch(Dwfl_Module *mod, const char *modname, char **debuginfo_file_name)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &id, &vaddr);
	const char *base = strrchr(modname, '/') ? strrchr(modname, '/') + 1 : modname;
	if (len <= 0) {
		note("%s has no build-id to ask for\n", base);
		return -1;
	}
	char hex[2 * 64 + 1] = "";
	for (int i = 0; i < len && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	debuginfod_client *c = debuginfod_begin();
	if (!c)
		return -1;
	char *path = NULL;
	int fd = debuginfod_find_debuginfo(c, id, len, &path);
	const char *url = debuginfod_get_url(c);
	struct stat st;
	if (fd < 0) {
		note("no debug info for %s (build-id %s): %s\n", base, hex, strerror(-fd));
	} else if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_ELF_BYTES ||
		   !same_build_id(fd, id, len)) {
		note("%s from %s does not have build-id %s: ignored\n", path ? path : "?",
			 url ? url : "the cache", hex);
		close(fd);
		fd = -1;
	} else if (!inflates_within(fd, path ? path : "?")) { /* (it says why, under -v) */
		close(fd);
		fd = -1;
	} else {
		note("debug info for %s (build-id %s) %s%s: %s\n", base, hex,
			 url ? "fetched from " : "from the cache", url ? url : "", path ? path : "?");
		*debuginfo_file_name = path;
		path = NULL;
	}
	free(path);
	debuginfod_end(c);
	return fd;
}
#endif

/* libdwfl asks for a module's debug info, and for the dwz alt file
 * (.gnu_debugaltlink) of DWARF it found, through this one callback.
 * Both are looked up by build-id only (debug_by_build_id); then, when
 * the user set DEBUGINFOD_URLS (the opt-in; ignored when the tool runs
 * with file capabilities: secure_getenv), the servers it names, for the
 * VM's executable.  .gnu_debuglink is never followed. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			  char **debuginfo_file_name)
{
	(void)userdata;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	/* While libdwfl looks for the alt file, the module's DWARF is
	 * already loaded (libdwfl/dwfl_module_getdwarf.c, find_dw: "the
	 * find_debuginfo callback might need it"); while it looks for the
	 * debug file itself, it is not (and asking does not recurse: the
	 * failure is cached). */
	Dwarf_Addr bias;
	Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
	if (dw) {
		const char *altname;
		const void *altid;
		ssize_t n = dwelf_dwarf_gnu_debugaltlink(dw, &altname, &altid);
		if (n <= 0)
			return -1;
		int fd = debug_by_build_id(altid, (int)n, debuginfo_file_name);
		if (fd >= 0 && cur &&
		    xb_grow((void **)&cur->alt_ok, &cur->capalt_ok, cur->nalt_ok + 1, sizeof(*cur->alt_ok)) == 0)
			cur->alt_ok[cur->nalt_ok++] = mod;
		return fd;
	}
	const unsigned char *id;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &id, &vaddr);
	int fd = len > 0 ? debug_by_build_id(id, len, debuginfo_file_name) : -1;
#ifdef XB_HAVE_DEBUGINFOD
	const char *urls = secure_getenv("DEBUGINFOD_URLS");
	if (fd < 0 && urls && *urls && modname && is_target_exe(modname))
		fd = debuginfod_fetch(mod, modname, debuginfo_file_name);
#else
	(void)modname;
#endif
	return fd;
}

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

static bool reportable(const struct xb_map *m)
{
	const char *p = m->path;
	if (strcmp(p, "[vdso]") == 0) {
		vdso_lo = m->start;
		vdso_hi = m->end;
		return false; /* reported separately, see xb_symbols_open */
	}
	if (p[0] != '/')
		return false;
	if (strncmp(p, "/memfd:", 7) == 0 || strncmp(p, "/dev/", 5) == 0 ||
	    strstr(p, " (deleted)"))
		return false;
	return true;
}

struct modlist {
	Dwfl_Module **v;
	size_t n, cap;
};

static int collect_module(Dwfl_Module *m, void **ud, const char *n, Dwarf_Addr a, void *arg)
{
	(void)ud;
	(void)n;
	(void)a;
	struct modlist *c = arg;
	if (xb_grow((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v)) < 0)
		return DWARF_CB_ABORT;
	c->v[c->n++] = m;
	return DWARF_CB_OK;
}

static bool known_module(const struct xb_symbols *s, const Dwfl_Module *mod)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i]->mod == mod)
			return true;
	return false;
}

/* Is M's file still the one mapped at its address? */
static bool still_mapped(const struct xb_modsyms *m, const struct xb_maps *maps)
{
	if (m->gone || !m->ino)
		return true; /* nothing to compare (the vDSO) */
	const char *path = dwfl_module_info(m->mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	const struct xb_map *mp = xb_maps_find(maps, m->low);
	return mp && path && strcmp(mp->path, path) == 0 && mp->inode == m->ino &&
	       mp->dev_major == m->dev_major && mp->dev_minor == m->dev_minor;
}

/* Does M overlap a module whose file is no longer mapped there? */
static bool in_stale_module(const struct xb_symbols *s, const struct xb_map *m,
			    const struct xb_maps *maps)
{
	for (size_t i = 0; i < s->nmods; i++) {
		const struct xb_modsyms *mod = s->mods[i];
		if (m->start < mod->high && m->end > mod->low && !still_mapped(mod, maps))
			return true;
	}
	return false;
}

/* The maps lines of files libdwfl should know about, in maps format, for
 * dwfl_linux_proc_maps_report: all of them; only those outside every
 * reported module (adding modules later); or all but those over a stale
 * module (dropping it). */
enum { ALL_FILES, NEW_FILES, ALL_BUT_STALE };

static char *maps_text(const struct xb_symbols *s, const struct xb_maps *maps, int which,
		       size_t *lenp)
{
	size_t cap = 0, len = 0;
	char *text = NULL;
	for (size_t i = 0; i < maps->n; i++) {
		const struct xb_map *m = &maps->v[i];
		if (!reportable(m) || (which == NEW_FILES && xb_symbols_module_at(s, m->start)) ||
		    (which == ALL_BUT_STALE && in_stale_module(s, m, maps)))
			continue;
		char line[4400];
		int n = snprintf(line, sizeof(line), "%llx-%llx %c%c%c%c %08llx %02x:%02x %llu %s\n",
				 (unsigned long long)m->start, (unsigned long long)m->end,
				 m->readable ? 'r' : '-', m->writable ? 'w' : '-',
				 m->executable ? 'x' : '-', m->shared ? 's' : 'p',
				 (unsigned long long)m->offset, m->dev_major, m->dev_minor,
				 (unsigned long long)m->inode, m->path);
		if (n < 0 || (size_t)n >= sizeof(line))
			continue;
		if (xb_grow((void **)&text, &cap, len + (size_t)n + 1, 1) < 0) {
			free(text);
			return NULL;
		}
		memcpy(text + len, line, (size_t)n + 1);
		len += (size_t)n;
	}
	*lenp = len;
	return text;
}

/* Report the files in TEXT (maps format; a full report when !ADD drops the
 * modules it leaves out), append the modules libdwfl did not know before to
 * s->mods and mark those it dropped gone.  Existing entries never move:
 * callers keep pointers to them (vm->beam).  Returns the number of modules
 * added or dropped, or -1. */
static int report(struct xb_symbols *s, const struct xb_maps *maps, char *text, size_t len,
		  bool add, bool vdso)
{
	FILE *f = fmemopen(text, len, "r");
	if (!f)
		return xb_fail("fmemopen: %m");
	if (add)
		dwfl_report_begin_add(s->dwfl);
	else
		dwfl_report_begin(s->dwfl);
	int r = dwfl_linux_proc_maps_report(s->dwfl, f);
	fclose(f);
	/* The vDSO (clock_gettime & co.): its CFI is needed to unwind out of
	 * it with callee-saved registers intact.  find_elf copies its image. */
	if (r == 0 && vdso && vdso_lo)
		dwfl_report_module(s->dwfl, "[vdso]", vdso_lo, vdso_hi);
	int end = dwfl_report_end(s->dwfl, NULL, NULL);
	if (!add && (end != 0 || r != 0))
		return xb_fail("libdwfl could not report modules of process %d: %s (%d)", (int)s->pid,
			       dwfl_errmsg(-1), r);
	/* Adding: keep whatever libdwfl accepted, even if a line failed. */
	struct modlist c = { NULL, 0, 0 };
	if (dwfl_getmodules(s->dwfl, collect_module, &c, 0) < 0) {
		free(c.v);
		return xb_fail("libdwfl lists no modules of process %d", (int)s->pid);
	}
	int changed = 0;
	/* Modules libdwfl dropped (not re-reported by a full report). */
	for (size_t i = 0; i < s->nmods; i++) {
		struct xb_modsyms *m = s->mods[i];
		bool listed = false;
		for (size_t k = 0; k < c.n && !listed; k++)
			listed = c.v[k] == m->mod;
		if (m->gone || listed)
			continue;
		m->gone = true;
		m->mod = NULL;
		m->low = m->high = 0;
		m->name = "(unmapped)";
		/* Its symbol names lived in libdwfl's copy of the file. */
		free(m->byaddr);
		free(m->byname);
		m->byaddr = m->byname = NULL;
		m->naddr = m->nname = 0;
		m->loaded = true;
		m->fde_table = NULL; /* in that copy too */
		m->nfde = 0;
		m->fde_looked = true;
		changed++;
	}
	for (size_t i = 0; i < c.n; i++) {
		if (known_module(s, c.v[i]))
			continue;
		struct xb_modsyms *m = calloc(1, sizeof(*m));
		if (!m || xb_grow((void **)&s->mods, &s->capmods, s->nmods + 1, sizeof(*s->mods)) < 0) {
			free(m);
			break;
		}
		Dwarf_Addr lo, hi;
		const char *name = dwfl_module_info(c.v[i], NULL, &lo, &hi, NULL, NULL, NULL, NULL);
		m->mod = c.v[i];
		m->low = lo;
		m->high = hi;
		const char *b = name ? strrchr(name, '/') : NULL;
		m->name = b ? b + 1 : (name ? name : "?");
		if (strcmp(m->name, "[vdso]") == 0)
			m->name = "vdso";
		const struct xb_map *mp = xb_maps_find(maps, lo);
		if (mp && name && strcmp(mp->path, name) == 0) {
			m->ino = mp->inode;
			m->dev_major = mp->dev_major;
			m->dev_minor = mp->dev_minor;
		}
		s->mods[s->nmods++] = m;
		changed++;
	}
	free(c.v);
	return changed;
}

int xb_symbols_open(struct xb_symbols *s, pid_t pid, const struct xb_maps *maps)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->maps = maps;
	report_pid = pid;
	cur = s;
	s->rootfd = xb_proc_root_open(pid);
	if (s->rootfd < 0)
		return -1;
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/root", (int)pid);
	ssize_t rl = readlink(link, s->root_prefix, sizeof(s->root_prefix) - 1);
	s->root_prefix[rl > 0 ? rl : 0] = 0;
	if (strcmp(s->root_prefix, "/") == 0)
		s->root_prefix[0] = 0;
	s->dwfl = dwfl_begin(&callbacks);
	if (!s->dwfl)
		return xb_fail("libdwfl: %s", dwfl_errmsg(-1));
	vdso_lo = vdso_hi = 0;
	/* Feed libdwfl a filtered copy of the maps: only regular files. */
	size_t len;
	char *text = maps_text(s, maps, ALL_FILES, &len);
	if (!text)
		return xb_fail("process %d maps no files", (int)pid);
	int n = report(s, maps, text, len, false, true);
	free(text);
	if (n < 0)
		return -1;
	if (n == 0)
		return xb_fail("libdwfl found no modules in process %d", (int)pid);
	return 0;
}

int xb_symbols_refresh(struct xb_symbols *s, const struct xb_maps *maps)
{
	s->maps = maps;
	cur = s;
	bool stale = false;
	for (size_t i = 0; i < s->nmods && !stale; i++)
		stale = !still_mapped(s->mods[i], maps);
	size_t len;
	char *text;
	int n = 0;
	if (stale) {
		/* libdwfl drops a module only when a full report leaves it out,
		 * and keeps one re-reported with the same name and range even if
		 * the file changed: report everything but the stale modules'
		 * ranges first, then add what is mapped there now. */
		text = maps_text(s, maps, ALL_BUT_STALE, &len);
		n = text ? report(s, maps, text, len, false, true) : -1;
		free(text);
		if (n < 0)
			return -1;
	}
	text = maps_text(s, maps, NEW_FILES, &len);
	if (!text)
		return n;
	int added = report(s, maps, text, len, true, false);
	free(text);
	return added < 0 ? -1 : n + added;
}

void xb_symbols_close(struct xb_symbols *s)
{
	for (size_t i = 0; i < s->nmods; i++) {
		struct xb_modsyms *m = s->mods[i];
		free(m->byaddr);
		free(m->byname);
		for (size_t k = 0; k < m->nowned; k++)
			free(m->owned[k]);
		free(m->owned);
		free(m);
	}
	free(s->mods);
	free(s->alt_ok);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	if (s->rootfd >= 0)
		close(s->rootfd);
	if (cur == s)
		cur = NULL;
	memset(s, 0, sizeof(*s));
	s->rootfd = -1;
}

struct xb_modsyms *xb_symbols_module(struct xb_symbols *s, const char *path)
{
	for (size_t i = 0; i < s->nmods; i++) {
		if (s->mods[i]->gone)
			continue;
		const char *name = dwfl_module_info(s->mods[i]->mod, NULL, NULL, NULL, NULL, NULL,
						    NULL, NULL);
		if (name && strcmp(name, path) == 0)
			return s->mods[i];
	}
	return NULL;
}

struct xb_modsyms *xb_symbols_module_at(const struct xb_symbols *s, uint64_t addr)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (!s->mods[i]->gone && addr >= s->mods[i]->low && addr < s->mods[i]->high)
			return s->mods[i];
	return NULL;
}

static char **realloc_owned(char **v, size_t *n, char *s)
{
	char **nv = realloc(v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return v;
	nv[(*n)++] = s;
	return nv;
}

static int cmp_addr(const void *a, const void *b)
{
	const struct xb_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Prefer the larger (more specific, e.g. global over alias) symbol. */
	return x->size > y->size ? -1 : x->size < y->size;
}

static int cmp_name(const void *a, const void *b)
{
	const struct xb_sym *x = a, *y = b;
	return strcmp(x->name, y->name);
}

static void load(struct xb_modsyms *m)
{
	if (m->loaded)
		return;
	m->loaded = true;
	int n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return;
	m->byname = calloc((size_t)n, sizeof(*m->byname));
	m->byaddr = calloc((size_t)n, sizeof(*m->byaddr));
	if (!m->byname || !m->byaddr)
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, NULL, NULL, NULL);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF)
			continue;
		int type = GELF_ST_TYPE(sym.st_info);
		const char *at = strchr(name, '@');
		if (at) { /* "pthread_mutex_lock@@GLIBC_2.2.5" -> "pthread_mutex_lock" */
			char *t = strndup(name, (size_t)(at - name));
			if (!t)
				continue;
			name = t;
			m->owned = realloc_owned(m->owned, &m->nowned, t);
		}
		struct xb_sym e = { addr, sym.st_size, name };
		if (type == STT_FUNC || type == STT_OBJECT || type == STT_NOTYPE ||
		    type == STT_GNU_IFUNC || type == STT_TLS)
			m->byname[m->nname++] = e;
		if ((type == STT_FUNC || type == STT_GNU_IFUNC) && sym.st_size > 0)
			m->byaddr[m->naddr++] = e;
	}
	qsort(m->byname, m->nname, sizeof(*m->byname), cmp_name);
	qsort(m->byaddr, m->naddr, sizeof(*m->byaddr), cmp_addr);
}

uint64_t xb_symbols_lookup(struct xb_symbols *s, struct xb_modsyms *m, const char *name,
			   uint64_t *size)
{
	(void)s;
	if (!m)
		return 0;
	load(m);
	if (!m->byname)
		return 0; /* no symbol table at all */
	struct xb_sym key = { 0, 0, name };
	struct xb_sym *e = bsearch(&key, m->byname, m->nname, sizeof(key), cmp_name);
	if (!e)
		return 0;
	/* Several local symbols can share a name (static `r` in many files):
	 * refuse to choose between them. */
	if ((e > m->byname && strcmp(e[-1].name, name) == 0) ||
	    (e + 1 < m->byname + m->nname && strcmp(e[1].name, name) == 0)) {
		struct xb_sym *first = e;
		while (first > m->byname && strcmp(first[-1].name, name) == 0)
			first--;
		uint64_t addr = first->addr;
		for (struct xb_sym *p = first; p < m->byname + m->nname && strcmp(p->name, name) == 0; p++)
			if (p->addr != addr)
				return 0;
	}
	if (size)
		*size = e->size;
	return e->addr;
}

/* Size of a DW_EH_PE_* encoded value (the low nibble; 0 absptr). */
static size_t eh_pe_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c: return 8;
	case 0x03: case 0x0b: return 4;
	case 0x02: case 0x0a: return 2;
	default: return 0;
	}
}

/* .eh_frame_hdr (LSB Core, "Exception Frames"): version 1, the encodings
 * of eh_frame_ptr, fde_count and the table, eh_frame_ptr, fde_count, then
 * fde_count (initial location, FDE address) pairs sorted by location.
 * GCC and LLVM write the count udata4 and the table datarel sdata4
 * (relative to the header's own address).  Sets m->fde_table when the
 * file has one such (it is the target's: every size is checked). */
static void find_fde_table(struct xb_modsyms *m)
{
	Dwarf_Addr bias;
	Elf *elf = m->mod ? dwfl_module_getelf(m->mod, &bias) : NULL;
	size_t shstrndx;
	m->fde_looked = true;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		const char *name;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".eh_frame_hdr") != 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < 8)
			return;
		const uint8_t *b = d->d_buf;
		size_t ptr = eh_pe_size(b[1]), off = 4 + ptr;
		uint32_t count;
		if (b[0] != 1 || !ptr || b[2] != 0x03 || b[3] != 0x3b || d->d_size < off + 4)
			return;
		memcpy(&count, b + off, 4);
		off += 4;
		if (count == 0 || (d->d_size - off) / 8 < count)
			return;
		m->fde_table = b + off;
		m->nfde = count;
		m->fde_base = sh.sh_addr + bias;
		return;
	}
}

uint64_t xb_symbols_fde_start(struct xb_modsyms *m, uint64_t pc)
{
	if (!m)
		return 0;
	if (!m->fde_looked)
		find_fde_table(m);
	if (!m->fde_table)
		return 0;
	/* PC as an offset from the header */
	int64_t want = (int64_t)(pc - m->fde_base);
	size_t lo = 0, hi = m->nfde; /* the last entry <= want is lo - 1 */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int32_t loc;
		memcpy(&loc, m->fde_table + mid * 8, 4);
		if ((int64_t)loc <= want)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	int32_t loc;
	memcpy(&loc, m->fde_table + (lo - 1) * 8, 4);
	return (uint64_t)((int64_t)m->fde_base + loc);
}

const struct xb_sym *xb_symbols_addr(struct xb_symbols *s, uint64_t addr,
				     struct xb_modsyms **modp)
{
	struct xb_modsyms *m = xb_symbols_module_at(s, addr);
	if (modp)
		*modp = m;
	if (!m)
		return NULL;
	load(m);
	size_t lo = 0, hi = m->naddr;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->byaddr[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo-1 is the last symbol starting at or below addr; aliases and
	 * nested symbols mean an earlier one may cover it too. */
	for (size_t i = lo; i > 0 && lo - i < 8; i--) {
		const struct xb_sym *e = &m->byaddr[i - 1];
		if (addr < e->addr + e->size)
			return e;
	}
	return NULL;
}

enum xb_debug xb_symbols_debug_level(struct xb_symbols *s, struct xb_modsyms *m, Dwarf **dw,
				     Dwarf_Addr *bias)
{
	Dwarf_Addr b = 0;
	Dwarf *d = dwfl_module_getdwarf(m->mod, &b);
	const char *altname;
	const void *altid;
	if (d && dwelf_dwarf_gnu_debugaltlink(d, &altname, &altid) > 0) {
		/* DWARF compressed with dwz: usable only with the alt file we
		 * found by build-id (libdw would otherwise open the name the
		 * file gives, as it is). */
		bool ok = false;
		for (size_t i = 0; i < s->nalt_ok && !ok; i++)
			ok = s->alt_ok[i] == m->mod;
		if (!ok) {
			refuse("symbols: DWARF needs a dwz file not found by build-id: not used");
			d = NULL;
		}
	}
	if (dw)
		*dw = d;
	if (bias)
		*bias = b;
	if (d)
		return XB_DEBUG_DWARF;
	/* dwfl_module_getsymtab prefers .symtab; see whether the ELF has one. */
	GElf_Addr eb;
	Elf *elf = dwfl_module_getelf(m->mod, &eb);
	Elf_Scn *scn = NULL;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return XB_DEBUG_SYMTAB;
	}
	return XB_DEBUG_DYNSYM;
}

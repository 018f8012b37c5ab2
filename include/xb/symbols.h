/* symbols.h - ELF symbols of the target's mapped files, through libdwfl.
 *
 * Whatever the binary carries is used: DWARF, .symtab, or only .dynsym.
 * Files are opened inside the target's root (xb/safefile.h); JIT code, memfd and
 * deleted mappings are never reported to libdwfl (their names come from
 * the VM's own code tables: the code map, src/beam/codemap.c).  Nothing here reads
 * /proc/PID/mem. */
#ifndef XB_SYMBOLS_H
#define XB_SYMBOLS_H

#include "xb/procmaps.h"
#include <elfutils/libdwfl.h>
#include <stdint.h>

enum xb_debug { XB_DEBUG_DYNSYM, XB_DEBUG_SYMTAB, XB_DEBUG_DWARF };
const char *xb_debug_name(enum xb_debug d);

struct xb_sym {
	uint64_t addr, size; /* run-time address */
	const char *name;
};

struct xb_modsyms {
	Dwfl_Module *mod;
	const char *name; /* basename of the file */
	uint64_t low, high;
	struct xb_sym *byaddr; /* functions, sorted by address */
	size_t naddr;
	struct xb_sym *byname; /* all symbols, sorted by name */
	size_t nname;
	bool loaded;
	char **owned; /* names we allocated (version suffix stripped) */
	size_t nowned;
	/* The file mapped at low when reported: a different one there now
	 * means the library was unloaded and something else mapped over it. */
	uint64_t ino;
	unsigned dev_major, dev_minor;
	bool gone; /* no longer in libdwfl (unmapped or replaced): ignored */
	/* .eh_frame_hdr's table of FDE starts (xb_symbols_fde_start), looked
	 * for once, in libdwfl's copy of the file: nfde (initial location,
	 * FDE) pairs of int32, relative to fde_base (run-time). */
	const uint8_t *fde_table;
	uint32_t nfde;
	uint64_t fde_base;
	bool fde_looked;
};

struct xb_symbols {
	pid_t pid;
	Dwfl *dwfl;
	/* Files are opened inside the target's root (xb/safefile.h): this
	 * directory fd, and the maps whose lines name them (device, inode). */
	int rootfd;
	char root_prefix[1024]; /* the target's root as we see it ("" for ours) */
	const struct xb_maps *maps;
	uint64_t refused; /* files refused (not the mapped one, not regular, too big, ...) */
	char refusal[256]; /* the first refusal, for -v */
	/* Modules whose DWARF needs a dwz alt file (.gnu_debugaltlink) that
	 * was found by build-id: their DWARF is used; others' is not (libdw
	 * would look for the alt file by a name the file chose). */
	Dwfl_Module **alt_ok;
	size_t nalt_ok, capalt_ok;
	struct xb_modsyms **mods; /* never moved once added: callers keep pointers */
	size_t nmods, capmods;
};

int xb_symbols_open(struct xb_symbols *s, pid_t pid, const struct xb_maps *maps);
/* Bring the modules up to date with MAPS (re-read by the caller): files
 * mapped since (a NIF's .so loaded after we attached) are added; modules
 * whose file is no longer mapped at their address (a library unloaded,
 * perhaps another one mapped over it) are dropped from libdwfl and marked
 * gone.  Returns how many modules changed, or -1. */
int xb_symbols_refresh(struct xb_symbols *s, const struct xb_maps *maps);
void xb_symbols_close(struct xb_symbols *s);
/* Module whose file path is PATH (as in maps), or NULL. */
struct xb_modsyms *xb_symbols_module(struct xb_symbols *s, const char *path);
struct xb_modsyms *xb_symbols_module_at(const struct xb_symbols *s, uint64_t addr);
/* Address of symbol NAME in module M (any binding, functions and data);
 * 0 when absent. */
uint64_t xb_symbols_lookup(struct xb_symbols *s, struct xb_modsyms *m, const char *name,
			   uint64_t *size);
/* Function containing ADDR.  A symbol only covers [addr, addr+size): an
 * address past the end of the nearest symbol (a static function in a
 * stripped binary) gets NULL, never its neighbour's name. */
const struct xb_sym *xb_symbols_addr(struct xb_symbols *s, uint64_t addr,
				     struct xb_modsyms **modp);

/* The entry of the function of M that contains PC (a run-time address
 * inside some FDE: the caller checked it with the module's CFI), from the
 * ELF's .eh_frame_hdr table of FDE starts: a stripped object's static
 * functions have no symbol, but every function has its FDE, and FDEs do
 * not overlap, so the last start at or below PC is its function's.  0
 * when there is no such table or it is encoded otherwise than GCC and
 * LLVM write it. */
uint64_t xb_symbols_fde_start(struct xb_modsyms *m, uint64_t pc);
enum xb_debug xb_symbols_debug_level(struct xb_symbols *s, struct xb_modsyms *m, Dwarf **dw,
				     Dwarf_Addr *bias);

#endif

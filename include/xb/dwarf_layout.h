/* dwarf_layout.h - struct offsets and register roles read from DWARF.
 * Used by scripts/gen-release-table (through xb-gen-release) to write the
 * release tables, and at run time to cross-check a table against a beam
 * that carries DWARF. */
#ifndef XB_DWARF_LAYOUT_H
#define XB_DWARF_LAYOUT_H

#include "xb/release.h"
#include <elfutils/libdw.h>

/* Fill off[] from DWARF; fields not found are XB_NOFIELD.  Returns the
 * number of fields found. */
int xb_dwarf_layout(Dwarf *dw, int64_t off[XB_F_COUNT]);

/* Check offsets read from DWARF (the target's own file): a struct's size
 * must be positive and sane, a member's offset within its struct (the
 * struct's size from OFF, else from FALLBACK, the release table, may be
 * NULL).  Offsets that fail become XB_NOFIELD; returns how many did, the
 * first described in WHY. */
int xb_dwarf_validate(int64_t off[XB_F_COUNT], const int64_t *fallback, char *why, size_t wlen);

/* perf register number of a variable of FUNC whose DWARF location is one
 * fixed register for the whole function (e.g. `register BeamInstr *I
 * asm("%rbx")` in process_main), or XB_PREG_NONE. */
int xb_dwarf_fixed_reg(Dwarf *dw, const char *func, const char *var);


#endif

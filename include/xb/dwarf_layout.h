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

/* perf register number of a variable of FUNC whose DWARF location is one
 * fixed register for the whole function (e.g. `register BeamInstr *I
 * asm("%rbx")` in process_main), or XB_PREG_NONE. */
int xb_dwarf_fixed_reg(Dwarf *dw, const char *func, const char *var);


#endif

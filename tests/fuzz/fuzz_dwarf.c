/* fuzz_dwarf.c - libFuzzer target: the DWARF layout reader on an ELF
 * file's bytes (the target's beam or its debug file): struct offsets,
 * their validation, and the interpreter's fixed registers. */
#include "xb/dwarf_layout.h"

#include <elfutils/libdw.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	if (!init) {
		elf_version(EV_CURRENT);
		init = 1;
	}
	char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	Elf *e = elf_memory(copy, size);
	if (e) {
		Dwarf *dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
		if (dw) {
			int64_t off[XB_F_COUNT];
			char why[200];
			xb_dwarf_layout(dw, off);
			xb_dwarf_validate(off, NULL, why, sizeof(why));
			for (int i = 0; i < XB_F_COUNT; i++)
				if (off[i] != XB_NOFIELD && (off[i] < 0 || off[i] > (1 << 20)))
					__builtin_trap(); /* validation let an absurd offset through */
			xb_dwarf_fixed_reg(dw, "process_main", "I");
			dwarf_end(dw);
		}
		elf_end(e);
	}
	free(copy);
	return 0;
}

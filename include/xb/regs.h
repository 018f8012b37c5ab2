/* regs.h - x86-64 registers as perf numbers them (asm/perf_regs.h), their
 * names, and the DWARF (x86-64 psABI) numbering libdw uses. */
#ifndef XB_REGS_H
#define XB_REGS_H

enum xb_preg {
	XB_PREG_AX, XB_PREG_BX, XB_PREG_CX, XB_PREG_DX, XB_PREG_SI, XB_PREG_DI,
	XB_PREG_BP, XB_PREG_SP, XB_PREG_IP, XB_PREG_FLAGS, XB_PREG_CS, XB_PREG_SS,
	XB_PREG_DS, XB_PREG_ES, XB_PREG_FS, XB_PREG_GS,
	XB_PREG_R8, XB_PREG_R9, XB_PREG_R10, XB_PREG_R11, XB_PREG_R12,
	XB_PREG_R13, XB_PREG_R14, XB_PREG_R15,
	XB_PREG_COUNT,
	XB_PREG_NONE = -1
};

/* perf register number of DWARF register 0..16 (rax rdx rcx rbx rsi rdi
 * rbp rsp r8..r15 rip). */
#define XB_DWARF_NREGS 17
extern const int xb_dw2perf[XB_DWARF_NREGS];
/* DWARF register number to perf register number, or XB_PREG_NONE. */
int xb_dwarf_to_preg(int dwreg);

/* "rax", "rbx", ..., "rip", "r8".."r15", "flags", ...; "?" when out of range. */
const char *xb_preg_name(int r);
/* "XB_PREG_AX", ... (for generated tables); "XB_PREG_NONE" out of range. */
const char *xb_preg_enum_name(int r);
/* A general register by name ("rax".."rdi", "rbp", "rsp", "rip", "r8".."r15");
 * XB_PREG_NONE when S names none. */
int xb_preg_parse(const char *s);

#endif

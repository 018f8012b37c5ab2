/* regs.c - register numbering and names. */
#include "xb/regs.h"

#include <string.h>

const int xb_dw2perf[XB_DWARF_NREGS] = {
	XB_PREG_AX,  XB_PREG_DX,  XB_PREG_CX,  XB_PREG_BX,  XB_PREG_SI,  XB_PREG_DI,
	XB_PREG_BP,  XB_PREG_SP,  XB_PREG_R8,  XB_PREG_R9,  XB_PREG_R10, XB_PREG_R11,
	XB_PREG_R12, XB_PREG_R13, XB_PREG_R14, XB_PREG_R15, XB_PREG_IP,
};

int xb_dwarf_to_preg(int dwreg)
{
	return dwreg >= 0 && dwreg < XB_DWARF_NREGS ? xb_dw2perf[dwreg] : XB_PREG_NONE;
}

static const char *const names[XB_PREG_COUNT] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "rip", "flags", "cs", "ss",
	"ds",  "es",  "fs",  "gs",  "r8",  "r9",  "r10", "r11", "r12", "r13",   "r14", "r15",
};

static const char *const enum_names[XB_PREG_COUNT] = {
	"XB_PREG_AX", "XB_PREG_BX", "XB_PREG_CX",    "XB_PREG_DX",  "XB_PREG_SI",  "XB_PREG_DI",
	"XB_PREG_BP", "XB_PREG_SP", "XB_PREG_IP",    "XB_PREG_FLAGS", "XB_PREG_CS", "XB_PREG_SS",
	"XB_PREG_DS", "XB_PREG_ES", "XB_PREG_FS",    "XB_PREG_GS",  "XB_PREG_R8",  "XB_PREG_R9",
	"XB_PREG_R10", "XB_PREG_R11", "XB_PREG_R12", "XB_PREG_R13", "XB_PREG_R14", "XB_PREG_R15",
};

const char *xb_preg_name(int r)
{
	return r >= 0 && r < XB_PREG_COUNT ? names[r] : "?";
}

const char *xb_preg_enum_name(int r)
{
	return r >= 0 && r < XB_PREG_COUNT ? enum_names[r] : "XB_PREG_NONE";
}

int xb_preg_parse(const char *s)
{
	for (int r = 0; r < XB_PREG_COUNT; r++) {
		if (r == XB_PREG_FLAGS || (r >= XB_PREG_CS && r <= XB_PREG_GS))
			continue; /* not general registers */
		if (strcmp(s, names[r]) == 0)
			return r;
	}
	return XB_PREG_NONE;
}

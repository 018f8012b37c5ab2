/* fields.c - where each field of struct xb_release comes from in DWARF.
 * Shared by the table generator (scripts/gen-release-table) and by the
 * run-time cross-check when the running beam has DWARF. */
#include "xb/release.h"

#include <stdio.h>
#include <string.h>

#define F(id, type, member, src, jit) [id] = { type, member, src, jit, #id }

const struct xb_field_spec xb_field_specs[XB_F_COUNT] = {
	F(XB_F_PROC_SIZE, "process", "", "erl_process.h", 0),
	F(XB_F_PROC_ID, "process", "common.id", "erl_process.h", 0),
	F(XB_F_PROC_REG, "process", "common.u.alive.reg", "erl_process.h", 0),
	F(XB_F_PROC_HTOP, "process", "htop", "erl_process.h", 0),
	F(XB_F_PROC_STOP, "process", "stop", "erl_process.h", 0),
	F(XB_F_PROC_HEAP, "process", "heap", "erl_process.h", 0),
	F(XB_F_PROC_HEND, "process", "hend", "erl_process.h", 0),
	F(XB_F_PROC_FCALLS, "process", "fcalls", "erl_process.h", 0),
	F(XB_F_PROC_I, "process", "i", "erl_process.h", 0),
	F(XB_F_PROC_FLAGS, "process", "flags", "erl_process.h", 0),
	F(XB_F_PROC_CURRENT, "process", "current", "erl_process.h", 0),
	F(XB_F_REGPROC_NAME, "reg_proc", "name", "register.h", 0),
	F(XB_F_SCHED_STRIDE, "ErtsAlignedSchedulerData", "", "erl_process.h", 0),
	F(XB_F_SCHED_CURRENT_PROCESS, "ErtsSchedulerData_", "current_process", "erl_process.h", 0),
	F(XB_F_SCHED_NO, "ErtsSchedulerData_", "no", "erl_process.h", 0),
	F(XB_F_SCHED_TYPE, "ErtsSchedulerData_", "type", "erl_process.h", 0),
	F(XB_F_INDEXTAB_ENTRIES, "index_table", "entries", "index.h", 0),
	F(XB_F_INDEXTAB_SEG_TABLE, "index_table", "seg_table", "index.h", 0),
	F(XB_F_ATOM_LEN, "atom", "len", "atom.h", 0),
	F(XB_F_ATOM_NAME, "atom", "name", "atom.h", 0),
	F(XB_F_ATOM_BIN, "atom", "u.bin", "atom.h", 0),
	F(XB_F_HEAPBITS_DATA, "erl_heap_bits", "data", "erl_bits.h", 0),
	F(XB_F_SUBBITS_BASE_FLAGS, "erl_sub_bits", "base_flags", "erl_bits.h", 0),
	F(XB_F_SUBBITS_START, "erl_sub_bits", "start", "erl_bits.h", 0),
	F(XB_F_RANGES_SIZE, "ranges", "", "beam_ranges.c", 0),
	F(XB_F_RANGES_MODULES, "ranges", "modules", "beam_ranges.c", 0),
	F(XB_F_RANGES_N, "ranges", "n", "beam_ranges.c", 0),
	F(XB_F_RANGE_SIZE, "Range", "", "beam_ranges.c", 0),
	F(XB_F_RANGE_START, "Range", "start", "beam_ranges.c", 0),
	F(XB_F_RANGE_END, "Range", "end", "beam_ranges.c", 0),
	F(XB_F_CODEHDR_NUM_FUNCTIONS, "beam_code_header", "num_functions", "beam_code.h", 0),
	F(XB_F_CODEHDR_FUNCTIONS, "beam_code_header", "functions", "beam_code.h", 0),
	F(XB_F_CODEINFO_MFA, "ErtsCodeInfo_", "mfa", "code_ix.h", 0),
	F(XB_F_MFA_MODULE, "ErtsCodeMFA_", "module", "code_ix.h", 0),
	F(XB_F_MFA_FUNCTION, "ErtsCodeMFA_", "function", "code_ix.h", 0),
	F(XB_F_MFA_ARITY, "ErtsCodeMFA_", "arity", "code_ix.h", 0),
	F(XB_F_PTAB_TAB, "ErtsPTab", "r.o.tab", "erl_ptab.h", 0),
	F(XB_F_PTAB_MAX, "ErtsPTab", "r.o.max", "erl_ptab.h", 0),
	F(XB_F_PTAB_INVALID_ELEMENT, "ErtsPTab", "r.o.invalid_element", "erl_ptab.h", 0),
	F(XB_F_PTAB_ELEMENT_SIZE, "ErtsPTab", "r.o.element_size", "erl_ptab.h", 0),
	F(XB_F_PTAB_PIX_MASK, "ErtsPTab", "r.o.pix_mask", "erl_ptab.h", 0),
	F(XB_F_PTAB_PIX_CL_MASK, "ErtsPTab", "r.o.pix_cl_mask", "erl_ptab.h", 0),
	F(XB_F_PTAB_PIX_CL_SHIFT, "ErtsPTab", "r.o.pix_cl_shift", "erl_ptab.h", 0),
	F(XB_F_PTAB_PIX_CLI_MASK, "ErtsPTab", "r.o.pix_cli_mask", "erl_ptab.h", 0),
	F(XB_F_PTAB_PIX_CLI_SHIFT, "ErtsPTab", "r.o.pix_cli_shift", "erl_ptab.h", 0),
	F(XB_F_JITDESC_VERSION, "jit_descriptor", "version", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_JITDESC_FIRST_ENTRY, "jit_descriptor", "first_entry", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_JITENTRY_NEXT, "jit_code_entry", "next_entry", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_JITENTRY_SYMFILE_ADDR, "jit_code_entry", "symfile_addr", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_JITENTRY_SYMFILE_SIZE, "jit_code_entry", "symfile_size", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_DBGINFO_SIZE, "debug_info", "", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_DBGINFO_PAYLOAD, "debug_info", "payload", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_EMUINFO_FRAME_LAYOUT, "emulator_info", "frame_layout", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_EMUINFO_NORMAL_EXIT, "emulator_info", "normal_exit", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_MODINFO_BASE_ADDRESS, "module_info|erlang_module_info", "base_address", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_MODINFO_RANGE_COUNT, "module_info|erlang_module_info", "range_count", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_MODINFO_NAME_LENGTH, "module_info|erlang_module_info", "name_length", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_MODINFO_NAME, "module_info|erlang_module_info", "name", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_RANGEINFO_SIZE, "range_info", "", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_RANGEINFO_START, "range_info", "start_offset", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_RANGEINFO_END, "range_info", "end_offset", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_RANGEINFO_LINE_COUNT, "range_info", "line_count", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_RANGEINFO_NAME_LENGTH, "range_info", "name_length", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_RANGEINFO_NAME, "range_info", "name", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_LINEINFO_SIZE, "line_info", "", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_LINEINFO_FILE_LENGTH, "line_info", "file_length", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_LINEINFO_FILE, "line_info", "file", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_LINEINFO_START, "line_info", "start_offset", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_LINEINFO_LINE, "line_info", "line_number", "jit/beam_jit_metadata.cpp", 1),
	F(XB_F_CODEHDR_LINE_TABLE, "beam_code_header", "line_table", "beam_code.h", 0),
	F(XB_F_LINETAB_FNAME_PTR, "BeamCodeLineTab_", "fname_ptr", "beam_code.h", 0),
	F(XB_F_LINETAB_LOC_SIZE, "BeamCodeLineTab_", "loc_size", "beam_code.h", 0),
	F(XB_F_LINETAB_LOC_TAB, "BeamCodeLineTab_", "loc_tab", "beam_code.h", 0),
	F(XB_F_LINETAB_FUNC_TAB, "BeamCodeLineTab_", "func_tab", "beam_code.h", 0),
	F(XB_F_PROC_REDS, "process", "reds", "erl_process.h", 0),
	F(XB_F_PROC_INITIAL, "process", "u.initial", "erl_process.h", 0),
};

const char *xb_field_name(enum xb_field f)
{
	static __thread char buf[96];
	const struct xb_field_spec *s = &xb_field_specs[f];
	snprintf(buf, sizeof(buf), "%s%s%s", s->type, *s->member ? "." : " size",
		 s->member);
	return buf;
}

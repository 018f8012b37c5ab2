/* fuzz_symfile.c - libFuzzer target: the JIT's GDB symfiles (the VM's
 * memory, jit/beam_jit_metadata.cpp) into a code map and into line
 * tables, with the layouts of every release we carry. */
#include "xb/codemap.h"
#include "xb/release.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t nrel = 0;
	while (xb_releases[nrel])
		nrel++;
	const struct xb_release *rel = xb_releases[(data[0] & 0x7f) % nrel];
	const int64_t *off = rel->jit.off;
	unsigned flags = data[0] & 0x80 ? XB_CM_FOLD_PROLOGUE : 0;
	data++, size--;
	struct xb_codemap cm;
	memset(&cm, 0, sizeof(cm));
	if (xb_codemap_parse_symfile(&cm, off, data, size, 1, flags) == 0)
		xb_codemap_finish(&cm);
	for (size_t i = 0; i < cm.n; i++)
		if (cm.v[i].end <= cm.v[i].start || !cm.v[i].name)
			__builtin_trap(); /* an empty or unnamed range was kept */
	struct xb_linemod lm = { .start = 0, .end = UINT64_MAX };
	/* (a malformed record leaves LM half filled: the caller frees it) */
	int lr = xb_codemap_parse_symfile_lines(off, data, size, &lm);
	for (size_t i = 1; lr == 0 && i < lm.n; i++)
		if (lm.v[i - 1].addr > lm.v[i].addr || lm.v[i].file >= (lm.nfiles ? lm.nfiles : 1))
			__builtin_trap(); /* unsorted, or a file index out of range */
	xb_linemod_free(&lm);
	xb_codemap_free(&cm);
	return 0;
}

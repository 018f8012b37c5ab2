/* fuzz_layout.c - libFuzzer target: layout files (--layout FILE).  Any
 * input is refused with a reason or parsed into offsets inside the bounds
 * the parser promises; never a crash or an unbounded allocation. */
#define _GNU_SOURCE
#include "xb/layout.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xb_layout_file lf;
	char why[200];
	if (xb_layout_parse((const char *)data, size, &lf, why, sizeof(why)) < 0) {
		if (!why[0])
			__builtin_trap(); /* a refusal says why */
		return 0;
	}
	for (int i = 0; i < XB_F_COUNT; i++)
		if (lf.off[i] != XB_NOFIELD && (lf.off[i] < 0 || lf.off[i] > (1 << 20)))
			__builtin_trap();
	if (lf.pid_num_bits < 1 || lf.pid_num_bits + lf.pid_ser_bits > 60 || lf.num_code_ix < 1)
		__builtin_trap();
	return 0;
}

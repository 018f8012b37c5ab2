/* fuzz_terms.c - libFuzzer target: what names are made of, from the
 * VM's memory: atom text quoting, pid terms, Elixir spellings, C++
 * demangling, --blame matching. */
#include "xb/demangle.h"
#include "xb/names.h"
#include "xb/profile.h"
#include "xb/term.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[4 * 1024 + 8], buf[2048];
	if (size >= 8 + 24) {
		uint64_t t;
		struct xb_pix pix;
		memcpy(&t, data, 8);
		memcpy(&pix.mask, data + 8, 8);
		memcpy(&pix.cl_mask, data + 16, 8);
		memcpy(&pix.cli_mask, data + 24, 8);
		pix.cl_shift = data[8] & 127;
		pix.cli_shift = data[9] & 127;
		pix.valid = data[10] & 1;
		xb_format_pid(t, data[11] % 40, data[12] % 40, &pix, buf, 64);
	}
	size_t n = size > 1020 ? 1020 : size;
	size_t q = xb_atom_quote((const char *)data, n, out, sizeof(out));
	if (q >= sizeof(out) || strlen(out) != q)
		__builtin_trap();
	char *z = malloc(size + 1);
	if (!z)
		return 0;
	memcpy(z, data, size);
	z[size] = 0;
	xb_elixir_name(z, buf, sizeof(buf));
	xb_elixir_atom(z, buf, sizeof(buf));
	xb_demangle(z, buf, sizeof(buf));
	const char *mid = memchr(z, '|', size);
	if (mid)
		xb_blame_match(z, mid + 1);
	free(z);
	return 0;
}

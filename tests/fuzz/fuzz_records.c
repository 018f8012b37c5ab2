/* fuzz_records.c - libFuzzer target: perf sample records (the kernel's
 * ring, xb_sampler_parse) and BPF capture records (xb_bpf_parse): both
 * carry the target's stack bytes and lengths. */
#include "xb/bpf_capture.h"
#include "xb/sampler.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct xb_sample s;
	bool which = data[0] & 1, callchain = data[0] & 2;
	data++, size--;
	if (which) {
		if (xb_sampler_parse(data, size, callchain, &s) == 0) {
			if (s.stack && (s.stack < data || s.stack + s.stack_size > data + size))
				__builtin_trap(); /* the stack copy points outside the record */
			if (s.nkips > XB_MAX_KFRAMES || s.nregions > XB_MAX_REGIONS)
				__builtin_trap();
		}
	} else if (xb_bpf_parse(data, size, &s) == 0) {
		for (unsigned i = 0; i < s.nregions; i++) {
			const struct xb_region *g = &s.regions[i];
			if (s.nregions > XB_MAX_REGIONS ||
			    (g->len && (g->data < data || g->data + g->len > data + size)))
				__builtin_trap(); /* a region outside the record */
		}
	}
	return 0;
}

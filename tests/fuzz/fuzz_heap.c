/* fuzz_heap.c - libFuzzer target: erlang-heapsample's decoders of the
 * VM's memory (src/beam/proctab.c: the process table's slots, a process
 * struct, its links, monitors, message queue and dictionary; and
 * src/beam/heapwalk.c: the objects of its heaps), over memory made of the
 * input.
 *
 * Input: byte 0 picks the release table (xb_releases) and flavour, byte 1
 * the number of slots (1-4), byte 2 the walk's bound and chunk size,
 * bytes 3-7 unused; the rest is the memory of one mapping at BASE: the
 * slot array at BASE, the rest wherever its pointers lead (outside the
 * mapping every read fails, as it does in a VM).  Every process of the
 * table is read (xb_ptab_foreach, names and memory) and slot 0 is read
 * and its heap walked, whole or sampled (xb_heapwalk).  The seeds
 * (seeds.c) hold well-formed processes with a heap of known terms.
 *
 * The readers poll a process caught mid-GC (usleep between reads): no
 * sleeping here, the memory never changes. */
#define _GNU_SOURCE
#include "xb/heapwalk.h"
#include "xb/proctab.h"
#include "xb/release.h"
#include "xb/remote.h"
#include "xb/vm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE 0x7f0000100000ull

int usleep(useconds_t us)
{
	(void)us;
	return 0;
}

static int each(const struct xb_proc *p, void *arg)
{
	(*(uint64_t *)arg) += p->memory + p->heap_sz;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8 + 64 || size > (1u << 20))
		return 0;
	size_t nrel = 0;
	while (xb_releases[nrel])
		nrel++;
	const struct xb_release *rel = xb_releases[(data[0] & 0x7f) % nrel];
	enum xb_flavor fl = data[0] & 0x80 ? XB_FLAVOR_EMU : XB_FLAVOR_JIT;
	uint32_t nslots = 1 + data[1] % 4;

	struct xb_vm *vm = calloc(1, sizeof(*vm));
	if (!vm)
		return 0;
	vm->pid = 1;
	vm->rel = rel;
	vm->flavor = fl;
	memcpy(vm->off, xb_release_flavor(rel, fl)->off, sizeof(vm->off));
	vm->num_code_ix = rel->num_code_ix;
	vm->pid_num_bits = rel->pid_num_bits;
	vm->pid_ser_bits = rel->pid_ser_bits;
	vm->pid_pixdata = rel->pid_pixdata;
	snprintf(vm->erts, sizeof(vm->erts), "%s", rel->erts);
	snprintf(vm->otp, sizeof(vm->otp), "%s", rel->otp);

	/* What xb_ptab_open checks first: a flavour whose table lacks a field
	 * a snapshot needs (no emu table for a JIT-only release) is refused
	 * before any struct is read. */
	if (xb_ptab_fields_ok(vm) < 0) {
		free(vm);
		return 0;
	}

	size_t len = size - 8;
	struct xb_region region = { .addr = BASE, .len = len, .data = data + 8 };
	char maps[128];
	snprintf(maps, sizeof(maps), "%llx-%llx rw-p 00000000 00:00 0\n", (unsigned long long)BASE,
		 (unsigned long long)(BASE + ((len + 4095) & ~(size_t)4095)));
	if (xb_remote_open_snapshot(&vm->mem, maps, &region, 1) < 0) {
		free(vm);
		return 0;
	}

	/* the table's live slots, as xb_ptab_refresh keeps them */
	uint64_t slots[4] = { 0 }, live_ptr[4];
	uint32_t live_slot[4], nlive = 0;
	memcpy(slots, data + 8, 8 * nslots);
	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i]) {
			live_slot[nlive] = i;
			live_ptr[nlive++] = slots[i];
		}
	struct xb_ptab t = { .vm = vm, .addr = BASE, .tab = BASE, .invalid = 0, .max = nslots, .count = nslots,
			     .live_slot = live_slot, .live_ptr = live_ptr, .nlive = nlive, .caplive = 4 };
	uint64_t sum = 0;
	struct xb_ptab_stats st;
	xb_ptab_foreach(&t, XB_PROC_NAMES | XB_PROC_MEMORY, each, &sum, &st);

	struct xb_hw_opts o = { .max_words = 64 + (uint64_t)(data[2] & 0x0f) * 256,
				.chunk_words = 16 + (uint64_t)(data[2] >> 4) * 16, .seed = 1 };
	struct xb_hw_result r;
	if (xb_heapwalk(&t, 0, &o, &r) == 0) {
		for (size_t i = 0; i < r.nkinds; i++)
			if (strnlen(r.kinds[i].name, sizeof(r.kinds[i].name)) == sizeof(r.kinds[i].name))
				__builtin_trap(); /* a kind's name not terminated */
		xb_heapwalk_free(&r);
	}
	xb_vm_detach(vm);
	free(vm);
	return 0;
}

/* alloc.h - the VM's memory allocators (erts_alloc: erl_alloc.c,
 * erl_alloc_util.c), read from outside.
 *
 * Per allocator type (binary_alloc, eheap_alloc, ...), summed over its
 * instances (erts_allctr_thr_spec[A].allctr[0..size-1] for thread-specific
 * ones, erts_allctrs_info[A].extra otherwise), the figures
 * erlang:system_info({allocator, A}) reports:
 *   mbcs carriers      Allctr_t.mbcs.carriers[].no/.size (mseg + sys_alloc)
 *   mbcs blocks        Allctr_t.mbcs.blocks[T].curr.no/.size, every type T
 *                      of block living in these carriers
 *   mbcs_pool          Allctr_t.cpool.stat.no_carriers/carriers_size and
 *                      .no_blocks[T]/.blocks_size[T] (carriers in the
 *                      carrier pool); counted into the mbcs figures below,
 *                      as recon_alloc counts "current"
 *   sbcs               Allctr_t.sbcs likewise
 * Walking the carrier lists (Allctr_t.mbc_list, .sbc_list, the pool's
 * sentinel ring) gives each carrier's address and size (Carrier_t.chdr),
 * the bytes of blocks in it (Carrier_t.cpool.total_blocks_size) and, for
 * the address-order first-fit strategies (aoff*, the default in OTP 25+),
 * its largest free block (AOFF_Carrier_t.rbt_node.hdr.bhdr, erl_ao_firstfit_alloc.c).
 */
#ifndef XB_ALLOC_H
#define XB_ALLOC_H

#include "xb/vm.h"

#include <stdbool.h>
#include <stdint.h>

#define XB_ALLOC_MAX_TYPES 32

struct xb_alloc_type {
	char name[32];        /* "binary_alloc" */
	int alloc_no;         /* ERTS_ALC_A_* */
	int instances;
	int strategy;         /* ErtsAlcStrat_t of instance 0 */
	bool thr_spec;
	/* system_info({allocator, A}) figures summed over instances */
	uint64_t mbcs_carriers, mbcs_carriers_bytes, mbcs_blocks, mbcs_blocks_bytes;
	uint64_t pool_carriers, pool_carriers_bytes, pool_blocks, pool_blocks_bytes;
	uint64_t sbcs_carriers, sbcs_carriers_bytes, sbcs_blocks, sbcs_blocks_bytes;
	/* from the carrier walk (XB_ALLOC_WALK) */
	bool walked;          /* every carrier of this type was visited */
	uint64_t walked_mbcs, walked_sbcs;
	uint64_t free_bytes;  /* multiblock carrier space not in blocks */
	uint64_t largest_free;/* largest free block (aoff strategies only) */
	bool largest_known;
	uint64_t resident;    /* resident bytes of its carriers (pagemap) */
	uint64_t resident_free; /* resident bytes not holding blocks (estimate) */
};

/* The figures mbcs include the pool. */
static inline uint64_t xb_alloc_carriers_bytes(const struct xb_alloc_type *a)
{
	return a->mbcs_carriers_bytes + a->pool_carriers_bytes + a->sbcs_carriers_bytes;
}
static inline uint64_t xb_alloc_blocks_bytes(const struct xb_alloc_type *a)
{
	return a->mbcs_blocks_bytes + a->pool_blocks_bytes + a->sbcs_blocks_bytes;
}

struct xb_alloc_info {
	struct xb_alloc_type type[XB_ALLOC_MAX_TYPES];
	size_t ntypes;
	int nblocktypes;        /* ERTS_ALC_A_COUNT */
	/* Bytes of blocks of each allocator type (index alloc_no), wherever
	 * they live, over the thread-specific allocators: erl_alloc.c
	 * alcu_size(), which erlang:memory/0 uses. */
	uint64_t blocks_of[XB_ALLOC_MAX_TYPES];
	uint64_t nblocks_of[XB_ALLOC_MAX_TYPES]; /* how many blocks */
	char type_name[XB_ALLOC_MAX_TYPES][32]; /* by alloc_no */
	/* fix_alloc lists (ErtsAlcFixList_t): allocated bytes by type size */
	bool fix_known;
	int nfix;
	uint64_t fix_type_size[64], fix_allocated[64], fix_used[64];
	/* carrier walk */
	bool walked, resident_known;
	uint64_t carriers_walked;
	char note[256];         /* what could not be read, for the user */
};

enum {
	XB_ALLOC_WALK = 1,      /* walk carrier lists: free blocks, addresses */
	XB_ALLOC_RESIDENT = 2,  /* and which of their pages are resident */
};

/* -1 (xb_err) when the allocator tables cannot be found or read; partial
 * results say so in ai->note. */
int xb_alloc_read(struct xb_vm *vm, struct xb_alloc_info *ai, unsigned flags);

/* The offsets OFF (a release table, or one merged with the target's
 * DWARF) keep every field xb_alloc_read reads from its copy of an
 * Allctr_t inside that copy (sums and per-type arrays included). */
bool xb_alloc_layout_ok(const int64_t *off);

/* erlang:memory(processes) as erl_alloc.c erts_memory() computes it,
 * in parts: eheap_alloc blocks (alcu_size), the process table
 * (erts_ptab_mem_size, given), and the fix_alloc lists of the types PROC,
 * MONITOR, LINK, MSG_REF, LL_PTIMER, HL_PTIMER, BIF_TIMER ("allocated"
 * bytes: items in use and items kept free on the lists), recognised by
 * their type sizes. */
struct xb_alloc_procs {
	uint64_t total;              /* the VM's figure */
	uint64_t eheap, eheap_blocks;/* eheap_alloc blocks: bytes, how many */
	uint64_t procs, procs_used;  /* fix PROC: allocated, in use */
	uint64_t fix_other, fix_other_used; /* the other six types */
	uint64_t ptab;
	bool fix_known;              /* false: fix lists not matched (0 then) */
};
void xb_alloc_processes(struct xb_vm *vm, const struct xb_alloc_info *ai, uint64_t ptab_bytes,
			struct xb_alloc_procs *out);

/* Anonymous read-write memory of the VM from /proc/PID/smaps: Rss summed
 * over private, writable mappings with no file. */
int xb_anon_rw_rss(pid_t pid, uint64_t *rss, uint64_t *size);

#endif

/* heapwalk.h - what one process's heap is made of (erlang-heapsample
 * --contents), read from outside.
 *
 * The areas that hold the process's terms are walked object by object,
 * the way the garbage collector sweeps them (erl_gc.c sweep()): the young
 * heap [heap, htop), the old heap [old_heap, old_htop) and the heap
 * fragments (mbuf list, used_size words each).  An object is a cons cell
 * (two words, no header) or a boxed object whose header word says its
 * kind (erl_term.h subtag, through the release table) and size.  Words
 * are counted by kind: tuples whose first element is an atom by that atom
 * (records), lists, maps (flatmaps with their keys tuple, HAMT nodes),
 * binaries by kind, bignums, floats, funs, references and external
 * identifiers.  Immediates live inside the object that holds them.
 *
 * Bounded: up to max_words words are read.  A larger heap is sampled
 * (and the sampled walk reads at most twice max_words in all, the search
 * for object boundaries included):
 * chunks of chunk_words words start at random places (one per stratum of
 * the heap), each synchronised on an object boundary first (a header
 * whose object, and the objects after it, parse as valid terms); shares
 * are then ratio estimates with a 95 % confidence interval from the
 * spread between chunks.  A heap read whole gives exact shares (interval
 * 0).  The walk is validated like every snapshot: if the process garbage
 * collected while it was read (its heap moved), it is read again once,
 * then given up. */
#ifndef XB_HEAPWALK_H
#define XB_HEAPWALK_H

#include "xb/proctab.h"

#include <stdbool.h>
#include <stdint.h>

#define XB_HW_MAX_KINDS 256

struct xb_hw_kind {
	char name[160];
	uint64_t words, objects;
	double share, ci95;
	double s2, sx; /* (internal) sums over chunks for the interval */
};

struct xb_hw_opts {
	uint64_t max_words;   /* read at most this many words (0: 16 Mi) */
	uint64_t chunk_words; /* sample chunk size (0: 64 Ki) */
	uint64_t seed;        /* 0: from the clock */
};

struct xb_hw_result {
	struct xb_proc proc;         /* the snapshot walked */
	uint64_t words_total;        /* young used + old used + fragments */
	uint64_t words_read;         /* words classified */
	uint64_t words_unparsed;     /* words that did not parse (corrupt or moving) */
	uint64_t objects;
	bool whole;                  /* everything read: shares are exact */
	unsigned chunks, chunks_skipped;
	uint64_t offheap_bin_bytes;  /* ProcBin sizes (OTP 25-26) */
	struct xb_hw_kind *kinds;    /* sorted by words, largest first */
	size_t nkinds;
	bool budget_spent;           /* a sampled walk stopped at its read budget (2 x max_words) */
	char method[400];
	unsigned reads;              /* 2: the heap moved under the first read (a GC), read again */
};

/* -1 (xb_err) when the process cannot be read or kept changing. */
int xb_heapwalk(struct xb_ptab *t, uint32_t slot, const struct xb_hw_opts *o, struct xb_hw_result *r);
void xb_heapwalk_free(struct xb_hw_result *r);

#endif

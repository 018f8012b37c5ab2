/* hsout.h - erlang-heapsample's outputs (src/output/heapsample.c): the
 * rows of each mode, written as a table (80 columns), CSV or JSON.
 * Text in rows comes from the target's memory (atom text): every writer
 * escapes it for its format. */
#ifndef XB_HSOUT_H
#define XB_HSOUT_H

#include "xb/alloc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum xb_hs_format { XB_HS_TABLE, XB_HS_CSV, XB_HS_JSON };

/* One process (default mode). */
struct xb_hs_proc {
	const char *pid, *name, *registered_name, *initial_call, *current_function, *status;
	uint64_t memory_bytes, heap_words, old_heap_words, old_heap_used_words, stack_words,
		mbuf_words, message_queue_len, message_queue_bytes, bin_vheap_bytes, reductions,
		links, monitors;
	bool partial;
};

struct xb_hs_totals {
	uint64_t processes, memory_bytes;
	uint64_t system_bytes;  /* of memory_bytes: std_alloc blocks (system) */
	uint64_t skipped_changed, skipped_gone, skipped_unreadable, partial;
	bool vm_known;          /* the VM's own figure could be computed */
	bool vm_fix_known;
	uint64_t vm_processes, vm_eheap, vm_procs, vm_ptab, vm_fix_other;
	/* What erlang:memory(processes) counts that no process owns (and
	 * process_info(P, memory) therefore never counts): */
	uint64_t ptab_slots, ptab_slot_bytes; /* the table: slots x bytes */
	bool regs_known;        /* scheduler registers (BEAM_REGISTER) */
	uint64_t regs_count, regs_block;
	const char *regs_why;   /* why not known */
	uint64_t eheap_blocks, block_header; /* eheap_alloc block headers */
	uint64_t fix_free;      /* fix_alloc items allocated, not in use */
	const char *vm_why;     /* why not known */
};

/* Bytes of t that no process owns (the table, the scheduler registers
 * when known, block headers, free fix_alloc items). */
uint64_t xb_hs_unowned(const struct xb_hs_totals *t);

/* One process's growth between two snapshots (--interval). */
struct xb_hs_growth {
	const char *pid, *name, *current_function;
	unsigned interval;
	double seconds;
	int64_t memory_bytes, long_lived_bytes, old_heap_used_bytes, old_heap_bytes, heap_bytes, mbuf_bytes,
		bin_vheap_bytes, message_queue_len, message_queue_bytes, reductions;
	bool new_process;
	bool full_sweep;        /* a full-sweep collection ran in the interval:
				 * the old heap was emptied into the young */
};

/* What one heap holds (--contents). */
struct xb_hs_kind {
	const char *kind;       /* "tuple {session,...}", "list", "map", ... */
	uint64_t words, objects;
	double share, ci95;     /* fraction of the words read, +- */
};

struct xb_hs_contents {
	const char *pid, *name;
	uint64_t words_total, words_read, objects;
	bool whole;             /* every word was read: shares are exact */
	const char *method;
	const struct xb_hs_kind *kinds;
	size_t nkinds;
	uint64_t offheap_bin_bytes;
};

int xb_hs_write_procs(FILE *f, enum xb_hs_format fmt, const struct xb_hs_proc *rows, size_t n,
		      const struct xb_hs_totals *tot);
/* Totals as sentences (table: under the rows; other formats: stderr). */
void xb_hs_write_totals(FILE *f, const struct xb_hs_totals *tot);

int xb_hs_write_growth_header(FILE *f, enum xb_hs_format fmt);
int xb_hs_write_growth(FILE *f, enum xb_hs_format fmt, const struct xb_hs_growth *rows, size_t n,
		       bool last);

struct xb_hs_rss {
	bool known;
	uint64_t anon_rw_rss, anon_rw_size;
	bool resident_known;
	uint64_t carriers_bytes, carriers_resident, blocks_bytes, resident_free;
};
int xb_hs_write_alloc(FILE *f, enum xb_hs_format fmt, const struct xb_alloc_info *ai,
		      const struct xb_hs_rss *rss);
void xb_hs_write_rss(FILE *f, const struct xb_alloc_info *ai, const struct xb_hs_rss *rss);

int xb_hs_write_contents(FILE *f, enum xb_hs_format fmt, const struct xb_hs_contents *c);

/* "12.3M" style, 1024-based, at most 6 characters. */
const char *xb_hs_human(uint64_t bytes, char *buf, size_t len);

#endif

/* proctab.h - the VM's process table (erl_ptab.h: erts_proc) and one
 * process's state, read from outside and validated.
 *
 *   struct xb_ptab t;
 *   xb_ptab_open(vm, &t);                       reads the slot array
 *   xb_ptab_foreach(&t, XB_PROC_MEMORY, fn, arg, &stats);
 *   xb_ptab_close(&t);
 *
 * Every snapshot handed out passed these checks: the slot still holds the
 * process, its pid is a pid whose table index is that slot, its heap
 * pointers are ordered (heap <= hend, old_heap <= old_htop <= old_hend),
 * and the fields that only a garbage collection or an exit changes (heap,
 * hend, heap_sz, old heap, heap fragments) read the same before and after
 * everything else about the process was read.  A process that fails is
 * read once more; if it fails again it is skipped and counted (stats
 * .changed), never reported.
 *
 * Where each figure comes from (erl_process.h struct process unless
 * said otherwise):
 *   heap_sz                 heap_sz (process_info heap_size)
 *   old heap                old_hend - old_heap; used: old_htop - old_heap
 *   stack                   hend - stop (process_info stack_size)
 *   long-lived              old_htop - old_heap + high_water - heap: data
 *                           that survived a garbage collection
 *   mbuf                    mbuf_sz: heap and message fragments
 *   vheap                   off_heap.overhead + bin_old_vheap (words of
 *                           off-heap binaries referenced, erl_gc.c)
 *   reductions              reds
 *   memory                  erts_process_memory() (erl_process_dump.c):
 *                           sizeof(Process) + links + monitors + (heap_sz +
 *                           mbuf_sz + old heap [+ abandoned heap]) words +
 *                           messages (sizeof(ErtsMessage) + their heap
 *                           fragments' used_size) + recv markers + spilled
 *                           argument registers + ErtsPSD + process
 *                           dictionary (ProcDict arraySize)
 *   system_bytes            the part of memory in std_alloc blocks, which
 *                           erlang:memory/0 counts as system: spilled
 *                           argument registers, ErtsPSD, the dictionary's
 *                           array (erl_alloc.types ARG_REG, PSD, PROC_DICT)
 */
#ifndef XB_PROCTAB_H
#define XB_PROCTAB_H

#include "xb/vm.h"

#include <stdbool.h>
#include <stdint.h>

enum xb_pstatus {
	XB_PS_WAITING, XB_PS_RUNNABLE, XB_PS_RUNNING, XB_PS_EXITING,
	XB_PS_GARBAGE_COLLECTING, XB_PS_SUSPENDED, XB_PS_FREE,
};
/* As process_info(P, status) names it. */
const char *xb_pstatus_name(enum xb_pstatus s);

struct xb_ptab {
	struct xb_vm *vm;
	uint64_t addr;      /* erts_proc */
	uint64_t tab;       /* r.o.tab: slot array */
	uint64_t invalid;   /* r.o.invalid_element: an empty slot */
	uint32_t max;       /* slots */
	uint32_t count;     /* processes as the VM counts them (vola.tile.count) */
	bool free_id_data;  /* r.o.free_id_data != NULL (erts_ptab_mem_size) */
	/* The non-empty slots as the slot array was last read (in slot
	 * order): the array itself is read in chunks and not kept, as a VM
	 * run with +P 134217727 has 1 GiB of it, mostly empty. */
	uint32_t *live_slot;
	uint64_t *live_ptr; /* the struct process each points to */
	uint32_t nlive, caplive;
	/* Nodes (tree and list nodes, messages, signals, heap fragments)
	 * the current snapshot (xb_ptab_foreach) or read of one process
	 * (xb_proc_read) may still read: a loop or a crafted chain in the
	 * target's memory costs a bounded amount whatever the number of
	 * processes pointing into it; past it, rows are marked partial. */
	uint64_t walk_left;
};

/* What to read beyond the process structure itself. */
enum {
	XB_PROC_NAMES = 1,  /* registered name, current function */
	XB_PROC_MEMORY = 2, /* links, monitors, message queue, dictionary: memory */
	XB_PROC_CHANGING = 4, /* xb_ptab_foreach: a process that changed under
			       * both reads is handed out too, its first read
			       * (which parsed: pid, slot and state hold),
			       * marked XB_PP_CHANGING (--wall: a running
			       * process's heap changes all the time) */
};

/* Parts cut short by the bounds below (the figures are then low). */
enum {
	XB_PP_MSGQ = 1,     /* more than XB_MAX_MSGQ_WALK messages */
	XB_PP_LINKS = 2,    /* more than XB_MAX_ML_WALK links or monitors */
	XB_PP_UNREADABLE = 4, /* a message or link could not be read */
	XB_PP_CHANGING = 8,   /* XB_PROC_CHANGING: not the same twice; the first read */
};
#define XB_MAX_MSGQ_WALK 2000000
#define XB_MAX_ML_WALK 1000000

/* A process state (ERTS_PSFLG_*, erl_process.h) of a process running
 * or collecting garbage: its heap pointers change while they are read. */
bool xb_proc_state_busy(uint32_t st);

struct xb_proc {
	uint32_t slot;
	uint64_t addr;           /* Process* */
	uint64_t pid;            /* pid term */
	uint32_t state;          /* ERTS_PSFLG_* */
	enum xb_pstatus status;
	uint64_t reg;            /* RegProc*, 0 = not registered */
	uint64_t reg_name;       /* atom term (XB_PROC_NAMES), 0 = none */
	uint64_t initial[3];     /* u.initial: module, function atoms, arity */
	uint64_t current;        /* const ErtsCodeMFA*, 0 = none */
	uint64_t current_mfa[3]; /* (XB_PROC_NAMES) module, function, arity; 0 = unread */
	uint64_t i;              /* instruction pointer (stale while running) */
	/* addresses */
	uint64_t heap, htop, stop, hend, abandoned_heap;
	uint64_t old_heap, old_htop, old_hend;
	uint64_t high_water;     /* young heap below it survived a collection */
	uint64_t mbuf;
	/* words */
	uint64_t heap_sz, mbuf_sz;
	uint64_t vheap_words;
	uint16_t gen_gcs;
	uint64_t reds;
	/* XB_PROC_MEMORY */
	uint64_t msgq_len, msgq_bytes;
	uint64_t links, monitors, ml_bytes;
	uint64_t dict_bytes;
	uint64_t memory;         /* bytes, as process_info(P, memory) */
	uint64_t system_bytes;   /* of which std_alloc blocks (argument
				  * registers, ErtsPSD, dictionary array):
				  * erlang:memory(system), not processes */
	unsigned partial;        /* XB_PP_* */
};

static inline uint64_t xb_proc_old_heap_words(const struct xb_proc *p)
{
	return p->old_heap ? (p->old_hend - p->old_heap) / 8 : 0;
}
static inline uint64_t xb_proc_old_used_words(const struct xb_proc *p)
{
	return p->old_heap ? (p->old_htop - p->old_heap) / 8 : 0;
}
/* Data that survived at least one garbage collection: the old heap's
 * used part and the young heap below high_water (erl_gc.c: what the next
 * minor collection promotes; after a full sweep, everything live). */
static inline uint64_t xb_proc_long_lived_words(const struct xb_proc *p)
{
	uint64_t young = p->high_water >= p->heap && p->high_water <= p->hend ? (p->high_water - p->heap) / 8 : 0;
	return xb_proc_old_used_words(p) + young;
}
static inline uint64_t xb_proc_stack_words(const struct xb_proc *p)
{
	return p->stop <= p->hend && p->stop >= p->heap ? (p->hend - p->stop) / 8 : 0;
}
static inline uint64_t xb_proc_heap_used_words(const struct xb_proc *p)
{
	return p->htop >= p->heap && p->htop <= p->hend ? (p->htop - p->heap) / 8 : 0;
}

struct xb_ptab_stats {
	uint64_t slots_live; /* non-empty slots seen */
	uint64_t read;       /* snapshots handed out */
	uint64_t changed;    /* changed under both reads: skipped */
	uint64_t gone;       /* exited (or slot reused) while being read */
	uint64_t unreadable; /* memory could not be read at all */
	uint64_t partial;    /* handed out with a part cut short (XB_PP_*) */
};

/* Read the table header and the slot array.  -1 with a message naming
 * what is missing (no erts_proc symbol and none discovered, no field). */
int xb_ptab_open(struct xb_vm *vm, struct xb_ptab *t);
/* Has VM's release table every field a snapshot needs?  -1 with xb_err
 * naming the first missing one (xb_ptab_open checks it first). */
int xb_ptab_fields_ok(const struct xb_vm *vm);
/* Re-read the slot array (for repeated snapshots). */
int xb_ptab_refresh(struct xb_ptab *t);
void xb_ptab_close(struct xb_ptab *t);

/* The next non-empty slot at or after *slot in the slot array as last
 * read (xb_ptab_refresh); false at the end.  With xb_proc_read, the way
 * to visit processes one by one:
 *   for (uint32_t s = 0; xb_ptab_next(&t, &s); s++)
 *           if (xb_proc_read(&t, s, XB_PROC_NAMES, &p) == 0) ... */
bool xb_ptab_next(const struct xb_ptab *t, uint32_t *slot);

/* Keep only the non-empty slots (as the slot array was last read) KEEP
 * says yes to, in order: a subset for xb_ptab_foreach to visit (--wall's
 * random sample of a big table).  The next xb_ptab_refresh reads them all
 * again. */
void xb_ptab_filter(struct xb_ptab *t, bool (*keep)(void *arg), void *arg);

/* Every process in slot order, in batches (one process_vm_readv per
 * batch of structures); fn returns 0 to go on, non-zero to stop (returned).
 * Memory use is one batch, whatever the number of processes. */
int xb_ptab_foreach(struct xb_ptab *t, unsigned want,
		    int (*fn)(const struct xb_proc *p, void *arg), void *arg,
		    struct xb_ptab_stats *st);

/* One process (the slot's current occupant), validated as above.  -1:
 * empty slot, gone, or changing (xb_err says which). */
int xb_proc_read(struct xb_ptab *t, uint32_t slot, unsigned want, struct xb_proc *p);

/* The slot of <0.NUM.SER> (serial -1: any), or of the process registered
 * as NAME; -1 if there is none (xb_err says so). */
int xb_ptab_find_pid(struct xb_ptab *t, unsigned num, long ser, uint32_t *slot);
int xb_ptab_find_name(struct xb_ptab *t, const char *name, uint32_t *slot);

/* The slot of SPEC: a pid "<0.N.S>" or "0.N.S" (of this node), or a
 * registered name.  -1 with a one-line message when there is none. */
int xb_ptab_find(struct xb_ptab *t, const char *spec, uint32_t *slot);

/* Text of a pid term, "<0.N.S>". */
void xb_proc_pid_text(const struct xb_vm *vm, uint64_t pid, char *buf, size_t len);
/* "M:F/A" from three words (atoms and arity); "-" when unknown. */
void xb_mfa_text(struct xb_vm *vm, const uint64_t mfa[3], char *buf, size_t len);

/* erts_ptab_mem_size(&erts_proc): the slot array (and free id data). */
uint64_t xb_ptab_mem_size(const struct xb_ptab *t);

#endif

/* proctab.c - the process table (erl_ptab.h ErtsPTab erts_proc) and
 * validated snapshots of processes.  See include/xb/proctab.h. */
#define _GNU_SOURCE
#include "xb/proctab.h"
#include "xb/names.h"
#include "xb/procmaps.h"
#include "xb/common.h"
#include "xb/cli.h"
#include "xb/term.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* erl_process.h: ERTS_PSFLG_BIT(N) = 1 << (ERTS_PSFLGS_ZERO_BIT_OFFSET (6)
 * + N); the bit numbers below are the same in OTP 25, 27 and 29. */
#define PSFLG(n) (1u << (6 + (n)))
#define PSFLG_FREE PSFLG(4)
#define PSFLG_EXITING PSFLG(5)
#define PSFLG_ACTIVE PSFLG(7)
#define PSFLG_RUNNING PSFLG(9)
#define PSFLG_SUSPENDED PSFLG(10)
#define PSFLG_GC PSFLG(11)
#define PSFLG_ACTIVE_SYS PSFLG(14)
#define PSFLG_RUNNING_SYS PSFLG(15)
#define PSFLG_DIRTY_ACTIVE_SYS PSFLG(22)
#define PSFLG_DIRTY_RUNNING PSFLG(23)
#define PSFLG_DIRTY_RUNNING_SYS PSFLG(24)

bool xb_proc_state_busy(uint32_t st)
{
	return st & (PSFLG_GC | PSFLG_RUNNING | PSFLG_RUNNING_SYS | PSFLG_DIRTY_RUNNING | PSFLG_DIRTY_RUNNING_SYS);
}

/* erl_message.h: ERTS_MSG_COMBINED_HFRAG, the message and its heap
 * fragment in one allocation. */
#define MSG_COMBINED_HFRAG 1u
/* erl_message.h ERTS_SIG_IS_NON_MSG_TAG: a signal other than a message
 * has an external-pid header as its tag (erl_term.h _TAG_HEADER_MASK,
 * EXTERNAL_PID_SUBTAG 0xC << 2, the same in OTP 25-29). */
#define TAG_HEADER_MASK 0x3fu
#define TAG_HEADER_EXTERNAL_PID 0x30u
/* ERTS_PROC_SIG_INQ_BUFFERED_NR_OF_BUFFERS is at most 64 (erl_message.h:
 * one bit per slot in nonempty_slots). */
#define MAX_INQ_BUFFERS 64

/* erl_monitor_link.h ERTS_MON_TYPE_SUSPEND, ERTS_MON_TYPE_ALIAS (OTP
 * 25-29); OTP 29 keeps the type in the low ERTS_ML_TYPE_BITS (5) of
 * flags instead of a field of its own. */
#define MON_TYPE_NODE 6
#define MON_TYPE_NODES 7
#define MON_TYPE_SUSPEND 8
#define MON_TYPE_ALIAS 9
#define ML_TYPE_MASK 0x1fu

#define BATCH 256

const char *xb_pstatus_name(enum xb_pstatus s)
{
	static const char *const names[] = { "waiting", "runnable", "running", "exiting",
					     "garbage_collecting", "suspended", "free" };
	return (unsigned)s < XB_ARRAY_SIZE(names) ? names[s] : "?";
}

/* erl_process.c erts_process_state2status */
static enum xb_pstatus state2status(uint32_t st)
{
	if (st & PSFLG_FREE)
		return XB_PS_FREE;
	if (st & PSFLG_EXITING)
		return XB_PS_EXITING;
	if (st & PSFLG_GC)
		return XB_PS_GARBAGE_COLLECTING;
	if (st & PSFLG_SUSPENDED)
		return XB_PS_SUSPENDED;
	if (st & (PSFLG_RUNNING | PSFLG_RUNNING_SYS | PSFLG_DIRTY_RUNNING | PSFLG_DIRTY_RUNNING_SYS))
		return XB_PS_RUNNING;
	if (st & (PSFLG_ACTIVE | PSFLG_ACTIVE_SYS | PSFLG_DIRTY_ACTIVE_SYS))
		return XB_PS_RUNNABLE;
	return XB_PS_WAITING;
}

static int64_t off(const struct xb_ptab *t, enum xb_field f)
{
	return t->vm->off[f];
}

static uint64_t get64(const uint8_t *b, int64_t o)
{
	uint64_t v = 0;
	if (o >= 0)
		memcpy(&v, b + o, 8);
	return v;
}

static uint32_t get32(const uint8_t *b, int64_t o)
{
	uint32_t v = 0;
	if (o >= 0)
		memcpy(&v, b + o, 4);
	return v;
}

static uint16_t get16(const uint8_t *b, int64_t o)
{
	uint16_t v = 0;
	if (o >= 0)
		memcpy(&v, b + o, 2);
	return v;
}

/* Fields every snapshot needs.  The rest are optional: a figure that
 * needs a missing one is left out and the tool says so. */
static const enum xb_field required[] = {
	XB_F_PROC_SIZE, XB_F_PROC_ID, XB_F_PROC_HTOP, XB_F_PROC_STOP, XB_F_PROC_HEAP,
	XB_F_PROC_HEND, XB_F_PROC_HEAP_SZ, XB_F_PROC_OLD_HEAP, XB_F_PROC_OLD_HTOP,
	XB_F_PROC_OLD_HEND, XB_F_PROC_MBUF_SZ, XB_F_PROC_STATE, XB_F_PTAB_TAB,
	XB_F_PTAB_MAX, XB_F_PTAB_INVALID_ELEMENT,
};

int xb_ptab_fields_ok(const struct xb_vm *vm)
{
	for (size_t i = 0; i < XB_ARRAY_SIZE(required); i++)
		if (vm->off[required[i]] == XB_NOFIELD)
			return xb_fail("cannot read processes on this VM (OTP %s, erts %s): the release "
				       "table has no %s (%s)", vm->otp[0] ? vm->otp : "?", vm->erts,
				       xb_field_name(required[i]), xb_field_specs[required[i]].source);
	return 0;
}

int xb_ptab_open(struct xb_vm *vm, struct xb_ptab *t)
{
	memset(t, 0, sizeof(*t));
	t->vm = vm;
	if (xb_ptab_fields_ok(vm) < 0)
		return -1;
	if (!vm->sym.proc_tab)
		return xb_fail("cannot read processes: the process table (erts_proc, erl_process.c) is "
			       "neither a symbol of this beam.smp nor found in its data; install the VM's "
			       "debug symbols");
	t->addr = vm->sym.proc_tab;
	uint64_t fid = 0;
	if (xb_read_u64(&vm->mem, t->addr + (uint64_t)off(t, XB_F_PTAB_TAB), &t->tab) < 0 ||
	    xb_read_u32(&vm->mem, t->addr + (uint64_t)off(t, XB_F_PTAB_MAX), &t->max) < 0 ||
	    xb_read_u64(&vm->mem, t->addr + (uint64_t)off(t, XB_F_PTAB_INVALID_ELEMENT), &t->invalid) < 0)
		return xb_fail("cannot read the process table header (erts_proc at 0x%llx): %s",
			       (unsigned long long)t->addr, xb_err());
	if (t->max == 0 || t->max > (1u << 27) || !t->tab)
		return xb_fail("the process table (erts_proc at 0x%llx) is implausible: %u slots at 0x%llx",
			       (unsigned long long)t->addr, t->max, (unsigned long long)t->tab);
	if (off(t, XB_F_PTAB_FREE_ID_DATA) >= 0 &&
	    xb_read_u64(&vm->mem, t->addr + (uint64_t)off(t, XB_F_PTAB_FREE_ID_DATA), &fid) == 0)
		t->free_id_data = fid != 0;
	/* The slots are one array of the VM (erl_ptab.c: erts_ptab_init):
	 * all of it inside one readable mapping, or the header read is
	 * garbage (and we would allocate up to 1 GB for it). */
	const struct xb_map *m = xb_maps_find(&vm->mem.maps, t->tab);
	if (!m || !m->readable || t->tab + (uint64_t)t->max * 8 > m->end)
		return xb_fail("the process table (erts_proc at 0x%llx) is implausible: %u slots at 0x%llx are "
			       "not in one mapping of the VM", (unsigned long long)t->addr, t->max,
			       (unsigned long long)t->tab);
	if (xb_ptab_refresh(t) < 0) {
		xb_ptab_close(t);
		return -1;
	}
	return 0;
}

#define SLOT_CHUNK 8192 /* slots read at once (64 KiB) */

int xb_ptab_refresh(struct xb_ptab *t)
{
	uint64_t *chunk = malloc(SLOT_CHUNK * 8);
	if (!chunk)
		return xb_fail("out of memory");
	t->nlive = 0;
	for (uint32_t at = 0; at < t->max; at += SLOT_CHUNK) {
		uint32_t n = t->max - at < SLOT_CHUNK ? t->max - at : SLOT_CHUNK;
		if (xb_interrupted || xb_read(&t->vm->mem, t->tab + (uint64_t)at * 8, chunk, (size_t)n * 8) < 0) {
			free(chunk);
			t->nlive = 0; /* no part of a table */
			if (xb_interrupted)
				return xb_fail("interrupted");
			return xb_fail("cannot read the %u process slots at 0x%llx: %s", t->max,
				       (unsigned long long)t->tab, xb_err());
		}
		for (uint32_t i = 0; i < n; i++) {
			if (!chunk[i] || chunk[i] == t->invalid)
				continue;
			if (t->nlive == t->caplive) {
				size_t cap = t->caplive;
				if (xb_grow((void **)&t->live_slot, &cap, (size_t)t->nlive + 1, sizeof(*t->live_slot)) < 0)
					goto oom;
				cap = t->caplive;
				if (xb_grow((void **)&t->live_ptr, &cap, (size_t)t->nlive + 1, sizeof(*t->live_ptr)) < 0)
					goto oom;
				t->caplive = (uint32_t)cap;
			}
			t->live_slot[t->nlive] = at + i;
			t->live_ptr[t->nlive++] = chunk[i];
		}
	}
	free(chunk);
	if (off(t, XB_F_PTAB_COUNT) >= 0)
		xb_read_u32(&t->vm->mem, t->addr + (uint64_t)off(t, XB_F_PTAB_COUNT), &t->count);
	return 0;
oom:
	free(chunk);
	t->nlive = 0;
	return -1;
}

/* The index in live_slot of the first non-empty slot at or after SLOT, or
 * nlive. */
static uint32_t live_at(const struct xb_ptab *t, uint32_t slot)
{
	uint32_t lo = 0, hi = t->nlive;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->live_slot[mid] < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool xb_ptab_next(const struct xb_ptab *t, uint32_t *slot)
{
	uint32_t i = live_at(t, *slot);
	if (i >= t->nlive)
		return false;
	*slot = t->live_slot[i];
	return true;
}

void xb_ptab_close(struct xb_ptab *t)
{
	free(t->live_slot);
	free(t->live_ptr);
	t->live_slot = NULL;
	t->live_ptr = NULL;
	t->nlive = t->caplive = 0;
}

uint64_t xb_ptab_mem_size(const struct xb_ptab *t)
{
	/* erl_ptab.c erts_ptab_mem_size: max * sizeof(erts_atomic_t), plus
	 * max * sizeof(erts_atomic32_t) with free_id_data */
	return (uint64_t)t->max * 8 + (t->free_id_data ? (uint64_t)t->max * 4 : 0);
}

/* The table index a pid term carries (erl_ptab.h erts_ptab_id2pix). */
static bool pid_slot(const struct xb_vm *vm, uint64_t pid, uint32_t *slot)
{
	if (vm->pid_pixdata) {
		if (!vm->pix.valid)
			return false;
		*slot = (uint32_t)((pid >> 4) & vm->pix.mask);
	} else {
		*slot = (uint32_t)(pid >> 32);
	}
	return true;
}

/* Decode the structure in B into P; false when it is not a live process
 * in SLOT (why in *why). */
static bool parse(struct xb_ptab *t, uint32_t slot, uint64_t addr, const uint8_t *b,
		  struct xb_proc *p, const char **why)
{
	struct xb_vm *vm = t->vm;
	memset(p, 0, sizeof(*p));
	p->slot = slot;
	p->addr = addr;
	p->pid = get64(b, off(t, XB_F_PROC_ID));
	uint32_t s;
	if (!xb_is_pid(p->pid)) {
		*why = "gone";
		return false;
	}
	if (pid_slot(vm, p->pid, &s) && s != slot) {
		*why = "gone";
		return false;
	}
	p->state = get32(b, off(t, XB_F_PROC_STATE));
	p->status = state2status(p->state);
	if (p->status == XB_PS_FREE) {
		*why = "gone";
		return false;
	}
	if (p->state & PSFLG_GC) {
		/* in the middle of a garbage collection: its heap pointers
		 * are not a state of the process */
		*why = "changing";
		return false;
	}
	p->reg = get64(b, off(t, XB_F_PROC_REG));
	for (int k = 0; k < 3; k++)
		p->initial[k] = off(t, XB_F_PROC_INITIAL) >= 0 ? get64(b, off(t, XB_F_PROC_INITIAL) + 8 * k) : 0;
	p->current = get64(b, off(t, XB_F_PROC_CURRENT));
	p->i = get64(b, off(t, XB_F_PROC_I));
	p->heap = get64(b, off(t, XB_F_PROC_HEAP));
	p->htop = get64(b, off(t, XB_F_PROC_HTOP));
	p->stop = get64(b, off(t, XB_F_PROC_STOP));
	p->hend = get64(b, off(t, XB_F_PROC_HEND));
	p->abandoned_heap = get64(b, off(t, XB_F_PROC_ABANDONED_HEAP));
	p->old_heap = get64(b, off(t, XB_F_PROC_OLD_HEAP));
	p->old_htop = get64(b, off(t, XB_F_PROC_OLD_HTOP));
	p->old_hend = get64(b, off(t, XB_F_PROC_OLD_HEND));
	p->mbuf = get64(b, off(t, XB_F_PROC_MBUF));
	p->high_water = get64(b, off(t, XB_F_PROC_HIGH_WATER));
	p->heap_sz = get64(b, off(t, XB_F_PROC_HEAP_SZ));
	p->mbuf_sz = get64(b, off(t, XB_F_PROC_MBUF_SZ));
	p->vheap_words = get64(b, off(t, XB_F_PROC_OFF_HEAP_OVERHEAD)) + get64(b, off(t, XB_F_PROC_BIN_OLD_VHEAP));
	p->gen_gcs = get16(b, off(t, XB_F_PROC_GEN_GCS));
	p->reds = get64(b, off(t, XB_F_PROC_REDS));
	/* Ordered heap pointers, sane sizes.  htop and stop are stale while
	 * the process runs but stay inside its heap until it collects. */
	const uint64_t lim = XB_MAX_HEAP_WORDS;
	bool ok = p->heap && p->heap % 8 == 0 && p->heap < p->hend && p->heap_sz && p->heap_sz < lim &&
		  p->mbuf_sz < lim && p->vheap_words < (1ull << 56) &&
		  (p->abandoned_heap || p->heap_sz == (p->hend - p->heap) / 8) &&
		  ((!p->old_heap && !p->old_htop && !p->old_hend) ||
		   (p->old_heap <= p->old_htop && p->old_htop <= p->old_hend &&
		    (p->old_hend - p->old_heap) / 8 < lim)) &&
		  p->stop >= p->heap && p->stop <= p->hend;
	if (!ok) {
		*why = "changing";
		return false;
	}
	return true;
}

/* Fields only a garbage collection, an exit or a slot reuse change. */
static bool same_snapshot(const struct xb_proc *a, const struct xb_proc *b)
{
	return a->pid == b->pid && a->heap == b->heap && a->hend == b->hend && a->heap_sz == b->heap_sz &&
	       a->abandoned_heap == b->abandoned_heap && a->old_heap == b->old_heap &&
	       a->old_htop == b->old_htop && a->old_hend == b->old_hend && a->mbuf == b->mbuf &&
	       a->high_water == b->high_water &&
	       a->mbuf_sz == b->mbuf_sz;
}

/* ---- what erts_process_memory() adds beyond the heaps ---- */

/* One more node of the snapshot's budget (t->walk_left); false when it is
 * spent or ^C came (checked every 4096 nodes). */
static bool walk_one(struct xb_ptab *t)
{
	if (!t->walk_left)
		return false;
	t->walk_left--;
	return (t->walk_left & 4095) || !xb_interrupted;
}

/* Sum of used_size over a heap fragment chain (erl_message.h
 * erts_used_frag_sz); FIRST_USED/FIRST_NEXT when the first one is
 * already read. */
static int frag_chain(struct xb_ptab *t, uint64_t next, uint64_t *words)
{
	struct xb_cycle c;
	xb_cycle_init(&c, next);
	for (int n = 0; next && n < 100000; n++) {
		uint64_t nx, used;
		if (!walk_one(t))
			return xb_fail("the walk's budget is spent");
		if (xb_read_u64(&t->vm->mem, next + (uint64_t)off(t, XB_F_HFRAG_NEXT), &nx) < 0 ||
		    xb_read_u64(&t->vm->mem, next + (uint64_t)off(t, XB_F_HFRAG_USED_SIZE), &used) < 0)
			return -1;
		if (used > XB_MAX_HEAP_WORDS)
			return xb_fail("a heap fragment of %llu words", (unsigned long long)used);
		*words += used;
		next = nx;
		if (next && xb_cycle_seen(&c, next))
			return xb_fail("the heap fragment chain loops");
	}
	return 0;
}

enum queue_kind { Q_INNER, Q_OTHER };

/* Messages in one signal queue: count and bytes as erts_process_memory
 * counts them once process_info has moved them to the inner queue. */
static void walk_queue(struct xb_ptab *t, uint64_t first, enum queue_kind kind, struct xb_proc *p)
{
	int64_t msz = off(t, XB_F_MSG_SIZE), onext = off(t, XB_F_MSG_NEXT), odata = off(t, XB_F_MSG_DATA),
		om = off(t, XB_F_MSG_M), ohf = off(t, XB_F_MSG_HFRAG);
	int64_t ohu = off(t, XB_F_HFRAG_USED_SIZE), ohn = off(t, XB_F_HFRAG_NEXT);
	/* every word read of a message inside the message (ErtsMessage
	 * embeds its first heap fragment: erl_message.h), which is inside
	 * b: the offsets may come from the target's DWARF */
	if (msz <= 0 || msz > 512 || onext < 0 || odata < 0 || om < 0 || ohf < 0 || ohu < 0 || ohn < 0 ||
	    onext + 8 > msz || odata + 8 > msz || om + 8 > msz || ohf + ohu + 8 > msz || ohf + ohn + 8 > msz) {
		p->partial |= XB_PP_UNREADABLE;
		return;
	}
	uint8_t b[512];
	uint64_t m = first;
	struct xb_cycle c;
	xb_cycle_init(&c, first);
	while (m) {
		/* every node counts against the budget, signals too (which
		 * are not messages: msgq_len alone would not bound them) */
		if (p->msgq_len >= XB_MAX_MSGQ_WALK || !walk_one(t)) {
			p->partial |= XB_PP_MSGQ;
			return;
		}
		/* A message whose data the process has moved to its heap is
		 * an ErtsMessageRef (erl_message.h; fix_alloc MSG_REF),
		 * shorter than ErtsMessage: if the whole read runs off a
		 * mapping, read that much, and the fragment if it has one. */
		if (xb_read(&t->vm->mem, m, b, (size_t)msz) < 0) {
			int64_t rsz = off(t, XB_F_MSGREF_SIZE);
			uint64_t d;
			if (rsz <= 0 || rsz > msz || xb_read(&t->vm->mem, m, b, (size_t)rsz) < 0 ||
			    ((d = get64(b, odata)) == MSG_COMBINED_HFRAG &&
			     xb_read(&t->vm->mem, m + (uint64_t)rsz, b + rsz, (size_t)(msz - rsz)) < 0)) {
				xb_debug("message %llu of %llx: %s\n", (unsigned long long)p->msgq_len,
					 (unsigned long long)p->pid, xb_err());
				p->partial |= XB_PP_UNREADABLE;
				return;
			}
		}
		uint64_t tag = get64(b, om), data = get64(b, odata);
		if (tag == 0) {
			/* THE_NON_VALUE: a distribution message; its undecoded
			 * data is not counted (erts_msg_attached_data_size_aux) */
			p->msgq_len++;
			p->msgq_bytes += (uint64_t)msz;
		} else if ((tag & 3) == 0) {
			/* a signal; in the inner queue only receive markers */
			if (kind == Q_INNER && (tag & TAG_HEADER_MASK) == TAG_HEADER_EXTERNAL_PID &&
			    off(t, XB_F_RECV_MARKER_SIZE) > 0)
				p->msgq_bytes += (uint64_t)off(t, XB_F_RECV_MARKER_SIZE);
		} else {
			uint64_t words = 0;
			p->msgq_len++;
			p->msgq_bytes += (uint64_t)msz;
			if (data == MSG_COMBINED_HFRAG) {
				words = get64(b, ohf + off(t, XB_F_HFRAG_USED_SIZE));
				if (frag_chain(t, get64(b, ohf + off(t, XB_F_HFRAG_NEXT)), &words) < 0) {
					xb_debug("message %llu: hfrag chain %llx: %s\n", (unsigned long long)p->msgq_len,
						 (unsigned long long)get64(b, ohf + off(t, XB_F_HFRAG_NEXT)), xb_err());
					p->partial |= XB_PP_UNREADABLE;
				}
			} else if (data) {
				if (frag_chain(t, data, &words) < 0) {
					xb_debug("message %llu: data %llx: %s\n", (unsigned long long)p->msgq_len,
						 (unsigned long long)data, xb_err());
					p->partial |= XB_PP_UNREADABLE;
				}
			}
			p->msgq_bytes += words * 8;
		}
		m = get64(b, onext);
		if (m && xb_cycle_seen(&c, m)) {
			/* a queue that loops: not one the VM keeps */
			p->partial |= XB_PP_UNREADABLE;
			return;
		}
	}
}

static void walk_messages(struct xb_ptab *t, const uint8_t *b, struct xb_proc *p)
{
	walk_queue(t, get64(b, off(t, XB_F_PROC_SIGQ_FIRST)), Q_INNER, p);
	walk_queue(t, get64(b, off(t, XB_F_PROC_SIGQ_CONT)), Q_OTHER, p);
	walk_queue(t, get64(b, off(t, XB_F_PROC_SIGINQ_FIRST)), Q_OTHER, p);
	uint64_t bufs = get64(b, off(t, XB_F_PROC_SIGINQ_BUFFERS)), nonempty = 0;
	if (!bufs || off(t, XB_F_SIGINQBUFS_SLOTS) < 0 || off(t, XB_F_SIGINQBUF_SIZE) <= 0 ||
	    off(t, XB_F_SIGINQBUF_QUEUE) < 0 || off(t, XB_F_SIGINQ_FIRST) < 0)
		return;
	if (off(t, XB_F_SIGINQBUFS_NONEMPTY) < 0 ||
	    xb_read_u64(&t->vm->mem, bufs + (uint64_t)off(t, XB_F_SIGINQBUFS_NONEMPTY), &nonempty) < 0)
		nonempty = ~0ull; /* look at every slot */
	for (int i = 0; i < MAX_INQ_BUFFERS; i++) {
		uint64_t q;
		if (!(nonempty >> i & 1))
			continue;
		uint64_t a = bufs + (uint64_t)off(t, XB_F_SIGINQBUFS_SLOTS) +
			     (uint64_t)i * (uint64_t)off(t, XB_F_SIGINQBUF_SIZE) +
			     (uint64_t)off(t, XB_F_SIGINQBUF_QUEUE) + (uint64_t)off(t, XB_F_SIGINQ_FIRST);
		if (xb_read_u64(&t->vm->mem, a, &q) < 0)
			break;
		walk_queue(t, q, Q_OTHER, p);
	}
}

/* One monitor as erl_monitor_link.c erts_monitor_size() counts it: the
 * size of its data by the origin's type (TYPE_WORD: origin.type, or
 * origin.flags in OTP 29), shared by its REFC holders.  Node monitors are
 * extended without heap; other extended ones (distribution, by name) are
 * counted as ErtsMonitorDataHeap, a few words short. */
static uint64_t monitor_bytes(struct xb_ptab *t, uint32_t refc, uint32_t type_word)
{
	uint64_t size = (uint64_t)off(t, XB_F_MONDATAHEAP_SIZE);
	uint32_t type = off(t, XB_F_MONDATA_ORIGIN_TYPE) >= 0 ? (type_word & 0xffff) : (type_word & ML_TYPE_MASK);
	if (type == MON_TYPE_ALIAS && off(t, XB_F_MONDATA_SIZE) > 0)
		size = (uint64_t)off(t, XB_F_MONDATA_SIZE);
	else if (type == MON_TYPE_SUSPEND && off(t, XB_F_MONSUSPEND_SIZE) > 0)
		size = (uint64_t)off(t, XB_F_MONSUSPEND_SIZE);
	else if ((type == MON_TYPE_NODE || type == MON_TYPE_NODES) && off(t, XB_F_MONDATAEXT_SIZE) > 8)
		size = (uint64_t)off(t, XB_F_MONDATAEXT_SIZE) - 8; /* extended, no heap: (hsz - 1) words */
	return size / (refc ? refc : 1);
}

static int64_t monitor_type_off(struct xb_ptab *t)
{
	return off(t, XB_F_MONDATA_ORIGIN_TYPE) >= 0 ? off(t, XB_F_MONDATA_ORIGIN_TYPE)
						     : off(t, XB_F_MONDATA_ORIGIN_FLAGS);
}

/* A monitor's refc as read: 0 or past a million is not one (counted as
 * 2 holders, the process's figure marked unreadable). */
static uint32_t checked_refc(uint32_t refc, bool ok, struct xb_proc *p)
{
	if (!ok || !refc || refc > 1000000) {
		p->partial |= XB_PP_UNREADABLE;
		return 2;
	}
	return refc;
}

static uint64_t monitor_size(struct xb_ptab *t, uint64_t node, uint16_t offset, struct xb_proc *p)
{
	uint64_t md = node - offset;
	uint32_t refc = 0, type = 0;
	bool ok = xb_read_u32(&t->vm->mem, md + (uint64_t)off(t, XB_F_MONDATA_REFC), &refc) == 0;
	refc = checked_refc(refc, ok, p);
	if (monitor_type_off(t) >= 0)
		xb_read(&t->vm->mem, md + (uint64_t)monitor_type_off(t), &type,
			off(t, XB_F_MONDATA_ORIGIN_TYPE) >= 0 ? 2 : 4);
	return monitor_bytes(t, refc, type);
}

/* Links (erl_monitor_link.c erts_link_size: sizeof(ErtsLink); extended
 * (distribution) links are counted at that size too) and monitors, in
 * red-black trees, for N processes at once: breadth first, one batched
 * read per level of all the trees (a supervisor with 100,000 links costs
 * some 40 system calls, not 100,000). */
#define WALK_TOTAL (4 * XB_MAX_ML_WALK) /* tree nodes read per batch of processes */
#define WALK_SNAPSHOT (32ull * XB_MAX_ML_WALK) /* nodes of every kind per xb_ptab_foreach */
#define WALK_ONE (8ull * XB_MAX_ML_WALK)       /* ... per xb_proc_read */

struct mlnode {
	uint64_t addr;
	uint32_t pi;
	bool monitor;
};

static void walk_trees(struct xb_ptab *t, struct xb_proc **ps, const uint8_t *const *bufs, size_t n)
{
	int64_t ol = off(t, XB_F_MLNODE_LEFT), orr = off(t, XB_F_MLNODE_RIGHT), oo = off(t, XB_F_MLNODE_OFFSET),
		osz = off(t, XB_F_MLNODE_SIZE), orefc = off(t, XB_F_MONDATA_REFC), oty = monitor_type_off(t);
	bool ok_links = ol >= 0 && orr >= 0 && osz > 0 && osz <= 256;
	bool ok_mons = ok_links && oo >= 0 && orefc >= 0 && off(t, XB_F_MONDATAHEAP_SIZE) > 0;
	struct mlnode *cur = NULL, *next = NULL;
	size_t ncur = 0, capcur = 0, nnext = 0, capnext = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t roots[2] = { get64(bufs[i], off(t, XB_F_PROC_LINKS)), get64(bufs[i], off(t, XB_F_PROC_MONITORS)) };
		for (int k = 0; k < 2; k++) {
			if (!roots[k])
				continue;
			if (!(k ? ok_mons : ok_links)) {
				ps[i]->partial |= XB_PP_UNREADABLE;
				continue;
			}
			if (xb_grow((void **)&cur, &capcur, ncur + 1, sizeof(*cur)) < 0)
				goto out;
			cur[ncur++] = (struct mlnode){ roots[k], (uint32_t)i, k == 1 };
		}
	}
	uint8_t *nb = NULL, *mb = NULL;
	size_t capnb = 0;
	struct xb_readreq *q = NULL;
	size_t capq = 0, visited = 0;
	while (ncur) {
		/* Nodes read for the whole batch: at most WALK_TOTAL (a loop
		 * in a tree meets it in a few levels, where the per-process
		 * bound alone would take a million nodes per process); those
		 * still to be read then make their processes partial. */
		if (visited >= WALK_TOTAL || ncur > t->walk_left || xb_interrupted) {
			for (size_t j = 0; j < ncur; j++)
				ps[cur[j].pi]->partial |= XB_PP_LINKS;
			break;
		}
		visited += ncur;
		t->walk_left -= ncur;
		/* a read per node, then up to two per monitor (its refc
		 * and its type): 3 per node at most */
		if (xb_grow((void **)&q, &capq, 3 * ncur, sizeof(*q)) < 0 ||
		    xb_grow((void **)&nb, &capnb, ncur * (size_t)osz + ncur * 8, 1) < 0)
			break;
		mb = nb + ncur * (size_t)osz; /* refc, type word per node */
		for (size_t j = 0; j < ncur; j++)
			q[j] = (struct xb_readreq){ cur[j].addr, nb + j * (size_t)osz, (size_t)osz, false };
		xb_read_many(&t->vm->mem, q, ncur);
		/* monitors: refc and type from the monitor data */
		size_t k = 0;
		for (size_t j = 0; j < ncur; j++) {
			memset(mb + 8 * j, 0, 8);
			if (!cur[j].monitor || !q[j].ok)
				continue;
			uint64_t md = cur[j].addr - get16(nb + j * (size_t)osz, oo);
			q[ncur + k++] = (struct xb_readreq){ md + (uint64_t)orefc, mb + 8 * j, 4, false };
			if (oty >= 0)
				q[ncur + k++] = (struct xb_readreq){ md + (uint64_t)oty, mb + 8 * j + 4,
								     off(t, XB_F_MONDATA_ORIGIN_TYPE) >= 0 ? 2 : 4, false };
		}
		xb_read_many(&t->vm->mem, q + ncur, k);
		nnext = 0;
		for (size_t j = 0; j < ncur; j++) {
			struct xb_proc *p = ps[cur[j].pi];
			const uint8_t *b = nb + j * (size_t)osz;
			if (!q[j].ok) {
				p->partial |= XB_PP_UNREADABLE;
				continue;
			}
			if (p->links + p->monitors >= XB_MAX_ML_WALK) {
				p->partial |= XB_PP_LINKS;
				continue;
			}
			if (cur[j].monitor) {
				uint32_t refc = checked_refc(get32(mb + 8 * j, 0), true, p), ty = get32(mb + 8 * j, 4);
				p->monitors++;
				p->ml_bytes += monitor_bytes(t, refc, ty);
			} else {
				p->links++;
				p->ml_bytes += (uint64_t)osz;
			}
			uint64_t kids[2] = { get64(b, ol), get64(b, orr) };
			/* A tree that loops (the target's memory can be
			 * anything) would double each level until every
			 * process of the batch met its bound: hundreds of
			 * millions of nodes.  A level holds at most
			 * XB_MAX_ML_WALK (a real tree of a million links is
			 * half that at its widest); a process whose children
			 * do not fit is marked partial. */
			if (nnext + 2 > XB_MAX_ML_WALK) {
				p->partial |= XB_PP_LINKS;
				continue;
			}
			for (int c = 0; c < 2; c++) {
				if (!kids[c])
					continue;
				if (xb_grow((void **)&next, &capnext, nnext + 1, sizeof(*next)) < 0)
					goto done;
				next[nnext++] = (struct mlnode){ kids[c], cur[j].pi, cur[j].monitor };
			}
		}
		struct mlnode *tmp = cur;
		size_t tc = capcur;
		cur = next;
		capcur = capnext;
		ncur = nnext;
		next = tmp;
		capnext = tc;
	}
done:
	free(q);
	free(nb);
out:
	free(cur);
	free(next);
}

/* Local target monitors: a circular list (erts_monitor_list_foreach). */
/* Where one list node's next and offset, and its monitor's refc and
 * type, lie from the monitor's start (MD = node - OFFSET, OFFSET as
 * guessed): one read of that span gives all four when the guess holds.
 * Every monitor of a list is the same kind (lt_monitors: local targets,
 * offsetof(ErtsMonitorData, u.target)), so after the first node one
 * system call a node is the rule, not four (a process monitored a
 * million times: 2 s, not 7). */
struct lt_span {
	int64_t lo, len;
};

static bool lt_span(struct xb_ptab *t, uint16_t guess, struct lt_span *sp)
{
	int64_t f[4][2] = { { guess + off(t, XB_F_MLNODE_NEXT), 8 },
			    { guess + off(t, XB_F_MLNODE_OFFSET), 2 },
			    { off(t, XB_F_MONDATA_REFC), 4 },
			    { monitor_type_off(t), off(t, XB_F_MONDATA_ORIGIN_TYPE) >= 0 ? 2 : 4 } };
	int64_t lo = INT64_MAX, hi = 0;
	for (int i = 0; i < 4; i++) {
		if (f[i][0] < 0)
			continue;
		lo = f[i][0] < lo ? f[i][0] : lo;
		hi = f[i][0] + f[i][1] > hi ? f[i][0] + f[i][1] : hi;
	}
	sp->lo = lo;
	sp->len = hi - lo;
	return lo != INT64_MAX && sp->len <= 512;
}

static void walk_list(struct xb_ptab *t, uint64_t head, struct xb_proc *p)
{
	int64_t on = off(t, XB_F_MLNODE_NEXT), oo = off(t, XB_F_MLNODE_OFFSET), orc = off(t, XB_F_MONDATA_REFC),
		oty = monitor_type_off(t);
	bool ty16 = off(t, XB_F_MONDATA_ORIGIN_TYPE) >= 0;
	if (!head)
		return;
	if (on < 0 || oo < 0 || orc < 0 || off(t, XB_F_MONDATAHEAP_SIZE) <= 0) {
		p->partial |= XB_PP_UNREADABLE;
		return;
	}
	uint8_t b[512];
	struct lt_span sp = { 0, 0 };
	bool guessed = false;
	uint16_t guess = 0;
	uint64_t n = head;
	struct xb_cycle c;
	xb_cycle_init(&c, head);
	for (uint64_t k = 0;; k++) {
		uint64_t next;
		uint16_t o;
		if (k >= XB_MAX_ML_WALK || !walk_one(t)) {
			p->partial |= XB_PP_LINKS;
			return;
		}
		if (guessed && n >= guess && xb_read(&t->vm->mem, n - guess + (uint64_t)sp.lo, b, (size_t)sp.len) == 0 &&
		    (o = get16(b, guess + oo - sp.lo)) == guess) {
			next = get64(b, guess + on - sp.lo);
			uint32_t refc = checked_refc(get32(b, orc - sp.lo), true, p);
			uint32_t type = oty < 0 ? 0 : ty16 ? get16(b, oty - sp.lo) : get32(b, oty - sp.lo);
			p->monitors++;
			p->ml_bytes += monitor_bytes(t, refc, type);
		} else {
			/* the first node, another kind, or a span not readable
			 * at once: its fields one by one */
			if (xb_read_u64(&t->vm->mem, n + (uint64_t)on, &next) < 0 ||
			    xb_read(&t->vm->mem, n + (uint64_t)oo, &o, 2) < 0) {
				p->partial |= XB_PP_UNREADABLE;
				return;
			}
			p->monitors++;
			p->ml_bytes += monitor_size(t, n, o, p);
			guessed = lt_span(t, o, &sp);
			guess = o;
		}
		if (!next || next == head)
			return;
		if (xb_cycle_seen(&c, next)) {
			/* a loop that misses the head: not a list the VM keeps */
			p->partial |= XB_PP_UNREADABLE;
			return;
		}
		n = next;
	}
}

/* Everything erts_process_memory() adds, but the link and monitor trees
 * (walk_trees, done first for a whole batch). */
static void read_memory(struct xb_ptab *t, const uint8_t *b, struct xb_proc *p)
{
	struct xb_vm *vm = t->vm;
	if (!(p->state & PSFLG_EXITING))
		walk_list(t, get64(b, off(t, XB_F_PROC_LT_MONITORS)), p);
	walk_messages(t, b, p);
	uint64_t dict = get64(b, off(t, XB_F_PROC_DICTIONARY));
	uint32_t asz;
	if (dict && off(t, XB_F_PROCDICT_ARRAY_SIZE) >= 0 && off(t, XB_F_PROCDICT_SIZE) > 0) {
		/* erl_process_dict.c PD_SZ2BYTES(arraySize) */
		if (xb_read_u32(&vm->mem, dict + (uint64_t)off(t, XB_F_PROCDICT_ARRAY_SIZE), &asz) == 0 && asz &&
		    asz < (1u << 30))
			p->dict_bytes = (uint64_t)off(t, XB_F_PROCDICT_SIZE) + ((uint64_t)asz - 1) * 8;
		else
			p->partial |= XB_PP_UNREADABLE;
	}
	uint64_t m = (uint64_t)off(t, XB_F_PROC_SIZE) + p->ml_bytes;
	m += (p->heap_sz + p->mbuf_sz) * 8;
	if (p->abandoned_heap)
		m += p->hend - p->heap;
	if (p->old_hend && p->old_heap)
		m += p->old_hend - p->old_heap;
	m += p->msgq_bytes;
	/* The spilled argument registers, the ErtsPSD and the dictionary's
	 * array are std_alloc blocks (erl_alloc.types: ARG_REG, PSD,
	 * PROC_DICT are STANDARD), counted in erlang:memory(system), not
	 * processes: system_bytes. */
	uint64_t sys = 0;
	if (off(t, XB_F_PROC_ARG_REG) >= 0 && off(t, XB_F_PROC_DEF_ARG_REG) >= 0 && off(t, XB_F_PROC_ARITY) >= 0 &&
	    get64(b, off(t, XB_F_PROC_ARG_REG)) != p->addr + (uint64_t)off(t, XB_F_PROC_DEF_ARG_REG))
		sys += (uint64_t)b[off(t, XB_F_PROC_ARITY)] * 8; /* Uint or byte: < 256 either way */
	if (get64(b, off(t, XB_F_PROC_PSD)) && off(t, XB_F_PSD_SIZE) > 0)
		sys += (uint64_t)off(t, XB_F_PSD_SIZE);
	sys += p->dict_bytes;
	p->system_bytes = sys;
	p->memory = m + sys;
}

/* Registered name (RegProc.name, checked to point back at the process)
 * and the current function's MFA, for N snapshots at once. */
static void read_names(struct xb_ptab *t, struct xb_proc *v, size_t n)
{
	struct xb_vm *vm = t->vm;
	struct xb_readreq q[3 * BATCH]; /* per process: its MFA, and its name's two words */
	uint64_t regbuf[BATCH][2];
	size_t k = 0;
	int64_t rn = off(t, XB_F_REGPROC_NAME), rp = off(t, XB_F_REGPROC_P);
	int64_t mm = off(t, XB_F_MFA_MODULE), mf = off(t, XB_F_MFA_FUNCTION), ma = off(t, XB_F_MFA_ARITY);
	for (size_t i = 0; i < n && i < BATCH; i++) {
		if (!v[i].addr)
			continue;
		if (v[i].current && mm >= 0 && mf >= 0 && ma >= 0 && mm == 0 && mf == 8 && ma == 16)
			q[k++] = (struct xb_readreq){ v[i].current, v[i].current_mfa, 24, false };
		if (v[i].reg && rn >= 0 && rp >= 0) {
			q[k++] = (struct xb_readreq){ v[i].reg + (uint64_t)rp, &regbuf[i][0], 8, false };
			q[k++] = (struct xb_readreq){ v[i].reg + (uint64_t)rn, &regbuf[i][1], 8, false };
		}
	}
	xb_read_many(&vm->mem, q, k);
	k = 0;
	for (size_t i = 0; i < n && i < BATCH; i++) {
		if (!v[i].addr)
			continue;
		if (v[i].current && mm == 0 && mf == 8 && ma == 16) {
			if (!q[k].ok || !xb_is_atom(v[i].current_mfa[0]) || !xb_is_atom(v[i].current_mfa[1]) ||
			    v[i].current_mfa[2] > 255)
				memset(v[i].current_mfa, 0, sizeof(v[i].current_mfa));
			k++;
		}
		if (v[i].reg && rn >= 0 && rp >= 0) {
			if (q[k].ok && q[k + 1].ok && regbuf[i][0] == v[i].addr && xb_is_atom(regbuf[i][1]))
				v[i].reg_name = regbuf[i][1];
			k += 2;
		}
	}
}

/* Before the second read of a process: let a garbage collection in
 * progress (ERTS_PSFLG_GC) finish, polling its state for up to 250 ms. */
static void wait_gc_done(struct xb_ptab *t, uint32_t slot)
{
	uint64_t addr;
	uint32_t st;
	usleep(1000);
	for (int i = 0; i < 50 && !xb_interrupted; i++) { /* (^C: within 5 ms) */
		if (xb_read_u64(&t->vm->mem, t->tab + (uint64_t)slot * 8, &addr) < 0 || !addr ||
		    addr == t->invalid ||
		    xb_read_u32(&t->vm->mem, addr + (uint64_t)off(t, XB_F_PROC_STATE), &st) < 0 || !(st & PSFLG_GC))
			return;
		usleep(5000);
	}
}

static int proc_read(struct xb_ptab *t, uint32_t slot, unsigned want, struct xb_proc *p);

int xb_proc_read(struct xb_ptab *t, uint32_t slot, unsigned want, struct xb_proc *p)
{
	t->walk_left = WALK_ONE;
	return proc_read(t, slot, want, p);
}

/* (within xb_ptab_foreach: on the snapshot's budget) */
static int proc_read(struct xb_ptab *t, uint32_t slot, unsigned want, struct xb_proc *p)
{
	struct xb_vm *vm = t->vm;
	size_t psz = (size_t)off(t, XB_F_PROC_SIZE);
	uint8_t *a = malloc(psz), *b = malloc(psz);
	int rc = -1;
	if (!a || !b) {
		xb_fail("out of memory");
		goto out;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t addr, addr2;
		if (attempt)
			wait_gc_done(t, slot);
		const char *why = NULL;
		struct xb_proc p2;
		if (slot >= t->max) {
			xb_fail("slot %u out of range", slot);
			goto out;
		}
		if (xb_read_u64(&vm->mem, t->tab + (uint64_t)slot * 8, &addr) < 0)
			goto out;
		if (!addr || addr == t->invalid) {
			xb_fail("gone: slot %u is empty", slot);
			goto out;
		}
		if (xb_read(&vm->mem, addr, a, psz) < 0) {
			xb_fail("gone: %s", xb_err());
			goto out;
		}
		if (!parse(t, slot, addr, a, p, &why)) {
			if (strcmp(why, "gone") == 0) {
				xb_fail("gone: the process in slot %u exited", slot);
				goto out;
			}
			continue;
		}
		if (want & XB_PROC_MEMORY) {
			const uint8_t *bufs[1] = { a };
			struct xb_proc *ps[1] = { p };
			if (!(p->state & PSFLG_EXITING))
				walk_trees(t, ps, bufs, 1);
			read_memory(t, a, p);
		}
		if (want & XB_PROC_NAMES)
			read_names(t, p, 1);
		if (xb_read_u64(&vm->mem, t->tab + (uint64_t)slot * 8, &addr2) < 0 || addr2 != addr ||
		    xb_read(&vm->mem, addr, b, psz) < 0) {
			xb_fail("gone: the process in slot %u exited", slot);
			goto out;
		}
		if (!parse(t, slot, addr, b, &p2, &why)) {
			if (strcmp(why, "gone") == 0) {
				xb_fail("gone: the process in slot %u exited", slot);
				goto out;
			}
			continue;
		}
		/* a message or link that could not be read: the queue
		 * changed under the walk; once more, then keep what was read
		 * (marked partial) */
		if (same_snapshot(p, &p2) && (!(p->partial & XB_PP_UNREADABLE) || attempt == 1)) {
			rc = 0;
			goto out;
		}
	}
	xb_fail("changing: the process in slot %u garbage collected (or grew) during both reads", slot);
out:
	free(a);
	free(b);
	return rc;
}

void xb_ptab_filter(struct xb_ptab *t, bool (*keep)(void *arg), void *arg)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->nlive; i++)
		if (keep(arg)) {
			t->live_slot[n] = t->live_slot[i];
			t->live_ptr[n++] = t->live_ptr[i];
		}
	t->nlive = n;
}

enum snap { S_GOOD, S_GONE, S_CHANGING, S_UNREADABLE };

int xb_ptab_foreach(struct xb_ptab *t, unsigned want, int (*fn)(const struct xb_proc *p, void *arg),
		    void *arg, struct xb_ptab_stats *st)
{
	struct xb_vm *vm = t->vm;
	size_t psz = (size_t)off(t, XB_F_PROC_SIZE);
	uint8_t *bufa = malloc(BATCH * psz), *bufb = malloc(BATCH * psz);
	struct xb_proc *v = calloc(BATCH, sizeof(*v));
	struct xb_readreq *q = calloc(2 * BATCH, sizeof(*q));
	uint32_t slot[BATCH];
	uint64_t addr[BATCH], addr2[BATCH];
	enum snap state[BATCH];
	int rc = 0;
	memset(st, 0, sizeof(*st));
	t->walk_left = WALK_SNAPSHOT;
	if (!bufa || !bufb || !v || !q) {
		rc = xb_fail("out of memory");
		goto out;
	}
	for (uint32_t next = 0; next < t->nlive && rc == 0;) {
		if (xb_interrupted) { /* ^C: within one batch's reads */
			rc = xb_fail("interrupted");
			break;
		}
		size_t n = 0;
		for (; next < t->nlive && n < BATCH; next++) {
			slot[n] = t->live_slot[next];
			addr[n++] = t->live_ptr[next];
		}
		if (!n)
			break;
		st->slots_live += n;
		for (size_t i = 0; i < n; i++)
			q[i] = (struct xb_readreq){ addr[i], bufa + i * psz, psz, false };
		xb_read_many(&vm->mem, q, n);
		if (vm->mem.gone) {
			rc = xb_fail("the VM exited");
			break;
		}
		for (size_t i = 0; i < n; i++) {
			const char *why = "unreadable";
			if (q[i].ok && parse(t, slot[i], addr[i], bufa + i * psz, &v[i], &why))
				state[i] = S_GOOD;
			else
				state[i] = !q[i].ok ? S_UNREADABLE : strcmp(why, "gone") == 0 ? S_GONE : S_CHANGING;
			if (state[i] != S_GOOD)
				memset(&v[i], 0, sizeof(v[i]));
		}
		if (want & XB_PROC_MEMORY) {
			struct xb_proc *ps[BATCH];
			const uint8_t *bufs[BATCH];
			size_t m = 0;
			for (size_t i = 0; i < n; i++)
				if (state[i] == S_GOOD && !(v[i].state & PSFLG_EXITING)) {
					ps[m] = &v[i];
					bufs[m++] = bufa + i * psz;
				}
			walk_trees(t, ps, bufs, m);
			for (size_t i = 0; i < n; i++)
				if (state[i] == S_GOOD)
					read_memory(t, bufa + i * psz, &v[i]);
		}
		if (want & XB_PROC_NAMES)
			read_names(t, v, n);
		/* Second read: the slot still holds it, and nothing a GC
		 * changes has changed. */
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			q[k++] = (struct xb_readreq){ t->tab + (uint64_t)slot[i] * 8, &addr2[i], 8, false };
			q[k++] = (struct xb_readreq){ addr[i], bufb + i * psz, psz, false };
		}
		xb_read_many(&vm->mem, q, k);
		for (size_t i = 0; i < n && rc == 0; i++) {
			struct xb_proc p2;
			const char *why = "unreadable";
			bool moved = !q[2 * i].ok || addr2[i] != addr[i];
			if (state[i] == S_GOOD && !moved && q[2 * i + 1].ok && !(v[i].partial & XB_PP_UNREADABLE) &&
			    parse(t, slot[i], addr[i], bufb + i * psz, &p2, &why) && same_snapshot(&v[i], &p2)) {
				/* consistent */
			} else if (moved || state[i] == S_GONE) {
				st->gone++;
				continue;
			} else {
				/* once more, alone */
				struct xb_proc one;
				if (proc_read(t, slot[i], want & ~XB_PROC_CHANGING, &one) == 0) {
					v[i] = one;
				} else if ((want & XB_PROC_CHANGING) && state[i] == S_GOOD &&
					   strncmp(xb_err(), "gone", 4) != 0) {
					v[i].partial |= XB_PP_CHANGING;
				} else {
					if (strncmp(xb_err(), "gone", 4) == 0)
						st->gone++;
					else if (state[i] == S_UNREADABLE)
						st->unreadable++;
					else
						st->changed++;
					continue;
				}
			}
			st->read++;
			if (v[i].partial)
				st->partial++;
			rc = fn(&v[i], arg);
		}
		if (vm->mem.gone && rc == 0)
			rc = xb_fail("the VM exited");
	}
out:
	free(bufa);
	free(bufb);
	free(v);
	free(q);
	return rc;
}

void xb_proc_pid_text(const struct xb_vm *vm, uint64_t pid, char *buf, size_t len)
{
	if (xb_format_pid(pid, vm->pid_num_bits, vm->pid_ser_bits, &vm->pix, buf, len) < 0)
		snprintf(buf, len, "?");
}

void xb_mfa_text(struct xb_vm *vm, const uint64_t mfa[3], char *buf, size_t len)
{
	const char *m = xb_is_atom(mfa[0]) ? xb_vm_atom(vm, mfa[0]) : NULL;
	const char *f = xb_is_atom(mfa[1]) ? xb_vm_atom(vm, mfa[1]) : NULL;
	if (!m || !f || mfa[2] > 255)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s:%s/%u", m, f, (unsigned)mfa[2]);
}

int xb_ptab_find_pid(struct xb_ptab *t, unsigned num, long ser, uint32_t *slot)
{
	char want[48], got[48];
	/* every live process's id, BATCH to a system call (a VM with a
	 * million processes: a second of reads one by one) */
	uint64_t id[BATCH];
	struct xb_readreq q[BATCH];
	for (uint32_t li = 0; li < t->nlive; li += BATCH) {
		if (xb_interrupted)
			return xb_fail("interrupted while looking for the process");
		size_t n = t->nlive - li < BATCH ? t->nlive - li : BATCH;
		for (size_t k = 0; k < n; k++)
			q[k] = (struct xb_readreq){ t->live_ptr[li + k] + (uint64_t)off(t, XB_F_PROC_ID), &id[k], 8,
						    false };
		xb_read_many(&t->vm->mem, q, n);
		for (size_t k = 0; k < n; k++) {
			if (!q[k].ok || !xb_is_pid(id[k]))
				continue;
			xb_proc_pid_text(t->vm, id[k], got, sizeof(got));
			unsigned n2, s2;
			if (sscanf(got, "<0.%u.%u>", &n2, &s2) == 2 && n2 == num && (ser < 0 || (long)s2 == ser)) {
				*slot = t->live_slot[li + k];
				return 0;
			}
		}
	}
	if (ser < 0)
		snprintf(want, sizeof(want), "<0.%u.*>", num);
	else
		snprintf(want, sizeof(want), "<0.%u.%ld>", num, ser);
	return xb_fail("no process %s in this VM", want);
}

int xb_ptab_find_name(struct xb_ptab *t, const char *name, uint32_t *slot)
{
	int64_t rn = off(t, XB_F_REGPROC_NAME), rp = off(t, XB_F_REGPROC_P);
	if (rn < 0 || rp < 0 || off(t, XB_F_PROC_REG) < 0)
		return xb_fail("cannot look up registered names on this VM: the release table has no %s",
			       xb_field_name(XB_F_REGPROC_NAME));
	/* Each live process's registration, then the name and owner of the
	 * few that have one: two system calls per BATCH processes, not three
	 * reads each (as xb_ptab_find_pid) */
	uint64_t reg[BATCH], got[2 * BATCH];
	uint32_t which[BATCH];
	struct xb_readreq q[2 * BATCH];
	for (uint32_t li = 0; li < t->nlive; li += BATCH) {
		if (xb_interrupted)
			return xb_fail("interrupted while looking for the process");
		size_t n = t->nlive - li < BATCH ? t->nlive - li : BATCH, m = 0;
		for (size_t k = 0; k < n; k++)
			q[k] = (struct xb_readreq){ t->live_ptr[li + k] + (uint64_t)off(t, XB_F_PROC_REG), &reg[k], 8,
						    false };
		xb_read_many(&t->vm->mem, q, n);
		for (size_t k = 0; k < n; k++)
			if (q[k].ok && reg[k])
				which[m++] = (uint32_t)k;
		for (size_t j = 0; j < m; j++) {
			q[2 * j] = (struct xb_readreq){ reg[which[j]] + (uint64_t)rp, &got[2 * j], 8, false };
			q[2 * j + 1] = (struct xb_readreq){ reg[which[j]] + (uint64_t)rn, &got[2 * j + 1], 8, false };
		}
		xb_read_many(&t->vm->mem, q, 2 * m);
		for (size_t j = 0; j < m; j++) {
			uint64_t s = t->live_ptr[li + which[j]], atom = got[2 * j + 1];
			if (!q[2 * j].ok || !q[2 * j + 1].ok || got[2 * j] != s || !xb_is_atom(atom))
				continue;
			char raw[1024], eb[1024];
			size_t l;
			/* either spelling of an Elixir module's name: 'Elixir.Foo' or Foo */
			if (xb_vm_atom_raw(t->vm, atom, raw, sizeof(raw), &l) == 0 &&
			    (strcmp(raw, name) == 0 || strcmp(xb_elixir_atom(raw, eb, sizeof(eb)), name) == 0)) {
				*slot = t->live_slot[li + which[j]];
				return 0;
			}
		}
	}
	return xb_fail("no process is registered as '%s' in this VM", name);
}

/* SPEC as a pid, "<A.B.C>" or "A.B.C" with each part decimal digits only:
 * 1 (V filled), 0 (not shaped like a pid), or -1 (shaped like one, with a
 * part past 32 bits: sscanf's %u took <0.4294967297.0> for <0.1.0> and
 * <0.-1.0> for <0.4294967295.0>). */
static int pid_spec(const char *spec, uint64_t v[3])
{
	size_t len = strlen(spec);
	const char *p = spec, *end = spec + len;
	if (len > 2 && spec[0] == '<' && spec[len - 1] == '>')
		p++, end--;
	bool big = false;
	for (int i = 0; i < 3; i++) {
		const char *q = memchr(p, '.', (size_t)(end - p));
		if (i == 2)
			q = q ? NULL : end; /* the last part: no dot after it */
		if (!q || q == p || strspn(p, "0123456789") < (size_t)(q - p))
			return 0;
		char part[24];
		size_t n = (size_t)(q - p);
		if (n >= sizeof(part))
			big = true;
		else {
			memcpy(part, p, n);
			part[n] = 0;
			if (xb_parse_u64(part, 0, UINT32_MAX, &v[i]) < 0)
				big = true;
		}
		p = q + 1;
	}
	return big ? -1 : 1;
}

static int find_once(struct xb_ptab *t, const char *spec, uint32_t *slot)
{
	uint64_t v[3];
	int shape = pid_spec(spec, v);
	if (shape < 0)
		return xb_fail("%s: a part of it is past 2^32, so no process has it; a pid is <0.N.S> as the VM "
			       "prints it", spec);
	if (shape > 0) {
		uint64_t node = v[0], num = v[1], ser = v[2];
		if (node != 0)
			return xb_fail("%s is a pid of another node; pass a process of this VM "
				       "(<0.N.S>)", spec);
		if (xb_ptab_find_pid(t, (unsigned)num, (long)ser, slot) < 0) {
			char why[512];
			snprintf(why, sizeof(why), "%s", xb_err());
			xb_fail("%s; erlang-heapsample lists the processes", why);
			return -2;
		}
		return 0;
	}
	for (const char *c = spec; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == '<' || *c == '>')
			return xb_fail("a process is a pid <0.N.S> or a registered name, not '%s'", spec);
	if (xb_ptab_find_name(t, spec, slot) < 0) {
		char why[512];
		snprintf(why, sizeof(why), "%s", xb_err());
		xb_fail("%s; pass a registered name or a pid <0.N.S> (erlang-heapsample lists them)", why);
		return -2; /* not found (find_once: -1 is a bad SPEC) */
	}
	return 0;
}

/* A miss is only believed after the table and the processes were read
 * three times: the VM changes them under the reads (a process is being
 * registered, its slot moves), and one bad read of the right process
 * must not make the answer "there is no such process". */
int xb_ptab_find(struct xb_ptab *t, const char *spec, uint32_t *slot)
{
	int rc = -1;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (attempt > 0 && xb_ptab_refresh(t) < 0)
			break;
		rc = find_once(t, spec, slot);
		if (rc != -2 || t->vm->mem.gone)
			break;
	}
	return rc < 0 ? -1 : 0;
}

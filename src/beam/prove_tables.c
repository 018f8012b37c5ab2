/* prove_tables.c - proofs of the fields that the tools' own walks read:
 * --lines' line tables, the allocators (--alloc) and heap objects
 * (--contents).  Each walk is run with the offsets under proof, and its
 * result must agree with facts about the VM that a wrong offset breaks:
 * a well-known function's source file and line, carrier counts from the
 * allocators' statistics against the carriers on their lists, a heap
 * that parses object by object up to its top.  See layout.h. */
#define _GNU_SOURCE
#include "xb/alloc.h"
#include "xb/codemap.h"
#include "xb/common.h"
#include "xb/heapwalk.h"
#include "xb/layout.h"
#include "xb/proctab.h"
#include "xb/vm.h"

#include <stdlib.h>
#include <string.h>

static void swap_in(struct xb_vm *vm, int64_t *saved, const int64_t *off)
{
	memcpy(saved, vm->off, sizeof(int64_t) * XB_F_COUNT);
	memcpy(vm->off, off, sizeof(int64_t) * XB_F_COUNT);
}

static void swap_out(struct xb_vm *vm, const int64_t *saved)
{
	memcpy(vm->off, saved, sizeof(int64_t) * XB_F_COUNT);
}

/* ------------------------------------------------------------------ */
/* --lines */

static const enum xb_field jit_line_fields[] = { XB_F_LINEINFO_START, XB_F_LINEINFO_LINE };
static const enum xb_field emu_line_fields[] = { XB_F_CODEHDR_LINE_TABLE, XB_F_LINETAB_FNAME_PTR,
						 XB_F_LINETAB_LOC_SIZE, XB_F_LINETAB_LOC_TAB,
						 XB_F_LINETAB_FUNC_TAB };

/* Where these functions' code is, each module's line table says: in
 * their own source file, at a line of it (OTP's stdlib and kernel are
 * compiled with line information). */
void xb_layout_prove_lines(struct xb_vm *vm, const int64_t *off)
{
	static const struct {
		const char *fn, *file;
	} known[] = {
		{ "lists:reverse/2", "lists.erl" },
		{ "gen_server:loop/7", "gen_server.erl" },
		{ "proc_lib:init_p/5", "proc_lib.erl" },
		{ "lists:foldl/3", "lists.erl" },
	};
	int64_t saved[XB_F_COUNT];
	swap_in(vm, saved, off);
	struct xb_codemap cm;
	char why[160] = "";
	int hits = 0, looked = 0;
	bool built = xb_codemap_build(vm, &cm, XB_CM_FOLD_PROLOGUE) == 0;
	if (!built) {
		snprintf(why, sizeof(why), "the code map does not build: %s", xb_err());
	} else {
		for (size_t k = 0; k < XB_ARRAY_SIZE(known); k++) {
			const struct xb_code *c = xb_codemap_find_name(&cm, known[k].fn);
			if (!c)
				continue;
			looked++;
			bool good = false;
			/* some address of its body has a line of its file */
			for (uint64_t a = c->start + 1; a < c->end && !good; a += (c->end - c->start) / 8 + 1) {
				const char *file;
				uint32_t line;
				if (xb_codemap_line(vm, &cm, c, a, &file, &line) == 0) {
					const char *base = strrchr(file, '/');
					base = base ? base + 1 : file;
					good = strcmp(base, known[k].file) == 0 && line > 0 && line < 100000;
					if (!good && !why[0])
						snprintf(why, sizeof(why), "%s is at %.60s:%u", known[k].fn, file, line);
				}
			}
			hits += good;
		}
		if (!why[0] && hits < 2)
			snprintf(why, sizeof(why), "%d of %d well-known functions have a line of their file", hits,
				 looked);
		xb_codemap_free(&cm);
	}
	swap_out(vm, saved);
	bool ok = hits >= 2 && hits == looked;
	const enum xb_field *other = vm->flavor == XB_FLAVOR_JIT ? emu_line_fields : jit_line_fields;
	size_t nother = vm->flavor == XB_FLAVOR_JIT ? XB_ARRAY_SIZE(emu_line_fields) : XB_ARRAY_SIZE(jit_line_fields);
	for (size_t k = 0; k < nother; k++)
		if (off[other[k]] >= 0)
			vm->lay.f[other[k]].proof = XB_LP_UNUSED;
	const enum xb_field *mine = vm->flavor == XB_FLAVOR_JIT ? jit_line_fields : emu_line_fields;
	size_t nmine = vm->flavor == XB_FLAVOR_JIT ? XB_ARRAY_SIZE(jit_line_fields) : XB_ARRAY_SIZE(emu_line_fields);
	xb_layout_mark(vm, off, mine, nmine, ok,
		       "lists:reverse/2, gen_server:loop/7... are at a line of lists.erl, gen_server.erl...", why);
	/* none of them in the map (a map that stopped at its budget): no
	 * evidence either way */
	for (size_t k = 0; built && looked == 0 && k < nmine; k++)
		if (off[mine[k]] >= 0 && vm->lay.f[mine[k]].proof == XB_LP_FAILED) {
			vm->lay.f[mine[k]].proof = XB_LP_CONSISTENT;
			snprintf(vm->lay.f[mine[k]].note, sizeof(vm->lay.f[0].note),
				 "no well-known function in the code map to look at");
		}
}

/* ------------------------------------------------------------------ */
/* --alloc */

static const char *const alloc_names[] = { "sys_alloc", "temp_alloc", "sl_alloc", "std_alloc", "ll_alloc",
					   "eheap_alloc", "ets_alloc", "fix_alloc", "literal_alloc", "exec_alloc",
					   "binary_alloc", "driver_alloc", "test_alloc", "mseg_alloc" };

static bool known_alloc(const char *n)
{
	for (size_t i = 0; i < XB_ARRAY_SIZE(alloc_names); i++)
		if (strcmp(n, alloc_names[i]) == 0)
			return true;
	return false;
}

/* The allocators read with OFF: the known allocator types, each
 * numbered as erl_alloc.types says (alloc_no, the instance's name), the
 * carriers on their lists exactly those their statistics count, blocks
 * inside carriers, and among the fix_alloc lists one whose item size is
 * sizeof(Process). */
static bool alloc_ok(struct xb_vm *vm, char *why, size_t wlen)
{
	struct xb_alloc_info *ai = calloc(1, sizeof(*ai));
	if (!ai) {
		snprintf(why, wlen, "out of memory");
		return false;
	}
	bool ok = false;
	if (xb_alloc_read(vm, ai, XB_ALLOC_WALK) < 0) {
		snprintf(why, wlen, "the allocators do not read: %s", xb_err());
		goto out;
	}
	int known = 0, eheap = 0;
	for (size_t i = 0; i < ai->ntypes; i++) {
		const struct xb_alloc_type *a = &ai->type[i];
		known += known_alloc(a->name);
		eheap |= strcmp(a->name, "eheap_alloc") == 0 && a->mbcs_blocks > 0;
		uint64_t carriers = a->mbcs_carriers + a->pool_carriers;
		if (a->walked && (a->walked_mbcs != carriers || a->walked_sbcs != a->sbcs_carriers)) {
			snprintf(why, wlen, "%s: %llu+%llu carriers on its lists, its statistics say %llu+%llu",
				 a->name, (unsigned long long)a->walked_mbcs, (unsigned long long)a->walked_sbcs,
				 (unsigned long long)carriers, (unsigned long long)a->sbcs_carriers);
			goto out;
		}
		if (xb_alloc_blocks_bytes(a) > xb_alloc_carriers_bytes(a) ||
		    a->mbcs_blocks > a->mbcs_blocks_bytes || a->sbcs_blocks > a->sbcs_blocks_bytes ||
		    a->sbcs_blocks_bytes > a->sbcs_carriers_bytes) {
			snprintf(why, wlen, "%s: %llu bytes of blocks in %llu bytes of carriers", a->name,
				 (unsigned long long)xb_alloc_blocks_bytes(a),
				 (unsigned long long)xb_alloc_carriers_bytes(a));
			goto out;
		}
	}
	if (known < 6 || !eheap || !ai->walked) {
		snprintf(why, wlen, "%d known allocator types (of %zu), eheap_alloc %s, carrier walk %s", known,
			 ai->ntypes, eheap ? "has blocks" : "has no blocks", ai->walked ? "complete" : "incomplete");
		goto out;
	}
	bool proc_fix = false;
	for (int k = 0; k < ai->nfix; k++)
		proc_fix |= ai->fix_type_size[k] == (uint64_t)vm->off[XB_F_PROC_SIZE] && ai->fix_allocated[k] >= ai->fix_used[k];
	if (ai->fix_known && !proc_fix) {
		snprintf(why, wlen, "no fix_alloc list of sizeof(Process) items (%lld bytes)",
			 (long long)vm->off[XB_F_PROC_SIZE]);
		goto out;
	}
	ok = true;
out:
	free(ai);
	return ok;
}

void xb_layout_prove_alloc(struct xb_vm *vm, const int64_t *off)
{
	enum xb_field fields[XB_F_COUNT];
	size_t n = 0;
	for (int f = 0; f < XB_F_COUNT; f++)
		if (xb_field_specs[f].needs & XB_NEED_ALLOC && !(xb_field_specs[f].needs & ~XB_NEED_ALLOC))
			fields[n++] = (enum xb_field)f;
	char why[200] = "";
	int64_t saved[XB_F_COUNT];
	swap_in(vm, saved, off);
	bool ok = alloc_ok(vm, why, sizeof(why));
	swap_out(vm, saved);
	xb_layout_mark(vm, off, fields, n, ok,
		       "the allocators read as erl_alloc.types numbers them; the carriers on their lists are "
		       "the ones their statistics count; blocks fit their carriers",
		       why);
	/* the sizes of fix_alloc items (MONITOR, MSG_REF): among the fix lists */
	static const enum xb_field shared[] = { XB_F_MONDATAHEAP_SIZE, XB_F_MSGREF_SIZE };
	xb_layout_mark(vm, off, shared, XB_ARRAY_SIZE(shared), ok, "sizes of fix_alloc items", why);
}

/* ------------------------------------------------------------------ */
/* --contents */

static const enum xb_field contents_fields[] = { XB_F_FUNTHING_NUM_FREE, XB_F_FUNTHING_ENV, XB_F_FLATMAP_SIZE,
						 XB_F_FLATMAP_KEYS, XB_F_PROCBIN_SIZE, XB_F_HFRAG_MEM };

/* The heaps of the system's first processes, walked whole with OFF:
 * every word parses as part of an object up to htop (a fun or a map of
 * the wrong size would put the walk off its objects), and among them
 * funs and maps. */
void xb_layout_prove_contents(struct xb_vm *vm, const int64_t *off)
{
	int64_t saved[XB_F_COUNT];
	swap_in(vm, saved, off);
	struct xb_ptab t;
	char why[200] = "";
	int walked = 0, clean = 0;
	bool fun = false, map = false;
	if (xb_ptab_open(vm, &t) < 0) {
		snprintf(why, sizeof(why), "%s", xb_err());
	} else {
		uint32_t slot = 0;
		/* 40 heaps, and up to 200 until a fun and a map were among them */
		for (int k = 0; (k < 40 || (k < 200 && !(fun && map))) && xb_ptab_next(&t, &slot) && !xb_interrupted;
		     k++, slot++) {
			struct xb_hw_opts o = { 1u << 20, 1u << 20, 1 };
			struct xb_hw_result r;
			if (xb_heapwalk(&t, slot, &o, &r) < 0)
				continue;
			if (xb_verbose >= 2) {
				char pid[32];
				xb_proc_pid_text(vm, r.proc.pid, pid, sizeof(pid));
				fprintf(stderr, "layout: --contents proof: %s: %llu of %llu words parsed%s\n", pid,
					(unsigned long long)(r.words_read), (unsigned long long)r.words_total,
					r.whole ? "" : " (sampled)");
			}
			if (r.whole) {
				walked++;
				clean += r.words_unparsed == 0;
				if (r.words_unparsed && !why[0] && clean * 10 < walked * 9)
					snprintf(why, sizeof(why), "%llu of %llu words of %s's heap do not parse",
						 (unsigned long long)r.words_unparsed, (unsigned long long)r.words_total,
						 r.proc.pid ? "a process" : "?");
				for (size_t i = 0; i < r.nkinds; i++) {
					fun |= strcmp(r.kinds[i].name, "fun") == 0;
					map |= strcmp(r.kinds[i].name, "map") == 0;
				}
			}
			xb_heapwalk_free(&r);
		}
		xb_ptab_close(&t);
	}
	swap_out(vm, saved);
	/* a heap that changed while it was read (a process that ran) does
	 * not parse to its top either: most must */
	bool ok = walked >= 10 && clean * 10 >= walked * 9;
	if (ok)
		why[0] = 0;
	else if (!why[0])
		snprintf(why, sizeof(why), "%d heaps walked, %d parsed whole", walked, clean);
	xb_layout_mark(vm, off, contents_fields, XB_ARRAY_SIZE(contents_fields), ok,
		       "the first processes' heaps parse object by object up to htop, funs and maps among them", why);
	/* heaps that held no fun (or no map) say nothing against its fields'
	 * offsets, and nothing for them: CONSISTENT */
	static const enum xb_field funf[] = { XB_F_FUNTHING_NUM_FREE, XB_F_FUNTHING_ENV };
	static const enum xb_field mapf[] = { XB_F_FLATMAP_SIZE, XB_F_FLATMAP_KEYS };
	for (int w = 0; ok && w < 2; w++) {
		if (w ? map : fun)
			continue;
		for (int k = 0; k < 2; k++) {
			struct xb_fstate *st = &vm->lay.f[w ? mapf[k] : funf[k]];
			if (st->proof != XB_LP_PROVEN)
				continue;
			st->proof = XB_LP_CONSISTENT;
			snprintf(st->note, sizeof(st->note), "no %s among the %d heaps walked", w ? "map" : "fun", walked);
		}
	}
}

/* ------------------------------------------------------------------ */
/* process figures: messages, links and monitors, dictionaries, PSD */

/* The size of the allocator block holding P (erl_alloc_util.h: the word
 * before a block's memory is its header, the size in bits 3..39 of an
 * mbc block; MBC_ABLK_OFFSET_BITS and the flags around it), 0 when
 * unreadable.  A fixed-size object allocated once has exactly its size
 * + 8 (ABLK_HDR_SZ). */
static uint64_t block_size(struct xb_vm *vm, uint64_t p)
{
	uint64_t h;
	if (!p || p % 8 || xb_read_u64(&vm->mem, p - 8, &h) < 0)
		return 0;
	return h & ((1ull << 40) - 1) & ~7ull;
}

static const enum xb_field msg_fields[] = { XB_F_MSG_NEXT, XB_F_MSG_DATA, XB_F_MSG_M, XB_F_MSG_HFRAG,
					    XB_F_MSG_SIZE, XB_F_HFRAG_NEXT, XB_F_HFRAG_ALLOC_SIZE,
					    XB_F_HFRAG_USED_SIZE };

struct qcheck {
	int queues, messages, combined, bad;
	char why[160];
};

/* One process's inner queue with OFF: the chain from sig_qs.first ends
 * in the message whose next is where sig_qs.last points, holding
 * sig_qs.len messages (signals such as receive markers are not counted:
 * erl_proc_sig_queue.h); a message with its fragment inside
 * (data.attached = ERTS_MSG_COMBINED_HFRAG) has its term in that
 * fragment, used_size <= alloc_size. */
static uint64_t word_at(const uint8_t *b, size_t blen, int64_t at)
{
	uint64_t v = 0;
	if (at >= 0 && (size_t)at + 8 <= blen)
		memcpy(&v, b + at, 8);
	return v;
}

/* P's struct process was read into B (BLEN bytes) */
static void check_queue(struct xb_vm *vm, const int64_t *off, uint64_t p, const uint8_t *b, size_t blen,
			enum xb_field ffirst, enum xb_field flast, enum xb_field flen, struct qcheck *q)
{
	if (off[ffirst] < 0 || off[flast] < 0 || off[flen] < 0 || (size_t)off[ffirst] + 8 > blen ||
	    (size_t)off[flast] + 8 > blen || (size_t)off[flen] + 8 > blen)
		return;
	uint64_t first = word_at(b, blen, off[ffirst]), last = word_at(b, blen, off[flast]),
		 len = word_at(b, blen, off[flen]);
	if (!first)
		return;
	int64_t on = off[XB_F_MSG_NEXT], od = off[XB_F_MSG_DATA], om = off[XB_F_MSG_M], oh = off[XB_F_MSG_HFRAG];
	int64_t hu = off[XB_F_HFRAG_USED_SIZE], ha = off[XB_F_HFRAG_ALLOC_SIZE], hm = off[XB_F_HFRAG_MEM];
	if (on < 0 || od < 0 || om < 0 || oh < 0 || hu < 0 || ha < 0 || on > 256 || od > 256 || om > 256 ||
	    oh > 256 || hu > 64 || ha > 64 || hm < 0 || hm > 64)
		return;
	q->queues++;
	uint64_t m = first, n = 0, prev_next = p + (uint64_t)off[ffirst];
	struct xb_cycle c;
	xb_cycle_init(&c, first);
	for (int k = 0; m && k < 20000 && !xb_interrupted; k++) {
		uint64_t next, data, term;
		if (xb_read_u64(&vm->mem, m + (uint64_t)on, &next) < 0 || xb_read_u64(&vm->mem, m + (uint64_t)od, &data) < 0 ||
		    xb_read_u64(&vm->mem, m + (uint64_t)om, &term) < 0) {
			q->bad++;
			snprintf(q->why, sizeof(q->why), "a message at 0x%llx does not read", (unsigned long long)m);
			return;
		}
		if ((term & 3) != 0 || term == 0)
			n++; /* a message (a term, or a distribution message's non-value) */
		if (xb_verbose >= 3)
			fprintf(stderr, "layout: message 0x%llx: term 0x%llx data 0x%llx\n", (unsigned long long)m,
				(unsigned long long)term, (unsigned long long)data);
		/* where a message's term lives (erl_message.h): on the process's
		 * heap once it was moved there (data NULL: an ErtsMessageRef),
		 * in a heap fragment of its own (data.heap_frag), or in the one
		 * inside the message (data.attached = ERTS_MSG_COMBINED_HFRAG) */
		uint64_t ptr = term & ~(uint64_t)3;
		bool boxed = term && (term & 3) && (term & 3) != 3;
		if (boxed && data == 0) {
			uint64_t heap = word_at(b, blen, off[XB_F_PROC_HEAP]), hend = word_at(b, blen, off[XB_F_PROC_HEND]),
				 old = word_at(b, blen, off[XB_F_PROC_OLD_HEAP]),
				 old_end = word_at(b, blen, off[XB_F_PROC_OLD_HEND]);
			bool in = (ptr >= heap && ptr < hend) || (ptr >= old && ptr < old_end);
			if (!in) {
				q->bad++;
				snprintf(q->why, sizeof(q->why), "a message's term 0x%llx is not on its process's heap",
					 (unsigned long long)term);
				return;
			}
			q->combined++;
		} else if (boxed && data > 1) {
			uint64_t used;
			if (xb_read_u64(&vm->mem, data + (uint64_t)hu, &used) < 0 || ptr < data + (uint64_t)hm ||
			    ptr >= data + (uint64_t)hm + used * 8) {
				q->bad++;
				snprintf(q->why, sizeof(q->why), "a message's term 0x%llx is not in its fragment 0x%llx",
					 (unsigned long long)term, (unsigned long long)data);
				return;
			}
			q->combined++;
		}
		if (term && (term & 3) && data == 1) { /* erl_message.h ERTS_MSG_COMBINED_HFRAG */
			uint64_t used, alloc;
			uint64_t hf = m + (uint64_t)oh;
			if (xb_read_u64(&vm->mem, hf + (uint64_t)hu, &used) < 0 ||
			    xb_read_u64(&vm->mem, hf + (uint64_t)ha, &alloc) < 0 || used > alloc || alloc > (1ull << 32)) {
				q->bad++;
				snprintf(q->why, sizeof(q->why), "a message's fragment has used %llu of %llu words",
					 (unsigned long long)used, (unsigned long long)alloc);
				return;
			}
			/* a boxed or list term points into the fragment */
			uint64_t mem = hf + (uint64_t)hm;
			if ((term & 3) != 3 && (ptr < mem || ptr >= mem + used * 8)) {
				q->bad++;
				snprintf(q->why, sizeof(q->why), "a message's term 0x%llx is outside its fragment",
					 (unsigned long long)term);
				return;
			}
			/* ErtsMessage embeds the fragment last: its size is
			 * hfrag + sizeof(ErlHeapFragment) (mem[1]); the block
			 * holds that and used - 1 more words */
			uint64_t bs = block_size(vm, m), need = (uint64_t)off[XB_F_MSG_SIZE] + (alloc ? alloc - 1 : 0) * 8;
			if (off[XB_F_MSG_SIZE] != oh + hm + 8 || (bs && (bs < need + 8 || bs > need + 8 + 64))) {
				q->bad++;
				snprintf(q->why, sizeof(q->why), "sizeof(ErtsMessage) %lld: the message's block is %llu "
								 "bytes for %llu words", (long long)off[XB_F_MSG_SIZE],
					 (unsigned long long)bs, (unsigned long long)alloc);
				return;
			}
			q->combined++;
		}
		prev_next = m + (uint64_t)on;
		m = next;
		if (m && xb_cycle_seen(&c, m)) {
			q->bad++;
			snprintf(q->why, sizeof(q->why), "the message queue loops");
			return;
		}
	}
	if (m)
		return; /* longer than we look at: says nothing */
	if (prev_next != last || n != len) {
		/* a queue the process changes while we walk it */
		uint64_t last2, len2;
		if (xb_read_u64(&vm->mem, p + (uint64_t)off[XB_F_PROC_SIGQ_LAST], &last2) == 0 && last2 == last &&
		    xb_read_u64(&vm->mem, p + (uint64_t)off[XB_F_PROC_SIGQ_LEN], &len2) == 0 && len2 == len) {
			q->bad++;
			snprintf(q->why, sizeof(q->why), "the queue's chain ends at 0x%llx holding %llu messages; "
							 "last 0x%llx, len %llu", (unsigned long long)prev_next,
				 (unsigned long long)n, (unsigned long long)last, (unsigned long long)len);
		}
		return;
	}
	q->messages += (int)n;
}

/* the first processes of the table (the system's own, then the oldest)
 * are enough: a VM of a million processes is not walked whole to prove a
 * layout, and --dump of 10,000 stays within its reads */
#define PROCS_ROWS 1000

struct procs_walk {
	struct xb_vm *vm;
	const int64_t *off;
	struct qcheck q;
	int rows, unreadable;
	int psd, psd_exact, dict, dict_exact, dict_over;
	char why[160];
	uint64_t addr[PROCS_ROWS];
};

static int procs_row(const struct xb_proc *p, void *arg)
{
	struct procs_walk *w = arg;
	if (w->rows >= PROCS_ROWS)
		return 1;
	w->addr[w->rows++] = p->addr;
	if (p->partial & XB_PP_UNREADABLE)
		w->unreadable++;
	return 0;
}

/* check_queue, and where the queue did not hold, again on the process
 * read anew (twice at most): a queue that received or lost messages while
 * it was walked holds on a second look; at a wrong offset it does not. */
static void stable_queue(struct xb_vm *vm, const int64_t *off, uint64_t p, uint8_t *b, size_t blen,
			 enum xb_field ffirst, enum xb_field flast, enum xb_field flen, struct qcheck *q)
{
	for (int k = 0; k < 3; k++) {
		struct qcheck t = *q;
		check_queue(vm, off, p, b, blen, ffirst, flast, flen, &t);
		if (t.bad == q->bad || k == 2 || xb_interrupted) {
			*q = t;
			return;
		}
		if (xb_read(&vm->mem, p, b, blen) < 0)
			return; /* gone meanwhile */
	}
}

/* The rows' structs read in batches: their queues, PSD and dictionary */
static void procs_check(struct procs_walk *w)
{
	const int64_t *off = w->off;
	size_t win = off[XB_F_PROC_SIZE] > 0 && off[XB_F_PROC_SIZE] <= 8192 ? (size_t)off[XB_F_PROC_SIZE] : 1024;
	enum { BATCH = 256 };
	uint8_t *buf = malloc(BATCH * win);
	struct xb_readreq q[BATCH];
	for (int at = 0; buf && at < w->rows && !xb_interrupted; at += BATCH) {
		int n = w->rows - at < BATCH ? w->rows - at : BATCH;
		for (int k = 0; k < n; k++)
			q[k] = (struct xb_readreq){ w->addr[at + k], buf + (size_t)k * win, win, false };
		xb_read_many(&w->vm->mem, q, (size_t)n);
		for (int k = 0; k < n; k++) {
			if (!q[k].ok)
				continue;
			uint8_t *b = buf + (size_t)k * win;
			uint64_t p = w->addr[at + k];
			stable_queue(w->vm, off, p, b, win, XB_F_PROC_SIGQ_FIRST, XB_F_PROC_SIGQ_LAST, XB_F_PROC_SIGQ_LEN,
				     &w->q);
			stable_queue(w->vm, off, p, b, win, XB_F_PROC_SIGINQ_FIRST, XB_F_PROC_SIGINQ_LAST,
				     XB_F_PROC_SIGINQ_LEN, &w->q);
			uint64_t psd = word_at(b, win, off[XB_F_PROC_PSD]), dict = word_at(b, win, off[XB_F_PROC_DICTIONARY]);
			if (psd && off[XB_F_PSD_SIZE] > 0) {
				uint64_t bs = block_size(w->vm, psd);
				w->psd++;
				w->psd_exact += bs == (uint64_t)off[XB_F_PSD_SIZE] + 8;
			}
			if (dict && off[XB_F_PROCDICT_ARRAY_SIZE] >= 0 && off[XB_F_PROCDICT_SIZE] > 0) {
				uint32_t asz;
				uint64_t bs = block_size(w->vm, dict);
				if (xb_read_u32(&w->vm->mem, dict + (uint64_t)off[XB_F_PROCDICT_ARRAY_SIZE], &asz) == 0 &&
				    bs) {
					/* erl_process_dict.c PD_SZ2BYTES: sizeof(ProcDict) + (arraySize - 1)
					 * words; a dictionary shrunk in place keeps its larger block */
					uint64_t need = (uint64_t)off[XB_F_PROCDICT_SIZE] + ((uint64_t)asz - 1) * 8 + 8;
					w->dict++;
					w->dict_exact += asz && bs == need;
					w->dict_over += !asz || bs < need;
				}
			}
		}
	}
	free(buf);
}

static const enum xb_field tree_fields[] = { XB_F_MLNODE_SIZE, XB_F_MLNODE_LEFT, XB_F_MLNODE_RIGHT,
					     XB_F_MLNODE_NEXT, XB_F_MLNODE_OFFSET, XB_F_MONDATA_REFC,
					     XB_F_MONDATA_ORIGIN_TYPE, XB_F_MONDATA_ORIGIN_FLAGS,
					     XB_F_SIGINQBUFS_SLOTS, XB_F_SIGINQBUFS_NONEMPTY, XB_F_SIGINQBUF_SIZE,
					     XB_F_SIGINQBUF_QUEUE, XB_F_SIGINQ_FIRST };
static const enum xb_field size_only_fields[] = { XB_F_RECV_MARKER_SIZE, XB_F_MONDATA_SIZE, XB_F_MONSUSPEND_SIZE,
						  XB_F_MONDATAEXT_SIZE, XB_F_MONDATAHEAP_SIZE, XB_F_MSGREF_SIZE };

void xb_layout_prove_procs(struct xb_vm *vm, const int64_t *off)
{
	int64_t saved[XB_F_COUNT];
	swap_in(vm, saved, off);
	struct procs_walk w = { .vm = vm, .off = off };
	struct xb_ptab t;
	struct xb_ptab_stats st;
	bool opened = xb_ptab_open(vm, &t) == 0;
	if (opened) {
		xb_ptab_foreach(&t, XB_PROC_MEMORY, procs_row, &w, &st);
		xb_ptab_close(&t);
		procs_check(&w);
	} else {
		snprintf(w.why, sizeof(w.why), "%s", xb_err());
	}
	swap_out(vm, saved);
	char why[200];
	/* messages */
	bool mok = opened && w.q.bad <= 1 + w.q.queues / 50;
	snprintf(why, sizeof(why), "%s", w.q.why[0] ? w.q.why : "no message queue to look at");
	if (mok && (w.q.messages == 0 || w.q.combined == 0)) {
		for (size_t k = 0; k < XB_ARRAY_SIZE(msg_fields); k++)
			if (off[msg_fields[k]] >= 0) {
				vm->lay.f[msg_fields[k]].proof = XB_LP_CONSISTENT;
				vm->lay.f[msg_fields[k]].inv = "message queues: chains end at sig_qs.last, sig_qs.len long";
				snprintf(vm->lay.f[msg_fields[k]].note, sizeof(vm->lay.f[0].note),
					 "no live evidence: %d messages in %d queues, %d with their term seen",
					 w.q.messages, w.q.queues, w.q.combined);
			}
	} else {
		xb_layout_mark(vm, off, msg_fields, XB_ARRAY_SIZE(msg_fields), mok,
			       "message queues: the chain from sig_qs.first ends where sig_qs.last points, "
			       "sig_qs.len messages long; combined messages hold their term and fit their block",
			       why);
	}
	/* links, monitors, signal buffers: the walks read them all */
	bool tok = opened && w.rows > 0 && w.unreadable <= 1 + w.rows / 50;
	snprintf(why, sizeof(why), "%d of %d processes' links, monitors or queues did not read", w.unreadable, w.rows);
	xb_layout_mark(vm, off, tree_fields, XB_ARRAY_SIZE(tree_fields), tok,
		       "every process's link and monitor trees and signal queues walk to their ends", why);
	/* PSD: allocated once, exactly its size */
	static const enum xb_field psd_f[] = { XB_F_PSD_SIZE };
	snprintf(why, sizeof(why), "%d of %d PSD blocks are sizeof(ErtsPSD) + 8", w.psd_exact, w.psd);
	if (w.psd == 0) {
		if (off[XB_F_PSD_SIZE] >= 0) {
			vm->lay.f[XB_F_PSD_SIZE].proof = XB_LP_CONSISTENT;
			snprintf(vm->lay.f[XB_F_PSD_SIZE].note, sizeof(vm->lay.f[0].note), "no live evidence: no process has one");
		}
	} else {
		xb_layout_mark(vm, off, psd_f, 1, w.psd_exact * 3 >= w.psd * 2 && w.psd_exact >= 1, "the allocator block of each psd", why);
	}
	static const enum xb_field dict_f[] = { XB_F_PROCDICT_SIZE, XB_F_PROCDICT_ARRAY_SIZE };
	snprintf(why, sizeof(why), "%d of %d dictionaries' blocks are PD_SZ2BYTES(arraySize) + 8, %d smaller",
		 w.dict_exact, w.dict, w.dict_over);
	if (w.dict == 0) {
		for (int k = 0; k < 2; k++)
			if (off[dict_f[k]] >= 0) {
				vm->lay.f[dict_f[k]].proof = XB_LP_CONSISTENT;
				snprintf(vm->lay.f[dict_f[k]].note, sizeof(vm->lay.f[0].note),
					 "no live evidence: no process has a dictionary");
			}
	} else {
		xb_layout_mark(vm, off, dict_f, 2, w.dict_over == 0 && w.dict_exact * 2 >= w.dict,
			       "a dictionary's allocator block holds PD_SZ2BYTES(arraySize), exactly unless shrunk", why);
	}
	/* sizes only summed (erts_process_memory): no object of theirs to see
	 * on most VMs */
	for (size_t k = 0; k < XB_ARRAY_SIZE(size_only_fields); k++) {
		enum xb_field f = size_only_fields[k];
		if (off[f] <= 0 || vm->lay.f[f].proof == XB_LP_PROVEN) /* the allocators' proof saw them */
			continue;
		vm->lay.f[f].proof = off[f] < 4096 ? XB_LP_CONSISTENT : XB_LP_FAILED;
		vm->lay.f[f].inv = "a struct size, summed into process_info(P, memory)";
		snprintf(vm->lay.f[f].note, sizeof(vm->lay.f[0].note), "no live evidence: a size, read nowhere");
	}
}

/* ------------------------------------------------------------------ */
/* struct sizes from the VM's own fix_alloc lists */

/* erl_alloc.types: the FIXED_SIZE types whose item size is a struct we
 * count (erl_alloc.c erts_memory: PROC, MSG_REF, the timers; the
 * monitor and link data) */
static const struct {
	const char *type;
	enum xb_field f;
} fix_sizes[] = {
	{ "PROC", XB_F_PROC_SIZE },           { "MSG_REF", XB_F_MSGREF_SIZE },
	{ "LL_PTIMER", XB_F_TWTIMER_SIZE },   { "HL_PTIMER", XB_F_HLTIMER_SIZE },
	{ "BIF_TIMER", XB_F_BIFTIMER_SIZE },  { "MONITOR", XB_F_MONDATAHEAP_SIZE },
	{ "LINK", XB_F_ILINK_SIZE },
};

static int fix_index(const struct xb_vm *vm, const char *name)
{
	const char *l = vm->rel ? vm->rel->fix_types : NULL;
	for (int i = 0; l && *l; i++) {
		size_t n = strcspn(l, ",");
		if (strlen(name) == n && strncmp(l, name, n) == 0)
			return i;
		l += n + (l[n] == ',');
	}
	return -1;
}

/* Every fix_alloc instance keeps one list per FIXED_SIZE type with its
 * item size (erl_alloc_util.h ErtsAlcFixList_t.type_size): the sizes of
 * those structs, whatever objects exist.  The PROC list's size is
 * sizeof(Process), which the process table says too: the anchor that the
 * lists were read right.  ErtsMessage is an ErtsMessageRef followed by
 * its heap fragment (erl_message.h): hfrag at sizeof(ErtsMessageRef),
 * sizeof(ErtsMessage) that plus sizeof(ErlHeapFragment). */
void xb_layout_prove_fix_sizes(struct xb_vm *vm, int64_t *off, bool discover)
{
	struct xb_alloc_info *ai = calloc(1, sizeof(*ai));
	if (!ai)
		return;
	int64_t saved[XB_F_COUNT];
	swap_in(vm, saved, off);
	int rc = xb_alloc_read(vm, ai, 0);
	swap_out(vm, saved);
	int kp = fix_index(vm, "PROC");
	if (rc < 0 || !ai->fix_known || kp < 0 || kp >= ai->nfix ||
	    (int64_t)ai->fix_type_size[kp] != off[XB_F_PROC_SIZE]) {
		free(ai);
		return; /* no anchor: the other proofs decide */
	}
	bool changed = false;
	for (size_t i = 0; i < XB_ARRAY_SIZE(fix_sizes); i++) {
		enum xb_field f = fix_sizes[i].f;
		int k = fix_index(vm, fix_sizes[i].type);
		if (off[f] <= 0 || k < 0 || k >= ai->nfix || !ai->fix_type_size[k])
			continue;
		int64_t truth = (int64_t)ai->fix_type_size[k];
		if (truth != off[f] && discover && !vm->lay.mutating) {
			off[f] = truth;
			vm->lay.f[f].src = XB_LSRC_DISCOVERED;
			vm->lay.discovered++;
			changed = true;
		}
		char why[96];
		snprintf(why, sizeof(why), "the VM's %s fix list has items of %lld bytes", fix_sizes[i].type,
			 (long long)truth);
		enum xb_field one[1] = { f };
		xb_layout_mark(vm, off, one, 1, truth == off[f], "the item size of its fix_alloc list", why);
	}
	/* the message from its reference part */
	if (off[XB_F_MSGREF_SIZE] > 0 && off[XB_F_HFRAG_MEM] >= 0 && off[XB_F_MSG_HFRAG] >= 0 &&
	    vm->lay.f[XB_F_MSGREF_SIZE].proof == XB_LP_PROVEN) {
		int64_t hf = off[XB_F_MSGREF_SIZE], sz = hf + off[XB_F_HFRAG_MEM] + 8;
		if ((off[XB_F_MSG_HFRAG] != hf || off[XB_F_MSG_SIZE] != sz) && discover && !vm->lay.mutating) {
			if (off[XB_F_MSG_HFRAG] != hf)
				vm->lay.f[XB_F_MSG_HFRAG].src = XB_LSRC_DISCOVERED;
			if (off[XB_F_MSG_SIZE] != sz)
				vm->lay.f[XB_F_MSG_SIZE].src = XB_LSRC_DISCOVERED;
			vm->lay.discovered += (off[XB_F_MSG_HFRAG] != hf) + (off[XB_F_MSG_SIZE] != sz);
			off[XB_F_MSG_HFRAG] = hf;
			off[XB_F_MSG_SIZE] = sz;
			changed = true;
		}
		static const enum xb_field mf[] = { XB_F_MSG_HFRAG, XB_F_MSG_SIZE };
		xb_layout_mark(vm, off, mf, 2, off[XB_F_MSG_HFRAG] == hf && off[XB_F_MSG_SIZE] == sz,
			       "ErtsMessage: its fragment after sizeof(ErtsMessageRef), its size that plus the fragment's",
			       "sizeof(ErtsMessageRef) from the MSG_REF fix list");
	}
	/* ErtsRecvMarker begins with an ErtsSignal, a union the size of an
	 * ErtsMessageRef (erl_message.h): it grows and shrinks with it */
	if (off[XB_F_RECV_MARKER_SIZE] > 0 && vm->rel && vm->lay.f[XB_F_MSGREF_SIZE].proof == XB_LP_PROVEN) {
		const int64_t *t = xb_release_flavor(vm->rel, vm->flavor)->off;
		if (t[XB_F_RECV_MARKER_SIZE] > 0 && t[XB_F_MSGREF_SIZE] > 0) {
			int64_t want = off[XB_F_MSGREF_SIZE] + (t[XB_F_RECV_MARKER_SIZE] - t[XB_F_MSGREF_SIZE]);
			if (want != off[XB_F_RECV_MARKER_SIZE] && discover && !vm->lay.mutating) {
				off[XB_F_RECV_MARKER_SIZE] = want;
				vm->lay.f[XB_F_RECV_MARKER_SIZE].src = XB_LSRC_DISCOVERED;
				vm->lay.discovered++;
			}
			static const enum xb_field rf[] = { XB_F_RECV_MARKER_SIZE };
			xb_layout_mark(vm, off, rf, 1, want == off[XB_F_RECV_MARKER_SIZE],
				       "an ErtsSignal (sizeof(ErtsMessageRef), from its fix list) and the marker's own fields",
				       "not what sizeof(ErtsMessageRef) gives");
		}
	}
	(void)changed;
	free(ai);
}

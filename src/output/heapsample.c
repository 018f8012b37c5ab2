/* heapsample.c - erlang-heapsample's writers: table (80 columns), CSV,
 * JSON (src/base/json.c).  See include/xb/hsout.h. */
#define _GNU_SOURCE
#include "xb/hsout.h"
#include "xb/common.h"
#include "xb/json.h"

#include <inttypes.h>
#include <string.h>

const char *xb_hs_human(uint64_t b, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	if (b < 1024) {
		snprintf(buf, len, "%" PRIu64, b);
		return buf;
	}
	double v = (double)b;
	int u = -1;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, v < 10 ? "%.2f%c" : v < 100 ? "%.1f%c" : "%.0f%c", v, units[u]);
	return buf;
}

static const char *hs(int64_t b, char *buf, size_t len)
{
	if (b >= 0)
		return xb_hs_human((uint64_t)b, buf, len);
	char t[16];
	xb_hs_human((uint64_t)-b, t, sizeof(t));
	snprintf(buf, len, "-%s", t);
	return buf;
}

static const char *plus(int64_t b, char *buf, size_t len)
{
	if (b <= 0)
		return hs(b, buf, len);
	char t[16];
	xb_hs_human((uint64_t)b, t, sizeof(t));
	snprintf(buf, len, "+%s", t);
	return buf;
}

/* No control character reaches a terminal: C0, DEL, C1 (U+0080..U+009F,
 * which some terminals take as escapes) and bytes that are not UTF-8 are
 * replaced (xb_sanitize). */
static const char *clean(const char *s, char *buf, size_t len)
{
	xb_sanitize(s ? s : "", buf, len);
	return buf;
}

/* RFC 4180 field: quoted when it holds a comma, quote or line break;
 * control characters become '?'. */
static void csv_field(FILE *f, const char *s)
{
	char b[2048];
	clean(s, b, sizeof(b));
	if (!strpbrk(b, ",\"")) {
		fputs(b, f);
		return;
	}
	fputc('"', f);
	for (const char *c = b; *c; c++) {
		if (*c == '"')
			fputc('"', f);
		fputc(*c, f);
	}
	fputc('"', f);
}

/* ---- processes ---- */

int xb_hs_write_procs(FILE *f, enum xb_hs_format fmt, const struct xb_hs_proc *rows, size_t n,
		      const struct xb_hs_totals *tot)
{
	char a[8][24], t1[1024], t2[1024], t3[1024];
	if (fmt == XB_HS_JSON) {
		struct xb_json j;
		xb_json_init(&j, f, XB_JSON_PRETTY);
		xb_json_begin_array(&j);
		for (size_t i = 0; i < n; i++) {
			const struct xb_hs_proc *r = &rows[i];
			xb_json_begin_object(&j);
			xb_json_kv_string(&j, "pid", r->pid);
			xb_json_kv_string(&j, "name", r->name);
			xb_json_key(&j, "registered_name");
			if (r->registered_name)
				xb_json_string(&j, r->registered_name);
			else
				xb_json_null(&j);
			xb_json_kv_string(&j, "initial_call", r->initial_call);
			xb_json_kv_string(&j, "current_function", r->current_function);
			xb_json_kv_string(&j, "status", r->status);
			xb_json_kv_uint(&j, "memory_bytes", r->memory_bytes);
			xb_json_kv_uint(&j, "heap_words", r->heap_words);
			xb_json_kv_uint(&j, "old_heap_words", r->old_heap_words);
			xb_json_kv_uint(&j, "old_heap_used_words", r->old_heap_used_words);
			xb_json_kv_uint(&j, "stack_words", r->stack_words);
			xb_json_kv_uint(&j, "mbuf_words", r->mbuf_words);
			xb_json_kv_uint(&j, "message_queue_len", r->message_queue_len);
			xb_json_kv_uint(&j, "message_queue_bytes", r->message_queue_bytes);
			xb_json_kv_uint(&j, "bin_vheap_bytes", r->bin_vheap_bytes);
			xb_json_kv_uint(&j, "reductions", r->reductions);
			xb_json_kv_uint(&j, "links", r->links);
			xb_json_kv_uint(&j, "monitors", r->monitors);
			xb_json_kv_bool(&j, "partial", r->partial);
			xb_json_end_object(&j);
		}
		xb_json_end_array(&j);
		return xb_json_finish(&j);
	}
	if (fmt == XB_HS_CSV) {
		fputs("pid,name,registered_name,initial_call,current_function,status,memory_bytes,heap_words,"
		      "old_heap_words,old_heap_used_words,stack_words,mbuf_words,message_queue_len,"
		      "message_queue_bytes,bin_vheap_bytes,reductions,links,monitors,partial\n", f);
		for (size_t i = 0; i < n; i++) {
			const struct xb_hs_proc *r = &rows[i];
			csv_field(f, r->pid);
			fputc(',', f);
			csv_field(f, r->name);
			fputc(',', f);
			csv_field(f, r->registered_name ? r->registered_name : "");
			fputc(',', f);
			csv_field(f, r->initial_call);
			fputc(',', f);
			csv_field(f, r->current_function);
			fprintf(f, ",%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
				   ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s\n",
				r->status, r->memory_bytes, r->heap_words, r->old_heap_words, r->old_heap_used_words,
				r->stack_words, r->mbuf_words, r->message_queue_len, r->message_queue_bytes,
				r->bin_vheap_bytes, r->reductions, r->links, r->monitors, r->partial ? "true" : "false");
		}
		return 0;
	}
	/* 12 + 8 x 7 = 68 columns; the second line names the process. */
	fprintf(f, "%-12s %6s %6s %6s %6s %6s %6s %6s %6s\n", "PID", "MEMORY", "HEAP", "OLD", "STACK", "MBUF",
		"MSGQ", "BINARY", "REDS");
	for (size_t i = 0; i < n; i++) {
		const struct xb_hs_proc *r = &rows[i];
		char q[24];
		if (r->message_queue_len < 1000000)
			snprintf(q, sizeof(q), "%" PRIu64, r->message_queue_len);
		else
			snprintf(q, sizeof(q), "%.1fM", (double)r->message_queue_len / 1e6);
		char reds[24];
		if (r->reductions < 100000)
			snprintf(reds, sizeof(reds), "%" PRIu64, r->reductions);
		else if (r->reductions < 100000000)
			snprintf(reds, sizeof(reds), "%" PRIu64 "k", r->reductions / 1000);
		else
			snprintf(reds, sizeof(reds), "%" PRIu64 "M", r->reductions / 1000000);
		fprintf(f, "%-12s %6s %6s %6s %6s %6s %6s %6s %6s%s\n", clean(r->pid, t3, 64),
			xb_hs_human(r->memory_bytes, a[0], 24), xb_hs_human(r->heap_words * 8, a[1], 24),
			xb_hs_human(r->old_heap_words * 8, a[2], 24), xb_hs_human(r->stack_words * 8, a[3], 24),
			xb_hs_human(r->mbuf_words * 8, a[4], 24), q, xb_hs_human(r->bin_vheap_bytes, a[5], 24),
			reds, r->partial ? " *" : "");
		fprintf(f, "  %s%s%s\n", clean(r->name, t1, sizeof(t1)),
			strcmp(r->current_function, "-") ? "  in " : "",
			strcmp(r->current_function, "-") ? clean(r->current_function, t2, sizeof(t2)) : "");
	}
	if (tot)
		xb_hs_write_totals(f, tot);
	return 0;
}

uint64_t xb_hs_unowned(const struct xb_hs_totals *t)
{
	return t->vm_ptab + (t->regs_known ? t->regs_count * t->regs_block : 0) +
	       t->eheap_blocks * t->block_header + t->fix_free;
}

void xb_hs_write_totals(FILE *f, const struct xb_hs_totals *t)
{
	char a[6][24];
	fprintf(f, "total: %" PRIu64 " processes, %s (%" PRIu64 " bytes) as process_info(P, memory)\n"
		   "counts them; %s (%" PRIu64 " bytes) of it is in std_alloc (dictionaries,\n"
		   "PSDs, spilled argument registers), which erlang:memory/0 counts as system\n",
		t->processes, xb_hs_human(t->memory_bytes, a[0], 24), t->memory_bytes,
		xb_hs_human(t->system_bytes, a[1], 24), t->system_bytes);
	if (t->vm_known) {
		fprintf(f, "the VM's own figure, erlang:memory(processes): %s (%" PRIu64 " bytes) =\n"
			   "  eheap_alloc blocks %s + process structures %s + process table %s\n"
			   "  + links, monitors, message refs, timers %s%s\n",
			xb_hs_human(t->vm_processes, a[1], 24), t->vm_processes, xb_hs_human(t->vm_eheap, a[2], 24),
			xb_hs_human(t->vm_procs, a[3], 24), xb_hs_human(t->vm_ptab, a[4], 24),
			xb_hs_human(t->vm_fix_other, a[5], 24),
			t->vm_fix_known ? "" : "\n  (fix_alloc lists not recognised: structures not counted)");
		uint64_t unowned = xb_hs_unowned(t);
		fprintf(f, "of which no process owns %s (%" PRIu64 " bytes):\n", xb_hs_human(unowned, a[0], 24),
			unowned);
		fprintf(f, "  process table         %6s = %" PRIu64 " slots x %" PRIu64 " bytes\n",
			xb_hs_human(t->vm_ptab, a[0], 24), t->ptab_slots, t->ptab_slot_bytes);
		if (t->regs_known)
			fprintf(f, "  scheduler registers   %6s = %" PRIu64 " x %" PRIu64 " bytes (eheap_alloc blocks)\n",
				xb_hs_human(t->regs_count * t->regs_block, a[0], 24), t->regs_count, t->regs_block);
		else
			fprintf(f, "  scheduler registers   not known: %s\n", t->regs_why ? t->regs_why : "?");
		fprintf(f, "  eheap_alloc headers   %6s = %" PRIu64 " blocks x %" PRIu64 " bytes\n",
			xb_hs_human(t->eheap_blocks * t->block_header, a[0], 24), t->eheap_blocks, t->block_header);
		fprintf(f, "  free fix_alloc items  %6s = %" PRIu64 " bytes (kept for reuse)\n",
			xb_hs_human(t->fix_free, a[0], 24), t->fix_free);
		uint64_t rows = t->memory_bytes - (t->system_bytes <= t->memory_bytes ? t->system_bytes : 0);
		uint64_t owned = t->vm_processes > unowned ? t->vm_processes - unowned : 0;
		fprintf(f, "like with like: the rows less their std_alloc part, %s (%" PRIu64 "\n"
			   "bytes), are %.1f%% of erlang:memory(processes) less what no process\n"
			   "owns, %s (%" PRIu64 " bytes)\n",
			xb_hs_human(rows, a[0], 24), rows, owned ? 100.0 * (double)rows / (double)owned : 0.0,
			xb_hs_human(owned, a[1], 24), owned);
	} else {
		fprintf(f, "the VM's own figure for processes is not available: %s\n",
			t->vm_why ? t->vm_why : "unknown");
	}
	if (t->skipped_changed || t->skipped_gone || t->skipped_unreadable)
		fprintf(f, "not shown: %" PRIu64 " processes changed (garbage collected) during both\n"
			   "reads, %" PRIu64 " exited while read, %" PRIu64 " unreadable\n",
			t->skipped_changed, t->skipped_gone, t->skipped_unreadable);
	if (t->partial)
		fprintf(f, "* %" PRIu64 " processes: a message queue or link set too long to walk, or\n"
			   "  partly unreadable; their memory is a lower bound\n", t->partial);
}

/* ---- growth ---- */

int xb_hs_write_growth_header(FILE *f, enum xb_hs_format fmt)
{
	if (fmt == XB_HS_JSON)
		fputs("[", f);
	else if (fmt == XB_HS_CSV)
		fputs("interval,seconds,pid,name,current_function,new_process,full_sweep,memory_bytes_delta,"
		      "long_lived_bytes_delta,old_heap_used_bytes_delta,old_heap_bytes_delta,heap_bytes_delta,mbuf_bytes_delta,"
		      "bin_vheap_bytes_delta,message_queue_len_delta,message_queue_bytes_delta,reductions_delta\n", f);
	return 0;
}

static bool growth_first = true;

int xb_hs_write_growth(FILE *f, enum xb_hs_format fmt, const struct xb_hs_growth *rows, size_t n, bool last)
{
	char a[8][24], t1[1024], t2[1024];
	if (fmt == XB_HS_JSON) {
		for (size_t i = 0; i < n; i++) {
			const struct xb_hs_growth *r = &rows[i];
			struct xb_json j;
			/* one object per row, joined by the caller's array */
			fputs(growth_first ? "\n  " : ",\n  ", f);
			growth_first = false;
			xb_json_init(&j, f, XB_JSON_COMPACT);
			xb_json_begin_object(&j);
			xb_json_kv_uint(&j, "interval", r->interval);
			xb_json_kv_double(&j, "seconds", r->seconds, 6);
			xb_json_kv_string(&j, "pid", r->pid);
			xb_json_kv_string(&j, "name", r->name);
			xb_json_kv_string(&j, "current_function", r->current_function);
			xb_json_kv_bool(&j, "new_process", r->new_process);
			xb_json_kv_bool(&j, "full_sweep", r->full_sweep);
			xb_json_kv_int(&j, "memory_bytes_delta", r->memory_bytes);
			xb_json_kv_int(&j, "long_lived_bytes_delta", r->long_lived_bytes);
			xb_json_kv_int(&j, "old_heap_used_bytes_delta", r->old_heap_used_bytes);
			xb_json_kv_int(&j, "old_heap_bytes_delta", r->old_heap_bytes);
			xb_json_kv_int(&j, "heap_bytes_delta", r->heap_bytes);
			xb_json_kv_int(&j, "mbuf_bytes_delta", r->mbuf_bytes);
			xb_json_kv_int(&j, "bin_vheap_bytes_delta", r->bin_vheap_bytes);
			xb_json_kv_int(&j, "message_queue_len_delta", r->message_queue_len);
			xb_json_kv_int(&j, "message_queue_bytes_delta", r->message_queue_bytes);
			xb_json_kv_int(&j, "reductions_delta", r->reductions);
			xb_json_end_object(&j);
			if (j.error || j.depth)
				return xb_fail("internal error: malformed JSON row");
		}
		if (last)
			fputs(growth_first ? "]\n" : "\n]\n", f);
		return 0;
	}
	if (fmt == XB_HS_CSV) {
		for (size_t i = 0; i < n; i++) {
			const struct xb_hs_growth *r = &rows[i];
			fprintf(f, "%u,%.3f,", r->interval, r->seconds);
			csv_field(f, r->pid);
			fputc(',', f);
			csv_field(f, r->name);
			fputc(',', f);
			csv_field(f, r->current_function);
			fprintf(f, ",%s,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
				   ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n",
				r->new_process ? "true" : "false", r->full_sweep ? "true" : "false", r->memory_bytes, r->long_lived_bytes, r->old_heap_used_bytes,
				r->old_heap_bytes, r->heap_bytes, r->mbuf_bytes, r->bin_vheap_bytes,
				r->message_queue_len, r->message_queue_bytes, r->reductions);
		}
		return 0;
	}
	if (n)
		fprintf(f, "interval %u (%.1f s): growth, largest first\n", rows[0].interval, rows[0].seconds);
	fprintf(f, "%-12s %7s %10s %7s %7s %7s %7s %6s\n", "PID", "MEMORY", "LONG-LIVED", "OLD", "YOUNG",
		"MBUF", "BINARY", "MSGQ");
	for (size_t i = 0; i < n; i++) {
		const struct xb_hs_growth *r = &rows[i];
		char q[24];
		snprintf(q, sizeof(q), "%+" PRId64, r->message_queue_len);
		fprintf(f, "%-12s %7s %10s %7s %7s %7s %7s %6s\n", clean(r->pid, t1, 64), plus(r->memory_bytes, a[0], 24),
			plus(r->long_lived_bytes, a[1], 24), plus(r->old_heap_bytes, a[2], 24),
			plus(r->heap_bytes, a[3], 24), plus(r->mbuf_bytes, a[4], 24),
			plus(r->bin_vheap_bytes, a[5], 24), q);
		fprintf(f, "  %s%s%s%s%s\n", clean(r->name, t1, sizeof(t1)), r->new_process ? " (new)" : "",
			r->full_sweep ? " (full sweep)" : "", strcmp(r->current_function, "-") ? "  in " : "",
			strcmp(r->current_function, "-") ? clean(r->current_function, t2, sizeof(t2)) : "");
	}
	if (!n)
		fputs("  (no process grew)\n", f);
	fputs("LONG-LIVED: growth of the data that survived a garbage collection (old heap\n"
	      "used + young heap below high_water); OLD, YOUNG: heap sizes; BINARY:\n"
	      "off-heap binaries referenced; MEMORY as process_info(P, memory).\n"
	      "(full sweep): a full-sweep collection moved the old heap into the young one\n"
	      "meanwhile: what survives shows there, below high_water, until promoted again.\n", f);
	return 0;
}

/* ---- allocators ---- */

static double usage(const struct xb_alloc_type *t)
{
	uint64_t c = xb_alloc_carriers_bytes(t);
	return c ? (double)xb_alloc_blocks_bytes(t) / (double)c : 0;
}

static bool frag(const struct xb_alloc_type *t, double *v)
{
	if (!t->walked || !t->largest_known)
		return false;
	*v = t->free_bytes ? (double)(t->free_bytes - (t->largest_free < t->free_bytes ? t->largest_free : t->free_bytes)) /
				      (double)t->free_bytes
			   : 0;
	return true;
}

int xb_hs_write_alloc(FILE *f, enum xb_hs_format fmt, const struct xb_alloc_info *ai, const struct xb_hs_rss *rss)
{
	char a[8][24];
	if (fmt == XB_HS_JSON) {
		struct xb_json j;
		xb_json_init(&j, f, XB_JSON_PRETTY);
		xb_json_begin_array(&j);
		for (size_t i = 0; i < ai->ntypes; i++) {
			const struct xb_alloc_type *t = &ai->type[i];
			double fr;
			xb_json_begin_object(&j);
			xb_json_kv_string(&j, "allocator", t->name);
			xb_json_kv_uint(&j, "instances", (uint64_t)t->instances);
			xb_json_kv_uint(&j, "mbcs_carriers", t->mbcs_carriers + t->pool_carriers);
			xb_json_kv_uint(&j, "mbcs_carriers_bytes", t->mbcs_carriers_bytes + t->pool_carriers_bytes);
			xb_json_kv_uint(&j, "mbcs_blocks", t->mbcs_blocks + t->pool_blocks);
			xb_json_kv_uint(&j, "mbcs_blocks_bytes", t->mbcs_blocks_bytes + t->pool_blocks_bytes);
			xb_json_kv_uint(&j, "mbcs_pool_carriers", t->pool_carriers);
			xb_json_kv_uint(&j, "mbcs_pool_carriers_bytes", t->pool_carriers_bytes);
			xb_json_kv_uint(&j, "mbcs_pool_blocks_bytes", t->pool_blocks_bytes);
			xb_json_kv_uint(&j, "sbcs_carriers", t->sbcs_carriers);
			xb_json_kv_uint(&j, "sbcs_carriers_bytes", t->sbcs_carriers_bytes);
			xb_json_kv_uint(&j, "sbcs_blocks", t->sbcs_blocks);
			xb_json_kv_uint(&j, "sbcs_blocks_bytes", t->sbcs_blocks_bytes);
			xb_json_kv_double(&j, "usage", usage(t), 6);
			xb_json_key(&j, "fragmentation");
			if (frag(t, &fr))
				xb_json_double(&j, fr, 6);
			else
				xb_json_null(&j);
			xb_json_key(&j, "free_bytes");
			if (t->walked)
				xb_json_uint(&j, t->free_bytes);
			else
				xb_json_null(&j);
			xb_json_key(&j, "largest_free_block_bytes");
			if (t->walked && t->largest_known)
				xb_json_uint(&j, t->largest_free);
			else
				xb_json_null(&j);
			xb_json_key(&j, "resident_bytes");
			if (t->walked && ai->resident_known)
				xb_json_uint(&j, t->resident);
			else
				xb_json_null(&j);
			xb_json_key(&j, "resident_free_bytes");
			if (t->walked && ai->resident_known)
				xb_json_uint(&j, t->resident_free);
			else
				xb_json_null(&j);
			xb_json_end_object(&j);
		}
		xb_json_end_array(&j);
		return xb_json_finish(&j);
	}
	if (fmt == XB_HS_CSV) {
		fputs("allocator,instances,mbcs_carriers,mbcs_carriers_bytes,mbcs_blocks,mbcs_blocks_bytes,"
		      "mbcs_pool_carriers,mbcs_pool_carriers_bytes,mbcs_pool_blocks_bytes,sbcs_carriers,"
		      "sbcs_carriers_bytes,sbcs_blocks,sbcs_blocks_bytes,usage,fragmentation,free_bytes,"
		      "largest_free_block_bytes,resident_bytes,resident_free_bytes\n", f);
		for (size_t i = 0; i < ai->ntypes; i++) {
			const struct xb_alloc_type *t = &ai->type[i];
			double fr;
			fprintf(f, "%s,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
				   ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.6f,",
				t->name, t->instances, t->mbcs_carriers + t->pool_carriers,
				t->mbcs_carriers_bytes + t->pool_carriers_bytes, t->mbcs_blocks + t->pool_blocks,
				t->mbcs_blocks_bytes + t->pool_blocks_bytes, t->pool_carriers, t->pool_carriers_bytes,
				t->pool_blocks_bytes, t->sbcs_carriers, t->sbcs_carriers_bytes, t->sbcs_blocks,
				t->sbcs_blocks_bytes, usage(t));
			if (frag(t, &fr))
				fprintf(f, "%.6f", fr);
			fputc(',', f);
			if (t->walked)
				fprintf(f, "%" PRIu64, t->free_bytes);
			fputc(',', f);
			if (t->walked && t->largest_known)
				fprintf(f, "%" PRIu64, t->largest_free);
			fputc(',', f);
			if (t->walked && ai->resident_known)
				fprintf(f, "%" PRIu64 ",%" PRIu64, t->resident, t->resident_free);
			else
				fputc(',', f);
			fputc('\n', f);
		}
		return 0;
	}
	fprintf(f, "%-16s %19s %19s\n", "", "-- MULTIBLOCK ----", "-- SINGLE-BLOCK --");
	fprintf(f, "%-16s %5s %6s %6s %5s %6s %6s %6s %6s\n", "ALLOCATOR", "CARR", "BYTES", "BLOCKS", "CARR",
		"BYTES", "BLOCKS", "USAGE", "FRAG");
	for (size_t i = 0; i < ai->ntypes; i++) {
		const struct xb_alloc_type *t = &ai->type[i];
		double fr;
		char fs[16] = "-";
		if (frag(t, &fr))
			snprintf(fs, sizeof(fs), "%.1f%%", 100 * fr);
		char us[16];
		snprintf(us, sizeof(us), "%.1f%%", 100 * usage(t));
		fprintf(f, "%-16s %5" PRIu64 " %6s %6s %5" PRIu64 " %6s %6s %6s %6s\n", t->name,
			t->mbcs_carriers + t->pool_carriers,
			xb_hs_human(t->mbcs_carriers_bytes + t->pool_carriers_bytes, a[0], 24),
			xb_hs_human(t->mbcs_blocks_bytes + t->pool_blocks_bytes, a[1], 24), t->sbcs_carriers,
			xb_hs_human(t->sbcs_carriers_bytes, a[2], 24), xb_hs_human(t->sbcs_blocks_bytes, a[3], 24), us,
			fs);
	}
	fputs("BYTES: carrier bytes; BLOCKS: bytes in allocated blocks (mbcs include the\n"
	      "carrier pool); USAGE: blocks / carriers; FRAG: (free - largest free block) /\n"
	      "free in multiblock carriers ('-': the strategy keeps no largest-free figure).\n", f);
	if (rss)
		xb_hs_write_rss(f, ai, rss);
	return 0;
}

void xb_hs_write_rss(FILE *f, const struct xb_alloc_info *ai, const struct xb_hs_rss *r)
{
	char a[8][24];
	(void)ai;
	if (!r->known) {
		fputs("RSS: /proc/PID/smaps could not be read\n", f);
		return;
	}
	fprintf(f, "RSS: %s of anonymous read-write memory resident (%s mapped; smaps)\n",
		xb_hs_human(r->anon_rw_rss, a[0], 24), xb_hs_human(r->anon_rw_size, a[1], 24));
	if (!r->resident_known) {
		fprintf(f, "  carriers: %s, blocks in them %s; which pages are resident is\n"
			   "  unknown (/proc/PID/pagemap unreadable, or a carrier list loops)\n",
			xb_hs_human(r->carriers_bytes, a[2], 24), xb_hs_human(r->blocks_bytes, a[3], 24));
		return;
	}
	uint64_t outside = r->anon_rw_rss > r->carriers_resident ? r->anon_rw_rss - r->carriers_resident : 0;
	fprintf(f, "  in allocator carriers:     %7s resident of %s (pagemap)\n",
		xb_hs_human(r->carriers_resident, a[2], 24), xb_hs_human(r->carriers_bytes, a[3], 24));
	fprintf(f, "    holding blocks:          %7s\n", xb_hs_human(r->blocks_bytes, a[4], 24));
	fprintf(f, "    resident, not in blocks: %7s (%.1f%% of RSS: free carrier space)\n",
		xb_hs_human(r->resident_free, a[5], 24),
		r->anon_rw_rss ? 100.0 * (double)r->resident_free / (double)r->anon_rw_rss : 0.0);
	fprintf(f, "  outside carriers:          %7s (unaccounted: stacks, libc malloc, ...)\n",
		xb_hs_human(outside, a[6], 24));
}

/* ---- heap contents ---- */

int xb_hs_write_contents(FILE *f, enum xb_hs_format fmt, const struct xb_hs_contents *c)
{
	char t1[1024], a[4][24];
	if (fmt == XB_HS_JSON) {
		struct xb_json j;
		xb_json_init(&j, f, XB_JSON_PRETTY);
		xb_json_begin_array(&j);
		for (size_t i = 0; i < c->nkinds; i++) {
			const struct xb_hs_kind *k = &c->kinds[i];
			xb_json_begin_object(&j);
			xb_json_kv_string(&j, "pid", c->pid);
			xb_json_kv_string(&j, "kind", k->kind);
			xb_json_kv_uint(&j, "words", k->words);
			xb_json_kv_uint(&j, "objects", k->objects);
			xb_json_kv_double(&j, "share", k->share, 6);
			xb_json_kv_double(&j, "ci95", k->ci95, 6);
			xb_json_kv_uint(&j, "heap_words_read", c->words_read);
			xb_json_kv_uint(&j, "heap_words_total", c->words_total);
			xb_json_end_object(&j);
		}
		xb_json_end_array(&j);
		return xb_json_finish(&j);
	}
	if (fmt == XB_HS_CSV) {
		fputs("pid,kind,words,objects,share,ci95,heap_words_read,heap_words_total\n", f);
		for (size_t i = 0; i < c->nkinds; i++) {
			const struct xb_hs_kind *k = &c->kinds[i];
			csv_field(f, c->pid);
			fputc(',', f);
			csv_field(f, k->kind);
			fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%.6f,%.6f,%" PRIu64 ",%" PRIu64 "\n", k->words, k->objects,
				k->share, k->ci95, c->words_read, c->words_total);
		}
		return 0;
	}
	fprintf(f, "heap of %s (%s): %s in %" PRIu64 " words\n%s\n", clean(c->pid, t1, 64),
		c->name, xb_hs_human(c->words_total * 8, a[0], 24), c->words_total, c->method);
	fprintf(f, "%-40s %7s %7s %7s %9s\n", "KIND", "SHARE", "+-95%", "BYTES", "OBJECTS");
	for (size_t i = 0; i < c->nkinds; i++) {
		const struct xb_hs_kind *k = &c->kinds[i];
		char ci[24];
		snprintf(ci, sizeof(ci), "%.1f", 100 * k->ci95);
		fprintf(f, "%-40.40s %6.1f%% %7s %7s %9" PRIu64 "\n", clean(k->kind, t1, sizeof(t1)), 100 * k->share,
			ci, xb_hs_human(k->words * 8, a[1], 24), k->objects);
	}
	if (c->offheap_bin_bytes)
		fprintf(f, "off-heap binaries referenced from the heap: %s (not heap words)\n",
			xb_hs_human(c->offheap_bin_bytes, a[2], 24));
	return 0;
}

/* frames.c - naming the frames of a resolved sample. */
#define _GNU_SOURCE
#include "xb/frames.h"
#include "xb/common.h"
#include "xb/demangle.h"
#include "xb/names.h"

#include <stdio.h>
#include <string.h>

void xb_frames_init(struct xb_frames *fr, struct xb_vm *vm, struct xb_codemap *cm,
		    struct xb_profile *p, bool include_kernel)
{
	memset(fr, 0, sizeof(*fr));
	fr->vm = vm;
	fr->cm = cm;
	fr->p = p;
	fr->include_kernel = include_kernel;
	if (include_kernel)
		xb_kallsyms_load(&fr->ksyms);
}

void xb_frames_free(struct xb_frames *fr)
{
	xb_kallsyms_free(&fr->ksyms);
}

void xb_frames_flush(struct xb_frames *fr)
{
	memset(fr->pccache, 0, sizeof(fr->pccache));
}

void xb_frames_native_name(struct xb_frames *fr, uint64_t pc, bool exact, char *name, size_t nlen,
			   char *tag, size_t tlen)
{
	struct xb_modsyms *m;
	uint64_t look = exact ? pc : pc - 1;
	const struct xb_sym *s = xb_symbols_addr(&fr->vm->syms, look, &m);
	if (s) {
		char d[512];
		snprintf(name, nlen, "%s", xb_demangle(s->name, d, sizeof(d)));
		snprintf(tag, tlen, "[%s]", m->name);
	} else if (m) {
		/* A static function of a stripped binary has no name: say so
		 * rather than borrow a neighbour's. */
		snprintf(name, nlen, "[unknown]");
		snprintf(tag, tlen, "[%s]", m->name);
	} else {
		const struct xb_map *mp = xb_maps_find(&fr->vm->mem.maps, look);
		const char *base = mp && mp->path[0] ? strrchr(mp->path, '/') : NULL;
		snprintf(name, nlen, "[unknown]");
		snprintf(tag, tlen, "[%s]", base ? base + 1 : mp && mp->path[0] ? mp->path : "anon");
	}
}

const struct xb_code *xb_frames_jit_here(struct xb_frames *fr, const struct xb_unwind *uw)
{
	if (fr->vm->flavor != XB_FLAVOR_JIT || uw->stop != XB_UW_REACHED_ERLANG)
		return NULL;
	const struct xb_code *here =
		xb_codemap_find(fr->cm, uw->erlang_pc_exact ? uw->erlang_pc : uw->erlang_pc - 1);
	return here && here->kind == XB_CODE_OTHER ? here : NULL;
}

const char *xb_frames_code_name(const struct xb_frames *fr, const struct xb_code *c, char *buf,
				size_t len)
{
	return fr->erlang_names ? c->name : xb_elixir_name(c->name, buf, len);
}

uint64_t xb_frames_line_addr(const struct xb_estack *es, unsigned k)
{
	return es->addrs[k] - (k > 0 || es->leaf_ret ? 1 : 0);
}

/* Frame K of ES with its source line (--lines): a frame per function and
 * line, cached by the call's address for this code map. */
static uint32_t erlang_line_id(struct xb_frames *fr, const struct xb_estack *es, unsigned k)
{
	const struct xb_code *code = es->frames[k];
	uint64_t a = xb_frames_line_addr(es, k);
	size_t h = (size_t)(a * 0x9E3779B97F4A7C15ull >> 52);
	if (fr->linecache[h].addr == a && fr->linecache[h].gen == fr->cm->gen)
		return fr->linecache[h].id;
	char buf[1200];
	const char *file = NULL;
	uint32_t line = 0;
	if (xb_codemap_line(fr->vm, fr->cm, code, a, &file, &line) < 0)
		file = NULL;
	uint32_t id = xb_profile_intern_at(fr->p, xb_frames_code_name(fr, code, buf, sizeof(buf)), "[Erlang]",
					   XB_FK_ERLANG, file, line);
	fr->linecache[h].addr = a;
	fr->linecache[h].gen = fr->cm->gen;
	fr->linecache[h].id = id;
	return id;
}

static uint32_t mark(struct xb_frames *fr, const char *what)
{
	return xb_profile_intern(fr->p, what, XB_MARK_TAG, XB_FK_MARK);
}

uint32_t xb_frames_ids(struct xb_frames *fr, const struct xb_sample *s, const struct xb_unwind *uw,
		       const struct xb_estack *es, uint32_t *ids, uint32_t *nnative)
{
	uint32_t n = 0, max = XB_MAX_FRAMES - 2; /* room for the marks */
	char name[512], tag[300];
	if (fr->include_kernel)
		for (unsigned k = 0; k < s->nkips && n < max; k++)
			ids[n++] = xb_profile_intern(fr->p, xb_kallsyms_name(&fr->ksyms, s->kips[k]), "[kernel]",
						     XB_FK_KERNEL);
	for (unsigned k = 0; k < uw->n && n < max; k++) {
		/* Direct-mapped cache pc -> frame id: symbol lookup and
		 * interning cost more than the rest of a sample. */
		uint64_t key = uw->pcs[k] * 2 + uw->activation[k];
		size_t h = (size_t)(key * 0x9E3779B97F4A7C15ull >> 52);
		if (fr->pccache[h].key != key) {
			xb_frames_native_name(fr, uw->pcs[k], uw->activation[k], name, sizeof(name), tag,
					      sizeof(tag));
			fr->pccache[h].key = key;
			fr->pccache[h].id = xb_profile_intern(fr->p, name, tag, XB_FK_NATIVE);
		}
		ids[n++] = fr->pccache[h].id;
	}
	const struct xb_code *here = xb_frames_jit_here(fr, uw);
	char cbuf[1200];
	if (here && n < max)
		ids[n++] = xb_profile_intern(fr->p, xb_frames_code_name(fr, here, cbuf, sizeof(cbuf)), "[JIT]",
					     XB_FK_JIT);
	else if (uw->stop == XB_UW_REACHED_ERLANG && es->status != XB_ES_OK &&
		 fr->vm->flavor == XB_FLAVOR_EMU && n < max) {
		/* The interpreter loop with no process on it (scheduling). */
		xb_frames_native_name(fr, uw->erlang_pc, uw->erlang_pc_exact, name, sizeof(name), tag,
				      sizeof(tag));
		ids[n++] = xb_profile_intern(fr->p, name, tag, XB_FK_NATIVE);
	}
	*nnative = n;
	for (unsigned k = 0; k < es->n && n < max; k++) {
		struct xb_code *code = (struct xb_code *)es->frames[k];
		if (fr->lines) {
			ids[n++] = erlang_line_id(fr, es, k);
			continue;
		}
		/* code->user caches the id: valid for this map and profile.
		 * With FILES, the module's source file where its line table
		 * names one (pprof's filename, speedscope's file; line 0: the
		 * text outputs show a location only with --lines); without,
		 * no line table is read on the sampling path. */
		if (!code->user) {
			const char *file = NULL;
			uint32_t line;
			if (!fr->files ||
			    (xb_codemap_line(fr->vm, fr->cm, code, code->start, &file, &line) < 0 &&
			     (code->end <= code->start ||
			      xb_codemap_line(fr->vm, fr->cm, code, code->end - 1, &file, &line) < 0)))
				file = NULL;
			code->user = xb_profile_intern_at(fr->p, xb_frames_code_name(fr, code, cbuf, sizeof(cbuf)),
							  "[Erlang]", XB_FK_ERLANG, file, 0) + 1;
		}
		ids[n++] = code->user - 1;
	}
	/* Only the innermost function is known (erlstack.c, leaf_only):
	 * say so where the callers would be, rather than let a flame graph
	 * show the function as a root. */
	if (es->partial)
		ids[n++] = mark(fr, XB_CALLERS_UNKNOWN);
	/* Cut at --max-callchain-depth (native or Erlang): the root is not
	 * the real root. */
	else if (uw->stop == XB_UW_DEPTH_LIMIT || es->truncated)
		ids[n++] = mark(fr, XB_TRUNCATED);
	return n;
}

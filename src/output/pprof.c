/* pprof.c - a profile as gzipped perftools.profiles.Profile
 * (vendor/pprof/profile.proto, encoded by protobuf-c's generated code,
 * gzipped by zlib as it is packed).
 *
 *   sample_type  [samples/count, cpu/nanoseconds]: value[1] = count x period
 *                (samples/count alone when the rate is unknown: --period)
 *   period_type  cpu/nanoseconds, period = the metadata's period_ns
 *                (samples/count, 1, when unknown)
 *   time_nanos, duration_nanos from the metadata; comments: the title,
 *   processed/received, --blame, the [truncated] note
 *   Function     one per frame used: name = the frame's name as shown
 *                (xb_display_name: valid UTF-8, no control characters);
 *                system_name = the same for native, kernel and JIT frames
 *                (symbols), none for Erlang, synthetic and group frames:
 *                pprof takes a function whose system_name equals its name
 *                for a demangled C++ symbol and "simplifies" it, cutting
 *                "<...>" and "(...)" out of names holding < > [ ] or ::, so
 *                "<0.80.0> worker" would read " worker" and "<0.81.0>"
 *                "<unknown>"; filename = the frame's source file when
 *                known (an Erlang frame: its module's, from the module's
 *                line table; never a guessed "MODULE.erl", which could
 *                name a file that does not exist), else, for native and
 *                kernel frames, the native module (the tag without
 *                brackets: "beam.smp", "libc.so.6", "kernel"); JIT,
 *                synthetic and group frames have none
 *   Location     one per frame used, id = its Function's id, one Line
 *                (the frame's line, 0 when unknown); no mappings: frames
 *                are named already
 *   Sample       one per distinct stack, location ids leaf first; a group
 *                frame (--by) is the root frame. */
#define _GNU_SOURCE
#include "xb/output.h"
#include "xb/output_util.h"
#include "xb/common.h"

#include "profile.pb-c.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- the string table --------------------------------------------------- */

struct strtab {
	char **s; /* owned */
	size_t n, cap;
	uint32_t *hash; /* open addressing: index + 1 */
	size_t hcap;
};

static uint64_t str_hash(const char *s)
{
	return xb_text_hash(s); /* (seeded: names come from the target) */
}

static int strtab_rehash(struct strtab *t)
{
	size_t cap = t->hcap ? t->hcap * 2 : 1024;
	uint32_t *h = calloc(cap, sizeof(*h));
	if (!h)
		return -1;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = str_hash(t->s[i]) & (cap - 1);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = (uint32_t)i + 1;
	}
	free(t->hash);
	t->hash = h;
	t->hcap = cap;
	return 0;
}

/* Index of S (taken: freed here when already present), -1 out of memory. */
static int64_t strtab_take(struct strtab *t, char *s)
{
	if (!s)
		return -1;
	if ((t->n + 1) * 2 > t->hcap && strtab_rehash(t) < 0) {
		free(s);
		return -1;
	}
	size_t j = str_hash(s) & (t->hcap - 1);
	while (t->hash[j]) {
		if (strcmp(t->s[t->hash[j] - 1], s) == 0) {
			free(s);
			return t->hash[j] - 1;
		}
		j = (j + 1) & (t->hcap - 1);
	}
	if (xb_grow((void **)&t->s, &t->cap, t->n + 1, sizeof(*t->s)) < 0) {
		free(s);
		return -1;
	}
	t->s[t->n] = s;
	t->hash[j] = (uint32_t)t->n + 1;
	return (int64_t)t->n++;
}

static int64_t strtab_add(struct strtab *t, const char *s)
{
	return strtab_take(t, xb_display_name(s));
}

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->hash);
}

/* ---- gzip as protobuf-c packs ------------------------------------------- */

struct gz_sink {
	ProtobufCBuffer base;
	FILE *f;
	z_stream zs;
	int zerr, werr; /* zlib's error, errno of a failed write */
	size_t used; /* bytes waiting in in[] */
	unsigned char in[1 << 16], out[1 << 16];
};

static void gz_deflate(struct gz_sink *g, int flush)
{
	g->zs.next_in = g->in;
	g->zs.avail_in = (uInt)g->used;
	do {
		g->zs.next_out = g->out;
		g->zs.avail_out = sizeof(g->out);
		int rc = deflate(&g->zs, flush);
		if (rc == Z_STREAM_ERROR) {
			g->zerr = rc;
			return;
		}
		size_t n = sizeof(g->out) - g->zs.avail_out;
		if (fwrite(g->out, 1, n, g->f) != n && !g->werr)
			g->werr = errno ? errno : EIO;
	} while (g->zs.avail_out == 0);
	g->used = 0;
}

/* protobuf-c appends field by field: gather them, deflate 64 KiB at a time. */
static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct gz_sink *g = (struct gz_sink *)b;
	while (len && !g->zerr) {
		size_t k = sizeof(g->in) - g->used;
		if (k > len)
			k = len;
		memcpy(g->in + g->used, data, k);
		g->used += k;
		data += k;
		len -= k;
		if (g->used == sizeof(g->in))
			gz_deflate(g, Z_NO_FLUSH);
	}
}

/* ---- the profile -------------------------------------------------------- */

struct pp {
	struct strtab st;
	Perftools__Profiles__ValueType vt[3], *vtp[2];
	Perftools__Profiles__Function *fun, **funp;
	Perftools__Profiles__Location *loc, **locp;
	Perftools__Profiles__Line *line, **linep;
	Perftools__Profiles__Sample *smp, **smpp;
	uint64_t *locids;
	int64_t *values, *comments;
	uint32_t *fid; /* frame id -> function/location id, 0: unused */
	size_t ntypes; /* sample types written: 2, or 1 when the rate is unknown */
};

static void pp_free(struct pp *x)
{
	strtab_free(&x->st);
	free(x->fun);
	free(x->funp);
	free(x->loc);
	free(x->locp);
	free(x->line);
	free(x->linep);
	free(x->smp);
	free(x->smpp);
	free(x->locids);
	free(x->values);
	free(x->comments);
	free(x->fid);
}

static int64_t value_type(struct pp *x, Perftools__Profiles__ValueType *vt, const char *type,
			  const char *unit)
{
	perftools__profiles__value_type__init(vt);
	vt->type = strtab_add(&x->st, type);
	vt->unit = strtab_add(&x->st, unit);
	return vt->type < 0 || vt->unit < 0 ? -1 : 0;
}

/* Function.filename: see the comment at the top. */
static int64_t filename_of(struct pp *x, const struct xb_fname *fn)
{
	if (fn->file)
		return strtab_add(&x->st, fn->file);
	if (fn->kind != XB_FK_NATIVE && fn->kind != XB_FK_KERNEL)
		return 0;
	size_t len = strlen(fn->tag);
	if (len >= 2 && fn->tag[0] == '[' && fn->tag[len - 1] == ']') {
		char *mod = strndup(fn->tag + 1, len - 2);
		if (!mod)
			return -1;
		int64_t i = strtab_add(&x->st, mod);
		free(mod);
		return i;
	}
	return strtab_add(&x->st, fn->tag);
}

static int64_t comment(struct pp *x, const char *fmt, ...) XB_PRINTF(2, 3);
static int64_t comment(struct pp *x, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return strtab_add(&x->st, buf);
}

static int build(struct pp *x, const struct xb_profile *p, const struct xb_out_meta *m,
		 Perftools__Profiles__Profile *pb)
{
	size_t nn = p->nnames ? p->nnames : 1, ns = p->nstacks ? p->nstacks : 1;
	perftools__profiles__profile__init(pb);
	if (strtab_add(&x->st, "") != 0)
		return -1;
	if (value_type(x, &x->vt[0], "samples", "count") < 0 ||
	    value_type(x, &x->vt[1], m->wall ? "wall" : "cpu", "nanoseconds") < 0 ||
	    value_type(x, &x->vt[2], m->wall ? "wall" : "cpu", "nanoseconds") < 0)
		return -1;
	x->vtp[0] = &x->vt[0];
	x->vtp[1] = &x->vt[1];
	/* No rate (--period N counts events, not time): samples/count only.
	 * A cpu/nanoseconds type of zeros would be pprof's default view (the
	 * last sample type) and show nothing. */
	x->ntypes = m->period_ns ? 2 : 1;
	pb->n_sample_type = x->ntypes;
	pb->sample_type = x->vtp;
	pb->period_type = m->period_ns ? &x->vt[2] : &x->vt[0];
	pb->period = m->period_ns ? (int64_t)m->period_ns : 1;
	pb->time_nanos = (int64_t)m->start_unix_ns;
	pb->duration_nanos = (int64_t)m->duration_ns;

	/* Comments. */
	if (!(x->comments = calloc(4, sizeof(*x->comments))))
		return -1;
	size_t nc = 0;
	x->comments[nc++] = strtab_add(&x->st, m->title ? m->title : "erlang-sample");
	if (m->received)
		x->comments[nc++] = comment(x, "processed %llu/%llu samples",
					    (unsigned long long)m->processed,
					    (unsigned long long)m->received);
	if (m->blame)
		x->comments[nc++] = comment(x, "--blame %s: only the stacks whose native frames include it",
					    m->blame);
	for (size_t i = 0; i < p->nnames; i++)
		if (p->names[i].kind == XB_FK_MARK && strcmp(p->names[i].name, "[truncated]") == 0) {
			if (m->max_depth)
				x->comments[nc++] = comment(x, "stacks deeper than %u frames are cut: "
							    "their root frame is [truncated]",
							    m->max_depth);
			else
				x->comments[nc++] = comment(x, "stacks cut at the maximum depth have "
							    "[truncated] as their root frame");
			break;
		}
	for (size_t i = 0; i < nc; i++)
		if (x->comments[i] < 0)
			return -1;
	pb->n_comment = nc;
	pb->comment = x->comments;

	/* Functions and locations: the frames used. */
	if (!(x->fid = calloc(nn, sizeof(*x->fid))))
		return -1;
	size_t nf = 0, nids = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		nids += p->stacks[i].n;
		for (uint32_t k = 0; k < p->stacks[i].n; k++)
			x->fid[p->stacks[i].ids[k]] = 1;
	}
	for (size_t i = 0; i < p->nnames; i++)
		if (x->fid[i])
			x->fid[i] = (uint32_t)++nf;
	size_t nfa = nf ? nf : 1;
	x->fun = calloc(nfa, sizeof(*x->fun));
	x->funp = calloc(nfa, sizeof(*x->funp));
	x->loc = calloc(nfa, sizeof(*x->loc));
	x->locp = calloc(nfa, sizeof(*x->locp));
	x->line = calloc(nfa, sizeof(*x->line));
	x->linep = calloc(nfa, sizeof(*x->linep));
	if (!x->fun || !x->funp || !x->loc || !x->locp || !x->line || !x->linep)
		return -1;
	for (size_t i = 0; i < p->nnames; i++) {
		if (!x->fid[i])
			continue;
		const struct xb_fname *fn = &p->names[i];
		size_t k = x->fid[i] - 1;
		Perftools__Profiles__Function *fu = &x->fun[k];
		perftools__profiles__function__init(fu);
		fu->id = x->fid[i];
		fu->name = strtab_add(&x->st, fn->name);
		if (fn->kind == XB_FK_NATIVE || fn->kind == XB_FK_KERNEL || fn->kind == XB_FK_JIT)
			fu->system_name = fu->name;
		fu->filename = filename_of(x, fn);
		if (fu->name < 0 || fu->filename < 0)
			return -1;
		x->funp[k] = fu;
		perftools__profiles__line__init(&x->line[k]);
		x->line[k].function_id = fu->id;
		x->line[k].line = fn->line;
		x->linep[k] = &x->line[k];
		perftools__profiles__location__init(&x->loc[k]);
		x->loc[k].id = fu->id;
		x->loc[k].n_line = 1;
		x->loc[k].line = &x->linep[k];
		x->locp[k] = &x->loc[k];
	}
	pb->n_function = pb->n_location = nf;
	pb->function = x->funp;
	pb->location = x->locp;

	/* Samples. */
	x->smp = calloc(ns, sizeof(*x->smp));
	x->smpp = calloc(ns, sizeof(*x->smpp));
	x->locids = calloc(nids ? nids : 1, sizeof(*x->locids));
	x->values = calloc(ns * 2, sizeof(*x->values));
	if (!x->smp || !x->smpp || !x->locids || !x->values)
		return -1;
	uint64_t *li = x->locids;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		Perftools__Profiles__Sample *sm = &x->smp[i];
		perftools__profiles__sample__init(sm);
		sm->n_location_id = s->n;
		sm->location_id = li;
		for (uint32_t k = 0; k < s->n; k++) /* leaf first, as the ids are */
			*li++ = x->fid[s->ids[k]];
		sm->n_value = x->ntypes;
		sm->value = &x->values[2 * i];
		sm->value[0] = (int64_t)s->count;
		sm->value[1] = (int64_t)(s->count * m->period_ns);
		x->smpp[i] = sm;
	}
	pb->n_sample = p->nstacks;
	pb->sample = x->smpp;
	pb->n_string_table = x->st.n;
	pb->string_table = x->st.s;
	return 0;
}

int xb_write_pprof(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m)
{
	struct pp x;
	memset(&x, 0, sizeof(x));
	Perftools__Profiles__Profile pb;
	if (build(&x, p, m, &pb) < 0) {
		pp_free(&x);
		return xb_fail("out of memory writing the pprof profile");
	}
	struct gz_sink *g = calloc(1, sizeof(*g));
	if (!g) {
		pp_free(&x);
		return xb_fail("out of memory writing the pprof profile");
	}
	g->base.append = gz_append;
	g->f = f;
	/* windowBits 15 + 16: a gzip header (mtime 0: the same profile
	 * gives the same bytes). */
	if (deflateInit2(&g->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		pp_free(&x);
		return xb_fail("writing the pprof profile: zlib initialisation failed");
	}
	perftools__profiles__profile__pack_to_buffer(&pb, &g->base);
	if (!g->zerr)
		gz_deflate(g, Z_FINISH);
	int zerr = g->zerr, werr = g->werr;
	deflateEnd(&g->zs);
	free(g);
	pp_free(&x);
	if (zerr)
		return xb_fail("writing the pprof profile: zlib error %d", zerr);
	if (werr)
		return xb_fail("writing the pprof profile: %s", strerror(werr));
	return xb_out_finish(f, "pprof profile");
}

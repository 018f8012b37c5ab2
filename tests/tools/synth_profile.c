/* synth_profile.c - synthetic profiles for the output tests and the bench. */
#define _GNU_SOURCE
#include "synth_profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int synth_add(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative,
	      uint64_t count)
{
	size_t before = p->nstacks;
	if (!count)
		return 0;
	if (xb_profile_add(p, ids, n, nnative) < 0)
		return -1;
	if (p->nstacks > before) {
		p->stacks[before].count = count;
		p->total += count - 1;
		return 0;
	}
	for (uint64_t k = 1; k < count; k++)
		if (xb_profile_add(p, ids, n, nnative) < 0)
			return -1;
	return 0;
}

/* Intern with file and line (part of a frame's identity). */
static uint32_t frame(struct xb_profile *p, const char *name, const char *tag,
		      enum xb_frame_kind kind, const char *file, uint32_t line)
{
	return xb_profile_intern_at(p, name, tag, kind, file, line);
}

/* ---- the small profile ---------------------------------------------------- */

enum {
	F_INIT, F_A, F_B, F_C, F_D, F_LEAF, F_OTHER, F_GCJIT, F_GC, F_SWEEP, F_XBWORK, F_NIFCALL,
	F_NIFWORK, F_MEMMOVE, F_ALLOC, F_MMAP_VM, F_MMAP_LIBC, F_DO_MMAP, F_CLEAR, F_WEIRD, F_BAD,
	F_UNI, F_UNKNOWN, F_HOT, F_TRUNC, F_DEEP, F_TINYP, F_COUNT
};

static const struct {
	const char *name, *tag;
	enum xb_frame_kind kind;
	const char *file;
	uint32_t line;
} small_frames[F_COUNT] = {
	[F_INIT] = { "proc_lib:init_p_do_apply/3", "[Erlang]", XB_FK_ERLANG, "proc_lib.erl", 241 },
	[F_A] = { "app:a/1", "[Erlang]", XB_FK_ERLANG, "app.erl", 10 },
	[F_B] = { "app:b/1", "[Erlang]", XB_FK_ERLANG, "app.erl", 20 },
	[F_C] = { "app:c/1", "[Erlang]", XB_FK_ERLANG, "app.erl", 30 },
	[F_D] = { "app:d/1", "[Erlang]", XB_FK_ERLANG, "app.erl", 40 },
	[F_LEAF] = { "app:leaf/1", "[Erlang]", XB_FK_ERLANG, "app.erl", 50 },
	[F_OTHER] = { "app:other/1", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_GCJIT] = { "global::garbage_collect", "[JIT]", XB_FK_JIT, NULL, 0 },
	[F_GC] = { "erts_garbage_collect_nobump", "[beam.smp]", XB_FK_NATIVE, NULL, 0 },
	[F_SWEEP] = { "sweep_one_heap", "[beam.smp]", XB_FK_NATIVE, "erl_gc.c", 1234 },
	[F_XBWORK] = { "xb_nif:work/1", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_NIFCALL] = { "beam_jit_call_nif", "[beam.smp]", XB_FK_NATIVE, NULL, 0 },
	[F_NIFWORK] = { "xb_nif_work", "[xb_nif.so]", XB_FK_NATIVE, NULL, 0 },
	[F_MEMMOVE] = { "__memmove_avx_unaligned_erms", "[libc.so.6]", XB_FK_NATIVE, NULL, 0 },
	[F_ALLOC] = { "app:alloc/1", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_MMAP_VM] = { "erts_mmap", "[beam.smp]", XB_FK_NATIVE, NULL, 0 },
	[F_MMAP_LIBC] = { "__mmap", "[libc.so.6]", XB_FK_NATIVE, NULL, 0 },
	[F_DO_MMAP] = { "do_mmap", "[kernel]", XB_FK_KERNEL, NULL, 0 },
	[F_CLEAR] = { "clear_page_erms", "[kernel]", XB_FK_KERNEL, NULL, 0 },
	[F_WEIRD] = { "app:'we;ird<&>\"\n\t'/0", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_BAD] = { "bad\xff\xfe"
		    "name\x01/0",
		    "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_UNI] = { "'\xc3\xbcn\xc3\xaf"
		    "c\xc3\xb8"
		    "d\xc3\xa9':f/0",
		    "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_UNKNOWN] = { XB_CALLERS_UNKNOWN, "[Erlang]", XB_FK_MARK, NULL, 0 },
	[F_HOT] = { "app:hot/1", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_TRUNC] = { "[truncated]", "[Erlang]", XB_FK_MARK, NULL, 0 },
	[F_DEEP] = { "app:deep/1", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
	[F_TINYP] = { "app:tiny_parent/0", "[Erlang]", XB_FK_ERLANG, NULL, 0 },
};

#define END 0xff
static const struct {
	unsigned char f[12]; /* root to leaf, END-terminated */
	unsigned nnative;    /* the innermost nnative frames are native */
	unsigned count;
	unsigned group;
} small_stacks[] = {
	{ { F_INIT, F_A, F_B, F_C, F_D, F_LEAF, END }, 0, 4000, 0 },
	{ { F_INIT, F_A, F_OTHER, END }, 0, 2000, 1 },
	{ { F_INIT, F_A, F_B, F_C, F_D, F_GCJIT, F_GC, F_SWEEP, END }, 3, 1500, 0 },
	{ { F_INIT, F_OTHER, F_XBWORK, F_NIFCALL, F_NIFWORK, F_MEMMOVE, END }, 3, 1000, 1 },
	{ { F_INIT, F_A, F_ALLOC, F_MMAP_VM, F_MMAP_LIBC, F_DO_MMAP, F_CLEAR, END }, 4, 500, 1 },
	{ { F_INIT, F_A, F_WEIRD, END }, 0, 300, 0 },
	{ { F_INIT, F_A, F_BAD, END }, 0, 300, 0 },
	{ { F_INIT, F_A, F_UNI, END }, 0, 200, 0 },
	{ { F_UNKNOWN, F_HOT, END }, 0, 400, 2 },
	{ { F_TRUNC, F_DEEP, END }, 0, 100, 2 },
};

static const char *const small_groups[] = { "<0.80.0> app_worker", "<0.81.0>", "scheduler 2" };

static int add_small(struct xb_profile *p, const unsigned char *f, unsigned nnative,
		     uint64_t count, int group)
{
	uint32_t ids[16], n = 0, len = 0;
	while (f[len] != END)
		len++;
	for (uint32_t k = len; k-- > 0;) { /* innermost first */
		unsigned i = f[k];
		ids[n++] = frame(p, small_frames[i].name, small_frames[i].tag, small_frames[i].kind,
				 small_frames[i].file, small_frames[i].line);
	}
	if (group >= 0)
		ids[n++] = xb_profile_intern(p, small_groups[group], "[group]", XB_FK_GROUP);
	return synth_add(p, ids, n, nnative, count);
}

int synth_small(struct xb_profile *p, bool groups)
{
	xb_profile_init(p);
	for (size_t i = 0; i < sizeof(small_stacks) / sizeof(small_stacks[0]); i++)
		if (add_small(p, small_stacks[i].f, small_stacks[i].nnative, small_stacks[i].count,
			      groups ? (int)small_stacks[i].group : -1) < 0)
			return -1;
	/* 200 one-sample leaves under app:tiny_parent/0: each 1/10,500 of
	 * the samples, under the flame graph's 0.1 %. */
	for (int i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof(name), "app:tiny_%03d/0", i);
		uint32_t ids[4], n = 0;
		ids[n++] = xb_profile_intern(p, name, "[Erlang]", XB_FK_ERLANG);
		ids[n++] = frame(p, small_frames[F_TINYP].name, "[Erlang]", XB_FK_ERLANG, NULL, 0);
		ids[n++] = frame(p, small_frames[F_INIT].name, "[Erlang]", XB_FK_ERLANG,
				 small_frames[F_INIT].file, small_frames[F_INIT].line);
		if (groups)
			ids[n++] = xb_profile_intern(p, small_groups[1], "[group]", XB_FK_GROUP);
		if (synth_add(p, ids, n, 0, 1) < 0)
			return -1;
	}
	return 0;
}

/* ---- the big profile ------------------------------------------------------- */

static uint64_t rnd_state;
static uint64_t rnd(void) /* splitmix64 */
{
	uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static unsigned rnd_below(unsigned n)
{
	return (unsigned)(rnd() % n);
}

#define NMOD 120
#define NFUN 15
#define NERL (NMOD * NFUN)
#define NCALLEE 4
#define NNATIVE_CHAINS 48
#define MAXD 60

static const char *const words[] = {
	"http", "json", "cache", "queue", "auth", "router", "worker", "metrics", "session",
	"codec", "db", "pool", "broker", "stream", "event", "config", "socket", "ledger",
	"index", "search", "mail", "billing", "report", "sched",
};
static const char *const suffixes[] = { "_server", "_handler", "_util", "_proto", "_store" };
static const char *const verbs[] = {
	"handle", "decode", "encode", "lookup", "insert", "update", "parse", "render", "route",
	"check", "merge", "split", "fold", "send", "recv",
};
static const char *const entry_chains[][6] = {
	{ "proc_lib:init_p_do_apply/3", "gen_server:loop/7", "gen_server:decode_msg/9",
	  "gen_server:handle_msg/6", "gen_server:try_handle_call/4", NULL },
	{ "proc_lib:init_p_do_apply/3", "gen_server:loop/7", "gen_server:decode_msg/9",
	  "gen_server:handle_msg/6", "gen_server:try_dispatch/4", NULL },
	{ "proc_lib:init_p_do_apply/3", "gen_statem:loop_receive/3",
	  "gen_statem:loop_state_callback/11", NULL },
	{ "erlang:apply/2", NULL },
	{ "proc_lib:init_p_do_apply/3", "supervisor:handle_info/2", NULL },
	{ "[callers unknown]", NULL },
};
static const char *const vm_names[] = {
	"erts_garbage_collect_nobump", "garbage_collect", "do_minor", "sweep_one_heap",
	"copy_struct_x", "size_object_x", "erts_send_message", "erts_queue_message",
	"process_main", "erts_schedule", "erts_alloc_fnf", "erts_bs_append", "erts_term_to_binary",
	"binary_to_term_int", "erts_cmp_compound", "hashmap_insert", "erts_mmap", "ethr_atomic_cmpxchg",
};

struct graph {
	uint32_t erl[NERL];
	uint32_t callee[NERL][NCALLEE];
	uint32_t nat[NNATIVE_CHAINS][12];
	unsigned natlen[NNATIVE_CHAINS], natnn[NNATIVE_CHAINS];
	uint32_t entry[6][6];
	unsigned entrylen[6];
};

static void build_graph(struct xb_profile *p, struct graph *g)
{
	char name[128];
	for (unsigned m = 0; m < NMOD; m++)
		for (unsigned f = 0; f < NFUN; f++) {
			snprintf(name, sizeof(name), "%s%s:%s_%u/%u", words[m % 24], suffixes[m / 24],
				 verbs[f], m % 7, (m + f) % 4);
			g->erl[m * NFUN + f] = xb_profile_intern(p, name, "[Erlang]", XB_FK_ERLANG);
		}
	/* Callees: mostly within the module, some anywhere; index 0 is the
	 * likely one. */
	for (unsigned i = 0; i < NERL; i++)
		for (unsigned k = 0; k < NCALLEE; k++)
			g->callee[i][k] = rnd_below(10) < 7 ? (i / NFUN) * NFUN + rnd_below(NFUN)
							      : rnd_below(NERL);
	for (unsigned e = 0; e < 6; e++) {
		unsigned n = 0;
		while (entry_chains[e][n])
			n++;
		g->entrylen[e] = n;
		for (unsigned k = 0; k < n; k++) {
			const char *nm = entry_chains[e][k];
			bool mark = nm[0] == '[';
			g->entry[e][k] = xb_profile_intern(p, nm, "[Erlang]",
							   mark ? XB_FK_MARK : XB_FK_ERLANG);
		}
	}
	/* Native chains, outermost first: a JIT fragment or a VM entry,
	 * VM functions, then maybe libc, then maybe the kernel; or a NIF. */
	for (unsigned c = 0; c < NNATIVE_CHAINS; c++) {
		unsigned n = 0;
		if (c % 8 == 0) {
			g->nat[c][n++] = xb_profile_intern(p, "beam_jit_call_nif", "[beam.smp]", XB_FK_NATIVE);
			snprintf(name, sizeof(name), "nif_fun_%u", c);
			g->nat[c][n++] = xb_profile_intern(p, name, "[libapp_nif.so]", XB_FK_NATIVE);
		} else {
			if (c % 3 == 0)
				g->nat[c][n++] = xb_profile_intern(p, "global::garbage_collect", "[JIT]",
								   XB_FK_JIT);
			unsigned nvm = 2 + rnd_below(6);
			for (unsigned k = 0; k < nvm; k++) {
				unsigned v = rnd_below(60);
				if (v < sizeof(vm_names) / sizeof(vm_names[0]))
					snprintf(name, sizeof(name), "%s", vm_names[v]);
				else
					snprintf(name, sizeof(name), "erts_internal_%u", v);
				g->nat[c][n++] = xb_profile_intern(p, name, "[beam.smp]", XB_FK_NATIVE);
			}
		}
		if (c % 2) {
			snprintf(name, sizeof(name), "__libc_fn_%u", rnd_below(20));
			g->nat[c][n++] = xb_profile_intern(p, name, "[libc.so.6]", XB_FK_NATIVE);
		}
		if (c % 4 == 1) {
			unsigned nk = 1 + rnd_below(3);
			for (unsigned k = 0; k < nk; k++) {
				snprintf(name, sizeof(name), "kernel_fn_%u", rnd_below(40));
				g->nat[c][n++] = xb_profile_intern(p, name, "[kernel]", XB_FK_KERNEL);
			}
		}
		g->natlen[c] = n;
	}
}

int synth_big(struct xb_profile *p, size_t nstacks, uint64_t nsamples, double skew, uint64_t seed)
{
	xb_profile_init(p);
	rnd_state = seed;
	struct graph *g = calloc(1, sizeof(*g));
	double *prob = calloc(nstacks ? nstacks : 1, sizeof(*prob));
	if (!g || !prob) {
		free(g);
		free(prob);
		return -1;
	}
	build_graph(p, g);
	uint32_t root[MAXD], ids[MAXD];
	size_t tries = 0;
	static const double entry_p[] = { .40, .25, .15, .10, .07, .03 };
	static const double callee_p[] = { .8, .1, .05, .05 };
	while (p->nstacks < nstacks && tries++ < nstacks * 20) {
		/* pr: how likely this walk is, i.e. its share of a real run's
		 * samples (entry, each call taken, the native tail). */
		unsigned depth = 20 + rnd_below(41), n = 0;
		unsigned e = rnd_below(100);
		e = e < 40 ? 0 : e < 65 ? 1 : e < 80 ? 2 : e < 90 ? 3 : e < 97 ? 4 : 5;
		double pr = entry_p[e];
		for (unsigned k = 0; k < g->entrylen[e]; k++)
			root[n++] = g->entry[e][k];
		/* Native tail on 30 % of the stacks: a prefix of a chain. */
		unsigned c = rnd_below(NNATIVE_CHAINS), nnat = 0;
		if (rnd_below(10) < 3) {
			nnat = 1 + rnd_below(g->natlen[c]);
			pr *= 0.3 / NNATIVE_CHAINS / g->natlen[c];
		} else {
			pr *= 0.7;
		}
		/* Erlang frames: a walk through the call graph from a
		 * handler picked by the entry chain; hot paths mostly take
		 * the first callee. */
		uint32_t cur = (uint32_t)((e * 7919u + rnd_below(40)) % NERL);
		pr /= 40;
		while (n + nnat < depth) {
			root[n++] = g->erl[cur];
			unsigned r = rnd_below(20), k = r < 16 ? 0 : r < 18 ? 1 : r < 19 ? 2 : 3;
			pr *= callee_p[k];
			cur = g->callee[cur][k];
		}
		for (unsigned k = 0; k < nnat; k++)
			root[n++] = g->nat[c][k];
		for (unsigned k = 0; k < n; k++) /* innermost first */
			ids[k] = root[n - 1 - k];
		size_t before = p->nstacks;
		if (xb_profile_add(p, ids, n, nnat) < 0) {
			free(g);
			free(prob);
			return -1;
		}
		if (p->nstacks > before)
			prob[before] = pr;
	}
	free(g);
	/* Counts: at least 1 each, the rest by weight pr^skew. */
	double wsum = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		wsum += prob[i] = pow(prob[i], skew);
	uint64_t spare = nsamples > p->nstacks ? nsamples - p->nstacks : 0, total = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		p->stacks[i].count = 1 + (uint64_t)((double)spare * prob[i] / wsum);
		total += p->stacks[i].count;
	}
	free(prob);
	if (p->nstacks && total < nsamples) {
		p->stacks[0].count += nsamples - total;
		total = nsamples;
	}
	p->total = total;
	return 0;
}

int synth_wide(struct xb_profile *p, unsigned nchains, unsigned depth, unsigned tiny)
{
	xb_profile_init(p);
	uint32_t *root = calloc(depth + 1, sizeof(*root)), *ids = calloc(depth + 1, sizeof(*ids));
	char name[160];
	int rc = -1;
	if (!root || !ids)
		goto out;
	for (unsigned c = 0; c < nchains; c++) {
		for (unsigned d = 0; d < depth; d++) {
			snprintf(name, sizeof(name),
				 "wide_application_module_%04u:a_long_descriptive_function_%02u/2", c, d);
			root[d] = xb_profile_intern(p, name, "[Erlang]", XB_FK_ERLANG);
		}
		for (unsigned k = 0; k < depth; k++)
			ids[k] = root[depth - 1 - k];
		if (synth_add(p, ids, depth, 0, 1000) < 0)
			goto out;
		for (unsigned t = 0; t < tiny; t++) { /* a leaf off the chain at depth t % depth */
			unsigned d = t % depth + 1;
			snprintf(name, sizeof(name), "tiny_branch_%u/0", t);
			ids[0] = xb_profile_intern(p, name, "[Erlang]", XB_FK_ERLANG);
			for (unsigned k = 0; k < d; k++)
				ids[1 + k] = root[d - 1 - k];
			if (synth_add(p, ids, d + 1, 0, 1) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(root);
	free(ids);
	return rc;
}

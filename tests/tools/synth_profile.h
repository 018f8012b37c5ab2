/* synth_profile.h - synthetic profiles for the output tests and the bench. */
#ifndef XB_SYNTH_PROFILE_H
#define XB_SYNTH_PROFILE_H

#include "xb/profile.h"

#include <stdbool.h>
#include <stdint.h>

/* The small profile tests/acceptance/test_formats.py knows by heart (its
 * TRUTH): a chain a->b->c->d->leaf, a second branch, native frames under
 * Erlang frames (VM, JIT, NIF, libc, kernel), names with ; < > & " ' \n \t,
 * invalid UTF-8 and non-ASCII, a [callers unknown] and a [truncated]
 * mark, 200 one-sample leaves (merged in the flame graph), file/line on
 * the chain.  GROUPS: each stack gets a group frame at its root (--by).
 * Returns 0, -1 when memory runs out. */
int synth_small(struct xb_profile *p, bool groups);

/* A profile shaped like a long run of a busy VM: NSTACKS distinct stacks,
 * random walks of depth 20-60 (process entry chains, Erlang call paths
 * through a fixed call graph of ~1,800 functions where hot paths take the
 * first callee 80 % of the time, native tails into the VM, libc, NIFs and
 * the kernel on 30 % of them), NSAMPLES samples spread over them with
 * weights (the walk's probability)^SKEW: 1 gives each stack the share
 * sampling would, 0 the same share to all.  Deterministic for a SEED. */
int synth_big(struct xb_profile *p, size_t nstacks, uint64_t nsamples, double skew, uint64_t seed);

/* The flame graph's worst case: NCHAINS disjoint chains of DEPTH frames
 * with long names, each holding the same share of the samples (1,000
 * samples at its leaf), and TINY one-sample branches off each chain at
 * every depth: 900 chains x (1 + 55) = 50,400 distinct stacks whose
 * 54,000 chain frames all hold more than 0.1 %. */
int synth_wide(struct xb_profile *p, unsigned nchains, unsigned depth, unsigned tiny);

/* Add a stack with COUNT samples at once. */
int synth_add(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative,
	      uint64_t count);

#endif

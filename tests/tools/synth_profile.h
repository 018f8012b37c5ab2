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

/* A profile shaped like a long run of a busy VM: NSTACKS distinct stacks
 * (depth 20-60: process entry chains, Erlang call paths through a fixed
 * call graph of ~1,800 functions, native tails into the VM, libc, NIFs and
 * the kernel on ~30 % of them), NSAMPLES samples spread over them with
 * weights ~ 1/(rank+10)^ZIPF (0: uniform).  Deterministic for a SEED. */
int synth_big(struct xb_profile *p, size_t nstacks, uint64_t nsamples, double zipf, uint64_t seed);

/* Add a stack with COUNT samples at once. */
int synth_add(struct xb_profile *p, const uint32_t *ids, uint32_t n, uint32_t nnative,
	      uint64_t count);

#endif

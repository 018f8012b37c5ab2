/* by.h - --by: samples grouped by Erlang process, scheduler, CPU or OS
 * thread (src/profile/by.c).
 *
 * The session appends the group to every stack as its outermost frame
 * (kind XB_FK_GROUP, tag XB_GROUP_TAG), so the stack formats show it as
 * the root (speedscope: one profile per group), and the table writes one
 * block per group (xb_write_grouped_table, writers.h).  Group names:
 *   process    "<0.85.0> my_server" (registered name), "<0.90.0> m:f/2"
 *              (initial call when unnamed), "[process unknown]" (running
 *              a process that could not be identified in time), "[no
 *              process]" (scheduling, idle, other threads)
 *   scheduler  "scheduler 3", "dirty CPU scheduler 1", "dirty I/O
 *              scheduler 2", "thread NAME" (other threads, by name)
 *   cpu        "cpu 1" (the CPU the kernel recorded), "cpu unknown"
 *   thread     "thread 1234 (NAME)" */
#ifndef XB_BY_H
#define XB_BY_H

#include "xb/erlstack.h"
#include "xb/profile.h"
#include "xb/sampler.h"
#include "xb/vm.h"

#include <stdio.h>

enum xb_by { XB_BY_NONE, XB_BY_PROCESS, XB_BY_SCHEDULER, XB_BY_CPU, XB_BY_THREAD };

/* "process", "scheduler", "cpu", "thread", NULL (for the option table). */
extern const char *const xb_by_names[];
/* XB_BY_* of a name in xb_by_names, or XB_BY_NONE. */
enum xb_by xb_by_parse(const char *name);

#define XB_GROUP_TAG "[group]"
#define XB_NO_PROCESS "[no process]"
#define XB_PROCESS_UNKNOWN "[process unknown]"

/* The name of a process as the views show it: its registered name, else
 * its initial call "m:f/A" (atoms quoted as the VM quotes them), else "".
 * Raw text from the VM: escape it for the output. */
const char *xb_process_name(struct xb_vm *vm, const struct xb_estack *es, char *buf, size_t len);
/* "scheduler 3", "dirty CPU scheduler 1", "dirty I/O scheduler 2" or
 * "thread NAME". */
const char *xb_thread_group_name(const struct xb_thread *t, char *buf, size_t len);

/* The group of one sample, interned into P (kind XB_FK_GROUP). */
uint32_t xb_by_group(enum xb_by by, struct xb_profile *p, struct xb_vm *vm, const struct xb_sample *s,
		     const struct xb_thread *t, const struct xb_estack *es);

/* P's stacks split by their group (the outermost frame, XB_FK_GROUP):
 * one profile per group holding its stacks without the group frame, so
 * that the table's row rules (xb_profile_flat, xb_profile_blame) apply to
 * it unchanged; stacks without a group frame form one group of gid
 * XB_NO_GROUP.  Groups in order of first appearance.  0, or -1 with xb_err
 * (nothing to free). */
#define XB_NO_GROUP UINT32_MAX
struct xb_group {
	uint32_t gid; /* group frame id in P, or XB_NO_GROUP */
	struct xb_profile sub;
};
int xb_by_split(const struct xb_profile *p, struct xb_group **out, size_t *n);
/* The same for the groups KEEP[gid] says (KEEP_NOGROUP: the stacks
 * without a group frame): a profile by process can hold a group for
 * every process the run saw, millions on a VM that spawns a process per
 * request; a writer splits the few it shows, a batch at a time. */
int xb_by_split_some(const struct xb_profile *p, const bool *keep, bool keep_nogroup, struct xb_group **out,
		     size_t *n);
/* The group frame id of stack S (its outermost frame, XB_FK_GROUP), or
 * XB_NO_GROUP. */
uint32_t xb_by_group_of(const struct xb_profile *p, const struct xb_stack *s);
void xb_by_groups_free(struct xb_group *g, size_t n);

#endif

/* check.h - erlang-sample --check: verify that the constants and offsets
 * in use (release table, DWARF, discovered globals) are consistent with
 * the running VM's internals.  One line per check, "ok" or "FAIL". */
#ifndef XB_CHECK_H
#define XB_CHECK_H

#include "xb/vm.h"
#include <stdio.h>

/* Returns the number of failed checks. */
int xb_check(struct xb_vm *vm, FILE *out);

#endif

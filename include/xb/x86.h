/* x86.h - the little x86-64 decoding we need (pure code). */
#ifndef XB_X86_H
#define XB_X86_H

#include <stddef.h>
#include <stdint.h>

/* Scan machine code CODE (LEN bytes, loaded at PC) for RIP-relative memory
 * operands (ModRM mod=00, rm=101) of common instructions (mov, lea, cmp,
 * add, ...) and store their target addresses in OUT (at most MAX).
 * Returns how many were found.  A heuristic scan, not a disassembler:
 * callers validate what the targets point at. */
size_t xb_x86_rip_targets(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out, size_t max);

#endif

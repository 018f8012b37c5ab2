/* x86.c - the little x86-64 decoding we need (pure code). */
#include "xb/x86.h"

#include <string.h>

size_t xb_x86_rip_targets(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i + 6 <= len && n < max; i++) {
		size_t j = i;
		if ((code[j] & 0xf0) == 0x40)
			j++; /* REX */
		if (j + 6 > len)
			break;
		uint8_t op = code[j], modrm = code[j + 1];
		size_t imm = 0;
		switch (op) {
		case 0x8b: case 0x8d: case 0x89: case 0x03: case 0x3b: case 0x39: case 0x63:
		case 0x2b: case 0x33: case 0x85:
			break;
		case 0xc7: imm = 4; break;
		case 0x83: case 0x80: case 0xc6: imm = 1; break;
		default:
			continue;
		}
		if ((modrm & 0xc7) != 0x05)
			continue;
		int32_t disp;
		memcpy(&disp, code + j + 2, 4);
		uint64_t end = pc + j + 6 + imm;
		out[n++] = end + (uint64_t)(int64_t)disp;
	}
	return n;
}

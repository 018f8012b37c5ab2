/* seeds.c - writes the seed corpora of the fuzz targets (tests/fuzz/corpus/):
 * well-formed inputs each decoder accepts, from the same layouts the
 * tools use, so that the fuzzers start past the first checks.
 *   cc -Iinclude tests/fuzz/seeds.c build/libxbcore.a build/libxblayout.a \
 *      -ldw -lelf -lbpf -lprotobuf-c -lz -lm -ldebuginfod -o /tmp/seeds
 *   /tmp/seeds tests/fuzz/corpus
 * (the DWARF seed is an object file compiled from dwarf_seed.c). */
#include "xb/bpf_record.h"
#include "xb/regs.h"
#include "xb/release.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *dir;

static void put(const char *target, const char *name, const void *data, size_t len)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, target);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s", dir, target, name);
	FILE *f = fopen(p, "wb");
	if (!f || fwrite(data, 1, len, f) != len) {
		perror(p);
		exit(1);
	}
	fclose(f);
}

/* A module symfile with ranges and line records, for release table R
 * (index into xb_releases), prefixed by the selector byte. */
static size_t symfile(uint8_t *b, int r, int fold, int emulator)
{
	const int64_t *o = xb_releases[r]->jit.off;
	memset(b, 0, 4096);
	b[0] = (uint8_t)(r | (fold ? 0x80 : 0));
	uint8_t *s = b + 1;
	int64_t pay = o[XB_F_DBGINFO_PAYLOAD];
	uint32_t hdr = emulator ? 0 : 1;
	memcpy(s, &hdr, 4);
	if (emulator) {
		int32_t layout = 1;
		uint64_t ne = 0x7f0000001000ull;
		memcpy(s + pay + o[XB_F_EMUINFO_FRAME_LAYOUT], &layout, 4);
		memcpy(s + pay + o[XB_F_EMUINFO_NORMAL_EXIT], &ne, 8);
		return 1 + 64;
	}
	uint64_t base = 0x7f0000000000ull;
	uint32_t n = 3;
	uint16_t ml = 4;
	memcpy(s + pay + o[XB_F_MODINFO_BASE_ADDRESS], &base, 8);
	memcpy(s + pay + o[XB_F_MODINFO_RANGE_COUNT], &n, 4);
	memcpy(s + pay + o[XB_F_MODINFO_NAME_LENGTH], &ml, 2);
	memcpy(s + pay + o[XB_F_MODINFO_NAME], "fake", 4);
	size_t p = (size_t)o[XB_F_DBGINFO_SIZE] + ml;
	const char *names[3] = { "fake:f/1-CodeInfoPrologue", "fake:f/1", "fake:g/0" };
	uint32_t starts[4] = { 0x00, 0x20, 0x80, 0x100 };
	for (int i = 0; i < 3; i++) {
		uint16_t nl = (uint16_t)strlen(names[i]);
		uint32_t lines = i == 1 ? 2 : 0;
		memcpy(s + p + o[XB_F_RANGEINFO_START], &starts[i], 4);
		memcpy(s + p + o[XB_F_RANGEINFO_END], &starts[i + 1], 4);
		memcpy(s + p + o[XB_F_RANGEINFO_LINE_COUNT], &lines, 4);
		memcpy(s + p + o[XB_F_RANGEINFO_NAME_LENGTH], &nl, 2);
		memcpy(s + p + o[XB_F_RANGEINFO_NAME], names[i], nl);
		p += (size_t)o[XB_F_RANGEINFO_SIZE] + nl;
		for (uint32_t l = 0; l < lines; l++) {
			uint32_t at = starts[i] + 8 * l, line = 10 + l;
			uint16_t fl = 6;
			if (o[XB_F_LINEINFO_START] >= 0)
				memcpy(s + p + o[XB_F_LINEINFO_START], &at, 4);
			if (o[XB_F_LINEINFO_LINE] >= 0)
				memcpy(s + p + o[XB_F_LINEINFO_LINE], &line, 4);
			memcpy(s + p + o[XB_F_LINEINFO_FILE_LENGTH], &fl, 2);
			memcpy(s + p + o[XB_F_LINEINFO_FILE], "f.erl", 6);
			p += (size_t)o[XB_F_LINEINFO_SIZE] + fl;
		}
	}
	return 1 + p;
}

static void perf_record(void)
{
	/* selector byte 1 (perf, no callchain), then PERF_SAMPLE_IP, TID,
	 * TIME, CPU, REGS_USER (abi + 17 registers), STACK_USER */
	uint8_t b[1 + 8 * 4 + 8 + 17 * 8 + 8 + 64 + 8];
	size_t p = 0;
	b[p++] = 1;
	uint64_t w[4] = { 0x7f0000000123ull, (uint64_t)1234 << 32 | 1234, 1000000, 1 };
	memcpy(b + p, w, sizeof(w)), p += sizeof(w);
	uint64_t abi = 2;
	memcpy(b + p, &abi, 8), p += 8;
	for (int r = 0; r < 17; r++) {
		uint64_t v = 0x7ffd00000000ull + (uint64_t)r * 8;
		memcpy(b + p, &v, 8), p += 8;
	}
	uint64_t size = 64, dyn = 64;
	memcpy(b + p, &size, 8), p += 8;
	memset(b + p, 0x11, 64), p += 64;
	memcpy(b + p, &dyn, 8), p += 8;
	put("records", "perf-sample", b, p);
}

static void bpf_record(void)
{
	uint8_t b[1 + sizeof(struct xb_bpf_rec) + 64 + 128];
	struct xb_bpf_rec h;
	memset(&h, 0, sizeof(h));
	h.magic = XB_BPF_MAGIC;
	h.version = XB_BPF_VERSION;
	h.hdr_size = sizeof(h);
	h.tid = h.pid = 1234;
	h.regs[XB_PREG_SP] = 0x7ffd00001000ull;
	h.regs[XB_PREG_IP] = 0x7f0000000123ull;
	h.slot = 0x7f0000100000ull;
	h.c_p = h.proc_addr = 0x7f0000200000ull;
	h.ustack_addr = h.regs[XB_PREG_SP];
	h.estack_addr = 0x7f0000300000ull;
	h.proc_len = 64;
	h.ustack_len = 64;
	h.estack_len = 64;
	h.total_len = (uint32_t)(sizeof(h) + 192);
	b[0] = 0;
	memcpy(b + 1, &h, sizeof(h));
	memset(b + 1 + sizeof(h), 0x22, 192);
	put("records", "bpf-sample", b, 1 + sizeof(h) + 192);
}

/* fuzz_heap: 8 header bytes (release | 0x80 for the interpreter, slots,
 * walk bounds), then the memory at 0x7f0000100000: the slot array (one
 * process), the process struct at +0x100 (release R's layout: a pid for
 * slot 0, a heap of HW words at +0x1000; no name, dictionary or
 * messages), and the heap: {session, 1}, {1, 2, 3}, [1] over and over.
 * SAMPLED: 256 words and bounds of 64 words read in chunks of 16 (a
 * sampled walk); else 32 words read whole. */
static size_t heap_seed(uint8_t *b, size_t cap, int r, int emu, int sampled)
{
	const struct xb_release *rel = xb_releases[r];
	const int64_t *o = (emu ? rel->emu : rel->jit).off;
	const uint64_t base = 0x7f0000100000ull, proc = base + 0x100, heap = base + 0x1000;
	const uint64_t hw = sampled ? 256 : 32, used = hw - hw % 9;
	uint8_t bounds = sampled ? 0x00 : 0xff;
	size_t len = 0x1000 + hw * 8;
	if (8 + len > cap || o[XB_F_PROC_SIZE] <= 0 || 0x100 + o[XB_F_PROC_SIZE] > 0x1000)
		return 0;
	memset(b, 0, 8 + len);
	b[0] = (uint8_t)(r | (emu ? 0x80 : 0));
	b[1] = 0;
	b[2] = bounds;
	uint8_t *m = b + 8;
#define PUT(at, v) do { uint64_t v_ = (v); memcpy(m + (at), &v_, 8); } while (0)
#define FIELD(f, v) do { if (o[f] >= 0) PUT(0x100 + o[f], v); } while (0)
	PUT(0, proc);
	FIELD(XB_F_PROC_ID, 0x3);          /* a pid, table index 0 */
	FIELD(XB_F_PROC_HEAP, heap);
	FIELD(XB_F_PROC_HTOP, heap + used * 8);
	FIELD(XB_F_PROC_STOP, heap + hw * 8);
	FIELD(XB_F_PROC_HEND, heap + hw * 8);
	FIELD(XB_F_PROC_HEAP_SZ, hw);
	FIELD(XB_F_PROC_HIGH_WATER, heap);
	uint64_t words[9] = {
		2u << 6,                          /* {session, 1}: arity 2 */
		(5u << 6) | 0x0b,                 /* atom 5 */
		(1u << 4) | 0x0f,                 /* 1 */
		3u << 6,                          /* {1, 2, 3} */
		(1u << 4) | 0x0f, (2u << 4) | 0x0f, (3u << 4) | 0x0f,
		(1u << 4) | 0x0f, 0x3b,           /* [1] */
	};
	for (uint64_t at = 0; at + 9 <= hw; at += 9)
		memcpy(m + 0x1000 + at * 8, words, sizeof(words));
#undef FIELD
#undef PUT
	(void)proc;
	return 8 + len;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds DIR\n");
		return 2;
	}
	dir = argv[1];
	mkdir(dir, 0755);
	uint8_t b[4096];
	char name[64];
	for (int r = 0; xb_releases[r]; r++) {
		for (int fold = 0; fold < 2; fold++) {
			snprintf(name, sizeof(name), "module-%s%s", xb_releases[r]->erts, fold ? "-fold" : "");
			put("symfile", name, b, symfile(b, r, fold, 0));
		}
		snprintf(name, sizeof(name), "emulator-%s", xb_releases[r]->erts);
		put("symfile", name, b, symfile(b, r, 0, 1));
	}
	perf_record();
	bpf_record();
	static uint8_t hb[8192];
	for (int r = 0; xb_releases[r]; r++)
		for (int emu = 0; emu < 2; emu++)
			for (int k = 0; k < 2; k++) {
				size_t n = heap_seed(hb, sizeof(hb), r, emu, k);
				if (!n)
					continue;
				snprintf(name, sizeof(name), "proc-%s-%s%s", xb_releases[r]->erts, emu ? "emu" : "jit",
					 k ? "-sampled" : "");
				put("heap", name, hb, n);
			}
	static const char *const terms[] = { "lists", "Elixir.Foo.Bar", "'quoted atom'", "h\xc3\xa9llo",
					     "_N\x01\n\xc2\x85", "copy_struct|copy_struct_x", "_ZN3foo3barEv" };
	for (size_t i = 0; i < sizeof(terms) / sizeof(terms[0]); i++) {
		uint8_t t[64 + 32] = { 0x33, 0x00, 0x05 };
		size_t l = strlen(terms[i]);
		memcpy(t + 32, terms[i], l);
		snprintf(name, sizeof(name), "term-%zu", i);
		put("terms", name, t, 32 + l);
	}
	static const char *const texts[] = {
		"7f0000001000 40 lists:reverse/2\n7f0000001040 20 $erlang:apply/3\n",
		"55a9cb0f3000-55a9cb0f5000 r--p 00000000 fe:00 10961361 /usr/lib/erlang/erts-13.1.5/bin/beam.smp\n"
		"7f0000000000-7f0000100000 r-xs 00000000 00:01 1234 /memfd:vmem (deleted)\n",
		"beam.smp 1234 [000] 1.000: 1 cpu-clock:\n\t    7f0000001010 [unknown] (/memfd:vmem (deleted))\n\n",
		"m:'a\nb'/1\x1b[31m\xff",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		snprintf(name, sizeof(name), "text-%zu", i);
		put("text", name, texts[i], strlen(texts[i]));
	}
	/* /proc/PID/maps as the kernel writes it (file-backed lines padded to
	 * column 73; anonymous ones end in a space; the last may lack its
	 * newline) */
	static const char *const maps[] = {
		"55a9cb0f3000-55a9cb0f5000 r--p 00000000 fe:00 10961361                   /usr/lib/erlang/erts-13.1.5/bin/beam.smp\n"
		"55a9cb0f5000-55a9cb4a0000 r-xp 00002000 fe:00 10961361                   /usr/lib/erlang/erts-13.1.5/bin/beam.smp\n"
		"7f0000000000-7f0000100000 r-xs 00000000 00:01 1234                       /memfd:vmem (deleted)\n"
		"7f0000100000-7f0000101000 rw-p 00000000 00:00 0 \n"
		"7f0000101000-7f0000102000 ---p 00000000 00:00 0 \n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
		"7f0000003000-7f0000004000 r--p 00002000 fd:00 42                         /tmp/dir with spaces/lib x.so\n\n",
	};
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		snprintf(name, sizeof(name), "maps-%zu", i);
		put("maps", name, maps[i], strlen(maps[i]));
	}
	return 0;
}

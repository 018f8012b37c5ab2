/* fuzz_text.c - libFuzzer target: names on their way out (perf map
 * escaping, display names, sanitized messages) and text read back in
 * (perf maps, /proc/PID/maps, `perf script` output for --symbolize).
 * A name must never end a line of the perf map. */
#define _GNU_SOURCE
#include "xb/common.h"
#include "xb/output_util.h"
#include "xb/perfmap.h"
#include "xb/procmaps.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void no_controls(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *z = malloc(size + 1);
	if (!z)
		return 0;
	memcpy(z, data, size);
	z[size] = 0;
	char buf[4 * 4096 + 8];
	size_t n = xb_perfmap_escape(z, buf, sizeof(buf));
	if (n != strlen(buf))
		__builtin_trap();
	no_controls(buf);
	xb_sanitize(z, buf, 257);
	no_controls(buf);
	/* the whole map: one line per entry, whatever the names */
	struct xb_codemap cm;
	memset(&cm, 0, sizeof(cm));
	xb_codemap_add(&cm, 0x1000, 0x2000, z, strlen(z), 0);
	xb_codemap_add(&cm, 0x3000, 0x4000, "m:f/1", 5, 0);
	xb_codemap_finish(&cm);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f) {
		xb_perfmap_print(&cm, f);
		fclose(f);
		size_t lines = 0;
		for (size_t i = 0; i < len; i++)
			lines += text[i] == '\n';
		if (lines != cm.n)
			__builtin_trap();
	}
	free(text);
	xb_codemap_free(&cm);
	/* read as a perf map, as /proc/PID/maps, as perf script output */
	FILE *in = size ? fmemopen(z, size, "r") : NULL;
	if (in) {
		struct xb_codemap back;
		if (xb_perfmap_parse(in, "fuzz", &back) == 0) {
			FILE *in2 = fmemopen(z, size, "r");
			FILE *out = fopen("/dev/null", "w");
			struct xb_symbolize_stats st = { 0 };
			struct xb_reloc rel = { "/memfd:vmem (deleted)", 0x7f0000000000ull };
			if (in2 && out)
				xb_symbolize(in2, out, &back, &rel, 1, &st);
			if (in2)
				fclose(in2);
			if (out)
				fclose(out);
			xb_codemap_free(&back);
		}
		fclose(in);
	}
	struct xb_maps m;
	if (xb_maps_parse(z, &m) == 0)
		xb_maps_free(&m);
	free(z);
	return 0;
}

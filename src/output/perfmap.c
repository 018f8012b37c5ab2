/* perfmap.c - writing /tmp/perf-PID.map safely (base/outfile.c): a
 * reader (perf) sees the old map or the new one, never half of one; a
 * symlink or a file owned by another user is never replaced. */
#define _GNU_SOURCE
#include "xb/perfmap.h"
#include "xb/common.h"

#include "xb/outfile.h"
#include "xb/output_util.h"

#include <stdlib.h>
#include <string.h>

size_t xb_perfmap_escape(const char *name, char *buf, size_t len)
{
	return xb_display_name_buf(name, buf, len);
}

int xb_perfmap_print(const struct xb_codemap *cm, FILE *f)
{
	char buf[4 * 2048];
	for (size_t i = 0; i < cm->n; i++) {
		const char *name = cm->v[i].name;
		/* the common case, no copy: printable ASCII only */
		for (const char *c = name; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) {
				xb_perfmap_escape(name, buf, sizeof(buf));
				name = buf;
				break;
			}
		if (fprintf(f, "%llx %llx %s\n", (unsigned long long)cm->v[i].start,
			    (unsigned long long)(cm->v[i].end - cm->v[i].start), name) < 0)
			return xb_fail("write failed: %m");
	}
	return 0;
}

int xb_perfmap_write_file(const struct xb_codemap *cm, const char *path)
{
	struct xb_outfile o;
	/* 0644 regardless of umask: perf, run by anyone, must read it; a file
	 * owned by another user is not ours to replace (sticky /tmp). */
	if (xb_outfile_open(&o, path, 0644, XB_OUTFILE_ONLY_OURS) < 0)
		return -1;
	if (xb_perfmap_print(cm, o.f) < 0) {
		xb_outfile_abort(&o);
		return xb_fail("writing %s: %s", path, xb_err());
	}
	return xb_outfile_commit(&o);
}

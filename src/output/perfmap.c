/* perfmap.c - writing /tmp/perf-PID.map safely (base/outfile.c): a
 * reader (perf) sees the old map or the new one, never half of one; a
 * symlink or a file owned by another user is never replaced. */
#define _GNU_SOURCE
#include "xb/perfmap.h"
#include "xb/common.h"

#include "xb/outfile.h"

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

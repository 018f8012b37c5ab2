/* outfile.h - writing a result file safely: into a temporary file next to
 * it (O_EXCL|O_NOFOLLOW), renamed over the path only when everything was
 * written.  A reader never sees half a file, a failed run leaves nothing
 * behind, and a symbolic link at the path is refused rather than followed
 * (it may point anywhere, and we often run as root). */
#ifndef XB_OUTFILE_H
#define XB_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct xb_outfile {
	FILE *f;
	int dfd;
	char path[PATH_MAX];
	char base[NAME_MAX + 1];
	char tmp[NAME_MAX + 1];
};

enum {
	XB_OUTFILE_ONLY_OURS = 1, /* refuse to replace a file owned by another user */
};

/* Open a temporary file for PATH with MODE (umask ignored).  -1 with a
 * one-line message (xb_err) naming the path and the fix. */
int xb_outfile_open(struct xb_outfile *o, const char *path, mode_t mode, unsigned flags);
/* Flush, check for write errors, and rename into place.  -1 (and nothing
 * left behind) on any error. */
int xb_outfile_commit(struct xb_outfile *o);
/* Throw the temporary file away. */
void xb_outfile_abort(struct xb_outfile *o);

/* Flush F and report a write error on it (e.g. stdout on a full disk):
 * 0, or -1 with "writing WHAT: reason". */
int xb_flush_check(FILE *f, const char *what);

#endif

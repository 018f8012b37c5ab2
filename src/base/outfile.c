/* outfile.c - atomic, symlink-safe result files. */
#define _GNU_SOURCE
#include "xb/outfile.h"
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int xb_outfile_open(struct xb_outfile *o, const char *path, mode_t mode, unsigned flags)
{
	char dbuf[PATH_MAX];
	memset(o, 0, sizeof(*o));
	o->dfd = -1;
	size_t plen = strlen(path);
	if (plen == 0 || plen >= sizeof(o->path) || path[plen - 1] == '/')
		return xb_fail("cannot write '%s': not a file name; pass a file path", path);
	snprintf(o->path, sizeof(o->path), "%s", path);
	snprintf(dbuf, sizeof(dbuf), "%s", path);
	const char *dir = dirname(dbuf);
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strlen(base) > NAME_MAX)
		return xb_fail("cannot write %s: not a file name; pass a file path", path);
	snprintf(o->base, sizeof(o->base), "%s", base);
	o->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dfd < 0)
		return xb_fail("cannot write %s: directory %s: %s; pass a writable path", path, dir,
			       strerror(errno));
	struct stat st;
	if (fstatat(o->dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		const char *why = NULL;
		if (S_ISLNK(st.st_mode))
			why = "it is a symbolic link (not followed); remove it or pass another path";
		else if (!S_ISREG(st.st_mode))
			why = "not a regular file; pass another path";
		else if ((flags & XB_OUTFILE_ONLY_OURS) && st.st_uid != geteuid())
			why = "owned by another user; remove it or pass another path";
		if (why) {
			close(o->dfd);
			o->dfd = -1;
			return xb_fail("refusing to write %s: %s", path, why);
		}
	}
	int fd = -1;
	for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
		snprintf(o->tmp, sizeof(o->tmp), ".%.200s.%d.%u", base, (int)getpid(),
			 (unsigned)(xb_now_ns() & 0xffffff) + (unsigned)attempt);
		fd = openat(o->dfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;
		close(o->dfd);
		o->dfd = -1;
		return xb_fail("cannot create a file in %s: %s; pass a writable path", dir, strerror(e));
	}
	fchmod(fd, mode); /* regardless of umask */
	o->f = fdopen(fd, "w");
	if (!o->f) {
		close(fd);
		xb_outfile_abort(o);
		return xb_fail("out of memory");
	}
	return 0;
}

void xb_outfile_abort(struct xb_outfile *o)
{
	if (o->f) {
		fclose(o->f);
		o->f = NULL;
	}
	if (o->dfd >= 0) {
		if (o->tmp[0])
			unlinkat(o->dfd, o->tmp, 0);
		close(o->dfd);
		o->dfd = -1;
	}
}

int xb_outfile_commit(struct xb_outfile *o)
{
	int rc = 0;
	if (!o->f)
		return xb_fail("writing %s: not open", o->path);
	if (fflush(o->f) != 0 || ferror(o->f))
		rc = xb_fail("writing %s: %s; free some space or pass another path", o->path,
			     strerror(errno ? errno : EIO));
	if (fclose(o->f) != 0 && rc == 0)
		rc = xb_fail("writing %s: %s; free some space or pass another path", o->path,
			     strerror(errno));
	o->f = NULL;
	if (rc == 0 && renameat(o->dfd, o->tmp, o->dfd, o->base) < 0)
		rc = xb_fail("cannot replace %s: %s; pass a writable path", o->path, strerror(errno));
	if (rc < 0)
		unlinkat(o->dfd, o->tmp, 0);
	close(o->dfd);
	o->dfd = -1;
	return rc;
}

int xb_flush_check(FILE *f, const char *what)
{
	errno = 0;
	if (fflush(f) != 0)
		return xb_fail("writing %s: %s", what, strerror(errno ? errno : EIO));
	if (ferror(f))
		return xb_fail("writing %s: write error", what);
	return 0;
}

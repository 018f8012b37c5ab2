/* perfmap.c - writing /tmp/perf-PID.map safely.
 *
 * The map goes to a temporary file in the target's directory, created
 * O_EXCL|O_NOFOLLOW, then renamed over the target: a reader (perf) sees the
 * old map or the new one, never half of one.  We refuse to replace a
 * symlink or a file owned by another user (in sticky /tmp the kernel would
 * refuse too), and the file is mode 0644 so perf, run by anyone, can read
 * it. */
#define _GNU_SOURCE
#include "xb/perfmap.h"
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int xb_perfmap_write_file(const struct xb_codemap *cm, const char *path)
{
	char dbuf[PATH_MAX], bbuf[PATH_MAX];
	size_t plen = strlen(path);
	if (plen == 0 || path[plen - 1] == '/')
		return xb_fail("cannot write map to '%s': that names a directory; pass -o FILE", path);
	snprintf(dbuf, sizeof(dbuf), "%s", path);
	snprintf(bbuf, sizeof(bbuf), "%s", path);
	const char *dir = dirname(dbuf), *base = basename(bbuf);
	if (!*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return xb_fail("cannot write map to %s: not a file name; pass -o FILE", path);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return xb_fail("cannot write map to %s: directory %s: %m; pass -o with a writable path",
			       path, dir);
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			close(dfd);
			return xb_fail("refusing to write %s: it is a symbolic link; remove it or pass -o", path);
		}
		if (!S_ISREG(st.st_mode)) {
			close(dfd);
			return xb_fail("refusing to write %s: not a regular file; pass -o", path);
		}
		if (st.st_uid != geteuid()) {
			close(dfd);
			return xb_fail("refusing to replace %s: owned by uid %u, not us (uid %u); remove it or pass -o",
				       path, (unsigned)st.st_uid, (unsigned)geteuid());
		}
	}
	char tmp[NAME_MAX + 1];
	int fd = -1;
	for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
		snprintf(tmp, sizeof(tmp), ".%.200s.%d.%u", base, (int)getpid(),
			 (unsigned)(xb_now_ns() & 0xffffff) + (unsigned)attempt);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;
		close(dfd);
		errno = e;
		return xb_fail("cannot create a file in %s: %m; pass -o with a writable path", dir);
	}
	fchmod(fd, 0644); /* regardless of umask: perf must read it */
	FILE *f = fdopen(fd, "w");
	int rc = f ? xb_perfmap_print(cm, f) : -1;
	if (f && fclose(f) != 0 && rc == 0)
		rc = xb_fail("writing %s: %m", path);
	if (!f)
		close(fd);
	if (rc == 0 && renameat(dfd, tmp, dfd, base) < 0)
		rc = xb_fail("cannot replace %s: %m; pass -o with a writable path", path);
	if (rc < 0)
		unlinkat(dfd, tmp, 0);
	close(dfd);
	return rc;
}

/* safefile.c - files the target can influence, opened inside its root
 * (see include/xb/safefile.h). */
#define _GNU_SOURCE
#include "xb/safefile.h"
#include "xb/common.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Kernels before 5.6 have no openat2: walk the path one component at a
 * time with O_PATH | O_NOFOLLOW instead, refusing every symlink and any
 * "..": stricter than RESOLVE_IN_ROOT, never looser. */
static int walk_open(int dirfd, const char *path)
{
	char comp[NAME_MAX + 1];
	int cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -1;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		if (n > NAME_MAX || (n == 2 && p[0] == '.' && p[1] == '.')) {
			close(cur);
			errno = n > NAME_MAX ? ENAMETOOLONG : EXDEV;
			return -1;
		}
		memcpy(comp, p, n);
		comp[n] = 0;
		p += n;
		int next = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(cur);
		if (next < 0) {
			errno = e;
			return -1;
		}
		struct stat st;
		if (fstat(next, &st) < 0 || S_ISLNK(st.st_mode)) {
			close(next);
			errno = ELOOP;
			return -1;
		}
		cur = next;
	}
	return cur;
}

int xb_safe_open(int dirfd, const char *path, uint64_t max_size, unsigned flags, struct stat *stp)
{
	struct stat st;
	if (!stp)
		stp = &st;
	/* openat2 takes a path relative to the root; "/x" means the same. */
	const char *rel = path;
	while (*rel == '/')
		rel++;
	if (!*rel) {
		errno = EISDIR;
		return xb_fail("%s: not a file", path);
	}
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | ((flags & XB_SAFE_NOFOLLOW) ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_NO_MAGICLINKS | ((flags & XB_SAFE_BENEATH) ? RESOLVE_BENEATH : RESOLVE_IN_ROOT),
	};
	int pfd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (pfd < 0 && (errno == ENOSYS || errno == E2BIG))
		pfd = walk_open(dirfd, rel);
	if (pfd < 0) {
		int e = errno;
		xb_fail("%s: %s", path, strerror(e));
		errno = e;
		return -1;
	}
	/* O_PATH opened nothing: check what it is before opening it. */
	if (fstat(pfd, stp) < 0) {
		int e = errno;
		close(pfd);
		errno = e;
		return xb_fail("%s: %s", path, strerror(e));
	}
	if (S_ISLNK(stp->st_mode)) {
		close(pfd);
		errno = ELOOP;
		return xb_fail("%s: a symbolic link (not followed)", path);
	}
	if (!S_ISREG(stp->st_mode)) {
		close(pfd);
		errno = EINVAL;
		return xb_fail("%s: not a regular file (refused)", path);
	}
	if ((uint64_t)stp->st_size > max_size) {
		close(pfd);
		errno = EFBIG;
		return xb_fail("%s: %lld bytes, more than the %llu allowed", path, (long long)stp->st_size,
			       (unsigned long long)max_size);
	}
	/* Reopen the very inode for reading through our own fd (the one
	 * magic link we follow, ours). */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	int fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	int e = errno;
	close(pfd);
	if (fd < 0) {
		errno = e;
		return xb_fail("%s: %s", path, strerror(e));
	}
	struct stat st2;
	if (fstat(fd, &st2) < 0 || st2.st_ino != stp->st_ino || st2.st_dev != stp->st_dev ||
	    !S_ISREG(st2.st_mode)) {
		close(fd);
		errno = EINVAL;
		return xb_fail("%s: changed while opening (refused)", path);
	}
	*stp = st2;
	return fd;
}

/* Could READER reach PATH (under DIRFD, resolved as xb_safe_open does):
 * may it search DIRFD and every directory on the way?  A 0644 file in a
 * 0700 directory of another user is out of its reach, whatever the
 * file's own bits say. */
static bool dirs_searchable(int dirfd, const char *path, unsigned flags, const struct xb_cred *reader)
{
	struct stat st;
	if (fstat(dirfd, &st) < 0 || !xb_cred_can_search(reader, &st))
		return false;
	const char *rel = path;
	while (*rel == '/')
		rel++;
	char prefix[PATH_MAX];
	for (const char *slash = strchr(rel, '/'); slash; slash = strchr(slash + 1, '/')) {
		size_t n = (size_t)(slash - rel);
		if (n == 0 || slash[-1] == '/')
			continue;
		if (n >= sizeof(prefix))
			return false;
		memcpy(prefix, rel, n);
		prefix[n] = 0;
		struct open_how how = {
			.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			.resolve = RESOLVE_NO_MAGICLINKS |
				   ((flags & XB_SAFE_BENEATH) ? RESOLVE_BENEATH : RESOLVE_IN_ROOT),
		};
		int d = (int)syscall(SYS_openat2, dirfd, prefix, &how, sizeof(how));
		if (d < 0 && (errno == ENOSYS || errno == E2BIG))
			d = walk_open(dirfd, prefix);
		if (d < 0)
			return false;
		bool ok = fstat(d, &st) == 0 && S_ISDIR(st.st_mode) && xb_cred_can_search(reader, &st);
		close(d);
		if (!ok)
			return false;
	}
	return true;
}

/* Root reading for another user: open and read PATH in a child process
 * that holds READER's file-system identity (setgroups, setfsgid,
 * setfsuid: from fsuid 0 to another, the kernel drops CAP_DAC_OVERRIDE
 * and CAP_DAC_READ_SEARCH, capabilities(7)), so that the kernel itself
 * decides, as for the target: every directory on the way, symlinks
 * included, the file's mode and ACLs.  The content comes back through a
 * pipe; the child's exit status is 0 or the errno that refused it. */
static char *slurp_as(int dirfd, const char *path, size_t max_size, unsigned flags, const struct xb_cred *r,
		      size_t *len)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return xb_fail("pipe: %s", strerror(errno)), NULL;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pfd[0]);
		close(pfd[1]);
		errno = e;
		return xb_fail("fork: %s", strerror(e)), NULL;
	}
	if (pid == 0) {
		close(pfd[0]);
		if (setgroups(r->ngroups, r->groups) < 0 || setfsgid(r->gid) < 0 || setfsuid(r->uid) < 0 ||
		    (uid_t)setfsuid((uid_t)-1) != r->uid || (gid_t)setfsgid((gid_t)-1) != r->gid)
			_exit(EPERM);
		struct stat st;
		int fd = xb_safe_open(dirfd, path, max_size, flags, &st);
		if (fd < 0) {
			int e = errno ? errno : EACCES;
			const char *m = xb_err();
			ssize_t w = write(pfd[1], m, strlen(m));
			(void)w;
			_exit(e & 0xff ? e & 0xff : EACCES);
		}
		char buf[4096];
		size_t total = 0;
		for (;;) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				_exit(EIO);
			if (n == 0)
				break;
			total += (size_t)n;
			if (total > max_size)
				_exit(EFBIG);
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(pfd[1], buf + off, (size_t)(n - off));
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					_exit(EIO);
				off += w;
			}
		}
		_exit(0);
	}
	close(pfd[1]);
	size_t n = 0;
	char *b = xb_read_fd(pfd[0], max_size + 512, &n, path);
	close(pfd[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
	if (code != 0 || !b) {
		if (code == 0)
			code = EIO;
		xb_fail("%.*s", b ? (int)n : 0, b ? b : "");
		if (!b || !n)
			xb_fail("%s: %s", path, strerror(code));
		free(b);
		if (code == EACCES || code == EPERM)
			xb_fail("%s: the target process (uid %u) could not read it itself (refused)", path,
				(unsigned)r->uid);
		errno = code;
		return NULL;
	}
	if (len)
		*len = n;
	return b;
}

char *xb_safe_slurp(int dirfd, const char *path, size_t max_size, unsigned flags,
		    const struct xb_cred *reader, size_t *len)
{
	struct stat st;
	int fd = xb_safe_open(dirfd, path, max_size, flags, &st);
	if (fd < 0)
		return NULL;
	if (reader && !dirs_searchable(dirfd, path, flags, reader)) {
		close(fd);
		errno = EACCES;
		xb_fail("%s: the target process (uid %u) could not reach it itself: a directory on the way "
			"is not searchable for it (refused)", path, (unsigned)reader->uid);
		return NULL;
	}
	if (reader && !xb_cred_can_read(reader, &st)) {
		close(fd);
		errno = EACCES;
		xb_fail("%s: the target process (uid %u) could not read it itself (refused)", path,
			(unsigned)reader->uid);
		return NULL;
	}
	/* The bits say yes; as root, the kernel decides too, as the target
	 * (symlinked directories, ACLs): the file read as READER. */
	if (reader && reader->uid != 0 && geteuid() == 0) {
		close(fd);
		return slurp_as(dirfd, path, max_size, flags, reader, len);
	}
	char *b = xb_read_fd(fd, max_size, len, path);
	int e = errno;
	close(fd);
	errno = e;
	return b;
}

int xb_proc_root_open(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		xb_fail("cannot open %s: %s", path, strerror(e));
		errno = e;
	}
	return fd;
}

int xb_proc_cred(pid_t pid, struct xb_cred *c)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *s = xb_slurp_max(path, 1 << 16, NULL);
	if (!s)
		return -1;
	memset(c, 0, sizeof(*c));
	int got = 0;
	for (char *line = s; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		unsigned a, b, d, e;
		if (sscanf(line, "Uid: %u %u %u %u", &a, &b, &d, &e) == 4) {
			c->ruid = a, c->euid = b, c->suid = d, c->uid = e;
			got |= 1;
		} else if (sscanf(line, "Gid: %u %u %u %u", &a, &b, &d, &e) == 4) {
			c->rgid = a, c->egid = b, c->sgid = d, c->gid = e;
			got |= 2;
		} else if (strncmp(line, "Groups:", 7) == 0) {
			char *p = line + 7, *end;
			for (;;) {
				unsigned long g = strtoul(p, &end, 10);
				if (end == p)
					break;
				if (c->ngroups < XB_MAX_GROUPS)
					c->groups[c->ngroups++] = (gid_t)g;
				else
					c->groups_cut = true;
				p = end;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	free(s);
	if (got != 3)
		return xb_fail("%s: no Uid/Gid lines", path);
	return 0;
}

/* The permission bits that apply to C (owner, else group, else other). */
static bool cred_may(const struct xb_cred *c, const struct stat *st, mode_t u, mode_t g, mode_t o)
{
	if (c->uid == 0)
		return true;
	if (st->st_uid == c->uid)
		return (st->st_mode & u) != 0;
	bool member = st->st_gid == c->gid;
	for (unsigned i = 0; i < c->ngroups && !member; i++)
		member = c->groups[i] == st->st_gid;
	if (!member && c->groups_cut)
		return false; /* cannot tell: refuse */
	if (member)
		return (st->st_mode & g) != 0;
	return (st->st_mode & o) != 0;
}

bool xb_cred_can_read(const struct xb_cred *c, const struct stat *st)
{
	return cred_may(c, st, S_IRUSR, S_IRGRP, S_IROTH);
}

bool xb_cred_can_search(const struct xb_cred *c, const struct stat *st)
{
	return cred_may(c, st, S_IXUSR, S_IXGRP, S_IXOTH);
}

/* safefile.h - opening files the target can influence (src/base/safefile.c).
 *
 * The tools run as root and read files named by the target: the ELF files
 * it maps, its -root directory's release files, debug files.  Such a name
 * is resolved inside the target's root directory (a directory fd of
 * /proc/PID/root, openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: a
 * symlink or ".." cannot leave it, /proc magic links are refused), the
 * file is first opened O_PATH (no open side effects: a FIFO, a device,
 * a tty), must be a regular file of bounded size, and only then is it
 * reopened for reading, O_NONBLOCK | O_NOCTTY.  Nothing falls back to
 * the host's file of the same name. */
#ifndef XB_SAFEFILE_H
#define XB_SAFEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

enum {
	/* Refuse a symlink as the last component (O_NOFOLLOW); symlinks on
	 * the way are still resolved inside the root. */
	XB_SAFE_NOFOLLOW = 1,
	/* Resolve beneath the directory (RESOLVE_BENEATH: no absolute
	 * symlinks, no ".." above it) instead of treating it as the root. */
	XB_SAFE_BENEATH = 2,
};

/* Open PATH (absolute or relative: relative to the root either way)
 * under the directory DIRFD for reading, by the rules above; regular
 * files of at most MAX_SIZE bytes only.  *ST (may be NULL) gets its stat.
 * Returns the fd (O_CLOEXEC), or -1 with xb_fail saying why (errno set:
 * ELOOP a symlink, EFBIG too large, EINVAL not a regular file, or the
 * open's own error). */
int xb_safe_open(int dirfd, const char *path, uint64_t max_size, unsigned flags, struct stat *st);

struct xb_cred;
/* The whole of a small file, opened by xb_safe_open: malloc'd, NUL
 * terminated, *LEN (may be NULL) its length.  With READER (may be NULL),
 * only a file those credentials could read themselves (xb_cred_can_read,
 * and xb_cred_can_search on every directory on the way; run as root, the
 * file is then read by a child process holding READER's file-system
 * identity, so that the kernel decides: symlinked directories, ACLs):
 * root reading on behalf of a process must not read what it could not.
 * NULL with xb_fail. */
char *xb_safe_slurp(int dirfd, const char *path, size_t max_size, unsigned flags,
		    const struct xb_cred *reader, size_t *len);

/* A directory fd (O_PATH) of process PID's root directory, or -1. */
int xb_proc_root_open(pid_t pid);

/* Whose files a process may read: its filesystem uid and gid and its
 * supplementary groups (/proc/PID/status). */
#define XB_MAX_GROUPS 64
struct xb_cred {
	uid_t uid; /* fsuid */
	gid_t gid; /* fsgid */
	gid_t groups[XB_MAX_GROUPS];
	unsigned ngroups;
	bool groups_cut; /* more groups than we keep: group checks are refused */
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;
};
int xb_proc_cred(pid_t pid, struct xb_cred *c);
/* Could a process with credentials C read the file ST describes, by its
 * permission bits (ACLs are not consulted: a file readable only through
 * an ACL is refused)?  uid 0 reads everything. */
bool xb_cred_can_read(const struct xb_cred *c, const struct stat *st);
/* The same for searching a directory (its x bits). */
bool xb_cred_can_search(const struct xb_cred *c, const struct stat *st);

#endif

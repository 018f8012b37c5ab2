/* procmaps.h - /proc/PID/maps, parsed.  Used to validate every remote read
 * and to find where the beam binary and JIT code are mapped. */
#ifndef XB_PROCMAPS_H
#define XB_PROCMAPS_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

struct xb_map {
	uint64_t start, end, offset, inode;
	unsigned dev_major, dev_minor;
	unsigned readable : 1, writable : 1, executable : 1, shared : 1;
	char *path; /* "" for anonymous mappings */
};

struct xb_maps {
	struct xb_map *v;
	size_t n;
};

/* Parse the text of a maps file.  Lines that do not parse are an error. */
int xb_maps_parse(const char *text, struct xb_maps *out);
int xb_maps_read(pid_t pid, struct xb_maps *out);
void xb_maps_free(struct xb_maps *m);
/* Mapping containing addr, or NULL.  Maps are sorted by start. */
const struct xb_map *xb_maps_find(const struct xb_maps *m, uint64_t addr);

#endif

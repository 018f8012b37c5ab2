/* procmaps.h - /proc/PID/maps, parsed.  Used to validate every remote read
 * and to find where the beam binary and JIT code are mapped. */
#ifndef XB_PROCMAPS_H
#define XB_PROCMAPS_H

#include <stdbool.h>
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
	/* The target has more mappings than are kept (XB_MAPS_MAX_LINES,
	 * XB_MAPS_MAX_BYTES): the first ones only. */
	bool truncated;
};

/* The most mappings kept (4 times Linux's default vm.max_map_count) and
 * the most text of /proc/PID/maps read: a target chooses how many
 * mappings it has, not how much memory or time the tools spend on them. */
#define XB_MAPS_MAX_LINES (1u << 18)
#define XB_MAPS_MAX_BYTES (64u << 20)

/* Parse the text of a maps file (LEN bytes; time linear in LEN).  Lines
 * that do not parse are an error; past XB_MAPS_MAX_LINES the rest is left
 * out and out->truncated set. */
int xb_maps_parse_n(const char *text, size_t len, struct xb_maps *out);
/* The same for a NUL-terminated text. */
int xb_maps_parse(const char *text, struct xb_maps *out);
/* The text of /proc/PID/maps (malloc'd, NUL-terminated, *LEN bytes), at
 * most XB_MAPS_MAX_BYTES of it in whole lines (*TRUNCATED then); NULL and
 * xb_fail when it cannot be read. */
char *xb_maps_text(pid_t pid, size_t *len, bool *truncated);
int xb_maps_read(pid_t pid, struct xb_maps *out);
void xb_maps_free(struct xb_maps *m);
/* Mapping containing addr, or NULL.  Maps are sorted by start. */
const struct xb_map *xb_maps_find(const struct xb_maps *m, uint64_t addr);

#endif

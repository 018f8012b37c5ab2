/* perfmap.h - atomic, symlink-safe perf map output. */
#ifndef XB_PERFMAP_H
#define XB_PERFMAP_H

#include "xb/codemap.h"

int xb_perfmap_write_file(const struct xb_codemap *cm, const char *path);

#endif

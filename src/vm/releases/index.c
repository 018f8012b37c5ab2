/* Written by scripts/gen-release-table: every compiled-in release table,
 * newest first. */
#include "xb/release.h"

extern const struct xb_release xb_release_erts_13_1_5;

const struct xb_release *const xb_releases[] = {
	&xb_release_erts_13_1_5,
	NULL,
};

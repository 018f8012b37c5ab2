/* Written by scripts/gen-release-table: every compiled-in release table,
 * newest first. */
#include "xb/release.h"

extern const struct xb_release xb_release_erts_17_1;
extern const struct xb_release xb_release_erts_15_2_7;
extern const struct xb_release xb_release_erts_13_1_5;

const struct xb_release *const xb_releases[] = {
	&xb_release_erts_17_1,
	&xb_release_erts_15_2_7,
	&xb_release_erts_13_1_5,
	NULL,
};

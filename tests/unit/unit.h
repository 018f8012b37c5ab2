/* unit.h - what the unit test files share (tests/unit/test_unit.c runs
 * every case). */
#ifndef XB_UNIT_H
#define XB_UNIT_H

#include <stdio.h>

extern char fail_msg[2048];
extern int case_failed;

#define CHECK(cond, ...)                                                         \
	do {                                                                     \
		if (!(cond) && !case_failed) {                                   \
			case_failed = 1;                                         \
			int n_ = snprintf(fail_msg, sizeof(fail_msg), "line %d: ", \
					  __LINE__);                             \
			snprintf(fail_msg + n_, sizeof(fail_msg) - (size_t)n_,   \
				 __VA_ARGS__);                                   \
		}                                                                \
	} while (0)

void run_case(const char *name, void (*fn)(void));

struct xb_codemap;
/* CM as xb_perfmap_print writes it (malloc'd, LEN bytes), NULL if it fails. */
char *perfmap_text(const struct xb_codemap *cm, size_t *len);

/* test_erlstack.c */
void erlstack_cases(void);
/* test_names.c */
void names_cases(void);
/* test_heapsample.c */
void heapsample_cases(void);
/* test_sched.c */
void sched_cases(void);
/* test_hostile.c */
void hostile_cases(void);
/* test_prompt.c */
void prompt_cases(void);
/* test_layout.c */
void layout_cases(void);

#endif

/* cli.h - one option table per tool drives parsing, --help and the
 * validation of every value.  Numbers are strict: decimal digits only (a
 * fraction and exponent where a real number is wanted), within the
 * option's bounds; no sign, no trailing junk, no nan, inf or wrap-around.
 * A bad option gives one line naming the option, what it wants and what
 * was given, and exit status 2. */
#ifndef XB_CLI_H
#define XB_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum xb_opt_type {
	XB_OPT_FLAG,   /* bool, set to true */
	XB_OPT_COUNT,  /* int, incremented (-v -v) */
	XB_OPT_UINT,   /* unsigned (32 bits), bounds min..max */
	XB_OPT_U64,    /* uint64_t, bounds min..max */
	XB_OPT_SIZE,   /* size_t, bounds min..max */
	XB_OPT_DOUBLE, /* double, bounds min..max (finite) */
	XB_OPT_STR,    /* const char *: the argument itself */
	XB_OPT_CHOICE, /* const char *: one of choices[] */
	XB_OPT_FN,     /* custom: parse(arg, dst) returns 0 or -1 with xb_fail */
	XB_OPT_LIST,   /* const char **: every occurrence, NULL-terminated (dst is a struct xb_strlist) */
};

struct xb_strlist {
	const char **v;
	size_t n, cap;
};

struct xb_opt {
	const char *lname; /* long name, without "--" */
	int sname;         /* short option character, or 0 */
	enum xb_opt_type type;
	void *dst;
	const char *arg;   /* value's name in --help ("SECONDS"), NULL for flags */
	const char *help;  /* '\n' starts a continuation line */
	double min, max;   /* numeric bounds, inclusive */
	const char *const *choices; /* XB_OPT_CHOICE: NULL-terminated */
	int (*parse)(const char *arg, void *dst); /* XB_OPT_FN */
	const char *group; /* starts a new --help section with this heading */
	bool *given;       /* set to true when the option appears (optional) */
};

struct xb_cli {
	const char *prog;
	const char *usage;   /* "[OPTIONS] PID" */
	const char *summary; /* lines printed under the usage line */
	const struct xb_opt *opts;
	size_t nopts;
	const char *epilog;  /* printed after the options */
};

/* Parse ARGV.  Returns the index of the first operand, or -1 after printing
 * one line on stderr (exit with status 2). */
int xb_cli_parse(const struct xb_cli *c, int argc, char **argv);
void xb_cli_help(const struct xb_cli *c, FILE *f);
/* Every long option, one per line ("--duration"), for the man page test. */
void xb_cli_list(const struct xb_cli *c, FILE *f);

/* Strict number parsing (pure; exposed for unit tests).  0, or -1. */
int xb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int xb_parse_double(const char *s, double min, double max, double *out);

#endif

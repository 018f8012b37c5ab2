/* cli.c - option tables: parsing, --help, strict values. */
#define _GNU_SOURCE
#include "xb/cli.h"
#include "xb/common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int xb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1; /* would wrap */
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int xb_parse_double(const char *s, double min, double max, double *out)
{
	if (!s || !*s)
		return -1;
	/* digits, at most one '.', an optional exponent: no sign, no hex,
	 * no "nan"/"inf", no spaces. */
	const char *p = s;
	bool digits = false;
	while (*p >= '0' && *p <= '9')
		p++, digits = true;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9')
			p++, digits = true;
	}
	if (!digits)
		return -1;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p)
		return -1;
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	if (*end || errno == ERANGE || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static const struct xb_opt *find_long(const struct xb_cli *c, const char *name, size_t len)
{
	for (size_t i = 0; i < c->nopts; i++)
		if (strlen(c->opts[i].lname) == len && strncmp(c->opts[i].lname, name, len) == 0)
			return &c->opts[i];
	return NULL;
}

static const struct xb_opt *find_short(const struct xb_cli *c, int ch)
{
	for (size_t i = 0; i < c->nopts; i++)
		if (c->opts[i].sname && c->opts[i].sname == ch)
			return &c->opts[i];
	return NULL;
}

static bool takes_value(const struct xb_opt *o)
{
	return o->type != XB_OPT_FLAG && o->type != XB_OPT_COUNT;
}

/* "a number of seconds (0..86400)" style description of what O wants. */
static void wants(const struct xb_opt *o, char *buf, size_t len)
{
	switch (o->type) {
	case XB_OPT_UINT:
	case XB_OPT_U64:
	case XB_OPT_SIZE:
		snprintf(buf, len, "a whole number %s in %.0f..%.0f", o->arg ? o->arg : "", o->min, o->max);
		break;
	case XB_OPT_DOUBLE:
		snprintf(buf, len, "a number %s in %.15g..%.15g", o->arg ? o->arg : "", o->min, o->max);
		break;
	case XB_OPT_CHOICE: {
		size_t used = (size_t)snprintf(buf, len, "one of");
		for (const char *const *ch = o->choices; *ch && used < len; ch++)
			used += (size_t)snprintf(buf + used, len - used, "%s %s", ch == o->choices ? "" : ",", *ch);
		break;
	}
	default:
		snprintf(buf, len, "%s", o->arg ? o->arg : "a value");
	}
}

static int bad(const struct xb_cli *c, const struct xb_opt *o, const char *val, const char *why)
{
	char w[256];
	wants(o, w, sizeof(w));
	if (why)
		fprintf(stderr, "%s: --%s '%s': %s\n", c->prog, o->lname, val, why);
	else
		fprintf(stderr, "%s: --%s wants %s, not '%s'\n", c->prog, o->lname, w, val);
	return -1;
}

static int apply(const struct xb_cli *c, const struct xb_opt *o, const char *val)
{
	uint64_t u;
	double d;
	if (o->given)
		*o->given = true;
	switch (o->type) {
	case XB_OPT_FLAG:
		*(bool *)o->dst = true;
		return 0;
	case XB_OPT_COUNT:
		(*(int *)o->dst)++;
		return 0;
	case XB_OPT_UINT:
		if (xb_parse_u64(val, (uint64_t)o->min, (uint64_t)(o->max < 4294967295.0 ? o->max : 4294967295.0), &u) < 0)
			return bad(c, o, val, NULL);
		*(unsigned *)o->dst = (unsigned)u;
		return 0;
	case XB_OPT_U64:
		if (xb_parse_u64(val, (uint64_t)o->min, o->max >= 1.8e19 ? UINT64_MAX : (uint64_t)o->max, &u) < 0)
			return bad(c, o, val, NULL);
		*(uint64_t *)o->dst = u;
		return 0;
	case XB_OPT_SIZE:
		if (xb_parse_u64(val, (uint64_t)o->min, o->max >= 1.8e19 ? SIZE_MAX : (uint64_t)o->max, &u) < 0)
			return bad(c, o, val, NULL);
		*(size_t *)o->dst = (size_t)u;
		return 0;
	case XB_OPT_DOUBLE:
		if (xb_parse_double(val, o->min, o->max, &d) < 0)
			return bad(c, o, val, NULL);
		*(double *)o->dst = d;
		return 0;
	case XB_OPT_STR:
		if (!*val)
			return bad(c, o, val, "empty");
		*(const char **)o->dst = val;
		return 0;
	case XB_OPT_CHOICE:
		for (const char *const *ch = o->choices; *ch; ch++)
			if (strcmp(*ch, val) == 0) {
				*(const char **)o->dst = *ch;
				return 0;
			}
		return bad(c, o, val, NULL);
	case XB_OPT_FN:
		if (o->parse(val, o->dst) < 0)
			return bad(c, o, val, xb_err());
		return 0;
	case XB_OPT_LIST: {
		struct xb_strlist *l = o->dst;
		if (xb_grow((void **)&l->v, &l->cap, l->n + 2, sizeof(*l->v)) < 0)
			return bad(c, o, val, "out of memory");
		l->v[l->n++] = val;
		l->v[l->n] = NULL;
		return 0;
	}
	}
	return -1;
}

int xb_cli_parse(const struct xb_cli *c, int argc, char **argv)
{
	int i = 1;
	/* Operands and options may be mixed ("PID -d 5"), as getopt allows. */
	int first_operand = -1;
	char **operands = calloc((size_t)argc + 1, sizeof(*operands));
	int nops = 0;
	if (!operands) {
		fprintf(stderr, "%s: out of memory\n", c->prog);
		return -1;
	}
	for (; i < argc; i++) {
		char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			for (i++; i < argc; i++)
				operands[nops++] = argv[i];
			break;
		}
		if (a[0] != '-' || a[1] == 0) {
			operands[nops++] = a;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			const struct xb_opt *o = find_long(c, name, len);
			if (!o) {
				fprintf(stderr, "%s: unknown option '--%.*s'; see %s --help\n", c->prog,
					(int)(len > 64 ? 64 : len), name, c->prog);
				goto fail;
			}
			const char *val = NULL;
			if (takes_value(o)) {
				if (eq)
					val = eq + 1;
				else if (i + 1 < argc)
					val = argv[++i];
				else {
					fprintf(stderr, "%s: --%s needs a value (%s)\n", c->prog, o->lname,
						o->arg ? o->arg : "value");
					goto fail;
				}
			} else if (eq) {
				fprintf(stderr, "%s: --%s takes no value\n", c->prog, o->lname);
				goto fail;
			}
			if (apply(c, o, val) < 0)
				goto fail;
			continue;
		}
		/* -abc: flags, the last may take a value (-d5 or -d 5) */
		for (const char *p = a + 1; *p; p++) {
			const struct xb_opt *o = find_short(c, *p);
			if (!o) {
				fprintf(stderr, "%s: unknown option '-%c'; see %s --help\n", c->prog, *p, c->prog);
				goto fail;
			}
			if (!takes_value(o)) {
				if (apply(c, o, NULL) < 0)
					goto fail;
				continue;
			}
			const char *val = p[1] ? p + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!val) {
				fprintf(stderr, "%s: -%c (--%s) needs a value (%s)\n", c->prog, *p, o->lname,
					o->arg ? o->arg : "value");
				goto fail;
			}
			if (apply(c, o, val) < 0)
				goto fail;
			break;
		}
	}
	/* Put the operands at the end of argv, in order. */
	first_operand = argc - nops;
	for (int k = 0; k < nops; k++)
		argv[first_operand + k] = operands[k];
	free(operands);
	return first_operand;
fail:
	free(operands);
	return -1;
}

void xb_cli_help(const struct xb_cli *c, FILE *f)
{
	fprintf(f, "Usage: %s %s\n", c->prog, c->usage);
	if (c->summary)
		fprintf(f, "%s", c->summary);
	for (size_t i = 0; i < c->nopts; i++) {
		const struct xb_opt *o = &c->opts[i];
		if (o->group)
			fprintf(f, o->group[0] ? "\n%s\n" : "\n", o->group);
		char left[96];
		int n;
		if (o->sname)
			n = snprintf(left, sizeof(left), "  -%c, --%s%s%s", o->sname, o->lname, o->arg ? " " : "",
				     o->arg ? o->arg : "");
		else
			n = snprintf(left, sizeof(left), "      --%s%s%s", o->lname, o->arg ? " " : "",
				     o->arg ? o->arg : "");
		const char *h = o->help ? o->help : "";
		bool first = true;
		do {
			size_t len = strcspn(h, "\n");
			if (first) {
				if (n > 26)
					fprintf(f, "%s\n%-27s%.*s\n", left, "", (int)len, h);
				else
					fprintf(f, "%-27s%.*s\n", left, (int)len, h);
				first = false;
			} else {
				fprintf(f, "%-27s%.*s\n", "", (int)len, h);
			}
			h += len;
			if (*h == '\n')
				h++;
		} while (*h);
	}
	if (c->epilog)
		fprintf(f, "\n%s", c->epilog);
}

void xb_cli_list(const struct xb_cli *c, FILE *f)
{
	for (size_t i = 0; i < c->nopts; i++)
		fprintf(f, "--%s\n", c->opts[i].lname);
}

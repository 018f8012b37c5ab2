/* names.c - Elixir spellings of code names (see names.h). */
#define _GNU_SOURCE
#include "xb/names.h"

#include <stdio.h>
#include <string.h>

static const char ELIXIR[] = "Elixir.";
#define ELIXIR_LEN (sizeof(ELIXIR) - 1)

bool xb_is_elixir_name(const char *name)
{
	return strstr(name, ELIXIR) != NULL;
}

/* One atom at S as erts prints it: 'quoted' (with \' and \\ escaped) or
 * bare up to a character of STOP.  Its text goes to OUT (truncated
 * names are refused).  Returns the position after it, or NULL. */
static const char *atom_token(const char *s, const char *stop, char *out, size_t olen)
{
	size_t n = 0;
	if (*s == '\'') {
		for (s++; *s && *s != '\''; s++) {
			char c = *s;
			if (c == '\\' && (s[1] == '\'' || s[1] == '\\'))
				c = *++s;
			if (n + 1 >= olen)
				return NULL;
			out[n++] = c;
		}
		if (*s != '\'')
			return NULL;
		s++;
	} else {
		for (; *s && !strchr(stop, *s); s++) {
			if (n + 1 >= olen)
				return NULL;
			out[n++] = *s;
		}
	}
	out[n] = 0;
	return s;
}

/* A function name as Elixir prints it in a remote call: bare when it is
 * an identifier (letters, digits, '_', a trailing '?' or '!') or an
 * operator, else in double quotes. */
static void fun_name(const char *f, char *out, size_t len)
{
	bool ident = *f != 0, op = *f != 0;
	for (const unsigned char *p = (const unsigned char *)f; *p; p++) {
		unsigned char c = *p;
		if (!(c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '?' || c == '!' || c == '@'))
			ident = false;
		if (!strchr("+-*/<>=!&|^~.\\%:@", c))
			op = false;
	}
	if (ident || op) {
		snprintf(out, len, "%s", f);
		return;
	}
	size_t k = 0;
	if (len < 3) {
		if (len)
			out[0] = 0;
		return;
	}
	out[k++] = '"';
	for (const char *p = f; *p && k + 3 < len; p++) {
		if (*p == '"' || *p == '\\')
			out[k++] = '\\';
		out[k++] = *p;
	}
	out[k++] = '"';
	out[k] = 0;
}

const char *xb_elixir_name(const char *name, char *buf, size_t len)
{
	char mod[512], fn[512], f1[560], f2[560];
	if (!xb_is_elixir_name(name))
		return name;
	const char *p = atom_token(name, ":", mod, sizeof(mod));
	if (!p || *p != ':' || strncmp(mod, ELIXIR, ELIXIR_LEN) != 0 || !mod[ELIXIR_LEN])
		return name;
	const char *emod = mod + ELIXIR_LEN;
	if (p[1] == ':') { /* M::codeHeader, M::codeFooter */
		snprintf(buf, len, "%s::%s", emod, p + 2);
		return buf;
	}
	const char *q = atom_token(p + 1, "/", fn, sizeof(fn));
	if (!q || (*q != '/' && *q) || !fn[0])
		return name;
	if (!*q) { /* no arity: "Elixir.Foo:bar" as a --blame pattern */
		fun_name(fn, f2, sizeof(f2));
		snprintf(buf, len, "%s.%s", emod, f2);
		return buf;
	}
	const char *arity = q + 1; /* digits, perhaps "-CodeInfoPrologue" after */
	/* A fun: the compiler names it "-OUTER/ARITY-fun-N-" (Erlang's
	 * v3_core and Elixir's compiler alike); Elixir prints
	 * "anonymous fn/A in Mod.outer/ARITY". */
	char *fun = strstr(fn, "-fun-");
	if (fn[0] == '-' && fun) {
		char *last;
		while ((last = strstr(fun + 1, "-fun-")))
			fun = last;
		*fun = 0;
		char *slash = strrchr(fn + 1, '/');
		if (slash && slash[1]) {
			*slash = 0;
			fun_name(fn + 1, f1, sizeof(f1));
			snprintf(buf, len, "anonymous fn/%s in %s.%s/%s", arity, emod, f1, slash + 1);
			return buf;
		}
		*fun = '-';
	}
	fun_name(fn, f2, sizeof(f2));
	snprintf(buf, len, "%s.%s/%s", emod, f2, arity);
	return buf;
}

const char *xb_elixir_atom(const char *atom, char *buf, size_t len)
{
	char a[512];
	const char *p = atom_token(atom, "", a, sizeof(a));
	if (!p || *p || strncmp(a, ELIXIR, ELIXIR_LEN) != 0 || !a[ELIXIR_LEN])
		return atom;
	snprintf(buf, len, "%s", a + ELIXIR_LEN);
	return buf;
}

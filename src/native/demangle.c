/* demangle.c - C++ names through libstdc++'s __cxa_demangle.
 *
 * The JIT's assembler and loader are C++ (BeamModuleAssembler, asmjit),
 * and so are some drivers and NIFs.  libstdc++ is opened at run time
 * rather than linked: the tools stay plain C programs, and where it is
 * missing names are printed mangled rather than not at all. */
#define _GNU_SOURCE
#include "xb/demangle.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

static cxa_demangle_fn demangler(void)
{
	static bool tried;
	static cxa_demangle_fn fn;
	if (!tried) {
		tried = true;
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			fn = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
	}
	return fn;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

void xb_demangle_trim(char *s)
{
	size_t n = strlen(s);
	for (;;) {
		/* " [clone .isra.0]", " [clone .cold]" */
		if (n && s[n - 1] == ']') {
			char *b = NULL;
			for (size_t i = n; i-- > 0;)
				if (s[i] == '[') {
					b = s + i;
					break;
				}
			if (b && b > s && b[-1] == ' ' && strncmp(b, "[clone ", 7) == 0) {
				n = (size_t)(b - 1 - s);
				continue;
			}
		}
		static const char *const quals[] = { " const", " volatile", " &&", " &", " noexcept" };
		bool cut = false;
		for (size_t q = 0; q < sizeof(quals) / sizeof(*quals) && !cut; q++)
			if (ends_with(s, n, quals[q])) {
				n -= strlen(quals[q]);
				cut = true;
			}
		if (!cut)
			break;
	}
	/* The parameter list: the last balanced (...) group.  A name such as
	 * "Foo::operator()(int)" keeps its "operator()". */
	if (n && s[n - 1] == ')') {
		int depth = 0;
		for (size_t i = n; i-- > 0;) {
			if (s[i] == ')')
				depth++;
			else if (s[i] == '(' && --depth == 0) {
				if (i > 0)
					n = i;
				break;
			}
		}
	}
	s[n] = 0;
}

const char *xb_demangle(const char *name, char *buf, size_t len)
{
	if (strncmp(name, "_Z", 2) != 0 || len == 0)
		return name;
	cxa_demangle_fn fn = demangler();
	if (!fn)
		return name;
	int status = -1;
	char *d = fn(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
	xb_demangle_trim(d);
	snprintf(buf, len, "%s", d);
	free(d);
	return buf;
}

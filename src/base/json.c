/* json.c - streaming JSON writer; see include/xb/json.h. */
#include "xb/json.h"
#include "xb/common.h"

#include <math.h>
#include <string.h>

void xb_json_init(struct xb_json *j, FILE *f, int flags)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->flags = flags;
}

struct sink {
	char *out;
	size_t len, cap;
	FILE *f;
};

static void put(struct sink *s, const char *p, size_t n)
{
	if (s->f) {
		fwrite(p, 1, n, s->f);
	} else {
		for (size_t i = 0; i < n; i++, s->len++)
			if (s->len + 1 < s->cap)
				s->out[s->len] = p[i];
		return;
	}
	s->len += n;
}

static void put_esc(struct sink *s, unsigned cp)
{
	char b[8];
	static const char hex[] = "0123456789abcdef";
	b[0] = '\\';
	b[1] = 'u';
	b[2] = hex[(cp >> 12) & 15];
	b[3] = hex[(cp >> 8) & 15];
	b[4] = hex[(cp >> 4) & 15];
	b[5] = hex[cp & 15];
	put(s, b, 6);
}

/* Length of the valid UTF-8 sequence at S (of at most N bytes), with its
 * code point in *cp; or 0 with *bad set to the length of the maximal
 * invalid subpart to replace by one U+FFFD (Unicode 15, section 3.9,
 * table 3-7 well-formed byte sequences). */
static size_t utf8_next(const unsigned char *s, size_t n, unsigned *cp, size_t *bad)
{
	unsigned c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		*cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		*cp = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0; /* no overlongs */
		if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		*cp = c & 0x07;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f; /* <= U+10FFFF */
	} else {
		*bad = 1; /* continuation byte, C0/C1, F5..FF */
		return 0;
	}
	for (size_t i = 1; i < len; i++) {
		unsigned b = i < n ? s[i] : 0x100;
		unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
		if (b < l || b > h) {
			*bad = i;
			return 0;
		}
		*cp = (*cp << 6) | (b & 0x3f);
	}
	return len;
}

static void quote(struct sink *s, const char *str, size_t n)
{
	const unsigned char *p = (const unsigned char *)str;
	put(s, "\"", 1);
	size_t i = 0;
	while (i < n) {
		size_t run = i;
		/* plain ASCII runs in one go */
		while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\')
			run++;
		if (run > i) {
			put(s, str + i, run - i);
			i = run;
			continue;
		}
		unsigned cp = 0;
		size_t bad = 0, len = utf8_next(p + i, n - i, &cp, &bad);
		if (!len) {
			put(s, "\xef\xbf\xbd", 3);
			i += bad;
			continue;
		}
		switch (cp) {
		case '"': put(s, "\\\"", 2); break;
		case '\\': put(s, "\\\\", 2); break;
		case '\n': put(s, "\\n", 2); break;
		case '\r': put(s, "\\r", 2); break;
		case '\t': put(s, "\\t", 2); break;
		case '\b': put(s, "\\b", 2); break;
		case '\f': put(s, "\\f", 2); break;
		default:
			if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
				put_esc(s, cp);
			else
				put(s, str + i, len);
		}
		i += len;
	}
	put(s, "\"", 1);
}

size_t xb_json_quote(const char *str, size_t n, char *out, size_t outlen)
{
	struct sink s = { out, 0, outlen, NULL };
	quote(&s, str, n);
	if (outlen)
		out[s.len < outlen ? s.len : outlen - 1] = 0;
	return s.len;
}

static void indent(struct xb_json *j)
{
	if (!(j->flags & XB_JSON_PRETTY))
		return;
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* Before a value: a comma and indentation where needed. */
static bool value_ok(struct xb_json *j)
{
	if (j->error)
		return false;
	if (j->depth == 0) {
		if (j->count[0]++) { /* one top-level value */
			j->error = true;
			return false;
		}
		return true;
	}
	if (j->kind[j->depth - 1] == '{') {
		if (!j->after_key) {
			j->error = true;
			return false;
		}
		j->after_key = false;
		return true;
	}
	if (j->count[j->depth]++)
		fputc(',', j->f);
	indent(j);
	return true;
}

static void begin(struct xb_json *j, char k)
{
	if (!value_ok(j))
		return;
	if (j->depth + 1 >= XB_JSON_MAX_DEPTH) {
		j->error = true;
		return;
	}
	fputc(k, j->f);
	j->kind[j->depth++] = k;
	j->count[j->depth] = 0;
}

static void end(struct xb_json *j, char k)
{
	if (j->error)
		return;
	if (j->depth == 0 || j->kind[j->depth - 1] != k || j->after_key) {
		j->error = true;
		return;
	}
	bool any = j->count[j->depth] != 0;
	j->depth--;
	if (any)
		indent(j);
	fputc(k == '{' ? '}' : ']', j->f);
}

void xb_json_begin_object(struct xb_json *j) { begin(j, '{'); }
void xb_json_end_object(struct xb_json *j) { end(j, '{'); }
void xb_json_begin_array(struct xb_json *j) { begin(j, '['); }
void xb_json_end_array(struct xb_json *j) { end(j, '['); }

void xb_json_key(struct xb_json *j, const char *key)
{
	if (j->error)
		return;
	if (j->depth == 0 || j->kind[j->depth - 1] != '{' || j->after_key) {
		j->error = true;
		return;
	}
	if (j->count[j->depth]++)
		fputc(',', j->f);
	indent(j);
	struct sink s = { NULL, 0, 0, j->f };
	quote(&s, key, strlen(key));
	fputs((j->flags & XB_JSON_PRETTY) ? ": " : ":", j->f);
	j->after_key = true;
}

void xb_json_string_n(struct xb_json *j, const char *str, size_t n)
{
	if (!value_ok(j))
		return;
	struct sink s = { NULL, 0, 0, j->f };
	quote(&s, str ? str : "", str ? n : 0);
}

void xb_json_string(struct xb_json *j, const char *str)
{
	xb_json_string_n(j, str, str ? strlen(str) : 0);
}

void xb_json_uint(struct xb_json *j, uint64_t v)
{
	if (value_ok(j))
		fprintf(j->f, "%llu", (unsigned long long)v);
}

void xb_json_int(struct xb_json *j, int64_t v)
{
	if (value_ok(j))
		fprintf(j->f, "%lld", (long long)v);
}

void xb_json_double(struct xb_json *j, double v, int precision)
{
	if (!value_ok(j))
		return;
	if (!isfinite(v)) {
		fputs("null", j->f);
		return;
	}
	if (precision < 1 || precision > 17)
		precision = 17;
	char b[64];
	snprintf(b, sizeof(b), "%.*g", precision, v);
	fputs(b, j->f); /* %g never writes a form JSON forbids for finite values */
}

void xb_json_bool(struct xb_json *j, bool v)
{
	if (value_ok(j))
		fputs(v ? "true" : "false", j->f);
}

void xb_json_null(struct xb_json *j)
{
	if (value_ok(j))
		fputs("null", j->f);
}

void xb_json_kv_string(struct xb_json *j, const char *key, const char *s)
{
	xb_json_key(j, key);
	xb_json_string(j, s);
}

void xb_json_kv_uint(struct xb_json *j, const char *key, uint64_t v)
{
	xb_json_key(j, key);
	xb_json_uint(j, v);
}

void xb_json_kv_int(struct xb_json *j, const char *key, int64_t v)
{
	xb_json_key(j, key);
	xb_json_int(j, v);
}

void xb_json_kv_double(struct xb_json *j, const char *key, double v, int precision)
{
	xb_json_key(j, key);
	xb_json_double(j, v, precision);
}

void xb_json_kv_bool(struct xb_json *j, const char *key, bool v)
{
	xb_json_key(j, key);
	xb_json_bool(j, v);
}

int xb_json_finish(struct xb_json *j)
{
	if (!j->error && (j->depth != 0 || j->count[0] != 1))
		j->error = true;
	if (j->error)
		return xb_fail("internal error: malformed JSON document (unbalanced or misplaced member)");
	fputc('\n', j->f);
	if (ferror(j->f))
		return xb_fail("writing JSON: write error");
	return 0;
}

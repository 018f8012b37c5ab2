/* json.h - a small streaming JSON writer.
 *
 *   struct xb_json j;
 *   xb_json_init(&j, stdout, XB_JSON_PRETTY);
 *   xb_json_begin_array(&j);
 *     xb_json_begin_object(&j);
 *       xb_json_key(&j, "pid");  xb_json_string(&j, "<0.80.0>");
 *       xb_json_kv_uint(&j, "memory_bytes", 12345);
 *     xb_json_end_object(&j);
 *   xb_json_end_array(&j);
 *   xb_json_finish(&j);        newline; 0, or -1 if misused or a write failed
 *
 * Strings are written as valid UTF-8 whatever they hold: every invalid
 * sequence (stray continuation byte, overlong form, surrogate, code point
 * above U+10FFFF, truncated sequence) becomes U+FFFD, one per maximal
 * invalid subpart (the Unicode "substitution of maximal subparts"
 * practice); control characters (U+0000-U+001F, U+007F-U+009F) and
 * U+2028/U+2029 are escaped, never written raw.  Numbers: integers as
 * they are; a double that is NaN or infinite is written as null.
 * Commas and nesting are tracked by the writer (at most XB_JSON_MAX_DEPTH
 * levels); a key outside an object, a value where a key is due, or an
 * unbalanced end makes xb_json_finish fail. */
#ifndef XB_JSON_H
#define XB_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define XB_JSON_MAX_DEPTH 64

enum { XB_JSON_COMPACT = 0, XB_JSON_PRETTY = 1 };

struct xb_json {
	FILE *f;
	int flags;
	int depth;
	bool error;
	bool after_key;
	char kind[XB_JSON_MAX_DEPTH];  /* '{' or '[' */
	uint64_t count[XB_JSON_MAX_DEPTH]; /* members written at each level */
};

void xb_json_init(struct xb_json *j, FILE *f, int flags);
void xb_json_begin_object(struct xb_json *j);
void xb_json_end_object(struct xb_json *j);
void xb_json_begin_array(struct xb_json *j);
void xb_json_end_array(struct xb_json *j);
void xb_json_key(struct xb_json *j, const char *key);
void xb_json_string(struct xb_json *j, const char *s);
void xb_json_string_n(struct xb_json *j, const char *s, size_t n);
void xb_json_uint(struct xb_json *j, uint64_t v);
void xb_json_int(struct xb_json *j, int64_t v);
/* PRECISION significant digits (%.*g); NaN and infinities as null. */
void xb_json_double(struct xb_json *j, double v, int precision);
void xb_json_bool(struct xb_json *j, bool v);
void xb_json_null(struct xb_json *j);

void xb_json_kv_string(struct xb_json *j, const char *key, const char *s);
void xb_json_kv_uint(struct xb_json *j, const char *key, uint64_t v);
void xb_json_kv_int(struct xb_json *j, const char *key, int64_t v);
void xb_json_kv_double(struct xb_json *j, const char *key, double v, int precision);
void xb_json_kv_bool(struct xb_json *j, const char *key, bool v);

/* Ends the document (a newline).  0, or -1 (xb_err) when the writer was
 * misused, nesting is unbalanced, or the stream had a write error. */
int xb_json_finish(struct xb_json *j);

/* The JSON string literal (with quotes) for S[0..N) into OUT, NUL
 * terminated if OUTLEN > 0; returns the length it needs (without NUL).
 * Pure: for tests and for callers that build text themselves. */
size_t xb_json_quote(const char *s, size_t n, char *out, size_t outlen);

#endif

/* test_heapsample.c - unit tests of erlang-heapsample's pure parts: the
 * JSON writer (src/base/json.c) and the human sizes of its tables. */
#define _GNU_SOURCE
#include "unit.h"
#include "xb/hsout.h"
#include "xb/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void quote_is(const char *in, size_t n, const char *want)
{
	char buf[512];
	size_t need = xb_json_quote(in, n, buf, sizeof(buf));
	CHECK(strcmp(buf, want) == 0 && need == strlen(want), "quote of %zu bytes: got %s, want %s", n, buf,
	      want);
}

static void t_json_quote_plain_and_escapes(void)
{
	quote_is("abc", 3, "\"abc\"");
	quote_is("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
	quote_is("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
	quote_is("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"");
	quote_is("nul\0x", 5, "\"nul\\u0000x\"");
	quote_is("", 0, "\"\"");
}

static void t_json_quote_valid_utf8_kept(void)
{
	quote_is("caf\xc3\xa9", 5, "\"caf\xc3\xa9\"");                 /* é */
	quote_is("\xe2\x82\xac", 3, "\"\xe2\x82\xac\"");               /* € */
	quote_is("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");       /* U+1F600 */
	quote_is("\xc2\x85", 2, "\"\\u0085\"");                        /* C1 control */
	quote_is("\xe2\x80\xa8", 3, "\"\\u2028\"");                    /* line separator */
}

#define FFFD "\xef\xbf\xbd"

static void t_json_quote_invalid_utf8_replaced(void)
{
	quote_is("\xff", 1, "\"" FFFD "\"");
	quote_is("a\x80z", 3, "\"a" FFFD "z\"");                      /* stray continuation */
	quote_is("\xc0\xaf", 2, "\"" FFFD FFFD "\"");                 /* overlong '/' */
	quote_is("\xe0\x80\xaf", 3, "\"" FFFD FFFD FFFD "\"");        /* overlong, 3 bytes */
	quote_is("\xed\xa0\x80", 3, "\"" FFFD FFFD FFFD "\"");        /* surrogate U+D800 */
	quote_is("\xf4\x90\x80\x80", 4, "\"" FFFD FFFD FFFD FFFD "\""); /* > U+10FFFF */
	quote_is("\xe2\x82" "A", 3, "\"" FFFD "A\"");                 /* truncated, then ASCII */
	quote_is("x\xe2\x82", 3, "\"x" FFFD "\"");                    /* truncated at the end */
	quote_is("\xf0\x9f\x98", 3, "\"" FFFD "\"");
	/* output never holds a raw control character or invalid UTF-8 */
	char in[256], out[2048];
	for (int i = 0; i < 256; i++)
		in[i] = (char)i;
	xb_json_quote(in, sizeof(in), out, sizeof(out));
	for (const unsigned char *p = (const unsigned char *)out; *p; p++)
		CHECK(*p >= 0x20 && *p != 0x7f, "raw control byte 0x%02x in output", *p);
}

static char *written(void (*fn)(struct xb_json *), int flags, int *rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct xb_json j;
	xb_json_init(&j, f, flags);
	fn(&j);
	*rc = xb_json_finish(&j);
	fclose(f);
	return text;
}

static void doc_ok(struct xb_json *j)
{
	xb_json_begin_array(j);
	xb_json_begin_object(j);
	xb_json_kv_string(j, "pid", "<0.80.0>");
	xb_json_kv_uint(j, "memory_bytes", 18446744073709551615ull);
	xb_json_kv_int(j, "delta", -5);
	xb_json_kv_double(j, "usage", 0.5, 6);
	xb_json_kv_double(j, "nan", NAN, 6);
	xb_json_kv_bool(j, "partial", false);
	xb_json_key(j, "registered_name");
	xb_json_null(j);
	xb_json_end_object(j);
	xb_json_begin_object(j);
	xb_json_end_object(j);
	xb_json_begin_array(j);
	xb_json_end_array(j);
	xb_json_end_array(j);
}

static void doc_key_in_array(struct xb_json *j)
{
	xb_json_begin_array(j);
	xb_json_key(j, "x");
	xb_json_end_array(j);
}

static void doc_unbalanced(struct xb_json *j)
{
	xb_json_begin_array(j);
	xb_json_begin_object(j);
	xb_json_end_object(j);
}

static void doc_value_without_key(struct xb_json *j)
{
	xb_json_begin_object(j);
	xb_json_uint(j, 1);
	xb_json_end_object(j);
}

static void doc_two_values(struct xb_json *j)
{
	xb_json_uint(j, 1);
	xb_json_uint(j, 2);
}

static void t_json_writer(void)
{
	int rc;
	char *t = written(doc_ok, XB_JSON_COMPACT, &rc);
	CHECK(rc == 0, "a well-formed document failed");
	CHECK(t && strcmp(t, "[{\"pid\":\"<0.80.0>\",\"memory_bytes\":18446744073709551615,\"delta\":-5,"
			     "\"usage\":0.5,\"nan\":null,\"partial\":false,\"registered_name\":null},{},[]]\n") == 0,
	      "compact: %s", t ? t : "(null)");
	free(t);
	t = written(doc_ok, XB_JSON_PRETTY, &rc);
	CHECK(rc == 0 && t && strstr(t, "[\n  {\n    \"pid\": \"<0.80.0>\",\n") && strstr(t, "  {},\n  []\n]\n"),
	      "pretty: %s", t ? t : "(null)");
	free(t);
	void (*bad[])(struct xb_json *) = { doc_key_in_array, doc_unbalanced, doc_value_without_key,
					    doc_two_values };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = written(bad[i], XB_JSON_COMPACT, &rc);
		CHECK(rc < 0, "misuse %zu accepted: %s", i, t ? t : "(null)");
		free(t);
	}
}

static void t_human_sizes(void)
{
	char b[24];
	CHECK(!strcmp(xb_hs_human(0, b, sizeof(b)), "0"), "%s", b);
	CHECK(!strcmp(xb_hs_human(1023, b, sizeof(b)), "1023"), "%s", b);
	CHECK(!strcmp(xb_hs_human(1024, b, sizeof(b)), "1.00K"), "%s", b);
	CHECK(!strcmp(xb_hs_human(23879800, b, sizeof(b)), "22.8M"), "%s", b);
	CHECK(!strcmp(xb_hs_human(209715200, b, sizeof(b)), "200M"), "%s", b);
	CHECK(strlen(xb_hs_human(18446744073709551615ull, b, sizeof(b))) <= 6, "%s", b);
}

void heapsample_cases(void)
{
	run_case("json_quote_plain_and_escapes", t_json_quote_plain_and_escapes);
	run_case("json_quote_valid_utf8_kept", t_json_quote_valid_utf8_kept);
	run_case("json_quote_invalid_utf8_replaced", t_json_quote_invalid_utf8_replaced);
	run_case("json_writer", t_json_writer);
	run_case("heapsample_human_sizes", t_human_sizes);
}

/* output_util.c - text and order shared by the picture writers. */
#define _GNU_SOURCE
#include "xb/output_util.h"
#include "xb/outfile.h"
#include "xb/common.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

size_t xb_utf8_next(const char *str, size_t len, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	/* Lead byte: the sequence's length and the range of its second
	 * byte (excluding overlong forms, surrogates, > U+10FFFF). */
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf;
	uint32_t v;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		v = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		v = c & 0x07;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		*cp = 0xfffd;
		return 1;
	}
	for (size_t i = 1; i < need; i++) {
		unsigned char b = i < len ? s[i] : 0;
		if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) {
			*cp = 0xfffd;
			return i;
		}
		v = (v << 6) | (b & 0x3f);
	}
	*cp = v;
	return need;
}

int xb_cp_width(uint32_t cp)
{
	static locale_t utf8;
	static bool tried;
	if (cp >= 0x20 && cp < 0x7f)
		return 1;
	if (!tried) {
		tried = true;
		utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	}
	if (!utf8)
		return 1;
	locale_t old = uselocale(utf8);
	int w = wcwidth((wchar_t)cp);
	uselocale(old);
	return w < 0 ? 1 : w;
}

size_t xb_display_fit(const char *s, size_t len, int cols, int *used)
{
	size_t n = 0;
	int col = 0;
	while (n < len) {
		uint32_t cp;
		size_t k = xb_utf8_next(s + n, len - n, &cp);
		int w = xb_cp_width(cp);
		if (col + w > cols)
			break;
		col += w;
		n += k;
	}
	if (used)
		*used = col;
	return n;
}

/* One character of display text for code point CP (K bytes at RAW) into O
 * (room for 10 bytes); returns the bytes written (at most 3 per byte of
 * RAW). */
static size_t display_char(uint32_t cp, const char *raw, size_t k, char *o)
{
	if (cp == '\t' || cp == '\n' || cp == '\r') {
		o[0] = '\\';
		o[1] = cp == '\t' ? 't' : cp == '\n' ? 'n' : 'r';
		return 2;
	}
	if (cp < 0x20 || cp == 0x7f)
		return (size_t)sprintf(o, "\\x%02x", (unsigned)cp);
	if (cp >= 0x80 && cp <= 0x9f)
		return (size_t)sprintf(o, "\\u%04x", (unsigned)cp); /* 6 bytes for 2 */
	/* Characters that change how the text around them is shown without
	 * showing themselves: bidirectional controls (a name that reorders
	 * the line it is printed in), zero-width ones (two names that look
	 * alike), line and paragraph separators.  Escaped: "\\u202e". */
	if (cp == 0xad || cp == 0x34f || cp == 0x61c || cp == 0x115f || cp == 0x1160 || cp == 0x17b4 ||
	    cp == 0x17b5 || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
	    (cp >= 0x2060 && cp <= 0x206f) || cp == 0x3164 || (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff ||
	    cp == 0xffa0 || (cp >= 0xfff0 && cp <= 0xfff8) || (cp >= 0xe0000 && cp <= 0xe0fff))
		return (size_t)sprintf(o, cp > 0xffff ? "\\U%08x" : "\\u%04x", (unsigned)cp);
	if (cp == 0xfffd) {
		memcpy(o, "\xef\xbf\xbd", 3); /* the replacement, or U+FFFD itself */
		return 3;
	}
	memcpy(o, raw, k);
	return k;
}

size_t xb_display_name_buf(const char *raw, char *buf, size_t len)
{
	size_t rl = strlen(raw), used = 0;
	char one[16];
	if (!len)
		return 0;
	for (size_t i = 0; i < rl;) {
		uint32_t cp;
		size_t k = xb_utf8_next(raw + i, rl - i, &cp);
		size_t n = display_char(cp, raw + i, k, one);
		if (used + n + 1 > len)
			break; /* whole characters only */
		memcpy(buf + used, one, n);
		used += n;
		i += k;
	}
	buf[used] = 0;
	return used;
}

char *xb_display_name(const char *raw)
{
	/* Worst case: every byte becomes "\xHH" or U+FFFD (3 bytes). */
	size_t len = strlen(raw) * 4 + 1;
	char *out = malloc(len);
	if (out)
		xb_display_name_buf(raw, out, len);
	return out;
}

void xb_put_xml(FILE *f, const char *s, size_t n)
{
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		const char *ent;
		switch (s[i]) {
		case '&': ent = "&amp;"; break;
		case '<': ent = "&lt;"; break;
		case '>': ent = "&gt;"; break;
		case '"': ent = "&quot;"; break;
		case '\'': ent = "&apos;"; break;
		default: continue;
		}
		fwrite(s + run, 1, i - run, f);
		fputs(ent, f);
		run = i + 1;
	}
	fwrite(s + run, 1, n - run, f);
}

void xb_put_json_string(FILE *f, const char *s)
{
	size_t len = strlen(s), run = 0;
	fputc('"', f);
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			i++; /* plain ASCII: copied in runs */
			continue;
		}
		uint32_t cp;
		size_t k = xb_utf8_next(s + i, len - i, &cp);
		if (cp >= 0x80 && cp != 0xfffd) {
			i += k; /* valid multi-byte character */
			continue;
		}
		fwrite(s + run, 1, i - run, f);
		if (cp == '"' || cp == '\\')
			fprintf(f, "\\%c", (char)cp);
		else if (cp < 0x80)
			fprintf(f, "\\u%04x", (unsigned)cp);
		else
			fputs("\xef\xbf\xbd", f); /* invalid: U+FFFD (or U+FFFD itself) */
		i += k;
		run = i;
	}
	fwrite(s + run, 1, len - run, f);
	fputc('"', f);
}

size_t xb_fit_text(const char *s, size_t maxchars, bool *cut)
{
	size_t len = strlen(s), chars = 0, keep = 0;
	*cut = false;
	/* keep: the bytes of the first maxchars - 2 characters. */
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		i += xb_utf8_next(s + i, len - i, &cp);
		chars++;
		if (chars > maxchars)
			break;
		if (chars + 2 <= maxchars)
			keep = i;
	}
	if (chars <= maxchars)
		return len;
	if (maxchars < 3)
		return 0;
	*cut = true;
	return keep;
}

void xb_put_u64(FILE *f, uint64_t v)
{
	char buf[24], *p = buf + sizeof(buf);
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite(p, 1, (size_t)(buf + sizeof(buf) - p), f);
}

int xb_out_finish(FILE *f, const char *what)
{
	char w[128];
	snprintf(w, sizeof(w), "the %s", what);
	return xb_flush_check(f, w);
}

/* ---- order ------------------------------------------------------------- */

static int cmp_frames(const void *a, const void *b, void *arg)
{
	const struct xb_profile *p = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(p->names[x].name, p->names[y].name);
	if (!c)
		c = strcmp(p->names[x].tag, p->names[y].tag);
	if (!c)
		c = (x > y) - (x < y);
	return c;
}

struct order_ctx {
	const struct xb_profile *p;
	const uint32_t *rank;
};

static int cmp_stacks(const void *a, const void *b, void *arg)
{
	const struct order_ctx *c = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	const struct xb_stack *x = &c->p->stacks[i], *y = &c->p->stacks[j];
	/* Root to leaf: from the end of the ids. */
	for (uint32_t k = 0; k < x->n && k < y->n; k++) {
		uint32_t rx = c->rank[x->ids[x->n - 1 - k]], ry = c->rank[y->ids[y->n - 1 - k]];
		if (rx != ry)
			return rx < ry ? -1 : 1;
	}
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return (i > j) - (i < j); /* same frames (nnative differs): stable */
}

int xb_out_order(const struct xb_profile *p, uint32_t **rankp, uint32_t **orderp)
{
	uint32_t *byname = malloc((p->nnames ? p->nnames : 1) * sizeof(*byname));
	uint32_t *rank = malloc((p->nnames ? p->nnames : 1) * sizeof(*rank));
	uint32_t *order = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*order));
	*rankp = *orderp = NULL;
	if (!byname || !rank || !order) {
		free(byname);
		free(rank);
		free(order);
		return xb_fail("out of memory ordering %zu stacks", p->nstacks);
	}
	for (size_t i = 0; i < p->nnames; i++)
		byname[i] = (uint32_t)i;
	qsort_r(byname, p->nnames, sizeof(*byname), cmp_frames, (void *)p);
	for (size_t i = 0; i < p->nnames; i++)
		rank[byname[i]] = (uint32_t)i;
	free(byname);
	for (size_t i = 0; i < p->nstacks; i++)
		order[i] = (uint32_t)i;
	struct order_ctx c = { p, rank };
	qsort_r(order, p->nstacks, sizeof(*order), cmp_stacks, &c);
	*rankp = rank;
	*orderp = order;
	return 0;
}

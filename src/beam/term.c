/* term.c - pure term formatting, following erts/emulator/beam/erl_printf_term.c. */
#include "xb/term.h"

#include <stdio.h>
#include <string.h>

int xb_format_pid(uint64_t t, int num_bits, int ser_bits, const struct xb_pix *pix, char *buf,
		  size_t len)
{
	if (!xb_is_pid(t) || num_bits <= 0 || ser_bits <= 0)
		return -1;
	uint64_t data = t >> 4; /* _PID_DATA_SHIFT = _TAG_IMMED1_SIZE */
	if (pix && pix->valid && pix->cl_shift < 64 && pix->cli_shift < 64) {
		uint64_t pd = data;
		data = pd & ~pix->mask;
		data |= (pd >> pix->cl_shift) & pix->cl_mask;
		data |= (pd & pix->cli_mask) << pix->cli_shift;
	}
	unsigned num = (unsigned)(data & ((1ull << num_bits) - 1));
	unsigned ser = (unsigned)((data >> num_bits) & ((1ull << ser_bits) - 1));
	snprintf(buf, len, "<0.%u.%u>", num, ser);
	return 0;
}

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_LOWER(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 128 + 95 && (c) <= 255 && (c) != 247))
#define IS_UPPER(c) (((c) >= 'A' && (c) <= 'Z') || ((c) >= 128 + 64 && (c) <= 128 + 94 && (c) != 247 - 32))
#define IS_ALNUM(c) (IS_DIGIT(c) || IS_LOWER(c) || IS_UPPER(c))

/* erl_printf_term.c latin1_char(): the Latin-1 value of a UTF-8 sequence
 * start, 'a' for a continuation byte, 0 for 3- and 4-byte sequences. */
static int latin1_char(int c1, int c2)
{
	if ((c1 & 0x80) == 0)
		return c1;
	if ((c1 & 0xE0) == 0xC0)
		return (c1 & 0x1F) << 6 | (c2 & 0x3F);
	if ((c1 & 0xC0) == 0x80)
		return 'a';
	return 0;
}

struct out {
	char *p;
	size_t len, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (o->len + 1 < o->cap)
			o->p[o->len] = s[i];
		o->len++;
	}
}

size_t xb_atom_quote(const char *name, size_t n, char *outbuf, size_t outlen)
{
	struct out o = { outbuf, 0, outlen };
	const unsigned char *s = (const unsigned char *)name;
	if (n == 0) {
		put(&o, "''", 2);
		goto done;
	}
	int need_quote = 0;
	{
		size_t i = 0;
		int lc = latin1_char(s[0], n > 1 ? s[1] : 0);
		if (!IS_LOWER(lc))
			need_quote = 1;
		else {
			for (i = 1; i < n; i++) {
				lc = latin1_char(s[i], i + 1 < n ? s[i + 1] : 0);
				if (!IS_ALNUM(lc) && lc != '_') {
					need_quote = 1;
					break;
				}
			}
		}
	}
	if (need_quote)
		put(&o, "'", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned c = s[i];
		char esc[8];
		switch (c) {
		case '\'': put(&o, "\\'", 2); break;
		case '\\': put(&o, "\\\\", 2); break;
		case '\n': put(&o, "\\n", 2); break;
		case '\f': put(&o, "\\f", 2); break;
		case '\t': put(&o, "\\t", 2); break;
		case '\r': put(&o, "\\r", 2); break;
		case '\b': put(&o, "\\b", 2); break;
		case '\v': put(&o, "\\v", 2); break;
		default:
			if (c < ' ') {
				snprintf(esc, sizeof(esc), "\\%o", c);
				put(&o, esc, strlen(esc));
			} else if (c >= 0x80) {
				size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
				/* erts keeps atoms valid UTF-8; memory read from a VM
				 * need not be: a sequence is copied only as far as its
				 * continuation bytes go (cut by the atom's end: what
				 * is there), and a lead byte followed by anything else
				 * (NUL, a control, ASCII) is escaped, never copied with
				 * what follows it */
				for (size_t k = 1; k < len && len; k++)
					if (i + k >= n)
						len = k;
					else if ((s[i + k] & 0xC0) != 0x80)
						len = 0;
				if (len == 2 && c == 0xC2 && s[i + 1] < 0xA0) {
					/* C1 control (U+0080..U+009F) */
					snprintf(esc, sizeof(esc), "\\%o", s[i + 1]);
					put(&o, esc, strlen(esc));
					i++;
				} else if (len == 0) {
					snprintf(esc, sizeof(esc), "\\%o", c);
					put(&o, esc, strlen(esc));
				} else {
					put(&o, (const char *)s + i, len);
					i += len - 1;
				}
			} else {
				char ch = (char)c;
				put(&o, &ch, 1);
			}
		}
	}
	if (need_quote)
		put(&o, "'", 1);
done:
	if (outlen)
		outbuf[o.len < outlen ? o.len : outlen - 1] = 0;
	return o.len < outlen ? o.len : (outlen ? outlen - 1 : 0);
}

/* flamegraph.c - a profile as one self-contained, interactive SVG.
 *
 * Layout as flamegraph.pl draws it: the root ("all") at the bottom, a
 * frame's width proportional to its samples, children left to right in
 * name order, a frame's own samples on its right.  Frames holding less
 * than XB_FLAME_MIN_FRACTION of all samples are not drawn: their samples
 * stay in their parent's width (flamegraph.pl's --minwidth), and the
 * legend says how many were merged.  A profile whose frames would still
 * take more than XB_FLAME_MAX_FRAME_BYTES (thousands of wide, deep
 * stacks) gets a larger minimum, doubled until they fit; the legend says
 * which.
 *
 * Each frame is
 *   <g class="KINDSHADE" data-x="X" data-w="W"><title>NAME (N samples, P%)</title>
 *     <rect .../><text ...>NAME, cut with ".."</text></g>
 * X and W in samples (exact, for zoom and search); the rect in pixels (for
 * viewers without script).  The class gives the colour: the kind of code
 * (see kind_of() and the legend) and one of SHADES shades picked by the
 * name's hash, so neighbours differ.  The script at the end (no external
 * resources) zooms on click, resets, and searches (a regular expression,
 * or a substring when the expression is invalid): window.fg.search(TERM),
 * the "Search" control, Ctrl-F or "/". */
#define _GNU_SOURCE
#include "xb/output.h"
#include "xb/output_util.h"
#include "xb/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the frame tree ---------------------------------------------------- */

struct path_entry {
	size_t node;
	uint64_t next_x;  /* where the next child starts */
	uint64_t dropped; /* samples of children left out (counted already) */
};

static int push_node(struct xb_flame *fl, size_t *cap, uint32_t frame, uint32_t depth, uint64_t x)
{
	if (xb_grow((void **)&fl->nodes, cap, fl->n + 1, sizeof(*fl->nodes)) < 0)
		return -1;
	fl->nodes[fl->n++] = (struct xb_flame_node){ frame, depth, x, 0 };
	return 0;
}

/* The innermost node of the path is complete: account for it in its
 * parent, and drop it (and what is left of its subtree) if narrow. */
static void pop_node(struct xb_flame *fl, struct path_entry *path, size_t *plen, double min)
{
	struct path_entry *e = &path[*plen - 1], *parent = &path[*plen - 2];
	const struct xb_flame_node *nd = &fl->nodes[e->node];
	parent->next_x += nd->total;
	if ((double)nd->total < min) {
		fl->merged_frames++;
		fl->merged_samples += nd->total - e->dropped;
		parent->dropped += nd->total;
		fl->n = e->node; /* its subtree follows it */
	}
	(*plen)--;
}

int xb_flame_build(const struct xb_profile *p, double min_fraction, struct xb_flame *fl)
{
	memset(fl, 0, sizeof(*fl));
	uint32_t *rank, *order;
	if (xb_out_order(p, &rank, &order) < 0)
		return -1;
	size_t cap = 0, pcap = 0, plen = 0;
	struct path_entry *path = NULL;
	uint64_t total = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		total += p->stacks[i].count;
	double min = min_fraction * (double)total;
	fl->min_fraction = min_fraction;
	if (push_node(fl, &cap, XB_FLAME_ROOT, 0, 0) < 0 ||
	    xb_grow((void **)&path, &pcap, 1, sizeof(*path)) < 0)
		goto fail;
	fl->nodes[0].total = fl->total = total;
	path[plen++] = (struct path_entry){ 0, 0, 0 };
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[order[i]];
		/* path[d] is the node of s->ids[s->n - d] for d <= common. */
		size_t common = 1;
		while (common < plen && common <= s->n &&
		       fl->nodes[path[common].node].frame == s->ids[s->n - common])
			common++;
		while (plen > common)
			pop_node(fl, path, &plen, min);
		if (xb_grow((void **)&path, &pcap, (size_t)s->n + 1, sizeof(*path)) < 0)
			goto fail;
		for (size_t d = common; d <= s->n; d++) {
			uint64_t x = path[d - 1].next_x;
			if (push_node(fl, &cap, s->ids[s->n - d], (uint32_t)d, x) < 0)
				goto fail;
			path[plen++] = (struct path_entry){ fl->n - 1, x, 0 };
		}
		for (size_t d = 1; d <= s->n; d++)
			fl->nodes[path[d].node].total += s->count;
	}
	while (plen > 1)
		pop_node(fl, path, &plen, min);
	for (size_t i = 0; i < fl->n; i++)
		if (fl->nodes[i].depth > fl->maxdepth)
			fl->maxdepth = fl->nodes[i].depth;
	free(path);
	free(rank);
	free(order);
	return 0;
fail:
	free(path);
	free(rank);
	free(order);
	xb_flame_free(fl);
	return xb_fail("out of memory building the flame graph");
}

void xb_flame_free(struct xb_flame *fl)
{
	free(fl->nodes);
	memset(fl, 0, sizeof(*fl));
}

/* ---- colours ------------------------------------------------------------ */

enum kind { K_ERLANG, K_JIT, K_VM, K_LIB, K_KERNEL, K_MARK, K_GROUP, K_ROOT, K_COUNT };

static const struct {
	char cls;
	const char *label;
	unsigned char from[3], to[3]; /* the shades run from one to the other */
} kinds[K_COUNT] = {
	[K_ERLANG] = { 'e', "Erlang", { 74, 174, 74 }, { 150, 215, 105 } },
	[K_JIT] = { 'j', "JIT glue", { 60, 178, 190 }, { 125, 215, 222 } },
	[K_VM] = { 'v', "VM (beam.smp)", { 214, 62, 50 }, { 242, 125, 92 } },
	[K_LIB] = { 'l', "NIF / shared library", { 204, 178, 38 }, { 236, 216, 104 } },
	[K_KERNEL] = { 'k', "kernel", { 226, 122, 30 }, { 250, 172, 82 } },
	[K_MARK] = { 'm', "synthetic", { 158, 158, 158 }, { 192, 192, 192 } },
	[K_GROUP] = { 'g', "group (--by)", { 122, 140, 222 }, { 165, 178, 242 } },
	[K_ROOT] = { 'r', NULL, { 205, 205, 205 }, { 205, 205, 205 } },
};
#define SHADES 6

static enum kind kind_of(const struct xb_fname *f)
{
	switch (f->kind) {
	case XB_FK_ERLANG: return K_ERLANG;
	case XB_FK_JIT: return K_JIT;
	case XB_FK_KERNEL: return K_KERNEL;
	case XB_FK_MARK: return K_MARK;
	case XB_FK_GROUP: return K_GROUP;
	case XB_FK_NATIVE: break;
	}
	/* The VM binary: beam.smp, beam.debug.smp, beam.emu.smp, ... */
	return strncmp(f->tag, "[beam.", 6) == 0 ? K_VM : K_LIB;
}

static unsigned shade_of(const char *name)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = (h ^ *c) * 16777619u;
	return (h >> 7) % SHADES;
}

/* ---- the SVG ------------------------------------------------------------ */

#define WIDTH 1200
#define PAD 10
#define FRAME_H 16
#define FONT 12
#define CHAR_W 7.25 /* glyph width at FONT px: 0.6 em in the monospace fonts of the style */
#define SEARCH_FILL "rgb(230,0,230)"

/* 1234567 -> "1,234,567" */
static const char *thousands(uint64_t v, char *buf, size_t size)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
	size_t o = 0;
	for (int i = 0; i < n && o + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

/* A line of text (any bytes: shown as xb_display_name shows names). */
static void put_text(FILE *f, double x, double y, const char *attrs, const char *text)
{
	char *d = xb_display_name(text);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\"%s>", x, y, attrs);
	if (d)
		xb_put_xml(f, d, strlen(d));
	fputs("</text>\n", f);
	free(d);
}

static const char style[] =
	"<style type=\"text/css\"><![CDATA[\n"
	"text{font-family:\"DejaVu Sans Mono\",Menlo,Consolas,\"Liberation Mono\",monospace;"
	"font-size:12px;fill:#000}\n"
	"#title{font-size:16px}\n"
	".btn{cursor:pointer;fill:#224;text-decoration:underline}\n"
	".off{opacity:.35}\n"
	"#frames>g{cursor:pointer}\n"
	"#frames rect{stroke:#fff;stroke-width:.5}\n"
	"#frames>g:hover>rect{stroke:#000;stroke-width:1}\n"
	"#frames text{pointer-events:none}\n"
	"#frames>g.anc>rect{opacity:.55}\n";

static void put_style(FILE *f)
{
	fputs(style, f);
	for (int k = 0; k < K_COUNT; k++)
		for (int s = 0; s < (k == K_ROOT ? 1 : SHADES); s++) {
			int rgb[3];
			for (int c = 0; c < 3; c++)
				rgb[c] = kinds[k].from[c] +
					 (kinds[k].to[c] - kinds[k].from[c]) * s / (SHADES - 1);
			fprintf(f, ".%c%d>rect,rect.%c%d{fill:rgb(%d,%d,%d)}\n", kinds[k].cls, s,
				kinds[k].cls, s, rgb[0], rgb[1], rgb[2]);
		}
	fputs("#frames>g.hit>rect{fill:" SEARCH_FILL "}\n]]></style>\n", f);
}

/* The script: zoom, reset, search.  Kept free of "]]>" and of anything
 * that loads a resource. */
static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"\"use strict\";\n"
	"var fg = (function () {\n"
	"  var NS = \"http://www.w3.org/2000/svg\", X0 = 10, W = 1180, CW = 7.25;\n"
	"  var svg = document.documentElement, frames = document.getElementById(\"frames\");\n"
	"  var root = document.getElementById(\"root\"), details = document.getElementById(\"details\");\n"
	"  var matched = document.getElementById(\"matched\"), unzoomBtn = document.getElementById(\"unzoom\");\n"
	"  var unsearchBtn = document.getElementById(\"unsearch\");\n"
	"  var total = +svg.getAttribute(\"data-total\"), zoomed = null, term = null;\n"
	"  function num(e, a) { return +e.getAttribute(a); }\n"
	"  function label(g) { var t = g.firstElementChild.textContent; return t.substring(0, t.lastIndexOf(\" (\")); }\n"
	"  function frameOf(e) { while (e && e.parentNode !== frames) e = e.parentNode; return e; }\n"
	"  function place(g, px, pw) {\n"
	"    var r = g.querySelector(\"rect\"), t = g.querySelector(\"text\");\n"
	"    r.setAttribute(\"x\", px.toFixed(1)); r.setAttribute(\"width\", pw.toFixed(1));\n"
	"    var n = Math.max(0, Math.floor((pw - 6) / CW)), s = Array.from(label(g)), txt = \"\";\n"
	"    if (s.length <= n) txt = s.join(\"\"); else if (n >= 3) txt = s.slice(0, n - 2).join(\"\") + \"..\";\n"
	"    if (!t) {\n"
	"      if (!txt) return;\n"
	"      t = document.createElementNS(NS, \"text\"); t.setAttribute(\"y\", num(r, \"y\") + 11); g.appendChild(t);\n"
	"    }\n"
	"    t.setAttribute(\"x\", (px + 3).toFixed(1)); t.textContent = txt;\n"
	"  }\n"
	"  function each(fn) { for (var g = frames.firstElementChild; g; g = g.nextElementSibling) fn(g); }\n"
	"  function unzoom() {\n"
	"    var k = total ? W / total : 0;\n"
	"    each(function (g) { g.style.display = \"\"; g.classList.remove(\"anc\"); place(g, X0 + num(g, \"data-x\") * k, num(g, \"data-w\") * k); });\n"
	"    zoomed = null; unzoomBtn.classList.add(\"off\");\n"
	"  }\n"
	"  function zoom(z) {\n"
	"    if (z === root) { unzoom(); return; }\n"
	"    var zx = num(z, \"data-x\"), zw = num(z, \"data-w\"), zy = num(z.querySelector(\"rect\"), \"y\"), k = W / zw;\n"
	"    each(function (g) {\n"
	"      var x = num(g, \"data-x\"), w = num(g, \"data-w\"), y = num(g.querySelector(\"rect\"), \"y\");\n"
	"      if (y > zy && x <= zx && x + w >= zx + zw) { g.style.display = \"\"; g.classList.add(\"anc\"); place(g, X0, W); }\n"
	"      else if (y <= zy && x >= zx && x + w <= zx + zw) { g.style.display = \"\"; g.classList.remove(\"anc\"); place(g, X0 + (x - zx) * k, w * k); }\n"
	"      else { g.style.display = \"none\"; g.classList.remove(\"anc\"); }\n"
	"    });\n"
	"    zoomed = z; unzoomBtn.classList.remove(\"off\");\n"
	"  }\n"
	"  function search(t) {\n"
	"    var re = null, hits = [], n = 0, sum = 0, end = -1;\n"
	"    try { re = new RegExp(t); } catch (err) { re = null; }\n"
	"    each(function (g) {\n"
	"      var s = label(g), m = g !== root && (re ? re.test(s) : s.indexOf(t) >= 0);\n"
	"      g.classList.toggle(\"hit\", m);\n"
	"      if (m) { n++; hits.push([num(g, \"data-x\"), num(g, \"data-w\")]); }\n"
	"    });\n"
	"    hits.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });\n"
	"    hits.forEach(function (h) { if (h[0] >= end) { sum += h[1]; end = h[0] + h[1]; } });\n"
	"    var pct = total ? 100 * sum / total : 0;\n"
	"    term = t; unsearchBtn.classList.remove(\"off\");\n"
	"    matched.textContent = \"Matched: \" + pct.toFixed(2) + \"% of samples, \" + n + (n === 1 ? \" frame\" : \" frames\");\n"
	"    return { frames: n, samples: sum, percent: pct };\n"
	"  }\n"
	"  function unsearch() {\n"
	"    each(function (g) { g.classList.remove(\"hit\"); });\n"
	"    term = null; matched.textContent = \"\"; unsearchBtn.classList.add(\"off\");\n"
	"  }\n"
	"  function ask() {\n"
	"    var t = window.prompt(\"Search frames (regular expression or text):\", term || \"\");\n"
	"    if (t === null) return; if (t === \"\") unsearch(); else search(t);\n"
	"  }\n"
	"  frames.addEventListener(\"click\", function (ev) { var g = frameOf(ev.target); if (g) zoom(g); });\n"
	"  frames.addEventListener(\"mouseover\", function (ev) { var g = frameOf(ev.target); if (g) details.textContent = g.firstElementChild.textContent; });\n"
	"  frames.addEventListener(\"mouseout\", function () { details.textContent = \"\"; });\n"
	"  unzoomBtn.addEventListener(\"click\", unzoom);\n"
	"  document.getElementById(\"search\").addEventListener(\"click\", ask);\n"
	"  unsearchBtn.addEventListener(\"click\", unsearch);\n"
	"  document.addEventListener(\"keydown\", function (ev) {\n"
	"    if (((ev.ctrlKey || ev.metaKey) && (ev.key === \"f\" || ev.key === \"F\")) || ev.key === \"/\") { ev.preventDefault(); ask(); }\n"
	"    else if (ev.key === \"Escape\") unsearch();\n"
	"  });\n"
	"  return { zoom: zoom, unzoom: unzoom, search: search, unsearch: unsearch,\n"
	"           zoomed: function () { return zoomed; }, term: function () { return term; } };\n"
	"})();\n"
	"]]></script>\n";

/* Samples of stacks holding a "[truncated]" mark. */
static uint64_t truncated_samples(const struct xb_profile *p)
{
	uint64_t n = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct xb_stack *s = &p->stacks[i];
		for (uint32_t k = 0; k < s->n; k++) {
			const struct xb_fname *fn = &p->names[s->ids[k]];
			if (fn->kind == XB_FK_MARK && strcmp(fn->name, "[truncated]") == 0) {
				n += s->count;
				break;
			}
		}
	}
	return n;
}

/* "processed 3,721/3,728 samples (99.8%) - 1 sample = 1.003 ms of CPU -
 * 60.0 s from 2026-11-05 12:00:00 UTC" (what the metadata knows). */
static void subtitle(const struct xb_out_meta *m, uint64_t total, char *buf, size_t size)
{
	char a[32], b[32];
	size_t o = 0;
#define ADD(...) o += (size_t)snprintf(buf + (o < size ? o : size), o < size ? size - o : 0, __VA_ARGS__)
	if (m->received)
		ADD("processed %s/%s samples (%.1f%%)", thousands(m->processed, a, sizeof(a)),
		    thousands(m->received, b, sizeof(b)),
		    100.0 * (double)m->processed / (double)m->received);
	else
		ADD("%s samples", thousands(total, a, sizeof(a)));
	if (m->period_ns)
		ADD(" \xc2\xb7 1 sample = %.3f ms of CPU (%.0f Hz)", (double)m->period_ns / 1e6,
		    1e9 / (double)m->period_ns);
	if (m->duration_ns)
		ADD(" \xc2\xb7 %.1f s", (double)m->duration_ns / 1e9);
	if (m->start_unix_ns) {
		time_t t = (time_t)(m->start_unix_ns / 1000000000u);
		struct tm tm;
		char when[40];
		if (gmtime_r(&t, &tm) && strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm))
			ADD(" from %s", when);
	}
#undef ADD
	if (o >= size && size)
		buf[size - 1] = 0;
}

static void put_frame(FILE *f, const struct xb_flame *fl, const struct xb_flame_node *nd,
		      const struct xb_profile *p, char *const *disp, uint32_t y_root)
{
	const char *name = nd->frame == XB_FLAME_ROOT ? "all" : disp[nd->frame];
	enum kind k = nd->frame == XB_FLAME_ROOT ? K_ROOT : kind_of(&p->names[nd->frame]);
	double scale = fl->total ? (double)(WIDTH - 2 * PAD) / (double)fl->total : 0;
	double px = PAD + (double)nd->x * scale, pw = (double)nd->total * scale;
	unsigned y = y_root - nd->depth * FRAME_H;
	char cnt[32];
	fprintf(f, "<g class=\"%c%u\"%s data-x=\"", kinds[k].cls,
		k == K_ROOT ? 0 : shade_of(name), nd->frame == XB_FLAME_ROOT ? " id=\"root\"" : "");
	xb_put_u64(f, nd->x);
	fputs("\" data-w=\"", f);
	xb_put_u64(f, nd->total);
	fputs("\"><title>", f);
	xb_put_xml(f, name, strlen(name));
	fprintf(f, " (%s sample%s, %.2f%%)</title><rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%d\"/>",
		thousands(nd->total, cnt, sizeof(cnt)), nd->total == 1 ? "" : "s",
		fl->total ? 100.0 * (double)nd->total / (double)fl->total : 0.0, px, y, pw,
		FRAME_H - 1);
	double chars = floor((pw - 6) / CHAR_W);
	bool cut = false;
	size_t n = chars > 0 ? xb_fit_text(name, (size_t)chars, &cut) : 0;
	if (n) {
		fprintf(f, "<text x=\"%.1f\" y=\"%u\">", px + 3, y + 11);
		xb_put_xml(f, name, n);
		fputs(cut ? "..</text>" : "</text>", f);
	}
	fputs("</g>\n", f);
}

static void write_svg(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m,
		      const struct xb_flame *fl, char *const *disp)
{
	char line[512], a[32], b[32];
	const char *title = m->title ? m->title : "erlang-sample";
	uint64_t trunc = truncated_samples(p);
	bool used[K_COUNT] = { false };
	for (size_t i = 1; i < fl->n; i++)
		used[kind_of(&p->names[fl->nodes[i].frame])] = true;

	/* Header lines, then the legend, then the frames, then the details
	 * line and the search result. */
	unsigned y = 24, nnotes = (m->blame != NULL) + (trunc != 0);
	unsigned legend_y = 44 + 18 * (1 + nnotes);
	unsigned top = legend_y + 18 + 16; /* the top of the deepest frame */
	unsigned y_root = top + fl->maxdepth * FRAME_H;
	unsigned height = y_root + FRAME_H + 34;

	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n", f);
	fprintf(f, "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%u\" "
		   "viewBox=\"0 0 %d %u\" data-total=\"",
		WIDTH, height, WIDTH, height);
	xb_put_u64(f, fl->total);
	char *dtitle = xb_display_name(title);
	fputs("\">\n<title>", f);
	if (dtitle)
		xb_put_xml(f, dtitle, strlen(dtitle));
	fputs(" - flame graph</title>\n", f);
	free(dtitle);
	put_style(f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"#f8f8f4\"/>\n", WIDTH,
		height);
	put_text(f, WIDTH / 2.0, y, " id=\"title\" text-anchor=\"middle\"", title);
	put_text(f, PAD, y, " id=\"unzoom\" class=\"btn off\"", "Reset zoom");
	put_text(f, WIDTH - PAD, y, " id=\"search\" class=\"btn\" text-anchor=\"end\"", "Search");
	put_text(f, WIDTH - PAD - 60, y, " id=\"unsearch\" class=\"btn off\" text-anchor=\"end\"",
		 "Reset search");
	y = 44;
	subtitle(m, fl->total, line, sizeof(line));
	put_text(f, WIDTH / 2.0, y, " id=\"subtitle\" text-anchor=\"middle\"", line);
	if (m->blame) {
		snprintf(line, sizeof(line),
			 "--blame %s: only the stacks of samples whose native frames include it "
			 "(%s samples)",
			 m->blame, thousands(fl->total, a, sizeof(a)));
		y += 18;
		put_text(f, WIDTH / 2.0, y, " class=\"note\" text-anchor=\"middle\"", line);
	}
	if (trunc) {
		char depth[48] = "";
		if (m->max_depth)
			snprintf(depth, sizeof(depth), " at --max-callchain-depth %u", m->max_depth);
		snprintf(line, sizeof(line),
			 "%s samples (%.2f%%) had deeper stacks, cut%s: their root frame is [truncated]",
			 thousands(trunc, a, sizeof(a)),
			 fl->total ? 100.0 * (double)trunc / (double)fl->total : 0.0, depth);
		y += 18;
		put_text(f, WIDTH / 2.0, y, " class=\"note\" text-anchor=\"middle\"", line);
	}

	/* Legend: the kinds present, then what was merged. */
	fprintf(f, "<g id=\"legend\">\n");
	double lx = PAD;
	for (int k = 0; k < K_COUNT; k++) {
		if (!used[k] || !kinds[k].label)
			continue;
		fprintf(f, "<rect class=\"%c2\" x=\"%.1f\" y=\"%u\" width=\"12\" height=\"12\"/>",
			kinds[k].cls, lx, legend_y - 10);
		put_text(f, lx + 16, legend_y, " class=\"legend\"", kinds[k].label);
		lx += 16 + CHAR_W * (double)strlen(kinds[k].label) + 14;
	}
	if (fl->merged_frames)
		snprintf(line, sizeof(line),
			 "%s frames narrower than %g%% of the samples are merged into their "
			 "parents (%s samples, %.2f%%)",
			 thousands(fl->merged_frames, a, sizeof(a)), 100 * fl->min_fraction,
			 thousands(fl->merged_samples, b, sizeof(b)),
			 fl->total ? 100.0 * (double)fl->merged_samples / (double)fl->total : 0.0);
	else
		snprintf(line, sizeof(line),
			 "frames narrower than %g%% of the samples are merged into their parents "
			 "(none here)",
			 100 * fl->min_fraction);
	put_text(f, PAD, legend_y + 18, " id=\"merged\" class=\"legend\"", line);
	fputs("</g>\n<g id=\"frames\">\n", f);
	if (fl->total)
		for (size_t i = 0; i < fl->n; i++)
			put_frame(f, fl, &fl->nodes[i], p, disp, y_root);
	fputs("</g>\n", f);
	if (!fl->total)
		put_text(f, WIDTH / 2.0, y_root, " text-anchor=\"middle\"", "no samples");
	put_text(f, PAD, height - 14, " id=\"details\"", "");
	put_text(f, WIDTH - PAD, height - 14, " id=\"matched\" text-anchor=\"end\"", "");
	fputs(script, f);
	fputs("</svg>\n", f);
}

/* What the frames of FL will take in the SVG, about (put_frame: ~160
 * bytes of markup, the name in the title, the label if one fits). */
static uint64_t frame_bytes(const struct xb_profile *p, const struct xb_flame *fl)
{
	uint64_t b = 0;
	double px_per_sample = fl->total ? (double)(WIDTH - 2 * PAD) / (double)fl->total : 0;
	for (size_t i = 1; i < fl->n; i++) {
		size_t len = strlen(p->names[fl->nodes[i].frame].name);
		double chars = floor(((double)fl->nodes[i].total * px_per_sample - 6) / CHAR_W);
		b += 160 + len;
		if (chars >= 3)
			b += 30 + (chars < (double)len ? (size_t)chars : len);
	}
	return b;
}

int xb_write_flamegraph(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m)
{
	struct xb_flame fl;
	for (double min = XB_FLAME_MIN_FRACTION;; min *= 2) {
		if (xb_flame_build(p, min, &fl) < 0)
			return -1;
		if (frame_bytes(p, &fl) <= XB_FLAME_MAX_FRAME_BYTES || min > 0.05)
			break;
		xb_flame_free(&fl);
	}
	/* Display names of the frames drawn. */
	char **disp = calloc(p->nnames ? p->nnames : 1, sizeof(*disp));
	int rc = -1;
	if (!disp) {
		xb_fail("out of memory writing the flame graph");
		goto out;
	}
	for (size_t i = 1; i < fl.n; i++) {
		uint32_t id = fl.nodes[i].frame;
		if (!disp[id] && !(disp[id] = xb_display_name(p->names[id].name))) {
			xb_fail("out of memory writing the flame graph");
			goto out;
		}
	}
	write_svg(f, p, m, &fl, disp);
	rc = xb_out_finish(f, "flame graph");
out:
	if (disp)
		for (size_t i = 0; i < p->nnames; i++)
			free(disp[i]);
	free(disp);
	xb_flame_free(&fl);
	return rc;
}

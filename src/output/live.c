/* live.c - --live: a top-like view of the session, redrawn on the
 * terminal every --live-interval seconds, and the progress line of runs
 * that write to a file.
 *
 * Plain ANSI/VT100 escapes (alternate screen, cursor home, clear to end of
 * line), so it works in any terminal and over ssh without terminfo.
 * The terminal is put back (main screen, cursor, line discipline) when the
 * sink is freed, which the session does on q, at the end of --duration and
 * after ^C; an atexit handler covers other exits, and handlers of SIGTSTP
 * (^Z: put back, stopped, and taken again on SIGCONT), SIGQUIT (^\) and
 * SIGHUP (put back, then the signal's default action) the signals that
 * would otherwise leave the alternate screen, a hidden cursor and no echo.
 * Widths are display columns (wcwidth in C.UTF-8), not code points. */
#define _GNU_SOURCE
#include "xb/outputs.h"
#include "xb/common.h"
#include "xb/output_util.h"
#include "xb/session.h"
#include "xb/writers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define MAX_WINDOW 3600

/* ---- the terminal ---- */

static struct {
	bool active;
	int in, out;
	bool close_in;
	struct termios saved;
	bool have_saved;
} term;

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* (async-signal-safe: write and tcsetattr only) */
static void term_leave(void)
{
	/* main screen back, then the cursor on (a terminal that keeps the
	 * cursor's mode with the screen it saved has it on either way) */
	static const char bye[] = "\033[?1049l\033[?25h";
	write_all(term.out, bye, sizeof(bye) - 1);
	if (term.have_saved)
		tcsetattr(term.in, TCSAFLUSH, &term.saved);
}

static void term_enter(void)
{
	if (term.have_saved) {
		/* keys without Enter, no echo; ^C still sends SIGINT */
		struct termios raw = term.saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(term.in, TCSAFLUSH, &raw);
	}
	/* alternate screen, cursor off, clear */
	static const char hello[] = "\033[?1049h\033[?25l\033[H\033[2J";
	write_all(term.out, hello, sizeof(hello) - 1);
}

static const int term_signals[] = { SIGTSTP, SIGQUIT, SIGHUP, SIGCONT };
static struct sigaction term_old[XB_ARRAY_SIZE(term_signals)];
static volatile sig_atomic_t term_redraw; /* back from a stop: draw at once */

static void term_restore(void)
{
	if (!term.active)
		return;
	term.active = false;
	for (size_t i = 0; i < XB_ARRAY_SIZE(term_signals); i++)
		sigaction(term_signals[i], &term_old[i], NULL);
	term_leave();
	if (term.close_in)
		close(term.in);
}

static void term_signal(int sig)
{
	int e = errno;
	if (!term.active) {
		errno = e;
		return;
	}
	if (sig == SIGCONT) {
		/* continued: after ^Z the SIGTSTP handler below takes the
		 * screen again; after a SIGSTOP it was never left (entering
		 * it twice would save the hidden cursor as the state to go
		 * back to).  Either way: draw again at once. */
		term_redraw = 1;
		errno = e;
		return;
	}
	term_leave();
	/* the signal's own action, with the terminal as it was */
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	sigset_t un;
	sigemptyset(&un);
	sigaddset(&un, sig);
	sigprocmask(SIG_UNBLOCK, &un, NULL);
	raise(sig); /* SIGTSTP stops here (unless the process group is orphaned) */
	/* continued: handled again */
	struct sigaction sa = { .sa_handler = term_signal };
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(sig, &sa, NULL);
	if (sig == SIGTSTP) {
		term_enter();
		term_redraw = 1;
	}
	errno = e;
}

static int term_open(void)
{
	if (!isatty(STDOUT_FILENO))
		return xb_fail("--live draws on a terminal, and standard output is not one; "
			       "use the table or --format folded -o FILE instead");
	term.out = STDOUT_FILENO;
	term.close_in = false;
	if (isatty(STDIN_FILENO)) {
		term.in = STDIN_FILENO;
	} else {
		term.in = open("/dev/tty", O_RDONLY | O_CLOEXEC);
		term.close_in = term.in >= 0;
	}
	term.have_saved = term.in >= 0 && tcgetattr(term.in, &term.saved) == 0;
	static bool registered;
	if (!registered) {
		atexit(term_restore);
		registered = true;
	}
	struct sigaction sa = { .sa_handler = term_signal };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < XB_ARRAY_SIZE(term_signals); i++)
		sigaddset(&sa.sa_mask, term_signals[i]);
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < XB_ARRAY_SIZE(term_signals); i++)
		sigaction(term_signals[i], &sa, &term_old[i]);
	term.active = true;
	term_enter();
	return 0;
}

static void term_size(int *rows, int *cols)
{
	struct winsize ws;
	*rows = 24;
	*cols = 80;
	if (ioctl(term.out, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

/* The next key pressed, or 0. */
static int term_key(void)
{
	if (term.in < 0)
		return 0;
	struct pollfd p = { .fd = term.in, .events = POLLIN };
	unsigned char c;
	if (poll(&p, 1, 0) == 1 && read(term.in, &c, 1) == 1)
		return c;
	return 0;
}

/* ---- a screen, built in memory and written at once ---- */

struct screen {
	char *p;
	size_t len, cap;
	int cols, rows, row;
};

static void put(struct screen *sc, const char *s, size_t n)
{
	if (xb_grow((void **)&sc->p, &sc->cap, sc->len + n + 1, 1) < 0)
		return;
	memcpy(sc->p + sc->len, s, n);
	sc->len += n;
}

/* One line of at most cols display columns (xb_display_fit; text is clean already),
 * then clear to the end of the line. */
static void line(struct screen *sc, const char *fmt, ...) XB_PRINTF(2, 3);
static void line(struct screen *sc, const char *fmt, ...)
{
	if (sc->row >= sc->rows)
		return;
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	size_t n = xb_display_fit(buf, strlen(buf), sc->cols, NULL);
	put(sc, buf, n);
	put(sc, "\033[K", 3);
	if (++sc->row < sc->rows)
		put(sc, "\r\n", 2);
}

/* ---- the live sink ---- */

struct live {
	struct xb_sink k;
	struct xb_live_opts o;
	unsigned nb;          /* buckets of one second in the window */
	uint32_t *bucket;     /* nb x cap counts, by profile frame id */
	uint64_t *total;
	size_t cap;
	uint64_t bucket_no[MAX_WINDOW]; /* which second each bucket holds */
	uint64_t samples_win[MAX_WINDOW];
	bool *hit;            /* --blame: frame ids matching FN */
	size_t nhit;
	uint32_t none;        /* --blame: the row of samples with no Erlang frame */
	double next_draw, t0;
	bool paused, by_total, quit, drawn;
	uint64_t matched;
	struct screen sc;
	/* rate: samples received between draws */
	uint64_t last_received;
	double last_draw;
	double rate;
};

static int grow(struct live *lv, size_t need)
{
	if (need <= lv->cap)
		return 0;
	size_t cap = lv->cap ? lv->cap : 256;
	while (cap < need)
		cap *= 2;
	uint32_t *b = calloc((size_t)lv->nb * cap, sizeof(*b));
	uint64_t *t = calloc(cap, sizeof(*t));
	if (!b || !t) {
		free(b);
		free(t);
		return -1;
	}
	for (unsigned i = 0; i < lv->nb; i++)
		if (lv->bucket)
			memcpy(b + (size_t)i * cap, lv->bucket + (size_t)i * lv->cap, lv->cap * sizeof(*b));
	if (lv->total)
		memcpy(t, lv->total, lv->cap * sizeof(*t));
	free(lv->bucket);
	free(lv->total);
	lv->bucket = b;
	lv->total = t;
	lv->cap = cap;
	return 0;
}

/* The row a sample counts in: its innermost frame (--only-erlang: its
 * innermost Erlang frame), or its --blame row, or with --by its group (of
 * the samples --blame matches, with both); false when it has none. */
static bool row_of(struct live *lv, struct xb_session *s, const struct xb_rsample *rs, uint32_t *row)
{
	struct xb_profile *p = &s->prof;
	if (lv->o.by) {
		/* the group is the outermost frame (session.c, xb_by_group) */
		if (!rs->n || p->names[rs->ids[rs->n - 1]].kind != XB_FK_GROUP)
			return false;
		if (lv->o.blame) {
			uint32_t brow;
			if (lv->nhit < p->nnames) {
				bool *h = realloc(lv->hit, p->nnames * sizeof(*h));
				if (!h)
					return false;
				for (size_t i = lv->nhit; i < p->nnames; i++)
					h[i] = xb_blame_kind(p->names[i].kind) &&
					       xb_blame_match(lv->o.blame, p->names[i].name);
				lv->hit = h;
				lv->nhit = p->nnames;
			}
			if (!xb_blame_row(p, lv->hit, lv->nhit, rs->ids, rs->n, rs->nnative, lv->none, &brow))
				return false;
			lv->matched++;
		}
		*row = rs->ids[rs->n - 1];
		return true;
	}
	if (lv->o.blame) {
		if (lv->nhit < p->nnames) {
			bool *h = realloc(lv->hit, p->nnames * sizeof(*h));
			if (!h)
				return false;
			for (size_t i = lv->nhit; i < p->nnames; i++)
				h[i] = xb_blame_kind(p->names[i].kind) && xb_blame_match(lv->o.blame, p->names[i].name);
			lv->hit = h;
			lv->nhit = p->nnames;
		}
		if (!xb_blame_row(p, lv->hit, lv->nhit, rs->ids, rs->n, rs->nnative, lv->none, row))
			return false;
		lv->matched++;
		return true;
	}
	if (!rs->n)
		return false;
	if (lv->o.only_erlang) {
		if (rs->nnative >= rs->n || p->names[rs->ids[rs->nnative]].kind == XB_FK_MARK)
			return false;
		*row = rs->ids[rs->nnative];
		return true;
	}
	*row = rs->ids[0];
	return true;
}

static uint64_t second_of(struct live *lv)
{
	double t = (double)xb_now_ns() / 1e9 - lv->t0;
	return t > 0 ? (uint64_t)t : 0;
}

static void add(struct xb_sink *k, struct xb_session *s, const struct xb_rsample *rs)
{
	struct live *lv = (struct live *)k;
	uint32_t row;
	if (!row_of(lv, s, rs, &row) || grow(lv, (size_t)row + 1) < 0)
		return;
	uint64_t sec = second_of(lv);
	unsigned b = (unsigned)(sec % lv->nb);
	if (lv->bucket_no[b] != sec) { /* a new second: forget what it held */
		memset(lv->bucket + (size_t)b * lv->cap, 0, lv->cap * sizeof(*lv->bucket));
		lv->bucket_no[b] = sec;
		lv->samples_win[b] = 0;
	}
	lv->bucket[(size_t)b * lv->cap + row]++;
	lv->samples_win[b]++;
	lv->total[row]++;
}

struct lrow {
	uint32_t id;
	uint64_t win, total;
};

static int by_win(const void *a, const void *b)
{
	const struct lrow *x = a, *y = b;
	if (x->win != y->win)
		return x->win > y->win ? -1 : 1;
	return (x->total < y->total) - (x->total > y->total);
}

static int by_total(const void *a, const void *b)
{
	const struct lrow *x = a, *y = b;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return (x->win < y->win) - (x->win > y->win);
}

static void draw(struct live *lv, struct xb_session *s)
{
	struct screen *sc = &lv->sc;
	sc->len = 0;
	sc->row = 0;
	term_size(&sc->rows, &sc->cols);
	put(sc, "\033[H", 3);
	double now = (double)xb_now_ns() / 1e9, el = now - lv->t0;
	uint64_t sec = second_of(lv);
	/* the window: the last nb whole seconds and the current one */
	size_t n = 0;
	struct lrow *rows = calloc(lv->cap ? lv->cap : 1, sizeof(*rows));
	uint64_t win_samples = 0, win_sum = 0, tot_sum = 0;
	for (unsigned b = 0; b < lv->nb; b++)
		if (lv->bucket_no[b] + lv->nb > sec && lv->bucket_no[b] <= sec)
			win_samples += lv->samples_win[b];
	for (size_t id = 0; rows && id < lv->cap; id++) {
		uint64_t w = 0;
		for (unsigned b = 0; b < lv->nb; b++)
			if (lv->bucket_no[b] + lv->nb > sec && lv->bucket_no[b] <= sec)
				w += lv->bucket[(size_t)b * lv->cap + id];
		if (!w && !lv->total[id])
			continue;
		rows[n++] = (struct lrow){ (uint32_t)id, w, lv->total[id] };
		win_sum += w;
		tot_sum += lv->total[id];
	}
	if (rows)
		qsort(rows, n, sizeof(*rows), lv->by_total ? by_total : by_win);
	if (now > lv->last_draw && lv->last_draw > 0)
		lv->rate = (double)(s->st.received - lv->last_received) / (now - lv->last_draw);
	lv->last_draw = now;
	lv->last_received = s->st.received;

	char title[200];
	xb_text_clean(lv->o.title ? lv->o.title : "", false, title, sizeof(title));
	line(sc, "%s  %.0f s%s", title, el, lv->paused ? "  [paused: p resumes]" : "");
	line(sc, "event %s; processed %llu/%llu samples (%.1f%%); %.0f samples/s", s->smp.event_name,
	     (unsigned long long)s->st.processed, (unsigned long long)s->st.received,
	     s->st.received ? 100.0 * (double)s->st.processed / (double)s->st.received : 0.0, lv->rate);
	if (lv->o.blame) {
		char fn[200];
		line(sc, "blame %s: %llu samples had it on their stack", xb_text_clean(lv->o.blame, false, fn, sizeof(fn)),
		     (unsigned long long)lv->matched);
	} else if (lv->o.by) {
		line(sc, "samples by %s", lv->o.by);
	} else {
		line(sc, "%s", lv->o.only_erlang ? "innermost Erlang function of each sample" : "innermost frame of each sample");
	}
	line(sc, "%s", "");
	char wl[32], what[64];
	snprintf(wl, sizeof(wl), "last %us", lv->nb);
	snprintf(what, sizeof(what), "%s (by %s)", lv->o.by ? "GROUP" : "FUNCTION",
		 lv->by_total ? "total" : "last window");
	line(sc, "%8s %6s %9s %6s  %s", wl, "%", "total", "%", what);
	int avail = sc->rows - sc->row - 1;
	for (size_t i = 0; rows && i < n && (int)i < avail; i++) {
		const struct xb_fname *f = &s->prof.names[rows[i].id];
		char text[1400], clean[1400], tag[320];
		xb_text_clean(xb_fname_text(f, text, sizeof(text)), false, clean, sizeof(clean));
		xb_text_clean(f->tag, false, tag, sizeof(tag));
		line(sc, "%8llu %5.1f%% %9llu %5.1f%%  %s %s", (unsigned long long)rows[i].win,
		     win_sum ? 100.0 * (double)rows[i].win / (double)win_sum : 0.0,
		     (unsigned long long)rows[i].total,
		     tot_sum ? 100.0 * (double)rows[i].total / (double)tot_sum : 0.0, clean, tag);
	}
	(void)win_samples;
	while (sc->row < sc->rows - 1)
		line(sc, "%s", "");
	put(sc, "\033[J", 3);
	char keys[160];
	snprintf(keys, sizeof(keys), "q quit   p %s   s sort by %s", lv->paused ? "resume" : "pause",
		 lv->by_total ? "the last window" : "the whole run");
	/* the last line without a newline: no scrolling */
	size_t kl = strlen(keys);
	if ((int)kl > sc->cols)
		kl = (size_t)sc->cols;
	put(sc, keys, kl);
	put(sc, "\033[K", 3);
	write_all(term.out, sc->p, sc->len);
	free(rows);
	lv->drawn = true;
}

static void tick(struct xb_sink *k, struct xb_session *s)
{
	struct live *lv = (struct live *)k;
	int c;
	bool redraw = false;
	while ((c = term_key())) {
		if (c == 'q' || c == 'Q') {
			lv->quit = true;
			return;
		}
		if (c == 'p' || c == 'P') {
			lv->paused = !lv->paused;
			redraw = true;
		}
		if (c == 's' || c == 'S') {
			lv->by_total = !lv->by_total;
			redraw = true;
		}
	}
	if (term_redraw) { /* back from ^Z: the screen was cleared */
		term_redraw = 0;
		redraw = true;
	}
	double now = (double)xb_now_ns() / 1e9;
	if (redraw || (!lv->paused && now >= lv->next_draw)) {
		draw(lv, s);
		lv->next_draw = now + lv->o.interval;
	}
}

static bool done(struct xb_sink *k, struct xb_session *s)
{
	(void)s;
	return ((struct live *)k)->quit;
}

static void free_live(struct xb_sink *k)
{
	struct live *lv = (struct live *)k;
	term_restore();
	free(lv->bucket);
	free(lv->total);
	free(lv->hit);
	free(lv->sc.p);
	free(lv);
}

/* The run is over: the terminal goes back before anything else prints. */
static int write_live(struct xb_sink *k, struct xb_session *s, FILE *out)
{
	(void)k;
	(void)s;
	(void)out;
	term_restore();
	return 0;
}

static const struct xb_sink_ops live_ops = {
	.name = "live",
	.add = add,
	.tick = tick,
	.done = done,
	.write = write_live,
	.free = free_live,
};

struct xb_sink *xb_live_sink_new(const struct xb_live_opts *o, struct xb_profile *p)
{
	struct live *lv = calloc(1, sizeof(*lv));
	if (!lv) {
		xb_fail("out of memory");
		return NULL;
	}
	lv->k.ops = &live_ops;
	lv->o = *o;
	double w = o->window < 1 ? 1 : o->window > MAX_WINDOW ? MAX_WINDOW : o->window;
	lv->nb = (unsigned)(w + 0.5);
	for (unsigned i = 0; i < MAX_WINDOW; i++)
		lv->bucket_no[i] = UINT64_MAX / 2; /* no second yet */
	if (o->blame)
		lv->none = xb_profile_intern(p, XB_NO_ERLANG, XB_MARK_TAG, XB_FK_MARK);
	lv->t0 = (double)xb_now_ns() / 1e9;
	if (term_open() < 0) {
		free(lv);
		return NULL;
	}
	return &lv->k;
}

/* ---- the progress line ---- */

struct progress {
	struct xb_sink k;
	double duration, last;
	bool shown;
	const char *prog;
};

static void progress_tick(struct xb_sink *k, struct xb_session *s)
{
	struct progress *pg = (struct progress *)k;
	double now = (double)xb_now_ns() / 1e9, el = now - s->start_s;
	if (el < 2.0 || now - pg->last < 0.5)
		return;
	pg->last = now;
	pg->shown = true;
	char dur[32] = "";
	if (pg->duration > 0)
		snprintf(dur, sizeof(dur), "/%.0f", pg->duration);
	fprintf(stderr, "\r%s: %.0f%s s, %llu samples, %.1f%% processed\033[K", pg->prog, el, dur,
		(unsigned long long)s->st.received,
		s->st.received ? 100.0 * (double)s->st.processed / (double)s->st.received : 0.0);
	fflush(stderr);
}

static void progress_clear(struct progress *pg)
{
	if (pg->shown) {
		fputs("\r\033[K", stderr); /* the line goes; later messages start clean */
		fflush(stderr);
		pg->shown = false;
	}
}

static int progress_write(struct xb_sink *k, struct xb_session *s, FILE *out)
{
	(void)s;
	(void)out;
	progress_clear((struct progress *)k);
	return 0;
}

static void progress_free(struct xb_sink *k)
{
	progress_clear((struct progress *)k);
	free(k);
}

static const struct xb_sink_ops progress_ops = {
	.name = "progress",
	.tick = progress_tick,
	.write = progress_write,
	.free = progress_free,
};

struct xb_sink *xb_progress_sink_new(const char *prog, double duration)
{
	struct progress *pg = calloc(1, sizeof(*pg));
	if (!pg)
		return NULL;
	pg->k.ops = &progress_ops;
	pg->duration = duration;
	pg->prog = prog;
	return &pg->k;
}

/* outputs.h - the sinks of erlang-sample (src/output/): each turns a
 * session's samples into one result. */
#ifndef XB_OUTPUTS_H
#define XB_OUTPUTS_H

#include "xb/sink.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* XB_FMT_JSON: reports that are not profiles (--dump, --schedulers, --long-calls). */
enum xb_format { XB_FMT_TABLE, XB_FMT_FOLDED, XB_FMT_FLAMEGRAPH, XB_FMT_SPEEDSCOPE, XB_FMT_PPROF, XB_FMT_JSON };

struct xb_profile;
struct xb_out_meta;
/* One row per format (src/output/profile_sink.c, indexed by enum
 * xb_format): a new stack format is its writer's file in src/output/ and
 * a row here. */
struct xb_format_desc {
	const char *name;    /* --format NAME */
	const char *ext[3];  /* file name endings that imply it (NULL-ended) */
	/* a stack format's writer (NULL: the table, or JSON reports) */
	int (*write)(FILE *f, const struct xb_profile *p, const struct xb_out_meta *m);
	bool files;          /* shows each Erlang frame's source file */
};
extern const struct xb_format_desc xb_formats[];

/* "table", "folded", ... <-> enum xb_format; xb_format_by_name -1 if none. */
extern const char *const xb_format_names[]; /* NULL-terminated, enum order */
int xb_format_by_name(const char *name);
/* The format a file name's extension implies (its longest matching ending
 * in xb_formats: .svg flamegraph, .speedscope.json or .json speedscope,
 * .pb.gz or .pprof pprof, .folded or .txt folded), or -1. */
int xb_format_by_extension(const char *path);

struct xb_profile_sink_opts {
	enum xb_format format;
	const char *title; /* for the picture formats */
	const char *blame; /* only samples whose native stack has this function */
	size_t top;        /* table rows */
	bool only_erlang;  /* table: count the innermost Erlang frame */
	bool grouped;      /* --by: stacks end in a group frame; the table has a block per group */
	double wall_hz;    /* --wall: the profile holds wall-clock samples, this many ticks a second */
	const struct xb_sink *wall; /* --wall: its sink (xb_wall_note, in the table) */
};

/* The session's aggregated profile, written in one format. */
struct xb_sink *xb_profile_sink_new(const struct xb_profile_sink_opts *o);

/* --wall: every process once per tick, its state as the root frame, into
 * the session's profile (the session runs with sinks_only); writes a note
 * on what the run read.  PROC_SIZE: the VM's process structure, bytes. */
struct xb_wall_opts {
	double hz;           /* ticks per second */
	size_t max_procs;    /* above this, a random subset per tick, scaled */
	bool by_process;     /* --by process: a group frame per process */
};
struct xb_sink *xb_wall_sink_new(const struct xb_wall_opts *o, size_t proc_size);
/* The note on a run that read random subsets (above max_procs), with the
 * error it implies, into BUF; false (BUF empty) when every tick read every
 * process. */
bool xb_wall_note(const struct xb_sink *k, char *buf, size_t len);

struct xb_pstack_opts {
	bool idle_stacks; /* unwind where idle schedulers wait */
};
/* --pstack: one stack per scheduler, the best seen while sampling. */
struct xb_sink *xb_pstack_sink_new(const struct xb_pstack_opts *o);

struct xb_profile;
struct xb_live_opts {
	double interval;  /* seconds between redraws */
	double window;    /* seconds of the recent window */
	const char *blame;/* rows are --blame rows */
	bool only_erlang;
	const char *by;   /* --by: rows are the groups ("process", ...), the
			     session having made each sample's group its
			     outermost frame; NULL: rows are functions */
	const char *title;/* first line: tool, PID, VM */
};
/* --live: a top view on the terminal (stdout must be one: NULL with
 * xb_err otherwise).  Names are interned in P (the session's profile). */
struct xb_sink *xb_live_sink_new(const struct xb_live_opts *o, struct xb_profile *p);
/* A one-line progress on stderr (elapsed/duration, samples, processed %)
 * from 2 s into the run, erased at its end.  Add it only when stderr is a
 * terminal. */
struct xb_sink *xb_progress_sink_new(const char *prog, double duration);

struct xb_dump_opts {
	bool json;              /* an array of {"pid", "name", "status", ...} */
	const char *const *only; /* processes to show (pids or registered names); none: all */
	size_t nonly;
};
/* --dump: every process's Erlang stack; running processes' from samples
 * (the sink collects them), the others' from their saved state. */
struct xb_sink *xb_dump_sink_new(const struct xb_dump_opts *o);

#endif

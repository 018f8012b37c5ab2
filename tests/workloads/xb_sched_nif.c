/* xb_sched_nif.c - a NIF that holds its scheduler for as long as asked
 * (tests/workloads/xb_sched_nif.erl), and records what each long call
 * really took (and each short one the machine stretched): the truth the
 * long-call report is checked against.
 *
 * Built by the test (gcc -shared -fPIC) against the target VM's own
 * erl_nif.h.  The spinning functions are global and never inlined, so
 * their names are on the sampled stacks. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <erl_nif.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

/* Calls asked to last this long are recorded, and every call that took
 * longer than LATE_NS (a short call stretched by the machine: the thread
 * preempted in the middle of it). */
#define RECORD_US 10000
#define LATE_NS 1000000ull
#define NREC 4096

/* Where the thread was off the CPU at a spinning call's edges, as a
 * sampler of on-CPU time sees them.  The per-thread cpu-clock event ticks
 * every 1.003 ms (997 Hz) of the thread's time on a CPU, and keeps what is
 * left of its period while the thread is switched out
 * (perf_swevent_cancel_hrtimer saves period_left, kernel/events/core.c):
 * so WINDOW_NS of on-CPU time, however split by switches, holds one tick.
 * The first sample in a call comes no later than the moment the call has
 * been on a CPU for WINDOW_NS, HEAD after its start; the last no earlier
 * than WINDOW_NS of on-CPU time before its end, TAIL (WINDOW_NS each
 * where the thread never left the CPU; 0 for the sleeping calls; a
 * reader that preempts the thread right after each sample, as the perf
 * path's reads at the sample do, adds its few microseconds to them).  The thread left the CPU wherever two clock
 * reads of the spin, a few microseconds apart, are more than GAP_NS apart
 * and its count of context switches (getrusage RUSAGE_THREAD: ru_nvcsw +
 * ru_nivcsw) grew meanwhile (a gap without one is an interrupt: the
 * thread stays current, and a tick then samples it); more than
 * MAX_STALLS such stalls: both unknown (~0ull). */
#define WINDOW_NS 1100000ull
#define GAP_NS 10000ull
#define MAX_STALLS 1024

static struct rec {
	unsigned long long start, end, cpu, us, head, tail;
} recs[NREC];
static unsigned long long nrec;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long now_ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* A call that started at T0 and whose spin ended at T1: recorded when
 * asked for RECORD_US or more, or stretched past LATE_NS, with as its end
 * a last clock read just before the lock is let go, after everything
 * else the call does (its caller only returns the term it built).  The
 * end is not T1: a thread preempted between its spin and its return
 * (the stall bookkeeping, this lock) is still in the NIF, and a sampler
 * rightly says so (a saturated run: a sample 2.5 ms after T1, in the
 * NIF).  TAIL was measured up to T1: where that last read is within
 * GAP_NS of it the thread stayed on its CPU, and the tail grows by the
 * difference at most; later, it may have left the CPU: unknown. */
static void record(unsigned long long t0, unsigned long long t1, unsigned long long cpu, long us,
		   unsigned long long head, unsigned long long tail)
{
	pthread_mutex_lock(&lock);
	unsigned long long end = now_ns(CLOCK_MONOTONIC);
	if (us >= RECORD_US || end - t0 >= LATE_NS) {
		if (tail != ~0ull)
			tail = end - t1 <= GAP_NS ? tail + (end - t1) : ~0ull;
		recs[nrec % NREC] = (struct rec){ t0, end, cpu, (unsigned long long)us, head, tail };
		nrec++;
	}
	pthread_mutex_unlock(&lock);
}

struct stalls {
	unsigned long long at[MAX_STALLS], len[MAX_STALLS];
	int n;
	int overflow;
	long switches; /* the thread's context switches when last looked */
};

static long switches(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw + ru.ru_nivcsw : -1;
}

/* Between FROM and TO (a gap in the clock reads): did the thread leave
 * the CPU?  Then a stall. */
static void gap(struct stalls *s, unsigned long long from, unsigned long long to)
{
	long now = switches();
	if (now == s->switches && now >= 0)
		return;
	s->switches = now;
	if (s->n < MAX_STALLS) {
		s->at[s->n] = from;
		s->len[s->n] = to - from;
		s->n++;
	} else {
		s->overflow = 1;
	}
}

/* HEAD and TAIL (above) of a spin over [t0, t1] with stalls S: the
 * stretches on the CPU lie between the stalls. */
static void edges(const struct stalls *s, unsigned long long t0, unsigned long long t1, unsigned long long *head,
		  unsigned long long *tail)
{
	if (s->overflow) {
		*head = *tail = ~0ull;
		return;
	}
	*head = *tail = t1 - t0;
	unsigned long long need = WINDOW_NS;
	for (int i = 0; i <= s->n; i++) {
		unsigned long long from = i ? s->at[i - 1] + s->len[i - 1] : t0, to = i < s->n ? s->at[i] : t1;
		if (to < from)
			continue;
		if (to - from >= need) {
			*head = from + need - t0;
			break;
		}
		need -= to - from;
	}
	need = WINDOW_NS;
	for (int i = s->n; i >= 0; i--) {
		unsigned long long from = i ? s->at[i - 1] + s->len[i - 1] : t0, to = i < s->n ? s->at[i] : t1;
		if (to < from)
			continue;
		if (to - from >= need) {
			*tail = t1 - (to - need);
			break;
		}
		need -= to - from;
	}
}

/* Arithmetic the compiler cannot drop. */
__attribute__((noinline)) unsigned long xb_sched_work(unsigned long x)
{
	for (int i = 0; i < 2000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

/* Spins until END; the stalls seen into *S, the last clock read into *T1. */
__attribute__((noinline)) unsigned long xb_sched_spin(unsigned long long t0, unsigned long long end, struct stalls *s,
						      unsigned long long *t1)
{
	unsigned long x = 1;
	unsigned long long prev = t0, now;
	do {
		x = xb_sched_work(x);
		now = now_ns(CLOCK_MONOTONIC);
		if (now - prev > GAP_NS) {
			gap(s, prev, now);
			now = now_ns(CLOCK_MONOTONIC); /* (after the system call) */
		}
		prev = now;
	} while (now < end);
	*t1 = now;
	return x;
}

__attribute__((noinline)) ERL_NIF_TERM xb_sched_spin_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	/* The call's real length: t0 first thing (before getrusage: a
	 * system call, where a loaded machine likes to preempt the thread,
	 * and a sample taken in the NIF before a preemption there came 1.3 ms
	 * before a t0 read after it, in a saturated run), t1 when the spin and
	 * the CPU-time clock (a system call too: it must lie inside the call)
	 * are done, and the end last thing (record()). */
	unsigned long long t0 = now_ns(CLOCK_MONOTONIC);
	long us;
	if (argc != 1 || !enif_get_long(env, argv[0], &us) || us < 0 || us > 10000000)
		return enif_make_badarg(env);
	static __thread struct stalls st;
	st.n = st.overflow = 0;
	st.switches = switches();
	unsigned long long cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID), t = now_ns(CLOCK_MONOTONIC), last, head, tail;
	/* (the system calls before the spin: where they took longer than a
	 * gap, the thread is taken to have left the CPU there, as it may have
	 * before the count of switches was first read) */
	if (t - t0 > GAP_NS) {
		st.at[0] = t0;
		st.len[0] = t - t0;
		st.n = 1;
	}
	unsigned long x = xb_sched_spin(t, t0 + (unsigned long long)us * 1000ull, &st, &last);
	unsigned long long cpu1 = now_ns(CLOCK_THREAD_CPUTIME_ID), t1 = now_ns(CLOCK_MONOTONIC);
	/* (the system calls at either end, where a loaded machine likes to
	 * preempt the thread: stalls like the spin's) */
	if (t1 - last > GAP_NS)
		gap(&st, last, t1);
	edges(&st, t0, t1, &head, &tail);
	ERL_NIF_TERM ret = enif_make_ulong(env, x);
	record(t0, t1, cpu1 - cpu0, us, head, tail);
	return ret;
}

/* Holds its scheduler without using it: nanosleep(Us), off the CPU (a
 * NIF doing blocking I/O).  Recorded like the spinning calls. */
__attribute__((noinline)) ERL_NIF_TERM xb_sched_sleep_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	unsigned long long t0 = now_ns(CLOCK_MONOTONIC);
	long us;
	if (argc != 1 || !enif_get_long(env, argv[0], &us) || us < 0 || us > 10000000)
		return enif_make_badarg(env);
	unsigned long long cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
	unsigned long long cpu1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	record(t0, now_ns(CLOCK_MONOTONIC), cpu1 - cpu0, us, 0, 0);
	return enif_make_atom(env, "ok");
}

static ERL_NIF_TERM raw_calls_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	(void)argc;
	(void)argv;
	ERL_NIF_TERM list = enif_make_list(env, 0);
	pthread_mutex_lock(&lock);
	unsigned long long first = nrec > NREC ? nrec - NREC : 0;
	for (unsigned long long i = nrec; i-- > first;) {
		struct rec *r = &recs[i % NREC];
		ERL_NIF_TERM t = enif_make_tuple6(env, enif_make_uint64(env, r->start), enif_make_uint64(env, r->end),
						  enif_make_uint64(env, r->cpu), enif_make_uint64(env, r->us),
						  enif_make_uint64(env, r->head), enif_make_uint64(env, r->tail));
		list = enif_make_list_cell(env, t, list);
	}
	pthread_mutex_unlock(&lock);
	return list;
}

/* The calling scheduler thread's CPU time (ns): xb_split's CPU clock
 * (xb_split:cpu_clock/0), which an OS preemption does not advance. */
static ERL_NIF_TERM thread_cpu_ns_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	(void)argc;
	(void)argv;
	return enif_make_uint64(env, now_ns(CLOCK_THREAD_CPUTIME_ID));
}

static ErlNifFunc funcs[] = {
	{ "spin", 1, xb_sched_spin_nif, 0 },
	{ "thread_cpu_ns", 0, thread_cpu_ns_nif, 0 },
	{ "sleep", 1, xb_sched_sleep_nif, 0 },
	{ "raw_calls", 0, raw_calls_nif, 0 },
};

ERL_NIF_INIT(xb_sched_nif, funcs, NULL, NULL, NULL, NULL)

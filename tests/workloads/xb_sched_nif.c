/* xb_sched_nif.c - a NIF that holds its scheduler for as long as asked
 * (tests/workloads/xb_sched_nif.erl), and records what each long call
 * really took (and each short one the machine stretched): the truth the
 * long-call report is checked against.
 *
 * Built by the test (gcc -shared -fPIC) against the target VM's own
 * erl_nif.h.  The spinning functions are global and never inlined, so
 * their names are on the sampled stacks. */
#include <erl_nif.h>
#include <pthread.h>
#include <time.h>

/* Calls asked to last this long are recorded, and every call that took
 * longer than LATE_NS (a short call stretched by the machine: the thread
 * preempted in the middle of it). */
#define RECORD_US 10000
#define LATE_NS 1000000ull
#define NREC 4096

static struct rec {
	unsigned long long start, end, cpu, us;
} recs[NREC];
static unsigned long long nrec;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long now_ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* A call that started at T0 ends now (the last thing it does): recorded
 * when asked for RECORD_US or more, or stretched past LATE_NS. */
static void record(unsigned long long t0, unsigned long long cpu, long us)
{
	pthread_mutex_lock(&lock);
	unsigned long long t1 = now_ns(CLOCK_MONOTONIC);
	if (us >= RECORD_US || t1 - t0 >= LATE_NS) {
		recs[nrec % NREC] = (struct rec){ t0, t1, cpu, (unsigned long long)us };
		nrec++;
	}
	pthread_mutex_unlock(&lock);
}

/* Arithmetic the compiler cannot drop. */
__attribute__((noinline)) unsigned long xb_sched_work(unsigned long x)
{
	for (int i = 0; i < 2000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

__attribute__((noinline)) unsigned long xb_sched_spin(unsigned long long end)
{
	unsigned long x = 1;
	do
		x = xb_sched_work(x);
	while (now_ns(CLOCK_MONOTONIC) < end);
	return x;
}

__attribute__((noinline)) ERL_NIF_TERM xb_sched_spin_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	long us;
	if (argc != 1 || !enif_get_long(env, argv[0], &us) || us < 0 || us > 10000000)
		return enif_make_badarg(env);
	/* The call's real length: t0 first thing, t1 last thing (the CPU-time
	 * clock is a system call, where a loaded machine likes to preempt the
	 * thread: it must lie inside [t0, t1]). */
	unsigned long long t0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	unsigned long x = xb_sched_spin(t0 + (unsigned long long)us * 1000ull);
	unsigned long long cpu1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	ERL_NIF_TERM r = enif_make_ulong(env, x);
	record(t0, cpu1 - cpu0, us);
	return r;
}

/* Holds its scheduler without using it: nanosleep(Us), off the CPU (a
 * NIF doing blocking I/O).  Recorded like the spinning calls. */
__attribute__((noinline)) ERL_NIF_TERM xb_sched_sleep_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	long us;
	if (argc != 1 || !enif_get_long(env, argv[0], &us) || us < 0 || us > 10000000)
		return enif_make_badarg(env);
	unsigned long long t0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
	unsigned long long cpu1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	record(t0, cpu1 - cpu0, us);
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
		ERL_NIF_TERM t = enif_make_tuple4(env, enif_make_uint64(env, r->start), enif_make_uint64(env, r->end),
						  enif_make_uint64(env, r->cpu), enif_make_uint64(env, r->us));
		list = enif_make_list_cell(env, t, list);
	}
	pthread_mutex_unlock(&lock);
	return list;
}

static ErlNifFunc funcs[] = {
	{ "spin", 1, xb_sched_spin_nif, 0 },
	{ "sleep", 1, xb_sched_sleep_nif, 0 },
	{ "raw_calls", 0, raw_calls_nif, 0 },
};

ERL_NIF_INIT(xb_sched_nif, funcs, NULL, NULL, NULL, NULL)

/* xb_nif.c - native code that appears after the profiler attached.
 *
 * Compiled by the test (gcc -shared -fPIC, the target's erl_nif.h) and
 * loaded by xb_nif:load/1 while erlang-sample runs, so the shared object
 * is mapped after erlang-sample reported the VM's modules to libdwfl.
 *
 *   spin(Us)         burns Us microseconds in xb_nif_spin(), called from
 *                    the NIF xb_nif_spin_nif() on the calling scheduler
 *   spin_dirty(Us)   the same NIF registered as a dirty CPU NIF: it runs on
 *                    a dirty CPU scheduler
 *   thread_start()   creates a thread (enif_thread_create, "xb_nif_burner")
 *                    spinning in xb_nif_thread_burn() until thread_stop()
 *   thread_stop()    stops and joins it
 *   thread_cpu_us()  CPU time (CLOCK_THREAD_CPUTIME_ID, microseconds) the
 *                    last stopped thread used, from its creation to its
 *                    stop: test_promises' ground truth for how much of it
 *                    was sampled
 *
 * The burning functions are global and never inlined so their names are in
 * the .so's symbol table and on the sampled stacks. */
#include <erl_nif.h>
#include <time.h>

/* -DXB_NIF_B builds the replacement library of
 * test_nif_library_replaced_while_sampling: the same code under other
 * names, so that a frame named from the wrong file shows. */
#ifdef XB_NIF_B
#define xb_nif_work xb_nif_work_b
#define xb_nif_spin xb_nif_spin_b
#define xb_nif_spin_nif xb_nif_spin_nif_b
#endif

/* -DXB_NIF_EVIL: one more exported function, whose name the test rewrites
 * in the built file (Q to ESC, Z to a newline: a symbol name the target
 * controls, as any NIF library's author does) for test_blame_close_names_clean. */
#ifdef XB_NIF_EVIL
void xb_evil_Q_red_Z_next(void);
void xb_evil_Q_red_Z_next(void)
{
}
#endif

static volatile int stop_flag;
static int running;
static ErlNifTid burner;
static unsigned long long burner_cpu_us;

static unsigned long long now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (unsigned long long)t.tv_sec * 1000000ull + (unsigned long long)t.tv_nsec / 1000;
}

/* Arithmetic the compiler cannot drop; most samples land here. */
__attribute__((noinline)) unsigned long xb_nif_work(unsigned long x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

__attribute__((noinline)) unsigned long xb_nif_spin(long us)
{
	unsigned long long end = now_us() + (unsigned long long)us;
	unsigned long x = 1;
	do
		x = xb_nif_work(x);
	while (now_us() < end);
	return x;
}

/* Its frame holds 8 KiB, touched, so the thread runs that far below the
 * top of its stack on resident pages, and every sample's user-stack copy
 * (16 KiB asked for) is full: a thread that is not a scheduler starts with
 * a small ring, and such samples fill it past half within one drain
 * interval, which is what makes erlang-sample give it a big one
 * (test_nif_loaded_after_attach: "rings enlarged").  Without it the kernel
 * copied only up to the first page not yet faulted in (it cannot fault in
 * the sampling interrupt), a few hundred bytes to a few KiB, and whether
 * the small ring ever got half full depended on the drain loop being late
 * (an ASan run beside another test: never). */
__attribute__((noinline)) void *xb_nif_thread_burn(void *arg)
{
	volatile char frame[8 << 10];
	for (size_t i = 0; i < sizeof(frame); i += 64) /* its pages resident: the kernel */
		frame[i] = 0;                           /* copies no page it would fault in */
	unsigned long x = (unsigned long)arg;
	while (!stop_flag)
		x = xb_nif_work(x);
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	burner_cpu_us = (unsigned long long)t.tv_sec * 1000000ull + (unsigned long long)t.tv_nsec / 1000;
	return (void *)x;
}

static ERL_NIF_TERM xb_nif_spin_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	long us;
	if (argc != 1 || !enif_get_long(env, argv[0], &us) || us < 0 || us > 10000)
		return enif_make_badarg(env);
	return enif_make_ulong(env, xb_nif_spin(us));
}

static ERL_NIF_TERM thread_start_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	(void)argc;
	(void)argv;
	if (running)
		return enif_make_atom(env, "already_running");
	stop_flag = 0;
	if (enif_thread_create("xb_nif_burner", &burner, xb_nif_thread_burn, (void *)1, NULL) != 0)
		return enif_make_atom(env, "error");
	running = 1;
	return enif_make_atom(env, "ok");
}

static ERL_NIF_TERM thread_stop_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	(void)argc;
	(void)argv;
	if (running) {
		stop_flag = 1;
		enif_thread_join(burner, NULL);
		running = 0;
	}
	return enif_make_atom(env, "ok");
}

static ERL_NIF_TERM thread_cpu_us_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
	(void)argc;
	(void)argv;
	return enif_make_uint64(env, burner_cpu_us);
}

static ErlNifFunc funcs[] = {
	{ "spin", 1, xb_nif_spin_nif, 0 },
	{ "spin_dirty", 1, xb_nif_spin_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND },
	{ "thread_start", 0, thread_start_nif, 0 },
	{ "thread_stop", 0, thread_stop_nif, 0 },
	{ "thread_cpu_us", 0, thread_cpu_us_nif, 0 },
};

ERL_NIF_INIT(xb_nif, funcs, NULL, NULL, NULL, NULL)

%% xb_sched_nif - Erlang side of xb_sched_nif.c (a NIF library the test
%% compiles against the target VM's own erl_nif.h).
%%
%%   load(Path)   erlang:load_nif(Path, 0) (Path without ".so")
%%   spin(Us)     burns Us microseconds of wall time in the NIF
%%                xb_sched_spin_nif (on the calling scheduler); calls asked
%%                for 10 ms or more, and calls that took 1 ms or more (a
%%                short call stretched by a preempted thread), are recorded
%%                with their real length
%%   sleep(Us)    holds the calling scheduler for Us microseconds off the
%%                CPU (nanosleep in the NIF xb_sched_sleep_nif: blocking
%%                I/O's shape); recorded as spin's calls are
%%   thread_cpu_ns()  the calling scheduler thread's CPU time, ns
%%                (CLOCK_THREAD_CPUTIME_ID): xb_split's CPU clock
%%   calls()      the recorded calls, oldest first, as text lines
%%                "call START_NS END_NS CPU_NS US HEAD_NS TAIL_NS"
%%                (CLOCK_MONOTONIC, the clock of the sample times; CPU time
%%                of the calling thread during the call; the length asked
%%                for; for spin, HEAD: from its start to the end of its
%%                first stretch of 1.1 ms on a CPU, TAIL: from the start of
%%                its last such stretch to its end, 1100000 each where the
%%                thread never left the CPU, 18446744073709551615 where it
%%                left too often to say (xb_sched_nif.c); 0 for sleep); the
%%                last 4096
-module(xb_sched_nif).
-export([load/1, spin/1, sleep/1, thread_cpu_ns/0, calls/0]).

load(Path) -> erlang:load_nif(Path, 0).

spin(_Us) -> erlang:nif_error(nif_not_loaded).

sleep(_Us) -> erlang:nif_error(nif_not_loaded).

thread_cpu_ns() -> erlang:nif_error(nif_not_loaded).

calls() ->
    [io_lib:format("call ~b ~b ~b ~b ~b ~b~n", [S, E, C, Us, H, T]) || {S, E, C, Us, H, T} <- raw_calls()].

raw_calls() -> erlang:nif_error(nif_not_loaded).

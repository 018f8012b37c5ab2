%% xb_split - one process whose CPU time is split between two functions in a
%% known ratio, for checking that a sampler attributes time correctly.
%%
%%   xb_split:start(HotPct)   HotPct: integer 0..100.  Spawns ONE process,
%%                            registered as `xb_split`, that runs forever in
%%                            cycles of about ?UNITS work units (each cycle
%%                            stretched at random, both parts alike): HotPct
%%                            of them in hot_a/1, the rest in hot_b/1.  A unit is the
%%                            same block of arithmetic in both, so the CPU
%%                            split is HotPct : 100 - HotPct by construction
%%                            (where a unit costs the same in both: times/0),
%%                            however much CPU the VM gets (a machine
%%                            saturated by other programs included).  It never
%%                            waits: it is always on a CPU or runnable (give
%%                            the VM at least one scheduler for it).  Returns
%%                            the pid.  Replaces a running xb_split.
%%   xb_split:start()         start(80).
%%   xb_split:stop()          kill it.
%%   xb_split:times()         {NsInHotA, NsInHotB}: the time the process has
%%                            spent in each (its own clock, summed per call
%%                            since it started).  The measured truth for a
%%                            sampler: "by construction" assumes a unit costs
%%                            the same in both, which code placement (the JIT
%%                            chooses it anew per VM) need not keep on every
%%                            CPU (CI once sampled 81.7/18.3 for 75/25).
%%                            Wall time: a call the OS preempts counts the
%%                            wait as its own, so on a saturated machine the
%%                            sums wander (3-8 points seen with the VM on one
%%                            CPU and two busy loops on each); measure on a
%%                            quiet one: what a unit costs does not change.
%%   xb_split:cpu_clock()     from now on also time each part by the CPU time
%%                            of the scheduler thread running it
%%                            (xb_sched_nif:thread_cpu_ns/0: load that NIF
%%                            first), which an OS preemption does not
%%                            advance: the truth on a saturated machine.
%%   xb_split:cpu_times()     {NsInHotA, NsInHotB, Cycles, Discarded}: CPU
%%                            time in each since cpu_clock/0 (or since the
%%                            process started, if later), the cycles so
%%                            timed, and those not counted because the
%%                            process changed schedulers (threads) between
%%                            two reads of the thread's clock.
%%
%% hot_a/1 and hot_b/1 have identical bodies: a block of 256 inline
%% multiply/add/mask steps, repeated N times (a tail call per unit: the
%% stack stays flat).  No BIF calls, no allocation (no GC) in the hot loops,
%% so CPU samples of the process land in hot_a/1 for HotPct % of its time and
%% in hot_b/1 for the rest.
-module(xb_split).
-export([start/0, start/1, stop/0, times/0, cpu_clock/0, cpu_times/0, init/1, phase/2, hot_a/1,
         hot_b/1]).

-define(UNITS, 2000). %% work units per cycle
%% 256 multiply/add/mask steps, expanded inline (no call).
-define(M1(X), ((((X) * 7) + 13) band 16#FFFFFF)).
-define(M4(X), ?M1(?M1(?M1(?M1(X))))).
-define(M16(X), ?M4(?M4(?M4(?M4(X))))).
-define(M64(X), ?M16(?M16(?M16(?M16(X))))).
-define(M256(X), ?M64(?M64(?M64(?M64(X))))).

start() -> start(80).

start(HotPct) when is_integer(HotPct), HotPct >= 0, HotPct =< 100 ->
    stop(),
    Pid = spawn(?MODULE, init, [HotPct]),
    register(xb_split, Pid),
    Pid.

stop() ->
    case whereis(xb_split) of
        undefined -> ok;
        Pid ->
            %% gone (and unregistered) before a start/1 registers the next
            unlink(Pid),
            MRef = monitor(process, Pid),
            exit(Pid, kill),
            receive {'DOWN', MRef, process, Pid, _} -> ok end
    end.

times() ->
    T = persistent_term:get({?MODULE, times}),
    {atomics:get(T, 1), atomics:get(T, 2)}.

cpu_clock() ->
    persistent_term:put({?MODULE, cpu}, true),
    ok.

cpu_times() ->
    T = persistent_term:get({?MODULE, times}),
    {atomics:get(T, 3), atomics:get(T, 4), atomics:get(T, 5), atomics:get(T, 6)}.

%% The counters are made anew by each process (a start/1 that replaces one
%% resets them) and found through persistent_term, so that a test can read
%% them without asking the busy process anything.
init(HotPct) ->
    T = atomics:new(6, [{signed, false}]),
    persistent_term:put({?MODULE, times}, T),
    phase({HotPct * ?UNITS div 100, (100 - HotPct) * ?UNITS div 100, T}, 12345).

%% One cycle, then the next (tail call: the stack stays flat).  Each cycle
%% is stretched by a pseudo-random factor in [0.5, 1.5) (an inline LCG:
%% no call), the same for both functions: the ratio holds in every cycle,
%% and cycles of varying length never line up with a sampler's period
%% (a fixed cycle could alias with it).  Each part is timed (three clock
%% reads a cycle of about a millisecond: too rare to show in a profile).
phase({A, B, T} = P, Seed) ->
    S1 = (Seed * 1103515245 + 12345) band 16#7FFFFFFF,
    R = 512 + (S1 band 1023),
    Cpu = persistent_term:get({?MODULE, cpu}, false),
    C0 = cpu_now(Cpu),
    T0 = erlang:monotonic_time(nanosecond),
    hot_a(A * R div 1024),
    T1 = erlang:monotonic_time(nanosecond),
    C1 = cpu_now(Cpu),
    hot_b(B * R div 1024),
    T2 = erlang:monotonic_time(nanosecond),
    C2 = cpu_now(Cpu),
    atomics:add(T, 1, T1 - T0),
    atomics:add(T, 2, T2 - T1),
    cpu_add(T, C0, C1, C2),
    ?MODULE:phase(P, S1).

%% {Scheduler, ThreadCpuNs, Scheduler}: the thread's clock is only
%% comparable with itself, so each read names its scheduler on both sides.
cpu_now(false) -> none;
cpu_now(true) ->
    S0 = erlang:system_info(scheduler_id),
    C = xb_sched_nif:thread_cpu_ns(),
    {S0, C, erlang:system_info(scheduler_id)}.

cpu_add(T, {S, C0, S}, {S, C1, S}, {S, C2, S}) when C1 >= C0, C2 >= C1 ->
    atomics:add(T, 3, C1 - C0),
    atomics:add(T, 4, C2 - C1),
    atomics:add(T, 5, 1);
cpu_add(T, {_, _, _}, _, _) -> atomics:add(T, 6, 1);
cpu_add(_, _, _, _) -> ok.

hot_a(0) -> ok;
hot_a(N) ->
    X = ?M256(N band 16#FFFFFF),
    case X =:= N of
        true -> put(xb_split_hit, X), hot_a(N - 1);
        false -> hot_a(N - 1)
    end.

hot_b(0) -> ok;
hot_b(N) ->
    X = ?M256(N band 16#FFFFFF),
    case X =:= N of
        true -> put(xb_split_hit, X), hot_b(N - 1);
        false -> hot_b(N - 1)
    end.

%% xb_split - one process whose CPU time is split between two functions in a
%% known ratio, for checking that a sampler attributes time correctly.
%%
%%   xb_split:start(HotPct)   HotPct: integer 0..100.  Spawns ONE process,
%%                            registered as `xb_split`, that runs forever in
%%                            wall-clock phases of 100 ms: the first HotPct % of
%%                            each phase busy in hot_a/1, the rest busy in
%%                            hot_b/1.  It never waits: it is always on a CPU
%%                            (give the VM at least one scheduler for it).
%%                            Returns the pid.  Replaces a running xb_split.
%%   xb_split:start()         start(80).
%%   xb_split:stop()          kill it.
%%
%% hot_a/1 and hot_b/1 have identical bodies: one clock read
%% (erlang:monotonic_time/0, a BIF called from the function itself), then a
%% block of 256 inline multiply/add/mask steps, repeated until the phase
%% ends.  So CPU samples of the process land in hot_a/1 (or the clock BIF
%% called from it) for HotPct % of the time and in hot_b/1 for the rest.
%% There are no other calls and no allocation in the hot loops (no GC).
%% Note: erlang:process_info(P, current_function) is biased (it is answered
%% where the process yields, often in the clock BIF; on the interpreter
%% always); sample with an OS-level profiler to see the real split.
-module(xb_split).
-export([start/0, start/1, stop/0, init/1, phase/1, hot_a/1, hot_b/1]).

-define(PHASE_MS, 100).
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
        Pid -> unlink(Pid), exit(Pid, kill), ok
    end.

init(HotPct) ->
    Phase = erlang:convert_time_unit(?PHASE_MS, millisecond, native),
    phase({HotPct * Phase div 100, Phase}).

%% One 100 ms phase, then the next (tail call: the stack stays flat).
phase({HotLen, Phase} = P) ->
    T0 = erlang:monotonic_time(),
    hot_a(T0 + HotLen),
    hot_b(T0 + Phase),
    ?MODULE:phase(P).

hot_a(End) ->
    Now = erlang:monotonic_time(),
    if
        Now >= End -> ok;
        true ->
            X = ?M256(Now band 16#FFFFFF),
            case X =:= End of
                true -> put(xb_split_hit, X), hot_a(End);
                false -> hot_a(End)
            end
    end.

hot_b(End) ->
    Now = erlang:monotonic_time(),
    if
        Now >= End -> ok;
        true ->
            X = ?M256(Now band 16#FFFFFF),
            case X =:= End of
                true -> put(xb_split_hit, X), hot_b(End);
                false -> hot_b(End)
            end
    end.

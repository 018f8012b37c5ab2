%% xb_mem_grow - one process that keeps adding to a long-lived structure,
%% one that churns short-lived garbage.
%%
%%   xb_mem_grow:start()   spawns, registered:
%%       xb_grow   every 50 ms adds 2,000 tuples {N, N} to a list it keeps
%%                 (about 80 KB per step, 1.6 MB/s): data that survives
%%                 garbage collections, so it ends up in the old heap
%%       xb_churn  builds lists of 2,000 tuples and drops them, a batch every
%%                 millisecond: garbage that no collection keeps; its heap
%%                 size settles within a second
%%                 Returns ok.  Replaces running ones.
%%   xb_mem_grow:start([minor_gc])  the same, but xb_grow runs a minor
%%                 collection after each step (erlang:garbage_collect/2,
%%                 {type, minor}): what the step before added is promoted to
%%                 the old heap 50 ms after it was added, so the old heap
%%                 holds all but the newest step except in the 50 ms after a
%%                 full sweep (which the collector runs when the old heap
%%                 has no room left, erl_gc.c)
%%   xb_mem_grow:count_full_sweeps()  from now on, counts xb_grow's full-sweep
%%                 collections (erlang:trace/3 garbage_collection:
%%                 gc_major_start) in the registered xb_grow_sweeps; ok
%%   xb_mem_grow:full_sweeps()  how many so far
%%   xb_mem_grow:stop()
-module(xb_mem_grow).
-export([start/0, start/1, stop/0, grow/1, grow/2, churn/1, count_full_sweeps/0, full_sweeps/0]).

start() -> start([]).

start(Opts) ->
    stop(),
    register(xb_grow, spawn(?MODULE, grow, [[], lists:member(minor_gc, Opts)])),
    register(xb_churn, spawn(?MODULE, churn, [0])),
    ok.

stop() ->
    xb_ctl:kill_registered(xb_grow_sweeps),
    xb_ctl:kill_registered(xb_grow),
    xb_ctl:kill_registered(xb_churn).

count_full_sweeps() ->
    xb_ctl:kill_registered(xb_grow_sweeps),
    T = spawn(fun() -> sweeps(0) end),
    register(xb_grow_sweeps, T),
    1 = erlang:trace(whereis(xb_grow), true, [garbage_collection, {tracer, T}]),
    ok.

sweeps(N) ->
    receive
        {trace, _, gc_major_start, _} -> sweeps(N + 1);
        {get, From} -> From ! {full_sweeps, N}, sweeps(N);
        _ -> sweeps(N)
    end.

full_sweeps() ->
    xb_grow_sweeps ! {get, self()},
    receive {full_sweeps, N} -> N after 5000 -> error(no_answer) end.

grow(Acc) -> grow(Acc, false).

grow(Acc, Minor) ->
    receive stop -> ok after 50 -> ok end,
    N = length(Acc),
    Acc1 = lists:foldl(fun(I, A) -> [{N + I, I} | A] end, Acc, lists:seq(1, 2000)),
    Minor andalso erlang:garbage_collect(self(), [{type, minor}]),
    grow(Acc1, Minor).

churn(K) ->
    Garbage = [{I, K} || I <- lists:seq(1, 2000)],
    _ = length(Garbage),
    receive stop -> ok after 1 -> churn(K + 1) end.

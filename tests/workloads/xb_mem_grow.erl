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
%%   xb_mem_grow:stop()
-module(xb_mem_grow).
-export([start/0, stop/0, grow/1, churn/1]).

start() ->
    stop(),
    register(xb_grow, spawn(?MODULE, grow, [[]])),
    register(xb_churn, spawn(?MODULE, churn, [0])),
    ok.

stop() ->
    xb_ctl:kill_registered(xb_grow),
    xb_ctl:kill_registered(xb_churn).

grow(Acc) ->
    receive stop -> ok after 50 -> ok end,
    N = length(Acc),
    grow(lists:foldl(fun(I, A) -> [{N + I, I} | A] end, Acc, lists:seq(1, 2000))).

churn(K) ->
    Garbage = [{I, K} || I <- lists:seq(1, 2000)],
    _ = length(Garbage),
    receive stop -> ok after 1 -> churn(K + 1) end.

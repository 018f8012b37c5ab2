%% xb_longbif - a BIF that holds its scheduler for milliseconds per call.
%%
%%   xb_longbif:start(N)   spawns a process registered as `xb_longbif`
%%                         running loop/3: erlang:external_size/1 of a
%%                         list of N small integers, back to back, from the
%%                         same caller.  external_size does not trap
%%                         (erts/emulator/beam/external.c, external_size_1:
%%                         "Unexpected yield") and allocates nothing but
%%                         its result, so each call is one stretch of C
%%                         code on a normal scheduler, of a length set by N
%%                         alone (no garbage collection between calls, no
%%                         allocator carrier to map: tuple_to_list/1 of a
%%                         big tuple took 0.2 ms or 4 ms by where its heap
%%                         fragment came from).  The list is collected into
%%                         the old heap first.  Each
%%                         call is timed around it with the OS's monotonic
%%                         clock (erlang:system_info(os_monotonic_time_source)
%%                         reads CLOCK_MONOTONIC, the clock of perf's
%%                         sample times).  Returns the pid.
%%   xb_longbif:calls()    the calls timed so far (the first 4096), oldest
%%                         first, as text lines "call START_NS END_NS".
%%   xb_longbif:stop()     kill it.
-module(xb_longbif).
-export([start/1, calls/0, stop/0, loop/3]).

-define(KEEP, 4096).

start(N) ->
    stop(),
    Pid = spawn(fun() -> init(N) end),
    register(xb_longbif, Pid),
    Pid.

stop() -> xb_ctl:kill_registered(xb_longbif).

calls() ->
    xb_longbif ! {calls, self()},
    receive
        {calls, Cs} -> [io_lib:format("call ~b ~b~n", [S, E]) || {S, E} <- Cs]
    after 10000 -> timeout
    end.

init(N) ->
    T = lists:seq(1, N),
    %% twice: the list survives to the old heap
    erlang:garbage_collect(),
    erlang:garbage_collect(),
    loop(T, [], 0).

%% The BIF's result is used after it: a body call, loop/3 on the stack
%% under it.
loop(T, Acc, K) ->
    S = now_ns(),
    Size = erlang:external_size(T),
    E = now_ns(),
    true = Size > 0,
    Acc1 = if K < ?KEEP -> [{S, E} | Acc]; true -> Acc end,
    receive
        {calls, From} -> From ! {calls, lists:reverse(Acc1)}
    after 0 -> ok
    end,
    loop(T, Acc1, K + 1).

now_ns() ->
    {time, T} = lists:keyfind(time, 1, erlang:system_info(os_monotonic_time_source)),
    T.

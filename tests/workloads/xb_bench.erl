%% xb_bench - a fixed unit of CPU work in a loop, counted, for measuring
%% the throughput a VM loses while it is being sampled.
%%
%%   xb_bench:start()   spawns one process (registered xb_bench) that does
%%                      work units forever: 1000 rounds of inline integer
%%                      arithmetic each, then counters:add/3.  Returns ok.
%%   xb_bench:count()   units done so far.
%%   xb_bench:stop()    kill it.
-module(xb_bench).
-export([start/0, stop/0, count/0, loop/2]).

-define(M1(X), ((((X) * 7) + 13) band 16#FFFFFF)).
-define(M4(X), ?M1(?M1(?M1(?M1(X))))).

start() ->
    stop(),
    C = counters:new(1, [write_concurrency]),
    persistent_term:put(xb_bench, C),
    Pid = spawn(?MODULE, loop, [C, 1]),
    register(xb_bench, Pid),
    ok.

stop() ->
    case whereis(xb_bench) of
        undefined -> ok;
        Pid -> exit(Pid, kill), ok
    end.

count() -> counters:get(persistent_term:get(xb_bench), 1).

loop(C, X) ->
    Y = unit(1000, X),
    counters:add(C, 1, 1),
    loop(C, Y).

unit(0, X) -> X;
unit(N, X) -> unit(N - 1, ?M4(X)).

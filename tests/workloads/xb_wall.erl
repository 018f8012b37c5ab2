%% xb_wall - processes in known states, for erlang-sample --wall.
%%
%%   xb_wall:start()   three registered processes:
%%                     xb_wall_busy     computes for ever in spin/1 (never
%%                                      waits: running or runnable);
%%                     xb_wall_waiter   blocked in a receive in wait_here/0,
%%                                      called through outer/0;
%%                     xb_wall_sleeper  in timer:sleep/1 (a receive with a
%%                                      timeout) called from nap/0.
%%                     Returns ok once the waiter and the sleeper wait.
%%   xb_wall:busy(N)   N more processes computing for ever in spin/1,
%%                     registered xb_wall_busy1..N.
%%   xb_wall:stop()    stop them all.
-module(xb_wall).
-export([start/0, busy/1, stop/0, spin/1, outer/0, wait_here/0, nap/0]).

start() ->
    stop(),
    register(xb_wall_busy, spawn(fun() -> spin(0) end)),
    register(xb_wall_waiter, spawn(fun() -> outer() end)),
    register(xb_wall_sleeper, spawn(fun() -> nap() end)),
    wait_until(fun() ->
                       process_info(whereis(xb_wall_waiter), status) =:= {status, waiting} andalso
                           process_info(whereis(xb_wall_sleeper), status) =:= {status, waiting}
               end),
    ok.

busy(N) ->
    [register(busy_name(I), spawn(fun() -> spin(0) end)) || I <- lists:seq(1, N)],
    ok.

busy_name(I) -> list_to_atom("xb_wall_busy" ++ integer_to_list(I)).

stop() ->
    [xb_ctl:kill_registered(N) || N <- [xb_wall_busy, xb_wall_waiter, xb_wall_sleeper]],
    [xb_ctl:kill_registered(N) || N <- registered(), lists:prefix("xb_wall_busy", atom_to_list(N))],
    ok.

%% small integers only (N * 1103515 < 2^52): nothing allocated, no
%% garbage collection, its heap still
spin(N) ->
    spin((N * 1103515 + 12345) rem 2147483648).

outer() ->
    R = wait_here(),
    {done, R}.

wait_here() ->
    receive
        {release, X} -> X
    end.

nap() ->
    timer:sleep(600000),
    nap().

wait_until(F) ->
    case F() of
        true -> ok;
        false -> timer:sleep(10), wait_until(F)
    end.

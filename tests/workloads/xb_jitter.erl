%% xb_jitter - a process that measures how late its own timer wakeups are,
%% to prove that a tool looking at the VM does not pause it (the promise:
%% gdb -p or py-spy dump stop the process; we must not).
%%
%%   xb_jitter:start(Ms)   spawns a process registered as `xb_jitter` that
%%                         sleeps Ms milliseconds (receive ... after Ms) in
%%                         a loop and records how much later than asked
%%                         each wakeup came (erlang:monotonic_time, us).
%%                         Replaces a running one.  Returns the pid.
%%   xb_jitter:window()    {MaxLateUs, Wakeups, P99LateUs} since the last
%%                         call (or start), then starts a new window.
%%   xb_jitter:stop()      kill it.
-module(xb_jitter).
-export([start/1, window/0, stop/0]).

start(Ms) when is_integer(Ms), Ms >= 1 ->
    stop(),
    Pid = spawn(fun() -> loop(Ms, 0, 0, []) end),
    register(xb_jitter, Pid),
    Pid.

stop() ->
    case whereis(xb_jitter) of
        undefined -> ok;
        Pid -> unlink(Pid), exit(Pid, kill), ok
    end.

window() ->
    xb_jitter ! {window, self()},
    receive {xb_jitter, Max, N, P99} -> {Max, N, P99} after 5000 -> timeout end.

loop(Ms, Max, N, Lates) ->
    T0 = erlang:monotonic_time(microsecond),
    receive
        {window, From} ->
            From ! {xb_jitter, Max, N, p99(Lates)},
            loop(Ms, 0, 0, [])
    after Ms ->
        Late = erlang:monotonic_time(microsecond) - T0 - Ms * 1000,
        loop(Ms, max(Max, Late), N + 1, [Late | Lates])
    end.

p99([]) -> 0;
p99(L) ->
    S = lists:sort(L),
    lists:nth(max(1, (length(S) * 99) div 100), S).

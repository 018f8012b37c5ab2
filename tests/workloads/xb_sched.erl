%% xb_sched - workloads of the scheduler views (tests/acceptance/test_sched.py).
%%
%%   ratio(A, B)       two registered workers, `xb_w2` and `xb_w1`, that take
%%                     turns with a token: xb_w2 does A work units and hands
%%                     the token to xb_w1, which does B units and hands it
%%                     back.  Only one of them runs at a time, so their CPU
%%                     shares are A : B by construction, however loaded the
%%                     machine.  Returns {PidOfW2, PidOfW1}.
%%   gc_busy(Sched)    `xb_gcbusy`, bound to normal scheduler Sched, building
%%                     lists of 5,000 one-tuples while it keeps the last one:
%%                     every minor collection copies a live list, so a good
%%                     part of its time is garbage collection (msacc's gc)
%%                     and the rest Erlang code.
%%   busy(Sched)       `xb_busy`, bound to normal scheduler Sched, computing
%%                     forever (never waits).
%%   port_busy(Sched)  `xb_portbusy`, bound to normal scheduler Sched,
%%                     sending 8 KiB UDP datagrams to a local socket nobody
%%                     reads, back to back: gen_udp:send/4 is a
%%                     port_command/2 to the inet driver, whose output runs
%%                     on the caller's scheduler (io.c, call_driver_outputv:
%%                     msacc's port state) and is mostly sendto(2), time in
%%                     the kernel.  A send never waits (a full buffer drops
%%                     the datagram), so the scheduler is never idle.
%%   aux_busy(S, O)    `xb_auxsend`, bound to normal scheduler S, starts
%%                     timers 100 at a time and hands them to `xb_auxrecv`
%%                     on scheduler O, which cancels them there; each
%%                     cancel is queued to the timer's scheduler S, which
%%                     handles it as aux work (msacc's aux state).
%%   mover(Ms, N)      `xb_mover`, computing forever, binds itself to
%%                     scheduler 1, 2, .., N, 1, .. in turn, Ms milliseconds
%%                     each: it migrates between schedulers.
%%   long_nif(Us)      (xb_sched_nif loaded) `xb_long`, bound to scheduler 1,
%%                     calls xb_sched_nif:spin(Us) and then erlang:yield()
%%                     in a loop: every call starts a time slice of its
%%                     own, with the same reductions left.
%%   sleep_nif(Us)     (xb_sched_nif loaded) `xb_sleeper`, bound to scheduler 1,
%%                     calls xb_sched_nif:sleep(Us) (off the CPU) then
%%                     erlang:yield() in a loop.
%%   short_nif(Us)     `xb_short`, bound to scheduler 2, calls
%%                     xb_sched_nif:spin(Us) back to back in one slice (one
%%                     reduction less each call).  Same NIF as xb_long, same
%%                     kind of caller: only the call identity
%%                     (include/xb/erlstack.h, struct xb_call_id) tells one
%%                     call from the next.
%%   window_start()    scheduler_wall_time on, microstate accounting reset
%%                     and on; returns the scheduler_wall_time_all snapshot
%%                     as text, "swt ID ACTIVE TOTAL" lines.
%%   window_end()      the same snapshot, then "msacc TYPE ID STATE TIME"
%%                     lines (time since window_start, perf-counter units),
%%                     and microstate accounting off.
%%   stop()            kill them all.
%%
%% Binding: process_flag(scheduler, N) binds the calling process to the
%% run queue of normal scheduler N (0 unbinds); undocumented, in
%% erts/emulator/beam/bif.c (process_flag_2, am_scheduler) of every
%% release we support.
-module(xb_sched).
-export([ratio/2, busy/1, aux_busy/2, aux_send/1, aux_recv/0, gc_busy/1, gc_loop/1, port_busy/1, port_loop/2, mover/2, long_nif/1, short_nif/1, sleep_nif/1, window_start/0, window_end/0, stop/0,
         worker/2, busy_loop/1, mover_loop/4, long_loop/1, short_loop/1, sleep_loop/1, unit/1]).

-define(UNIT, 20000). %% iterations per work unit (about a millisecond)
-define(NAMES, [xb_w2, xb_w1, xb_busy, xb_gcbusy, xb_portbusy, xb_auxsend, xb_auxrecv, xb_mover, xb_long,
                xb_short]).

ratio(A, B) when is_integer(A), A > 0, is_integer(B), B > 0 ->
    [xb_ctl:kill_registered(N) || N <- [xb_w2, xb_w1]],
    W1 = spawn(?MODULE, worker, [B, undefined]),
    register(xb_w1, W1),
    W2 = spawn(?MODULE, worker, [A, W1]),
    register(xb_w2, W2),
    W1 ! {peer, W2},
    W2 ! token,
    {W2, W1}.

worker(Units, undefined) ->
    receive {peer, Peer} -> worker(Units, Peer) end;
worker(Units, Peer) ->
    receive token -> ok end,
    units(Units),
    Peer ! token,
    worker(Units, Peer).

units(0) -> ok;
units(N) -> _ = unit(?UNIT), units(N - 1).

%% The same block of arithmetic for everybody.
unit(0) -> ok;
unit(N) -> _ = (N * 7 + 13) band 16#FFFFFF, unit(N - 1).

busy(Sched) when is_integer(Sched), Sched > 0 ->
    xb_ctl:kill_registered(xb_busy),
    Pid = spawn(fun() -> process_flag(scheduler, Sched), ?MODULE:busy_loop(0) end),
    register(xb_busy, Pid),
    Pid.

busy_loop(N) -> _ = unit(?UNIT), ?MODULE:busy_loop(N + 1).

gc_busy(Sched) when is_integer(Sched), Sched > 0 ->
    xb_ctl:kill_registered(xb_gcbusy),
    Pid = spawn(fun() -> process_flag(scheduler, Sched), ?MODULE:gc_loop([]) end),
    register(xb_gcbusy, Pid),
    Pid.

gc_loop(Prev) ->
    L = cells(5000, []),
    _ = length(Prev),
    ?MODULE:gc_loop(L).

cells(0, Acc) -> Acc;
cells(N, Acc) -> cells(N - 1, [{N} | Acc]).

port_busy(Sched) when is_integer(Sched), Sched > 0 ->
    xb_ctl:kill_registered(xb_portbusy),
    Pid = spawn(fun() ->
                        process_flag(scheduler, Sched),
                        %% a socket nobody reads: its buffer fills and the
                        %% kernel drops the rest, so a send never waits
                        {ok, Sink} = gen_udp:open(0, [binary, {ip, {127, 0, 0, 1}}, {active, false}]),
                        {ok, To} = inet:port(Sink),
                        {ok, S} = gen_udp:open(0, [binary, {ip, {127, 0, 0, 1}}]),
                        ?MODULE:port_loop(S, {To, binary:copy(<<"x">>, 8192), Sink})
                end),
    register(xb_portbusy, Pid),
    Pid.

port_loop(S, {To, Bin, _} = A) ->
    _ = gen_udp:send(S, {127, 0, 0, 1}, To, Bin),
    ?MODULE:port_loop(S, A).

aux_busy(Sched, Other) when is_integer(Sched), Sched > 0, is_integer(Other), Other > 0 ->
    [xb_ctl:kill_registered(N) || N <- [xb_auxsend, xb_auxrecv]],
    Recv = spawn(fun() -> process_flag(scheduler, Other), ?MODULE:aux_recv() end),
    register(xb_auxrecv, Recv),
    Send = spawn(fun() -> process_flag(scheduler, Sched), ?MODULE:aux_send(Recv) end),
    register(xb_auxsend, Send),
    Send.

%% 100 timers at a time (in the sender's scheduler's timer wheel), sent to
%% the receiver, which cancels them from its own scheduler, then waits
%% until the receiver has done so: the queue stays short
aux_send(Recv) ->
    Recv ! [erlang:start_timer(600000, self(), x) || _ <- lists:seq(1, 100)],
    receive ack -> ok end,
    ?MODULE:aux_send(Recv).

aux_recv() ->
    receive
        Refs -> [erlang:cancel_timer(R, [{async, true}, {info, false}]) || R <- Refs],
                xb_auxsend ! ack
    end,
    ?MODULE:aux_recv().

mover(Ms, N) when is_integer(Ms), Ms > 0, is_integer(N), N > 1 ->
    xb_ctl:kill_registered(xb_mover),
    %% (monotonic time may be negative: start from now)
    Pid = spawn(fun() -> ?MODULE:mover_loop(Ms, N, 0, erlang:monotonic_time(millisecond)) end),
    register(xb_mover, Pid),
    Pid.

mover_loop(Ms, N, I, Until) ->
    Now = erlang:monotonic_time(millisecond),
    case Now >= Until of
        true ->
            process_flag(scheduler, I rem N + 1),
            ?MODULE:mover_loop(Ms, N, I + 1, Now + Ms);
        false ->
            _ = unit(?UNIT div 4),
            ?MODULE:mover_loop(Ms, N, I, Until)
    end.

sleep_nif(Us) ->
    xb_ctl:kill_registered(xb_sleeper),
    L = spawn(fun() -> process_flag(scheduler, 1), ?MODULE:sleep_loop(Us) end),
    register(xb_sleeper, L),
    L.

long_nif(Us) ->
    xb_ctl:kill_registered(xb_long),
    L = spawn(fun() -> process_flag(scheduler, 1), ?MODULE:long_loop(Us) end),
    register(xb_long, L),
    L.

short_nif(Us) ->
    xb_ctl:kill_registered(xb_short),
    S = spawn(fun() -> process_flag(scheduler, 2), ?MODULE:short_loop(Us) end),
    register(xb_short, S),
    S.

%% Not tail calls: the loop stays on the stack under the NIF.
long_loop(Us) ->
    _ = xb_sched_nif:spin(Us),
    erlang:yield(),
    ?MODULE:long_loop(Us).

sleep_loop(Us) ->
    _ = xb_sched_nif:sleep(Us),
    erlang:yield(),
    ?MODULE:sleep_loop(Us).

short_loop(Us) ->
    _ = xb_sched_nif:spin(Us),
    ?MODULE:short_loop(Us).

window_start() ->
    erlang:system_flag(scheduler_wall_time, true),
    erlang:system_flag(microstate_accounting, reset),
    erlang:system_flag(microstate_accounting, true),
    swt_text().

window_end() ->
    Swt = swt_text(),
    Msacc = erlang:statistics(microstate_accounting),
    erlang:system_flag(microstate_accounting, false),
    [Swt,
     [io_lib:format("msacc ~p ~p ~p ~p~n", [Type, Id, State, Time])
      || #{type := Type, id := Id, counters := Counters} <- Msacc,
         {State, Time} <- maps:to_list(Counters)]].

swt_text() ->
    [io_lib:format("swt ~p ~p ~p~n", [Id, Active, Total])
     || {Id, Active, Total} <- lists:sort(erlang:statistics(scheduler_wall_time_all))].

stop() ->
    [xb_ctl:kill_registered(N) || N <- ?NAMES],
    ok.

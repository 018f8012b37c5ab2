%% xb_copy - a sender that spends its time copying a large term into
%% another process's heap (message passing: size_object + copy_struct).
%%
%%   xb_copy:start()       start(1000).  (Measured with perf on stock OTP 25:
%%                         1000 tuples -> ~28% of samples in copy_struct_x and
%%                         ~14% in size_object_x; with 10000 the kernel's
%%                         page clearing for fresh heap fragments dominates.)
%%   xb_copy:start(Size)   builds a list of Size tuples {I, I*2, <<"xb">>, [I]}
%%                         once, then spawns a receiver (registered
%%                         `xb_receiver`) that drops every message and a sender
%%                         (registered `xb_sender`) running send_loop/2, which
%%                         sends the term to the receiver over and over.
%%                         Flow control without waiting: the receiver acks
%%                         every 50 messages (asynchronously); while the
%%                         sender is more than 200 messages ahead of the last
%%                         ack it sends the term to itself instead (the same
%%                         copy, dropped at once).  So the sender never
%%                         waits: it is busy all the time, copying the term
%%                         inside the send BIF called from send_loop/2.  (In OTP 25 a large send
%%                         yields, so process_info current_function often
%%                         shows erlang:bif_return_trap/2.)
%%                         Returns {SenderPid, ReceiverPid}.
%%   xb_copy:start_self(Size)  one process (registered `xb_sender`) that sends
%%                         the same term to itself and receives it, forever,
%%                         in self_loop/1: no other process is involved, so
%%                         the mix of its CPU time (copying, the receive)
%%                         does not depend on how much CPU the VM gets
%%                         (a saturated machine included).  Returns its pid.
%%   xb_copy:stop()        kill both.
-module(xb_copy).
-export([start/0, start/1, start_self/1, stop/0, sender/2, receiver/2, send_loop/2,
         self_sender/1, self_loop/1]).

-define(ACK_EVERY, 50).
-define(MAX_AHEAD, 200).

start() -> start(1000).

start(Size) when is_integer(Size), Size > 0 ->
    stop(),
    R = spawn(?MODULE, receiver, [undefined, 0]),
    register(xb_receiver, R),
    S = spawn(?MODULE, sender, [R, Size]),
    register(xb_sender, S),
    {S, R}.

start_self(Size) when is_integer(Size), Size > 0 ->
    stop(),
    S = spawn(?MODULE, self_sender, [Size]),
    register(xb_sender, S),
    S.

self_sender(Size) ->
    self_loop([{I, I * 2, <<"xb">>, [I]} || I <- lists:seq(1, Size)]).

self_loop(Term) ->
    self() ! {self_copy, Term},
    receive {self_copy, _} -> ok end,
    self_loop(Term).

stop() ->
    [exit(P, kill) || N <- [xb_sender, xb_receiver], (P = whereis(N)) =/= undefined],
    ok.

sender(R, Size) ->
    Term = [{I, I * 2, <<"xb">>, [I]} || I <- lists:seq(1, Size)],
    R ! {sender, self()},
    send_loop(R, {Term, 0, 0}).

%% send_loop(Receiver, {Term, Sent, Acked})
%% When more than MAX_AHEAD messages ahead of the receiver's last ack, the
%% sender does not wait: it sends the term to itself instead (the same copy,
%% dropped at once) until the receiver catches up.
send_loop(R, {Term, Sent, Acked}) when Sent - Acked > ?MAX_AHEAD ->
    self() ! {self_copy, Term},
    receive {self_copy, _} -> ok end,
    receive
        {ack, N} -> send_loop(R, {Term, Sent, N})
    after 0 ->
        send_loop(R, {Term, Sent, Acked})
    end;
send_loop(R, {Term, Sent, Acked}) ->
    R ! {data, Term},
    receive
        {ack, N} -> send_loop(R, {Term, Sent + 1, N})
    after 0 ->
        send_loop(R, {Term, Sent + 1, Acked})
    end.

%% receiver(Sender, Received)
receiver(From, N) ->
    receive
        {sender, S} ->
            receiver(S, N);
        {data, _} when (N + 1) rem ?ACK_EVERY =:= 0, From =/= undefined ->
            From ! {ack, N + 1},
            receiver(From, N + 1);
        {data, _} ->
            receiver(From, N + 1)
    end.

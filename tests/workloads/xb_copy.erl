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
%%   xb_copy:start_sink(Size)  a sender (registered `xb_sender`) that sends
%%                         the term to a sink (registered `xb_receiver`,
%%                         message_queue_data off_heap: the sender copies
%%                         each message into a heap fragment, the sink only
%%                         drops it) in sink_loop/3, forever.  The sink runs
%%                         at priority high, so it drains its queue as soon
%%                         as its scheduler runs (about 20 messages wait);
%%                         every 64 messages the sender looks at the queue
%%                         and, when more than 200 are waiting, sleeps 1 ms.
%%                         So its CPU time is copying (erl_send: size_object
%%                         + copy_struct) and a short loop, in a mix that
%%                         does not depend on how much CPU the VM or the
%%                         sink gets (a saturated machine included), and
%%                         the allocator serves the fragments from a small,
%%                         steady set of blocks.  (With a sink of normal
%%                         priority and a bound of 4000, 1,500-4,700
%%                         messages waited, 20-60 MB of fragments, and on a
%%                         CI machine the sender's copying share wandered by
%%                         +-4 points between 3 s windows; the rest of its
%%                         time is mostly the allocator's, whose free-block
%%                         trees that live set keeps changing.)
%%                         Returns {SenderPid, SinkPid}.
%%   xb_copy:stop()        kill both.
-module(xb_copy).
-export([start/0, start/1, start_sink/1, stop/0, sender/2, receiver/2, send_loop/2,
         sink/0, sink_sender/2, sink_loop/3]).

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

start_sink(Size) when is_integer(Size), Size > 0 ->
    stop(),
    R = spawn_opt(?MODULE, sink, [], [{message_queue_data, off_heap}, {priority, high}]),
    register(xb_receiver, R),
    S = spawn(?MODULE, sink_sender, [R, Size]),
    register(xb_sender, S),
    {S, R}.

sink() ->
    receive _ -> sink() end.

sink_sender(R, Size) ->
    sink_loop(R, [{I, I * 2, <<"xb">>, [I]} || I <- lists:seq(1, Size)], 0).

sink_loop(R, Term, N) when N band 63 =:= 0 ->
    case process_info(R, message_queue_len) of
        {message_queue_len, L} when L > 200 -> receive after 1 -> ok end;
        _ -> ok
    end,
    R ! {data, Term},
    sink_loop(R, Term, N + 1);
sink_loop(R, Term, N) ->
    R ! {data, Term},
    sink_loop(R, Term, N + 1).

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

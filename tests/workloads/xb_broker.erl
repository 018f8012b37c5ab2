%% xb_broker - a message broker in miniature: many processes passing
%% mid-sized terms to each other through gen_server calls and casts, as
%% RabbitMQ's channels and queues do.  Its CPU goes to Erlang code
%% (gen_server, queue handling, building terms), to copying messages
%% (size_object + copy_struct in erts_send_message) and to garbage
%% collection: the work `--blame copy_struct` exists for.
%%
%%   xb_broker:start()              start(4, 8, 4): 4 queues, 8 publishers,
%%                                  4 consumers.
%%   xb_broker:start(Q, P, C)       Q queue processes (gen_servers,
%%                                  registered xb_queue_1..Q), P publishers
%%                                  and C consumers (plain processes,
%%                                  registered xb_pub_N / xb_con_N).
%%                                  A publisher casts {publish, Msg} to a
%%                                  queue, and every 20th message makes a
%%                                  call instead (flow control: it waits for
%%                                  the queue); a consumer calls `fetch` and
%%                                  gets a message back (a second copy), or
%%                                  `empty`, then acks it with a cast.  A
%%                                  queue keeps at most 2000 messages (the
%%                                  rest are dropped and counted), so memory
%%                                  stays flat however the schedulers share
%%                                  the work.  Msg: a map with a header
%%                                  tuple, a list of 20 {Key, Value} tuples,
%%                                  a 48-byte heap binary and a counter:
%%                                  about 1 KiB of heap, copied on every send.
%%   xb_broker:stats()              #{published, fetched, dropped}
%%   xb_broker:stop()               stop everything.
-module(xb_broker).
-behaviour(gen_server).
-export([start/0, start/3, stop/0, stats/0]).
-export([publisher/2, consumer/2, make_msg/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(MAX_QUEUE, 2000).
-define(CALL_EVERY, 20).
-define(KEYS, [{1, k1}, {2, k2}, {3, k3}, {4, k4}, {5, k5}, {6, k6}, {7, k7}, {8, k8}, {9, k9},
               {10, k10}, {11, k11}, {12, k12}, {13, k13}, {14, k14}, {15, k15}, {16, k16},
               {17, k17}, {18, k18}, {19, k19}, {20, k20}]).

start() -> start(4, 8, 4).

start(Q, P, C) when Q > 0, P > 0, C > 0 ->
    stop(),
    Queues = [begin
                  Name = qname(I),
                  {ok, _} = gen_server:start({local, Name}, ?MODULE, [], []),
                  Name
              end || I <- lists:seq(1, Q)],
    [register_spawn(list_to_atom("xb_pub_" ++ integer_to_list(I)),
                    fun() -> publisher(lists:nth(1 + I rem Q, Queues), 0) end)
     || I <- lists:seq(1, P)],
    [register_spawn(list_to_atom("xb_con_" ++ integer_to_list(I)),
                    fun() -> consumer(lists:nth(1 + I rem Q, Queues), 0) end)
     || I <- lists:seq(1, C)],
    ok.

register_spawn(Name, F) ->
    Pid = spawn(F),
    register(Name, Pid),
    Pid.

qname(I) -> list_to_atom("xb_queue_" ++ integer_to_list(I)).

stop() ->
    [xb_ctl:kill_registered(N) || N <- registered(),
                                  lists:prefix("xb_pub_", atom_to_list(N)) orelse
                                  lists:prefix("xb_con_", atom_to_list(N)) orelse
                                  lists:prefix("xb_queue_", atom_to_list(N))],
    ok.

stats() ->
    lists:foldl(fun(N, Acc) ->
                        case lists:prefix("xb_queue_", atom_to_list(N)) of
                            true ->
                                #{published := P, fetched := F, dropped := D} =
                                    gen_server:call(N, stats),
                                #{published => P + maps:get(published, Acc),
                                  fetched => F + maps:get(fetched, Acc),
                                  dropped => D + maps:get(dropped, Acc)};
                            false -> Acc
                        end
                end, #{published => 0, fetched => 0, dropped => 0}, registered()).

%% --- publishers and consumers

make_msg(From, N) ->
    #{header => {msg, From, N, erlang:monotonic_time()},
      props => [{K, I * N} || {I, K} <- ?KEYS],
      payload => <<N:64, 0:320>>,
      n => N}.

publisher(Queue, N) ->
    Msg = make_msg(self(), N),
    case N rem ?CALL_EVERY of
        0 -> ok = gen_server:call(Queue, {publish, Msg}, infinity);
        _ -> gen_server:cast(Queue, {publish, Msg})
    end,
    publisher(Queue, N + 1).

consumer(Queue, N) ->
    case gen_server:call(Queue, fetch, infinity) of
        {msg, #{n := Id}} ->
            gen_server:cast(Queue, {ack, Id}),
            consumer(Queue, N + 1);
        empty ->
            erlang:yield(),
            consumer(Queue, N)
    end.

%% --- the queue (gen_server)

init([]) ->
    {ok, #{q => queue:new(), len => 0, published => 0, fetched => 0, dropped => 0, acked => 0}}.

handle_call({publish, Msg}, _From, S) ->
    {reply, ok, enqueue(Msg, S)};
handle_call(fetch, _From, S = #{q := Q, len := L, fetched := F}) ->
    case queue:out(Q) of
        {{value, Msg}, Q2} -> {reply, {msg, Msg}, S#{q := Q2, len := L - 1, fetched := F + 1}};
        {empty, _} -> {reply, empty, S}
    end;
handle_call(stats, _From, S) ->
    {reply, maps:with([published, fetched, dropped], S), S}.

handle_cast({publish, Msg}, S) ->
    {noreply, enqueue(Msg, S)};
handle_cast({ack, _Id}, S = #{acked := A}) ->
    {noreply, S#{acked := A + 1}}.

handle_info(_, S) -> {noreply, S}.

enqueue(_Msg, S = #{len := L, dropped := D}) when L >= ?MAX_QUEUE ->
    S#{dropped := D + 1};
enqueue(Msg, S = #{q := Q, len := L, published := P}) ->
    S#{q := queue:in(Msg, Q), len := L + 1, published := P + 1}.

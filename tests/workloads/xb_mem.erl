%% xb_mem - processes with known memory figures, and the VM's own view of
%% them, for erlang-heapsample's tests.
%%
%%   xb_mem:start()        start([]).
%%   xb_mem:start(Opts)    spawns four registered processes and returns once
%%                         they are waiting (their figures held steady):
%%       xb_mem_list   holds a list of small integers of list_mb (20) MB
%%                     (16 bytes per cons cell), built and then compacted by
%%                     a full garbage collection
%%       xb_mem_queue  has 50,000 messages {msg, N, <<"payload">>} queued that
%%                     its receive never matches
%%       xb_mem_bins   holds bins (200) refc binaries of 1 MiB each (off-heap)
%%       xb_mem_deep   blocked in a receive under depth (100,000) non-tail
%%                     recursive calls: a deep stack
%%                     Opts: [{list_mb, N}, {bins, N}, {depth, N}, {msgs, N}].
%%   xb_mem:stop()         kill them.
%%   xb_mem:truth(Names)   one line per registered process:
%%                         "NAME PID MEMORY HEAP_SIZE TOTAL_HEAP_SIZE STACK_SIZE
%%                          MESSAGE_QUEUE_LEN BINARY_BYTES REDUCTIONS STATUS"
%%                         from process_info/2 (BINARY_BYTES: the sizes in
%%                         process_info(P, binary) summed).
%%   xb_mem:all_truth()    the same for every process, NAME "-" when it has none.
%%   xb_mem:alloc_truth(A) "MBCS_CARRIERS_BYTES MBCS_BLOCKS_BYTES SBCS_CARRIERS_BYTES
%%                         SBCS_BLOCKS_BYTES" of erlang:system_info({allocator, A})
%%                         summed over instances; mbcs include mbcs_pool (as
%%                         recon_alloc counts "current"); blocks of every type.
%%   xb_mem:usage(A)       blocks / carriers of A as a float (the same sums).
-module(xb_mem).
-export([start/0, start/1, stop/0, names/0, truth/1, all_truth/0, ident/0, alloc_truth/1, usage/1,
         list_holder/1, queue_holder/0, bin_holder/1, deep/1, wait_waiting/2]).

names() -> [xb_mem_list, xb_mem_queue, xb_mem_bins, xb_mem_deep].

start() -> start([]).

start(Opts) ->
    stop(),
    ListMB = proplists:get_value(list_mb, Opts, 20),
    Bins = proplists:get_value(bins, Opts, 200),
    Depth = proplists:get_value(depth, Opts, 100000),
    Msgs = proplists:get_value(msgs, Opts, 50000),
    L = spawn(?MODULE, list_holder, [ListMB * 1024 * 1024 div 16]),
    register(xb_mem_list, L),
    Q = spawn(?MODULE, queue_holder, []),
    register(xb_mem_queue, Q),
    [Q ! {msg, N, <<"payload">>} || N <- lists:seq(1, Msgs)],
    B = spawn(?MODULE, bin_holder, [Bins]),
    register(xb_mem_bins, B),
    D = spawn(?MODULE, deep, [Depth]),
    register(xb_mem_deep, D),
    true = wait_waiting([L, B, D], 600),
    wait_queue(Q, Msgs, 600),
    true = wait_waiting([Q], 600),
    ok.

stop() ->
    [xb_ctl:kill_registered(N) || N <- names()],
    ok.

list_holder(N) ->
    List = lists:seq(1, N),
    erlang:garbage_collect(),
    receive stop -> length(List) end.

queue_holder() ->
    receive stop -> ok end.

bin_holder(N) ->
    Bins = [binary:copy(<<I:8>>, 1024 * 1024) || I <- lists:seq(1, N)],
    erlang:garbage_collect(),
    receive stop -> length(Bins) end.

deep(0) -> receive stop -> 0 end;
deep(N) -> 1 + deep(N - 1).

wait_waiting(_Pids, 0) -> false;
wait_waiting(Pids, Tries) ->
    case lists:all(fun(P) -> process_info(P, status) =:= {status, waiting} end, Pids) of
        true -> timer:sleep(100),
                lists:all(fun(P) -> process_info(P, status) =:= {status, waiting} end, Pids)
                    orelse wait_waiting(Pids, Tries - 1);
        false -> timer:sleep(50), wait_waiting(Pids, Tries - 1)
    end.

wait_queue(_Q, _N, 0) -> false;
wait_queue(Q, N, Tries) ->
    case process_info(Q, message_queue_len) of
        {message_queue_len, N} -> true;
        _ -> timer:sleep(50), wait_queue(Q, N, Tries - 1)
    end.

truth(Names) ->
    iolist_to_binary([line(atom_to_list(N), whereis(N)) || N <- Names]).

all_truth() ->
    iolist_to_binary([line(case process_info(P, registered_name) of
                               {registered_name, N} -> atom_to_list(N);
                               _ -> "-"
                           end, P) || P <- processes()]).

line(_Name, undefined) -> [];
line(Name, P) ->
    case process_info(P, [memory, heap_size, total_heap_size, stack_size, message_queue_len,
                          binary, reductions, status]) of
        undefined -> [];
        [{memory, M}, {heap_size, H}, {total_heap_size, T}, {stack_size, S},
         {message_queue_len, Q}, {binary, Bins}, {reductions, R}, {status, St}] ->
            B = lists:sum([Sz || {_, Sz, _} <- Bins]),
            io_lib:format("~s ~s ~p ~p ~p ~p ~p ~p ~p ~p~n",
                          [Name, pid_to_list(P), M, H, T, S, Q, B, R, St])
    end.

%% One line per process: pid, registered name (or -), initial call,
%% current function, status; as process_info/2 gives them.
ident() ->
    iolist_to_binary([ident_line(P) || P <- processes()]).

ident_line(P) ->
    case process_info(P, [registered_name, initial_call, current_function, status]) of
        [{registered_name, R}, {initial_call, I}, {current_function, C}, {status, St}] ->
            io_lib:format("~s ~s ~s ~s ~p~n", [pid_to_list(P), case R of [] -> "-"; _ -> atom_to_list(R) end,
                                               mfa_text(I), mfa_text(C), St]);
        _ -> []
    end.

mfa_text({M, F, A}) -> io_lib:format("~s:~s/~p", [M, F, A]);
mfa_text(_) -> "-".

alloc_truth(A) ->
    {MC, MB, SC, SB} = sums(A),
    iolist_to_binary(io_lib:format("~p ~p ~p ~p", [MC, MB, SC, SB])).

usage(A) ->
    {MC, MB, SC, SB} = sums(A),
    case MC + SC of
        0 -> 0.0;
        C -> (MB + SB) / C
    end.

sums(A) ->
    case erlang:system_info({allocator, A}) of
        Insts when is_list(Insts) ->
            lists:foldl(
              fun({instance, _, Props}, {MC, MB, SC, SB}) ->
                      Mbcs = proplists:get_value(mbcs, Props, []),
                      Pool = proplists:get_value(mbcs_pool, Props, []),
                      Sbcs = proplists:get_value(sbcs, Props, []),
                      {MC + csize(Mbcs) + csize(Pool), MB + bsize(Mbcs) + bsize(Pool),
                       SC + csize(Sbcs), SB + bsize(Sbcs)};
                 (_, Acc) -> Acc
              end, {0, 0, 0, 0}, Insts);
        _ -> {0, 0, 0, 0}
    end.

csize(L) ->
    case lists:keyfind(carriers_size, 1, L) of
        false -> 0;
        T -> element(2, T)
    end.

%% {blocks, [{Type, [{count, ...}, {size, Cur, ...}]}]} (OTP 22+)
bsize(L) ->
    case lists:keyfind(blocks, 1, L) of
        {blocks, Types} when is_list(Types) ->
            lists:sum([element(2, lists:keyfind(size, 1, Info)) || {_Type, Info} <- Types,
                                                                   is_list(Info)]);
        _ -> 0
    end.

%% xb_mem - processes with known memory figures, and the VM's own view of
%% them, for erlang-heapsample's tests.
%%
%%   xb_mem:start()        start([]).
%%   xb_mem:start(Opts)    spawns five registered processes and returns once
%%                         they are waiting (their figures held steady):
%%       xb_mem_list   holds a list of small integers of list_mb (20) MB
%%                     (16 bytes per cons cell), built and then compacted by
%%                     a full garbage collection
%%       xb_mem_queue  has 50,000 messages {msg, N, <<"payload">>} queued that
%%                     its receive never matches
%%       xb_mem_bins   holds bins (200) refc binaries of 1 MiB each (off-heap)
%%       xb_mem_deep   blocked in a receive under depth (100,000) non-tail
%%                     recursive calls: a deep stack
%%       xb_mem_old    holds a list of old_mb (4) MB, most of it on its old
%%                     heap (the minor collections while it is built)
%%                     Opts: [{list_mb, N}, {bins, N}, {depth, N}, {msgs, N},
%%                     {old_mb, N}].
%%   xb_mem:stop()         kill them.
%%   xb_mem:idle(N)        N processes waiting in a receive, each linked to
%%                         the registered xb_mem_idle that started them (killing
%%                         it, as stop/0 does, ends them all); returns once all
%%                         are waiting.
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
%%   xb_mem:processes_truth()  "PROCESSES PROCESSES_USED SERVING PROCESS_LIMIT
%%                         SCHEDULERS DIRTY_CPU DIRTY_IO FLAVOR EHEAP_BLOCKS
%%                         EHEAP_BLOCK_BYTES": erlang:memory([processes,
%%                         processes_used]) in one call, process_info(P, memory)
%%                         of xb_ctl and user (which serve the test's requests:
%%                         their heaps move with each), system_info/1, the blocks of type
%%                         eheap_alloc in every allocator's instances (mbcs,
%%                         mbcs_pool, sbcs), as erl_alloc.c alcu_size counts them.
-module(xb_mem).
-export([start/0, start/1, stop/0, names/0, truth/1, all_truth/0, ident/0, alloc_truth/1, usage/1,
         list_holder/1, old_holder/1, queue_holder/0, bin_holder/1, deep/1, wait_waiting/2, processes_truth/0, idle/1]).

names() -> [xb_mem_list, xb_mem_queue, xb_mem_bins, xb_mem_deep, xb_mem_old, xb_mem_idle].

idle(N) ->
    xb_ctl:kill_registered(xb_mem_idle),
    Self = self(),
    P = spawn(fun() ->
                      Ps = [spawn_link(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, N)],
                      true = wait_waiting(Ps, 600),
                      Self ! {idle, self()},
                      receive stop -> ok end
              end),
    register(xb_mem_idle, P),
    receive {idle, P} -> ok after 60000 -> error(idle_timeout) end.

start() -> start([]).

start(Opts) ->
    stop(),
    ListMB = proplists:get_value(list_mb, Opts, 20),
    Bins = proplists:get_value(bins, Opts, 200),
    Depth = proplists:get_value(depth, Opts, 100000),
    Msgs = proplists:get_value(msgs, Opts, 50000),
    OldMB = proplists:get_value(old_mb, Opts, 4),
    L = spawn(?MODULE, list_holder, [ListMB * 1024 * 1024 div 16]),
    register(xb_mem_list, L),
    Q = spawn(?MODULE, queue_holder, []),
    register(xb_mem_queue, Q),
    [Q ! {msg, N, <<"payload">>} || N <- lists:seq(1, Msgs)],
    B = spawn(?MODULE, bin_holder, [Bins]),
    register(xb_mem_bins, B),
    D = spawn(?MODULE, deep, [Depth]),
    register(xb_mem_deep, D),
    O = spawn(?MODULE, old_holder, [OldMB * 1024 * 1024 div 16]),
    register(xb_mem_old, O),
    true = wait_waiting([L, B, D, O], 600),
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

%% A list on the old heap: the minor collections while it is built tenure
%% what survived one before (erl_gc.c minor_collection: what lies below
%% high_water goes to the old heap), and no full collection follows, so
%% old_heap_block_size is megabytes, not the 0 of the others.  (Asking for
%% minor collections after it instead found the old heap full and swept it
%% into a new heap: 0 again.)
old_holder(N) ->
    List = lists:seq(1, N),
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
                          binary, reductions, status, garbage_collection_info]) of
        undefined -> [];
        [{memory, M}, {heap_size, H}, {total_heap_size, T}, {stack_size, S},
         {message_queue_len, Q}, {binary, Bins}, {reductions, R}, {status, St},
         {garbage_collection_info, GC}] ->
            B = lists:sum([Sz || {_, Sz, _} <- Bins]),
            %% the old heap's block and the heap fragments, in words
            %% (erl_bif_info.c: what total_heap_size adds to heap_size)
            Old = proplists:get_value(old_heap_block_size, GC, 0),
            Mbuf = proplists:get_value(mbuf_size, GC, 0),
            io_lib:format("~s ~s ~p ~p ~p ~p ~p ~p ~p ~p ~p ~p~n",
                          [Name, pid_to_list(P), M, H, T, S, Q, B, R, St, Old, Mbuf])
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

processes_truth() ->
    %% the caller (xb_ctl) sheds the garbage of earlier requests, and the
    %% figures are gathered by a process of their own, whose garbage goes
    %% with it: the processes' memory as it was left by the request before
    erlang:garbage_collect(),
    {Pid, Ref} = spawn_monitor(fun() -> exit({truth, processes_line()}) end),
    receive
        {'DOWN', Ref, process, Pid, {truth, Line}} -> Line;
        {'DOWN', Ref, process, Pid, Other} -> error({processes_truth, Other})
    end.

processes_line() ->
    [{processes, P}, {processes_used, U}] = erlang:memory([processes, processes_used]),
    Serving = lists:sum([M || Name <- [xb_ctl, user], is_pid(whereis(Name)),
                              {memory, M} <- [process_info(whereis(Name), memory)]]),
    {N, B} = eheap_blocks(),
    iolist_to_binary(io_lib:format("~p ~p ~p ~p ~p ~p ~p ~s ~p ~p",
                                   [P, U, Serving, erlang:system_info(process_limit),
                                    erlang:system_info(schedulers),
                                    erlang:system_info(dirty_cpu_schedulers),
                                    erlang:system_info(dirty_io_schedulers),
                                    erlang:system_info(emu_flavor), N, B])).

%% Blocks allocated by eheap_alloc wherever they live: every allocator
%% instance's mbcs, mbcs_pool and sbcs "blocks" entries tagged eheap_alloc
%% (carriers move between instances through the pool).
eheap_blocks() ->
    lists:foldl(
      fun(A, Acc) ->
              case erlang:system_info({allocator, A}) of
                  Insts when is_list(Insts) ->
                      lists:foldl(fun({instance, _, Props}, Acc1) ->
                                          lists:foldl(fun(K, {N0, B0}) ->
                                                              {N1, B1} = tagged(eheap_alloc, proplists:get_value(K, Props, [])),
                                                              {N0 + N1, B0 + B1}
                                                      end, Acc1, [mbcs, mbcs_pool, sbcs]);
                                     (_, Acc1) -> Acc1
                                  end, Acc, Insts);
                  _ -> Acc
              end
      end, {0, 0}, erlang:system_info(alloc_util_allocators)).

tagged(Type, L) ->
    case lists:keyfind(blocks, 1, L) of
        {blocks, Types} when is_list(Types) ->
            case lists:keyfind(Type, 1, Types) of
                {Type, Info} when is_list(Info) ->
                    {element(2, lists:keyfind(count, 1, Info)), element(2, lists:keyfind(size, 1, Info))};
                _ -> {0, 0}
            end;
        _ -> {0, 0}
    end.

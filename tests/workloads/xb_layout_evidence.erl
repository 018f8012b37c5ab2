%% xb_layout_evidence - live objects of every kind whose struct fields the
%% tools read, so that each offset in use has evidence in the VM's data
%% (erlang-sample's layout proofs and their mutation sweep):
%%   - processes with messages waiting in their queue (never received):
%%     inner queue (after a selective receive moved them) and outer queue;
%%   - process dictionaries, monitors (process, alias, node), links,
%%     timers (erlang:send_after, erlang:start_timer), off-heap binaries;
%%   - a process yielding in a loop with live arguments (arity, arg_reg);
%%   - a process scheduled out while it holds heap fragments (mbuf).
%%
%%   xb_layout_evidence:start() -> ok
%%   xb_layout_evidence:stop()
-module(xb_layout_evidence).
-export([start/0, stop/0, sitter/0, selective/0, spinner/7, holder/1, fragments/0]).

start() ->
    stop(),
    %% messages left in queues: a sitter never receives (outer queue, each
    %% message with its heap fragment inside), a selective receiver has
    %% moved its messages to the inner queue looking for one that never comes
    S = spawn(?MODULE, sitter, []),
    [S ! {msg, I, lists:seq(1, 20), <<I:800>>} || I <- lists:seq(1, 200)],
    R = spawn(?MODULE, selective, []),
    [R ! {other, I, [I, I + 1]} || I <- lists:seq(1, 50)],
    %% dictionaries, monitors, links, timers, binaries, in a few holders
    Hs = [spawn(?MODULE, holder, [I]) || I <- lists:seq(1, 8)],
    [monitor(process, H) || H <- Hs],
    [erlang:send_after(600000, H, wake) || H <- Hs],
    [erlang:start_timer(600000, H, wake) || H <- Hs],
    %% a process with live arguments, yielding all the time
    P = spawn(?MODULE, spinner, [a, b, c, d, e, f, 0]),
    F = spawn(?MODULE, fragments, []),
    register(xb_le_sitter, S),
    register(xb_le_selective, R),
    register(xb_le_spinner, P),
    register(xb_le_fragments, F),
    [register(list_to_atom("xb_le_holder" ++ integer_to_list(I)), H)
     || {I, H} <- lists:zip(lists:seq(1, 8), Hs)],
    ok.

stop() ->
    [xb_ctl:kill_registered(N) || N <- [xb_le_sitter, xb_le_selective, xb_le_spinner, xb_le_fragments]],
    [xb_ctl:kill_registered(list_to_atom("xb_le_holder" ++ integer_to_list(I))) || I <- lists:seq(1, 8)],
    ok.

sitter() -> timer:sleep(infinity).

selective() ->
    receive never_sent -> ok end.

holder(I) ->
    [put({key, K}, lists:seq(1, K)) || K <- lists:seq(1, 20 + I)],
    process_flag(trap_exit, true),
    Friends = [spawn_link(fun() -> timer:sleep(infinity) end) || _ <- lists:seq(1, 3)],
    [monitor(process, F) || F <- Friends],
    Alias = alias(),
    Bins = [binary:copy(<<I:8000>>) || _ <- lists:seq(1, 4)],
    monitor_node(node(), true),
    receive stop -> {Alias, Bins} end.

%% seven live arguments: more than def_arg_reg holds (erl_process.h: 6)
spinner(A, B, C, D, E, F, N) when N >= 0 ->
    spinner(B, C, D, E, F, A, N + 1).

%% builds terms larger than its heap's free space in a BIF (a heap
%% fragment), then computes without collecting for a while, over and over
fragments() ->
    L = binary_to_list(<<0:80000>>),
    loop_no_alloc(L, 200000),
    fragments().

loop_no_alloc(_, 0) -> ok;
loop_no_alloc(L, N) -> loop_no_alloc(L, N - 1).

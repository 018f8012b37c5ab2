%% xb_dump - processes to find with erlang-sample --dump.
%%
%%   xb_dump:start(N)   a gen_server registered as `xb_dump_server`, blocked
%%                      inside handle_call in a call chain
%%                      handle_call -> chain_a/1 -> chain_b/1 -> chain_c/1 ->
%%                      wait_here/1, which waits in a receive (the call
%%                      comes from a helper process, so the caller is not
%%                      blocked); and N idle processes, each waiting in
%%                      idle/0 (linked to a keeper registered as
%%                      `xb_dump_keeper`).  Returns ok once all of them are
%%                      there.
%%   xb_dump:release()  let the server's call return.
%%   xb_dump:stop()     stop everything.
%%
%%   xb_dump:suspended()  a process registered as `xb_dump_suspended`,
%%                      waiting in idle/0 and suspended
%%                      (erlang:suspend_process/1): status suspended.
%%                      Returns its pid as text.
%%   xb_dump:exiting(Ms)  a process that owns an ETS table of 200,000 rows
%%                      starts a busy process of high priority (spin/1, for
%%                      Ms ms) and exits: its exit deletes the table a slice
%%                      at a time, and on a VM of one scheduler it gets no
%%                      slice while the spinner runs: it stays in the
%%                      process table with status exiting for Ms ms.  The
%%                      VM answers nothing meanwhile (its I/O runs at normal
%%                      priority): returns the pid as text after that.
%%   xb_dump:ring(N, Tokens)  N processes registered as `xb_dump_ring1`...
%%                      passing Tokens messages round for ever (hop/1):
%%                      each is switched in and out all the time, so its
%%                      saved state changes under any read of it.
%%   xb_dump:tickers(N, Ms)  N processes registered as `xb_dump_tick1`...
%%                      that wake every Ms ms (tick/1) and wait again in the
%%                      same place: a read of one is now and then overtaken
%%                      by a wake-up, and a read again at once is not.
-module(xb_dump).
-behaviour(gen_server).
-export([start/1, release/0, stop/0, idle/0, chain_a/1, chain_b/1, chain_c/1, wait_here/1]).
-export([suspended/0, exiting/1, spin/1, ring/2, hop/1, tickers/2, tick/1]).
-export([init/1, handle_call/3, handle_cast/2]).

start(N) ->
    stop(),
    {ok, S} = gen_server:start({local, xb_dump_server}, ?MODULE, [], []),
    Self = self(),
    spawn(fun() -> Self ! calling, gen_server:call(S, block, infinity) end),
    receive calling -> ok end,
    wait_until(fun() -> element(2, process_info(S, current_function)) =:= {?MODULE, wait_here, 1} end),
    K = spawn(fun() -> keeper(N, Self) end),
    register(xb_dump_keeper, K),
    Idle = receive {idle, L} -> L end,
    wait_until(fun() -> lists:all(fun(P) -> process_info(P, status) =:= {status, waiting} end, Idle) end),
    ok.

%% The idle processes are linked to it: they go when it is killed.
keeper(N, Parent) ->
    Parent ! {idle, [spawn_link(fun idle/0) || _ <- lists:seq(1, N)]},
    receive stop -> ok end.

wait_until(F) ->
    case F() of
        true -> ok;
        false -> timer:sleep(10), wait_until(F)
    end.

release() -> xb_dump_server ! release, ok.

stop() ->
    xb_ctl:kill_registered(xb_dump_keeper),
    xb_ctl:kill_registered(xb_dump_server),
    [xb_ctl:kill_registered(N) || N <- registered(),
                                  lists:prefix("xb_dump_", atom_to_list(N))],
    ok.

idle() ->
    receive stop -> ok end.

init([]) -> {ok, 0}.

handle_call(block, _From, S) ->
    R = chain_a(S),
    {reply, R, S + 1}.

handle_cast(_, S) -> {noreply, S}.

chain_a(X) -> Y = chain_b(X + 1), Y + 1.
chain_b(X) -> Y = chain_c(X + 1), Y + 1.
chain_c(X) -> Y = wait_here(X + 1), Y + 1.

wait_here(X) ->
    receive release -> X end.

suspended() ->
    P = spawn(fun idle/0),
    wait_until(fun() -> process_info(P, current_function) =:= {current_function, {?MODULE, idle, 0}} end),
    register(xb_dump_suspended, P),
    true = erlang:suspend_process(P),
    {status, suspended} = process_info(P, status),
    pid_to_list(P).

exiting(Ms) ->
    P = spawn(fun() ->
                  T = ets:new(xb_dump_table, [set, private]),
                  fill(T, 200000),
                  erlang:yield(), % a fresh slice: not preempted before exit/1
                  Until = erlang:monotonic_time(millisecond) + Ms,
                  spawn_opt(?MODULE, spin, [Until], [{priority, high}]),
                  exit(bye)
              end),
    Ref = monitor(process, P),
    receive {'DOWN', Ref, process, P, bye} -> pid_to_list(P) end.

fill(_, 0) -> ok;
fill(T, N) -> ets:insert(T, {N, N}), fill(T, N - 1).

spin(Until) ->
    case erlang:monotonic_time(millisecond) < Until of
        true -> spin(Until);
        false -> ok
    end.

ring(N, Tokens) ->
    Ps = [spawn(?MODULE, hop, [undefined]) || _ <- lists:seq(1, N)],
    [register(list_to_atom("xb_dump_ring" ++ integer_to_list(I)), P)
     || {I, P} <- lists:zip(lists:seq(1, N), Ps)],
    [P ! {next, Next} || {P, Next} <- lists:zip(Ps, tl(Ps) ++ [hd(Ps)])],
    [P ! token || P <- lists:sublist(Ps, Tokens)],
    ok.

hop(undefined) ->
    receive {next, Next} -> hop(Next) end;
hop(Next) ->
    receive token -> Next ! token, hop(Next) end.

tickers(N, Ms) ->
    [register(list_to_atom("xb_dump_tick" ++ integer_to_list(I)), spawn(?MODULE, tick, [Ms]))
     || I <- lists:seq(1, N)],
    ok.

tick(Ms) ->
    receive stop -> ok after Ms -> tick(Ms) end.

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
-module(xb_dump).
-behaviour(gen_server).
-export([start/1, release/0, stop/0, idle/0, chain_a/1, chain_b/1, chain_c/1, wait_here/1]).
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

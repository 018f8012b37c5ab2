%% xb_gc - a process that allocates heavily and garbage-collects often.
%%
%%   xb_gc:start()         start(5000).
%%   xb_gc:start(Batch)    spawns a process registered as `xb_alloc` running
%%                         alloc_loop/1: it conses Batch small tuples onto a
%%                         list (about 8 words of heap each), drops the list
%%                         and starts again, forever.  All allocation happens
%%                         in alloc_loop/1 itself, so its young heap fills
%%                         every few thousand iterations and the process
%%                         runs minor collections (erts_garbage_collect*)
%%                         from alloc_loop/1 many times a second.
%%                         Returns the pid.  Replaces a running xb_alloc.
%%   xb_gc:stop()          kill it.
%%   xb_gc:gcs()           number of garbage collections the whole VM has
%%                         done (erlang:statistics(garbage_collection)).
-module(xb_gc).
-export([start/0, start/1, stop/0, run/1, alloc_loop/1, gcs/0]).

start() -> start(5000).

start(Batch) when is_integer(Batch), Batch > 0 ->
    stop(),
    Pid = spawn(?MODULE, run, [Batch]),
    register(xb_alloc, Pid),
    Pid.

stop() ->
    case whereis(xb_alloc) of
        undefined -> ok;
        Pid -> exit(Pid, kill), ok
    end.

run(Batch) -> alloc_loop({Batch, 0, []}).

%% alloc_loop({Batch, Count, Acc})
alloc_loop({Batch, Count, _Acc}) when Count >= Batch ->
    alloc_loop({Batch, 0, []});
alloc_loop({Batch, Count, Acc}) ->
    alloc_loop({Batch, Count + 1, [{Count, Count + 1, Batch} | Acc]}).

gcs() ->
    {NumGCs, _, _} = erlang:statistics(garbage_collection),
    NumGCs.

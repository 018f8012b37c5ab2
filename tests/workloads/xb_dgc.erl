%% xb_dgc - major garbage collections of a large heap, which the VM runs on
%% a dirty CPU scheduler (a heap above ERTS_POTENTIALLY_LONG_GC_HSIZE).
%%
%%   xb_dgc:start()        start(1000000).
%%   xb_dgc:start(N)       spawns a process registered as `xb_dgc` that
%%                         builds a live list of N tuples (about 5 words
%%                         each) and then runs gc_loop/1 forever: an
%%                         explicit erlang:garbage_collect() (a major
%%                         collection, copying the whole heap) and a little
%%                         more allocation.  Returns the pid once the list is
%%                         built and the process registered (from then on it
%%                         only runs gc_loop/1).
%%   xb_dgc:stop()         kill it.
-module(xb_dgc).
-export([start/0, start/1, stop/0, init/1, gc_loop/1]).

start() -> start(1000000).

start(N) when is_integer(N), N > 0 ->
    stop(),
    Self = self(),
    Pid = spawn(?MODULE, init, [{N, Self}]),
    receive {xb_dgc_ready, Pid} -> Pid end.

stop() -> xb_ctl:kill_registered(xb_dgc).

init({N, From}) ->
    Live = [{I, I + 1} || I <- lists:seq(1, N)],
    register(xb_dgc, self()),
    From ! {xb_dgc_ready, self()},
    gc_loop(Live).

%% Not a tail call around garbage_collect: gc_loop/1 stays on the stack.
gc_loop(Live) ->
    true = erlang:garbage_collect(),
    _ = lists:seq(1, 100),
    gc_loop(Live).

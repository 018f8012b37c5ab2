%% xb_mem_frag - fragments binary_alloc: many binaries, then every other one
%% freed.
%%
%%   xb_mem_frag:start(N, Size)  spawns xb_frag holding N binaries of Size
%%                               bytes (off-heap, in binary_alloc's multiblock
%%                               carriers when Size is well under its single-
%%                               block threshold), returns when it waits.
%%   xb_mem_frag:free_half()     xb_frag drops every other binary and collects
%%                               its garbage: the freed blocks leave holes in
%%                               carriers that stay (usage falls).
%%   xb_mem_frag:stop()
-module(xb_mem_frag).
-export([start/2, free_half/0, stop/0, hold/2]).

start(N, Size) ->
    stop(),
    P = spawn(?MODULE, hold, [N, Size]),
    register(xb_frag, P),
    true = xb_mem:wait_waiting([P], 600),
    ok.

free_half() ->
    xb_frag ! {free_half, self()},
    receive freed -> ok after 30000 -> timeout end.

stop() -> xb_ctl:kill_registered(xb_frag).

hold(N, Size) ->
    Bins = [binary:copy(<<(I rem 256):8>>, Size) || I <- lists:seq(1, N)],
    erlang:garbage_collect(),
    wait(Bins).

wait(Bins) ->
    receive
        {free_half, From} ->
            Half = every_other(Bins),
            erlang:garbage_collect(),
            From ! freed,
            wait(Half);
        stop -> length(Bins)
    end.

every_other([A, _ | T]) -> [A | every_other(T)];
every_other(L) -> L.

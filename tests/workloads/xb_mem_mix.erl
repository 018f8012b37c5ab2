%% xb_mem_mix - a process holding a known mix of terms, for
%% erlang-heapsample --contents.
%%
%%   xb_mem_mix:start(Recs, Bins, Maps)
%%       spawns xb_mix holding one list of Recs records {session, I, I+1, I+2,
%%       I+3, I+4} (7 words each), Bins 48-byte binaries (on the heap: 8 words
%%       each) and Maps maps of 5 atom keys built by maps:from_list/1 (a
%%       flatmap of 8 words and its own keys tuple of 6: 14 words), then
%%       compacts its heap (a full garbage collection) and waits.
%%       Returns "RECWORDS BINWORDS MAPWORDS LISTWORDS": the words each kind
%%       takes on the heap, measured with erts_debug:flat_size/1 on terms
%%       built the same way, and the list's cons cells (2 words each).
%%   xb_mem_mix:stop()
%%   xb_mem_mix:start_kinds(N)
%%       the same as xb_kinds: N each of bignums (1 bsl 300 + I), floats,
%%       funs (closures over I), references (make_ref/0) and 100-byte
%%       binaries (off the heap: a reference to each on it); returns
%%       "BIG FLOAT FUN REF BINREF LIST", the words of each kind on the
%%       heap (erts_debug:flat_size/1 of the terms built the same way; for
%%       the binaries, their references' words) and the list's cells.
-module(xb_mem_mix).
-export([start/3, stop/0, hold/3, rec/1, bin/1, map/1, start_kinds/1, hold_kinds/1, kind/2]).

start(Recs, Bins, Maps) ->
    stop(),
    P = spawn(?MODULE, hold, [Recs, Bins, Maps]),
    register(xb_mix, P),
    true = xb_mem:wait_waiting([P], 600),
    RW = Recs * erts_debug:flat_size(rec(1)),
    BW = Bins * erts_debug:flat_size(bin(1)),
    MW = Maps * erts_debug:flat_size(map(1)),
    LW = 2 * (Recs + Bins + Maps),
    iolist_to_binary(io_lib:format("~p ~p ~p ~p", [RW, BW, MW, LW])).

stop() -> xb_ctl:kill_registered(xb_mix).

rec(I) -> {session, I, I + 1, I + 2, I + 3, I + 4}.
bin(I) -> <<I:384>>.
map(I) -> maps:from_list([{alpha, I}, {beta, I}, {gamma, I}, {delta, I}, {epsilon, I}]).

hold(Recs, Bins, Maps) ->
    L = [rec(I) || I <- lists:seq(1, Recs)] ++ [bin(I) || I <- lists:seq(1, Bins)] ++
        [map(I) || I <- lists:seq(1, Maps)],
    erlang:garbage_collect(),
    receive stop -> length(L) end.

kind(big, I) -> (1 bsl 300) + I;
kind(float, I) -> I / 7;
kind(funs, I) -> fun(X) -> X + I end;
kind(ref, _) -> make_ref();
kind(binref, I) -> <<I:800>>.

-define(KINDS, [big, float, funs, ref, binref]).

start_kinds(N) ->
    xb_ctl:kill_registered(xb_kinds),
    P = spawn(?MODULE, hold_kinds, [N]),
    register(xb_kinds, P),
    true = xb_mem:wait_waiting([P], 600),
    %% erts_debug:size/1: the words on the heap (of an off-heap binary,
    %% its reference's)
    Words = [N * erts_debug:size(kind(K, 1)) || K <- ?KINDS],
    iolist_to_binary(io_lib:format("~p ~p ~p ~p ~p ~p", Words ++ [2 * N * length(?KINDS)])).

hold_kinds(N) ->
    L = [kind(K, I) || K <- ?KINDS, I <- lists:seq(1, N)],
    erlang:garbage_collect(),
    receive stop -> length(L) end.

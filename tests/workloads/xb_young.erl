%% xb_young - code that is hot while it is young: each module runs for a
%% while right after it was loaded, then never again.
%%
%%   xb_young:start(N, Ms)  compiles N modules xby_1 .. xby_N first (no
%%                          sampling wanted during compilation: the caller
%%                          waits for start/2 to return), then spawns a
%%                          process registered as `xb_young` that loads them
%%                          one after another and, right after loading each,
%%                          runs its hot/1 for Ms milliseconds (a busy loop).
%%                          Every module also has cold_a/0 and cold_b/0 after
%%                          hot/1, which are never called, and module_info,
%%                          never called either.  Returns the pid.  A sample
%%                          named xby_K:cold_a/0, cold_b/0, module_info/0,1,
%%                          or a non-function entry of an xby_ module
%%                          (xby_K::codeHeader ...) was pinned on a neighbour.
%%   xb_young:loaded()      how many modules were loaded so far.
%%   xb_young:stop()        kill it.
-module(xb_young).
-export([start/2, stop/0, loaded/0, run/2]).

start(N, Ms) when is_integer(N), N >= 1, is_integer(Ms), Ms >= 1 ->
    stop(),
    Bins = [compile_one(list_to_atom("xby_" ++ integer_to_list(K))) || K <- lists:seq(1, N)],
    persistent_term:put(xb_young_loaded, 0),
    Pid = spawn(?MODULE, run, [Bins, Ms]),
    register(xb_young, Pid),
    Pid.

stop() -> xb_ctl:kill_registered(xb_young).

loaded() -> persistent_term:get(xb_young_loaded, 0).

run([], _Ms) ->
    receive stop -> ok end;
run([{Mod, Bin} | Rest], Ms) ->
    {module, Mod} = code:load_binary(Mod, atom_to_list(Mod) ++ ".erl", Bin),
    persistent_term:put(xb_young_loaded, loaded() + 1),
    _ = Mod:hot(erlang:monotonic_time(millisecond) + Ms),
    run(Rest, Ms).

compile_one(Mod) ->
    Src = io_lib:format(
            "-module(~p).~n"
            "-export([hot/1, cold_a/0, cold_b/0]).~n"
            "hot(End) -> case erlang:monotonic_time(millisecond) >= End of "
            "true -> ok; false -> spin(200), hot(End) end.~n"
            "spin(0) -> ok; spin(N) -> _ = (N * 7 + 13) band 16#FFFF, spin(N - 1).~n"
            "cold_a() -> {cold_a, erlang:phash2(make_ref())}.~n"
            "cold_b() -> {cold_b, erlang:phash2(make_ref())}.~n", [Mod]),
    {ok, Toks, _} = erl_scan:string(lists:flatten(Src)),
    Forms = split_forms(Toks, [], []),
    {ok, Mod, Bin} = compile:forms(Forms, [binary, return_errors]),
    {Mod, Bin}.

split_forms([], [], Acc) -> lists:reverse(Acc);
split_forms([{dot, _} = D | Rest], Cur, Acc) ->
    {ok, F} = erl_parse:parse_form(lists:reverse([D | Cur])),
    split_forms(Rest, [], [F | Acc]);
split_forms([T | Rest], Cur, Acc) -> split_forms(Rest, [T | Cur], Acc).

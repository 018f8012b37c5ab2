%% xb_loader - compile and load brand-new modules at run time (for tests of
%% tools that must notice code loading, e.g. erlang-write-perf-map --watch).
%%
%%   xb_loader:load(Mod, NFuns)
%%       Mod: atom (a module name not used before), NFuns: integer >= 1.
%%       Generates source for Mod exporting f1/0 .. fNFuns/0 plus a local
%%       helper g/1, compiles it in the VM (compile:forms/2, so the module
%%       comes from the VM's own compiler) and loads it.  Returns the list of
%%       {Function, Arity} of the loaded module as module_info(functions)
%%       reports it (includes module_info/0,1).
%%   xb_loader:source(Mod, NFuns)
%%       the generated source text.
%%   xb_loader:binary(Mod, NFuns)
%%       the compiled module (a binary for code:load_binary/3), not loaded.
%%   xb_loader:reload_loop(Mod, NFuns)
%%       compiles once, then loads that binary over and over (purging the
%%       old code first), forever: keeps the loader (the JIT's assembler) busy.
%%   xb_loader:unload(Mod)
%%       delete and purge it.
-module(xb_loader).
-export([load/2, source/2, unload/1, binary/2, reload_loop/2]).

source(Mod, NFuns) when is_atom(Mod), is_integer(NFuns), NFuns >= 1 ->
    Names = ["f" ++ integer_to_list(I) || I <- lists:seq(1, NFuns)],
    Exports = string:join([N ++ "/0" || N <- Names], ", "),
    Funs = [io_lib:format("~s() -> g(~b).~n", [N, I])
            || {I, N} <- lists:zip(lists:seq(1, NFuns), Names)],
    lists:flatten([io_lib:format("-module(~p).~n-export([~s]).~n", [Mod, Exports]),
                   Funs,
                   "g(N) -> N * 3 + erlang:phash2(N).\n"]).

load(Mod, NFuns) ->
    Bin = binary(Mod, NFuns),
    {module, Mod} = code:load_binary(Mod, atom_to_list(Mod) ++ ".erl", Bin),
    Mod:module_info(functions).

binary(Mod, NFuns) ->
    Forms = forms(source(Mod, NFuns)),
    {ok, Mod, Bin} = compile:forms(Forms, [binary, return_errors]),
    Bin.

reload_loop(Mod, NFuns) ->
    reload(Mod, binary(Mod, NFuns)).

reload(Mod, Bin) ->
    _ = code:purge(Mod),
    {module, Mod} = code:load_binary(Mod, atom_to_list(Mod) ++ ".erl", Bin),
    reload(Mod, Bin).

unload(Mod) ->
    code:purge(Mod),
    code:delete(Mod),
    code:purge(Mod).

forms(Src) -> forms(Src, 1, []).

forms(Src, Line, Acc) ->
    case erl_scan:tokens([], Src, Line) of
        {done, {ok, Tokens, Next}, Rest} ->
            {ok, Form} = erl_parse:parse_form(Tokens),
            forms(Rest, Next, [Form | Acc]);
        {more, _} ->
            lists:reverse(Acc);
        {done, {eof, _}, _} ->
            lists:reverse(Acc)
    end.

%% xb_inspect - ground truth from inside the VM, for checking our tools.
%%
%%   xb_inspect:functions()
%%       iodata, one line per function of every loaded module
%%       (code:all_loaded/0, M:module_info(functions)):
%%           NAME ADDRESS\n
%%       NAME is "M:F/A" with atoms quoted the way erts prints them (%T in
%%       erl_printf_term.c: no quotes iff the atom starts with a Latin-1
%%       lowercase letter and continues with Latin-1 alphanumerics or '_';
%%       reserved words are NOT quoted), UTF-8.  ADDRESS is the hex address
%%       of the function's first instruction (its func_info) as
%%       erts_debug:disassemble/1 reports it on the interpreter, or "-" when
%%       disassemble gives none (JIT VMs).
%%   xb_inspect:quote(Atom)
%%       the erts quoting of one atom, as a UTF-8 binary.
-module(xb_inspect).
-export([functions/0, quote/1, mfa_name/3, address/3]).

functions() ->
    Mods = lists:sort([M || {M, _} <- code:all_loaded()]),
    [[mfa_name(M, F, A), " ", address(M, F, A), "\n"]
     || M <- Mods, {F, A} <- funs(M)].

funs(M) ->
    try M:module_info(functions)
    catch _:_ -> []
    end.

mfa_name(M, F, A) ->
    [quote(M), ":", quote(F), "/", integer_to_list(A)].

address(M, F, A) ->
    try erts_debug:disassemble({M, F, A}) of
        {_Next, Text, _} when is_binary(Text) ->
            case re:run(Text, "^([0-9A-Fa-f]+):", [{capture, all_but_first, list}]) of
                {match, [Hex]} -> string:lowercase(Hex);
                nomatch -> "-"
            end;
        _ -> "-"
    catch _:_ -> "-"
    end.

quote(Atom) ->
    Cs = atom_to_list(Atom),
    Body = [esc(C) || C <- Cs],
    case needs_quotes(Cs) of
        true -> unicode:characters_to_binary(["'", Body, "'"]);
        false -> unicode:characters_to_binary(Body)
    end.

needs_quotes([]) -> true;
needs_quotes([C | Cs]) ->
    not (is_lower(C) andalso lists:all(fun(D) -> is_alnum(D) orelse D =:= $_ end, Cs)).

is_lower(C) -> (C >= $a andalso C =< $z) orelse (C >= 223 andalso C =< 255 andalso C =/= 247).
is_upper(C) -> (C >= $A andalso C =< $Z) orelse (C >= 192 andalso C =< 222 andalso C =/= 215).
is_alnum(C) -> (C >= $0 andalso C =< $9) orelse is_lower(C) orelse is_upper(C).

esc($') -> "\\'";
esc($\\) -> "\\\\";
esc($\n) -> "\\n";
esc($\f) -> "\\f";
esc($\t) -> "\\t";
esc($\r) -> "\\r";
esc($\b) -> "\\b";
esc($\v) -> "\\v";
esc(C) when C < $\s -> [$\\ | integer_to_list(C, 8)];
esc(C) when C >= 128, C < 160 -> [$\\ | integer_to_list(C, 8)];
esc(C) -> [C].

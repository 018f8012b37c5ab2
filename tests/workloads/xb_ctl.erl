%% xb_ctl - the test suite's control channel into a VM under test.
%%
%% Started by tests/lib/xbtest.py as
%%     erl -noshell +S N:N -pa DIR -eval "xb_ctl:start()."
%%
%% start/0 spawns a registered, high-priority process `xb_ctl` that prints
%%     XB-READY <os pid> <otp_release> <emu_flavor>
%% on stdout and then serves requests, one per stdin line:
%%     E <id> <base64 of an Erlang expression sequence, UTF-8>
%%         evaluate (erl_scan + erl_parse + erl_eval, fresh bindings) and
%%         answer with the result formatted with ~p
%%     R <id> <base64 ...>
%%         evaluate; the result must be iodata, which is sent back verbatim
%%         (use for bulk data: no ~p escaping)
%% Each answer is one line, written with a single io request so that other
%% processes' output cannot interleave with it:
%%     XB-ANSWER <id> ok <base64 of the payload>
%%     XB-ANSWER <id> error <base64 of "Class:Reason stacktrace" text>
%% End of stdin (the test harness went away) halts the VM: a VM under test
%% never outlives its harness.
%%
%% For the workloads: kill_registered(Name) kills the process registered as
%% Name, if any, and returns once it is gone, so that the name is free again.
-module(xb_ctl).
-export([start/0, serve/0, eval/1, kill_registered/1]).

start() ->
    Pid = spawn(fun serve/0),
    register(xb_ctl, Pid),
    ok.

serve() ->
    process_flag(priority, high),
    process_flag(trap_exit, false),
    out(io_lib:format("XB-READY ~s ~s ~s~n",
                      [os:getpid(), erlang:system_info(otp_release),
                       flavor()])),
    loop().

flavor() ->
    try erlang:system_info(emu_flavor) of F -> atom_to_list(F)
    catch _:_ -> "emu"
    end.

loop() ->
    case io:get_line('') of
        eof -> erlang:halt(0);
        {error, _} -> erlang:halt(0);
        Line ->
            handle(string:trim(Line, trailing, "\r\n")),
            loop()
    end.

handle([Kind, $\s | Rest]) when Kind =:= $E; Kind =:= $R ->
    {Id, Encoded} = split_id(Rest),
    Answer =
        try
            Src = unicode:characters_to_list(base64:decode(Encoded), utf8),
            Value = eval(Src),
            Payload = case Kind of
                          $E -> unicode:characters_to_binary(io_lib:format("~p", [Value]));
                          $R -> iolist_to_binary(Value)
                      end,
            ["ok ", base64:encode(Payload)]
        catch Class:Reason:Stack ->
            Msg = io_lib:format("~p:~p ~p", [Class, Reason, Stack]),
            ["error ", base64:encode(unicode:characters_to_binary(Msg))]
        end,
    out(["\nXB-ANSWER ", Id, " ", Answer, "\n"]);
handle(_Other) ->
    ok.

split_id(S) ->
    case string:split(S, " ") of
        [Id, Enc] -> {Id, Enc};
        [Enc] -> {"0", Enc}
    end.

%% Evaluate a string of Erlang expressions ("Expr, Expr" with or without the
%% final full stop); returns the value of the last one.
eval(Src0) ->
    Src = case string:trim(Src0, trailing) of
              "" -> "ok.";
              S -> case lists:last(S) of $. -> S; _ -> S ++ "." end
          end,
    {ok, Tokens, _} = erl_scan:string(Src),
    {ok, Exprs} = erl_parse:parse_exprs(Tokens),
    {value, Value, _} = erl_eval:exprs(Exprs, erl_eval:new_bindings()),
    Value.

out(Chars) ->
    io:put_chars(standard_io, Chars).

kill_registered(Name) ->
    case whereis(Name) of
        undefined -> ok;
        Pid ->
            Ref = monitor(process, Pid),
            exit(Pid, kill),
            receive {'DOWN', Ref, process, Pid, _} -> ok end
    end.

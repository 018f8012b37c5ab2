%% xb_lines - a deep chain whose calls sit on lines of their own, several
%% lines below each function's head (test_lines.py computes the expected
%% line of every call from this file: the line holding "CALL -> NAME").
%%
%%   xb_lines:start()   spawns a process registered as `xb_lines` that runs
%%                      outer/1 -> middle/1 -> inner/1 -> spin/1; spin/1
%%                      spins forever (inline arithmetic, no calls, no
%%                      allocation).  Every caller does work after its call
%%                      returns, so all frames stay on the stack.
%%   xb_lines:start_noline()  the same, but with xb_noline (compiled with
%%                      no_line_info) in the middle:
%%                      outer/1 -> xb_noline:hop/1 -> inner/1 -> spin/1.
%%   xb_lines:stop()    kill it.
-module(xb_lines).
-export([start/0, start_noline/0, stop/0, run/1, outer/2, middle/1, inner/1, spin/1]).

-define(M1(X), ((((X) * 7) + 13) band 16#FFFFFF)).
-define(M4(X), ?M1(?M1(?M1(?M1(X))))).
-define(M16(X), ?M4(?M4(?M4(?M4(X))))).

start() -> start(middle).
start_noline() -> start(noline).

start(Via) ->
    stop(),
    Pid = spawn(?MODULE, run, [Via]),
    register(xb_lines, Pid),
    Pid.

stop() ->
    case whereis(xb_lines) of
        undefined -> ok;
        Pid -> exit(Pid, kill), ok
    end.

run(Via) -> outer(Via, 1).

outer(Via, N) ->
    A = N + 1,
    B = A * 2,
    X = case Via of
            middle ->
                middle(B);          % CALL -> middle
            noline ->
                xb_noline:hop(B)    % CALL -> hop
        end,
    X + A.

middle(N) ->
    Y = N - 1,
    Z = inner(Y),                   % CALL -> inner
    Z + 1.

inner(N) ->
    P = N * 3,
    Q = spin(P),                    % CALL -> spin
    Q + 1.

spin(N) ->
    X = ?M16(N band 16#FFFFFF),
    case X =:= N - 100000000 of
        true -> X;
        false -> spin(N)
    end.

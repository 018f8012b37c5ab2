%% xb_deep - a process with a known, deep, non-tail-recursive call stack.
%%
%%   xb_deep:start()    spawns a process registered as `xb_deep` that calls
%%                      a/1 -> b/1 -> c/1 -> d/1 -> leaf/1; leaf/1 spins on
%%                      the CPU forever (a busy loop of inline arithmetic,
%%                      no receive, no calls, no allocation).  Each of a..d
%%                      does work after its call returns (X = next(N), X + 1),
%%                      so all four frames stay on the stack:
%%                        leaf/1 <- d/1 <- c/1 <- b/1 <- a/1  (outermost)
%%                      a/1 is entered by a tail call from the spawned fun,
%%                      so nothing is below it but the process's exit frame.
%%                      Returns the pid.  Replaces a running xb_deep.
%%   xb_deep:stop()     kill it.
%%   xb_deep:tall(N)    spawns `xb_tall`: N frames of tall/3, each holding
%%                      three live values (four words a frame: more than
%%                      the BPF capture's 16 KiB Erlang stack copy for
%%                      N = 800), then leaf/1 spinning.  Returns the pid.
%%
%% Every function is exported so the compiler cannot infer that leaf/1
%% never returns (which would let it turn the calls into tail calls).
-module(xb_deep).
-export([start/0, stop/0, run/0, a/1, b/1, c/1, d/1, leaf/1, tall/1, tall/3]).

-define(M1(X), ((((X) * 7) + 13) band 16#FFFFFF)).
-define(M4(X), ?M1(?M1(?M1(?M1(X))))).
-define(M16(X), ?M4(?M4(?M4(?M4(X))))).

start() ->
    stop(),
    Pid = spawn(?MODULE, run, []),
    register(xb_deep, Pid),
    Pid.

stop() ->
    case whereis(xb_deep) of
        undefined -> ok;
        Pid -> exit(Pid, kill), ok
    end.

run() -> a(1).

tall(N) ->
    case whereis(xb_tall) of
        undefined -> ok;
        Old -> exit(Old, kill)
    end,
    Pid = spawn(?MODULE, tall, [N, 1, 2]),
    register(xb_tall, Pid),
    Pid.

%% A, B and C are used after the call returns: each frame keeps them
%% (small integers: no bignum arithmetic under leaf/1).
tall(0, A, B) -> leaf((A + B) band 16#FFFF);
tall(N, A, B) ->
    C = (A * 3 + N) band 16#FFFF,
    X = tall(N - 1, B, C),
    X + A + B + C.

a(N) -> X = b(N + 1), X + 1.
b(N) -> X = c(N + 1), X + 1.
c(N) -> X = d(N + 1), X + 1.
d(N) -> X = leaf(N + 1), X + 1.

%% Spins forever: X is never -1 (masked to 0..16#FFFFFF), but the compiler
%% cannot know that N is an integer, so leaf/1 may return as far as it knows.
leaf(N) ->
    X = ?M16(N band 16#FFFFFF),
    case X =:= N - 100000000 of
        true -> X;
        false -> leaf(N)
    end.

%% xb_nif - Erlang side of xb_nif.c (a NIF library the test compiles).
%%
%%   xb_nif:load(Path)     erlang:load_nif(Path, 0): Path is the .so
%%                         without its extension.  Until then every NIF
%%                         below raises nif_not_loaded.
%%   xb_nif:start(Ms)      spawns a process registered as `xb_nif_caller`
%%                         running loop/1: it calls spin(900) (900 us in
%%                         the NIF's xb_nif_spin/xb_nif_work) for Ms
%%                         milliseconds, then exits.  A call costs one
%%                         reduction, so it yields only every few seconds
%%                         (a NIF that runs too long): meanwhile other
%%                         processes may wait for its scheduler, xb_ctl
%%                         too.  Returns the pid.  Replaces a running one
%%                         (not the thread).
%%   xb_nif:stop()         kill it (and stop the burner thread).
%%   xb_nif:thread_start() a native thread "xb_nif_burner" spinning in
%%                         xb_nif_thread_burn/xb_nif_work, outside Erlang.
%%   xb_nif:thread_stop()  stop and join it.
-module(xb_nif).
-export([load/1, start/1, stop/0, loop/1, spin/1, thread_start/0, thread_stop/0]).

load(Path) -> erlang:load_nif(Path, 0).

spin(_Us) -> erlang:nif_error(nif_not_loaded).
thread_start() -> erlang:nif_error(nif_not_loaded).
thread_stop() -> erlang:nif_error(nif_not_loaded).

start(Ms) when is_integer(Ms), Ms > 0 ->
    kill_caller(),
    Pid = spawn(?MODULE, loop, [erlang:monotonic_time(millisecond) + Ms]),
    register(xb_nif_caller, Pid),
    Pid.

stop() ->
    catch thread_stop(),
    kill_caller().

kill_caller() ->
    case whereis(xb_nif_caller) of
        undefined -> ok;
        Pid -> exit(Pid, kill), ok
    end.

%% Not a tail call: loop/1 stays on the stack under the NIF.
loop(Deadline) ->
    _ = spin(900),
    case erlang:monotonic_time(millisecond) < Deadline of
        true -> loop(Deadline);
        false -> ok
    end.

%% xb_nif - Erlang side of xb_nif.c (a NIF library the test compiles).
%%
%%   xb_nif:load(Path)     erlang:load_nif(Path, 0): Path is the .so
%%                         without its extension.  Until then every NIF
%%                         below raises nif_not_loaded.
%%   xb_nif:start(Ms)      spawns a process registered as `xb_nif_caller`
%%                         running loop/2: it calls spin(900) (900 us in
%%                         the NIF's xb_nif_spin/xb_nif_work) for Ms
%%                         milliseconds, then exits.  A call costs one
%%                         reduction, so it yields only every few seconds
%%                         (a NIF that runs too long): meanwhile other
%%                         processes may wait for its scheduler, xb_ctl
%%                         too, and OTP 25 keeps calling the NIF through
%%                         its load-time stub (erts_call_nif_early: thread
%%                         progress waits for the scheduler).  Returns the
%%                         pid.  Replaces a running one (not the thread).
%%   xb_nif:start(Ms, polite) the same, but it yields after every call.
%%   xb_nif:start_dirty(Ms) the same with spin_dirty(5000) (a dirty CPU NIF;
%%                         dirty NIFs are for jobs of milliseconds, and a
%%                         job must outlast the few ms between a sample and
%%                         the read of the dirty scheduler's process),
%%                         registered as `xb_nif_dirty_caller`, running
%%                         dirty_loop/1.
%%   xb_nif:stop()         kill it (and stop the burner thread).
%%   xb_nif:thread_start() a native thread "xb_nif_burner" spinning in
%%                         xb_nif_thread_burn/xb_nif_work, outside Erlang.
%%   xb_nif:thread_stop()  stop and join it.
%%   xb_nif:thread_cpu_us() CPU time in microseconds the last stopped thread
%%                         used (from its creation to thread_stop()).
-module(xb_nif).
-export([load/1, start/1, start/2, start_dirty/1, stop/0, loop/2, dirty_loop/1, spin/1,
         spin_dirty/1,
         thread_start/0, thread_stop/0, thread_cpu_us/0]).

load(Path) -> erlang:load_nif(Path, 0).

spin(_Us) -> erlang:nif_error(nif_not_loaded).
spin_dirty(_Us) -> erlang:nif_error(nif_not_loaded).
thread_start() -> erlang:nif_error(nif_not_loaded).
thread_stop() -> erlang:nif_error(nif_not_loaded).
thread_cpu_us() -> erlang:nif_error(nif_not_loaded).

start(Ms) -> start(Ms, hog).

start(Ms, Mode) when is_integer(Ms), Ms > 0, (Mode =:= hog orelse Mode =:= polite) ->
    kill_caller(),
    Pid = spawn(?MODULE, loop, [erlang:monotonic_time(millisecond) + Ms, Mode]),
    register(xb_nif_caller, Pid),
    Pid.

start_dirty(Ms) when is_integer(Ms), Ms > 0 ->
    xb_ctl:kill_registered(xb_nif_dirty_caller),
    Pid = spawn(?MODULE, dirty_loop, [erlang:monotonic_time(millisecond) + Ms]),
    register(xb_nif_dirty_caller, Pid),
    Pid.

stop() ->
    try thread_stop() catch error:_ -> ok end,
    xb_ctl:kill_registered(xb_nif_dirty_caller),
    kill_caller().

kill_caller() -> xb_ctl:kill_registered(xb_nif_caller).

%% Not a tail call: loop/2 stays on the stack under the NIF.
loop(Deadline, Mode) ->
    _ = spin(900),
    Mode =:= polite andalso erlang:yield(),
    case erlang:monotonic_time(millisecond) < Deadline of
        true -> loop(Deadline, Mode);
        false -> ok
    end.

dirty_loop(Deadline) ->
    _ = spin_dirty(5000),
    case erlang:monotonic_time(millisecond) < Deadline of
        true -> dirty_loop(Deadline);
        false -> ok
    end.

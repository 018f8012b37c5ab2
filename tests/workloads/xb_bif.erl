%% xb_bif - a process that spends its time inside a BIF's C code.
%%
%%   xb_bif:start()        start(apply).
%%   xb_bif:start(How)     spawns a process registered as `xb_bif` running
%%                         loop/3: it computes erlang:crc32/1 of a 32 KiB
%%                         binary (zlib's crc32_z does the work) over and
%%                         over, called
%%                           apply   as M:F(B), M and F in variables: a call
%%                                   through the BIF's export entry (in the
%%                                   interpreter, the call_bif wrapper
%%                                   outside any module's code);
%%                           direct  as erlang:crc32(B): a direct BIF call
%%                                   from loop/3's own code.
%%                         Either way it is a body call, so loop/3 is on the
%%                         stack under the BIF.  32 KiB stays under the
%%                         40,000 bytes after which crc32 traps, and nothing
%%                         is allocated per call, so the process does not
%%                         garbage-collect.  Returns the pid; replaces a
%%                         running xb_bif.
%%   xb_bif:stop()         kill it.
-module(xb_bif).
-export([start/0, start/1, stop/0, loop/3]).

start() -> start(apply).

start(How) when How =:= apply; How =:= direct ->
    stop(),
    B = binary:copy(<<7>>, 32768),
    Pid = case How of
              apply -> spawn(?MODULE, loop, [erlang, crc32, B]);
              direct -> spawn(fun() -> direct_loop(B) end)
          end,
    register(xb_bif, Pid),
    Pid.

stop() -> xb_ctl:kill_registered(xb_bif).

%% Not tail calls: loop/3 stays on the stack under the BIF.
loop(M, F, B) ->
    _ = M:F(B),
    loop(M, F, B).

direct_loop(B) ->
    _ = erlang:crc32(B),
    direct_loop(B).

%% xb_idle - the idle workload: start/0 does nothing, so the VM runs only
%% xb_ctl and the system processes.  Present so every workload can be
%% started the same way (Mod:start()).
-module(xb_idle).
-export([start/0, stop/0]).

start() -> ok.
stop() -> ok.

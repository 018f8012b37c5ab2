%% xb_noline - compiled without line information (no_line_info): its
%% frames must carry no source line, never a neighbour's (test_lines.py).
%%   xb_noline:hop(N)   calls xb_lines:inner/1 and adds one to the result.
-module(xb_noline).
-compile([no_line_info]).
-export([hop/1]).

hop(N) ->
    M = N + 2,
    R = xb_lines:inner(M),
    R + 1.

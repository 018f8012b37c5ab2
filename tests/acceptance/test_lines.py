"""erlang-sample --lines (issue 14): source file and line on Erlang frames.

The expected lines are computed from the workload's source: every caller
frame must name the line of its call (not its function's head), the
innermost frame a line inside its function, on the interpreter and the
JIT; frames of a module compiled without line info carry none.
"""

import os
import re
import time

from xbtest import VM, WORKLOADS, check, log, per_vm, run_tool

TOOL = "erlang-sample"
FRAME = re.compile(r"^(?P<name>.+?)(?: \((?P<file>[^():]+):(?P<line>\d+)\))?$")


def call_lines():
    """{callee: line} of the lines marked '% CALL -> NAME' in xb_lines.erl,
    and spin/1's lines (head to last)."""
    calls, spin = {}, None
    with open(os.path.join(WORKLOADS, "xb_lines.erl")) as f:
        lines = f.read().splitlines()
    for i, text in enumerate(lines, 1):
        m = re.search(r"% CALL -> (\w+)", text)
        if m:
            calls[m.group(1)] = i
        if text.startswith("spin(N) ->"):
            spin = i
    end = spin
    while end < len(lines) and lines[end].strip():
        end += 1
    return calls, (spin, end)


def split_frame(text):
    m = FRAME.match(text)
    return m.group("name"), m.group("file"), int(m.group("line")) if m.group("line") else None


def folded_stacks(vm, *extra):
    r = run_tool(TOOL, "-d", "3", "--lines", "--format", "folded", *extra, vm.pid, timeout=60)
    check(r.rc == 0, "erlang-sample --lines failed", r.describe())
    stacks = []
    for line in r.out.splitlines():
        frames, count = line.rsplit(" ", 1)
        stacks.append(([split_frame(f) for f in frames.split(";")], int(count)))
    return stacks


def chain_of(frames, names):
    """The frames of the chain (in NAMES), root first, if the stack has them."""
    return [f for f in frames if f[0] in names]


@per_vm()
def test_lines_of_calls(target):
    """--lines on a deep chain: every caller frame carries the file and the
    exact line of its call, the innermost a line of its own function."""
    calls, (spin_lo, spin_hi) = call_lines()
    names = {"xb_lines:outer/2": calls["middle"], "xb_lines:middle/1": calls["inner"],
             "xb_lines:inner/1": calls["spin"]}
    with VM(target) as vm:
        vm.eval("xb_lines:start()")
        time.sleep(0.5)
        stacks = folded_stacks(vm)
        full = bad = 0
        for frames, count in stacks:
            chain = chain_of(frames, set(names) | {"xb_lines:spin/1"})
            if [f[0] for f in chain] != list(names) + ["xb_lines:spin/1"]:
                continue
            full += count
            for name, file, line in chain:
                ok = file is not None and os.path.basename(file) == "xb_lines.erl"
                if name in names:
                    ok = ok and line == names[name]
                else:
                    ok = ok and spin_lo <= line <= spin_hi
                if not ok:
                    bad += count
                    log("wrong: %s %s:%s in %s" % (name, file, line, ";".join(map(str, chain))))
                    break
        log("%d samples with the whole chain, %d with a wrong line" % (full, bad))
        check(full >= 100, "too few samples show the whole chain: %d" % full)
        check(bad == 0, "%d samples have a frame without its call's line" % bad)

        r = run_tool(TOOL, "--pstack", "--lines", vm.pid, timeout=30)
        check(r.rc == 0, "--pstack --lines failed", r.describe())
        shown = {}
        for line in r.out.splitlines():
            m = re.match(r"^\s+#\d+\s+0x[0-9a-f]+ (.+) \[Erlang\]$", line)
            if m:
                name, file, ln = split_frame(m.group(1))
                shown[name] = ln
        for name, ln in names.items():
            check(shown.get(name) == ln, "--pstack --lines: %s at line %s, want %d"
                  % (name, shown.get(name), ln), r.out)


@per_vm()
def test_lines_none_without_line_info(target):
    """A module compiled without line info has frames without a line, never a
    neighbour's; the frames around it keep theirs."""
    calls, _ = call_lines()
    with VM(target) as vm:
        vm.eval("xb_lines:start_noline()")
        time.sleep(0.5)
        stacks = folded_stacks(vm)
        hop = 0
        for frames, count in stacks:
            for i, (name, file, line) in enumerate(frames):
                if name == "xb_noline:hop/1":
                    hop += count
                    check(file is None, "xb_noline:hop/1 has a line: %s:%s" % (file, line))
                    check(frames[i - 1] == ("xb_lines:outer/2", frames[i - 1][1], calls["hop"]),
                          "the caller of hop/1 is %r, want outer/2 at line %d"
                          % (frames[i - 1], calls["hop"]))
                    if i + 1 < len(frames):
                        check(frames[i + 1][0] == "xb_lines:inner/1"
                              and frames[i + 1][2] == calls["spin"],
                              "hop/1's callee frame is %r" % (frames[i + 1],))
        log("%d samples through xb_noline:hop/1" % hop)
        check(hop >= 100, "too few samples through xb_noline:hop/1: %d" % hop)

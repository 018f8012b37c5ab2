"""erlang-sample --lines: source file and line on Erlang frames.

The expected lines are computed from the workload's source: every caller
frame must name the line of its call (not its function's head), the
innermost frame a line inside its function, on the interpreter and the
JIT; frames of a module compiled without line info carry none.  One run
writes folded text ('name (file:LINE)'), speedscope (the frames' file and
line fields) and pprof (its locations' lines, as go tool pprof -traces
-lines reads them), and all three are checked alike.
"""

import os
import re
import sys

from xbtest import asan, VM, WORKLOADS, check, log, per_vm, run_tool, tmpdir
from xbsample import wait_running

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


def stacks_by_format(vm, *extra):
    """One --lines run, three outputs: {format: [(frames root first as
    (name, file, line), count)]} (file and line None where there are none)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_formats import load_speedscope, pprof_traces, speedscope_validator, validate
    d = tmpdir()
    fo, ss, pp = (os.path.join(d, "lines." + e) for e in ("folded", "speedscope.json", "pb.gz"))
    r = run_tool(TOOL, "-d", "3", "--lines", "-o", fo, "-o", ss, "-o", pp, *extra, vm.pid, timeout=60)
    check(r.rc == 0, "erlang-sample --lines failed", r.describe())
    out = {"folded": []}
    for line in open(fo, encoding="utf-8"):
        frames, count = line.rstrip("\n").rsplit(" ", 1)
        out["folded"].append(([split_frame(f) for f in frames.split(";")], int(count)))
    doc = load_speedscope(ss)
    validate(speedscope_validator(), doc, ss)
    fr = [(f["name"], f.get("file"), f.get("line")) for f in doc["shared"]["frames"]]
    out["speedscope"] = [([fr[i] for i in sample], w) for p in doc["profiles"]
                         for sample, w in zip(p["samples"], p["weights"])]
    # go tool pprof -traces -lines: "name file:line" (no ":line" where none),
    # leaf first
    out["pprof"] = []
    for count, frames in pprof_traces(pp, "-sample_index=samples", "-lines")[0]:
        st = []
        for f in reversed(frames):
            m = re.match(r"^(.+?) (\S+?):(\d+)$", f)
            st.append((m.group(1), m.group(2), int(m.group(3)) or None) if m else (f.split(" ")[0], None, None))
        out["pprof"].append((st, int(count)))
    return out


def chain_of(frames, names):
    """The frames of the chain (in NAMES), root first, if the stack has them."""
    return [f for f in frames if f[0] in names]


@per_vm(only=["stock", "otp25-emu-dwarf"])  # (each flavour in the plain pass: its time bounds unscaled)
@asan("both flavours plain; sanitized on one")
def test_lines_of_calls(target):
    """--lines on a deep chain: every caller frame carries the file and the
    exact line of its call, the innermost a line of its own function."""
    calls, (spin_lo, spin_hi) = call_lines()
    names = {"xb_lines:outer/2": calls["middle"], "xb_lines:middle/1": calls["inner"],
             "xb_lines:inner/1": calls["spin"]}
    with VM(target) as vm:
        vm.eval("xb_lines:start()")
        wait_running(vm, "xb_lines")
        for fmt, stacks in stacks_by_format(vm).items():
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
                        ok = ok and line is not None and spin_lo <= line <= spin_hi
                    if not ok:
                        bad += count
                        log("%s: wrong: %s %s:%s in %s" % (fmt, name, file, line, ";".join(map(str, chain))))
                        break
            log("%s: %d samples with the whole chain, %d with a wrong line" % (fmt, full, bad))
            check(full >= 100, "%s: too few samples show the whole chain: %d" % (fmt, full))
            check(bad == 0, "%s: %d samples have a frame without its call's line" % (fmt, bad))

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

        # the table (the default output): its rows are innermost functions,
        # "name (file.erl:LINE)", the line inside spin/1
        r = run_tool(TOOL, "-d", "2", "--lines", vm.pid, timeout=60)
        check(r.rc == 0, "erlang-sample --lines (table) failed", r.describe())
        rows = re.findall(r"\bxb_lines:spin/1 \((?:\S*/)?xb_lines\.erl:(\d+)\)", r.out)
        check(rows, "the table with --lines has no row 'xb_lines:spin/1 (xb_lines.erl:LINE)'", r.out[:3000])
        check(all(spin_lo <= int(n) <= spin_hi for n in rows),
              "the table with --lines: spin/1 at lines %s, outside %d..%d" % (rows, spin_lo, spin_hi), r.out[:3000])


@per_vm(only=["stock", "otp25-emu-dwarf"])  # (each flavour in the plain pass: its time bounds unscaled)
@asan("both flavours plain; sanitized on one")
def test_lines_none_without_line_info(target):
    """A module compiled without line info has frames without a line, never a
    neighbour's; the frames around it keep theirs."""
    calls, _ = call_lines()
    with VM(target) as vm:
        vm.eval("xb_lines:start_noline()")
        wait_running(vm, "xb_lines")
        for fmt, stacks in stacks_by_format(vm).items():
            hop = 0
            for frames, count in stacks:
                for i, (name, file, line) in enumerate(frames):
                    if name == "xb_noline:hop/1":
                        hop += count
                        # no line; and no file but its own (folded: neither)
                        check(line is None and (file is None if fmt == "folded" else
                                                file is None or file.endswith("xb_noline.erl")),
                              "%s: xb_noline:hop/1 has a line: %s:%s" % (fmt, file, line))
                        check(frames[i - 1] == ("xb_lines:outer/2", frames[i - 1][1], calls["hop"]),
                              "%s: the caller of hop/1 is %r, want outer/2 at line %d"
                              % (fmt, frames[i - 1], calls["hop"]))
                        if i + 1 < len(frames):
                            check(frames[i + 1][0] == "xb_lines:inner/1"
                                  and frames[i + 1][2] == calls["spin"],
                                  "%s: hop/1's callee frame is %r" % (fmt, frames[i + 1],))
            log("%s: %d samples through xb_noline:hop/1" % (fmt, hop))
            check(hop >= 100, "%s: too few samples through xb_noline:hop/1: %d" % (fmt, hop))

"""README.md's examples, run (a doc test).

README.md answers each question with a ```console block: `$ COMMAND` lines
and the output they print, trimmed.  The HTML comment just before the
block, `<!-- doctest: EXPR -->`, is the Erlang the test evaluates in a fresh
VM (tests/workloads/ are on its code path; NIF_LIB stands for
tests/workloads/xb_sched_nif.c built for that VM) before running the
command, with PID replaced by the VM's pid and the tools from the build
directory first in PATH.

The output must have the shape the README shows: every line shown (but
`...`, which stands for lines left out) matches the start of a line of the
output, each a different one, where a number shown stands for any number
(with its sign and unit: 12, +8.55M, 73.78%, 1908k, 0x7f... and hex
addresses), runs of blanks for any blanks, and a parenthesised lowercase
annotation such as `(full sweep)` may be there or not.  So the columns,
the headers and the workload's named functions and processes must be
there, and a change of either fails the test.

The two set-up commands of the README (./scripts/demo.sh,
./tests/run-all.sh) are indented blocks, not examples: CI runs them
(test_promises.test_demo_script runs the demo)."""

import os
import re
import time

from xbsample import build_sched_nif
from xbtest import ROOT, VM, check, log, no_asan, per_vm, run_cmd, timeout, tmpdir, tool_path

README = os.path.join(ROOT, "README.md")
MAX_LINES = 400
DOCTEST = re.compile(r"<!--\s*doctest:\s*(.*?)\s*-->\s*\n```console\n(.*?)\n```", re.S)
BLOCK = re.compile(r"^```console\n", re.M)
# a number as an output shows it: hex addresses, then decimal figures with
# their sign and unit
NUMBER_TOKEN = re.compile(r"0x[0-9a-f]+|(?<![\w.])[0-9a-f]*[0-9][0-9a-f]*(?![\w.])"
                          r"|(?<![\w.])[-+]?\d+(?:\.\d+)?[KMGTk%]?(?![\w])")
NUMBER = r"(?:0x[0-9a-f]+|[-+]?\d+(?:\.\d+)?[KMGTk%]?|[0-9a-f]+)"
ANNOTATION = re.compile(r"\s*\([a-z][a-z ]*\)")


def examples(text=None):
    """[(expr, [(command, [shown output lines])])] of README.md."""
    if text is None:
        with open(README) as f:
            text = f.read()
    out = []
    for m in DOCTEST.finditer(text):
        cmds = []
        for line in m.group(2).split("\n"):
            if line.startswith("$ "):
                cmds.append((line[2:].strip(), []))
            else:
                check(cmds, "README: a ```console block starts with output, not a `$ ` command",
                      m.group(2))
                cmds[-1][1].append(line)
        out.append((m.group(1), cmds))
    return out


def line_pattern(shown):
    """The regex a shown output line stands for (see the module doc)."""
    shown = ANNOTATION.sub("", shown.rstrip())
    parts, pos = [], 0
    for m in NUMBER_TOKEN.finditer(shown):
        parts.append(_literal(shown[pos:m.start()]))
        parts.append(NUMBER)
        pos = m.end()
    parts.append(_literal(shown[pos:]))
    return re.compile("".join(parts))


def _literal(s):
    return r"\s+".join(re.escape(w) for w in re.split(r"\s+", s)) if s.strip() or not s else r"\s+"


def shape_mismatches(shown_lines, output):
    """Shown lines that no line of the output (each used once) matches."""
    lines = [ANNOTATION.sub("", l.rstrip()) for l in output.splitlines()]
    used, missing = set(), []
    for shown in shown_lines:
        if shown.strip() in ("...", ""):
            continue
        pat = line_pattern(shown)
        hit = next((i for i, l in enumerate(lines) if i not in used and pat.match(l)), None)
        if hit is None:
            missing.append(shown)
        else:
            used.add(hit)
    return missing


@no_asan("reads README.md: none of our tools runs")
def test_readme_is_a_guide():
    """README.md is at most 400 lines; every ```console block is an example
    with its doctest line, and each has a command and output to compare;
    the shape matcher tells a changed output from the shown one."""
    with open(README) as f:
        text = f.read()
    n = text.count("\n")
    check(n <= MAX_LINES, "README.md has %d lines (at most %d)" % (n, MAX_LINES))
    blocks = len(BLOCK.findall(text))
    found = examples(text)
    check(blocks == len(found), "README.md: %d ```console blocks, %d with a <!-- doctest: ... --> line "
          "just before them" % (blocks, len(found)))
    check(len(found) >= 8, "README.md shows only %d examples" % len(found))
    for expr, cmds in found:
        check(cmds and all(c and shown for c, shown in cmds), "README example without a command or output",
              expr)
    # the matcher itself: the shown line matches what it shows, with other
    # figures, and not another function, column or tag
    shown = ["    2473  xb_split:hot_a/1       73.78%  [Erlang]",
             "<0.79.0>      +8.55M     +6.43M  +4.63M  +3.93M       0       0     +0",
             "  xb_grow (full sweep)  in xb_mem_grow:grow/2"]
    check(not shape_mismatches(shown, "  12  xb_split:hot_a/1  0.50%  [Erlang]\n"
                               "<0.80.0>  -1.2K  +0  0  +3.93M  12  0  +7\n"
                               "  xb_grow  in xb_mem_grow:grow/2"), "the matcher refuses a line of the same shape")
    for bad in ["  12  xb_split:hot_b/1  0.50%  [Erlang]", "  12  xb_split:hot_a/1  0.50%  [JIT]",
                "  12  xb_split:hot_a/1  [Erlang]"]:
        check(shape_mismatches(shown[:1], bad), "the matcher takes %r for %r" % (bad, shown[0]))


def run_example(vm, cmd, env):
    argv = ["sh", "-c", re.sub(r"\bPID\b", str(vm.pid), cmd)]
    return run_cmd(argv, timeout=60, env=env)


@per_vm(only=["stock"])
@timeout(300)
def test_readme_examples(target):
    """Every README example on Debian's VM with its workload: exit 0 and the
    output of the shape shown."""
    env = dict(os.environ, PATH=os.path.dirname(tool_path("erlang-sample")) + ":" + os.environ["PATH"])
    failures, nif = [], None
    for expr, cmds in examples():
        if "NIF_LIB" in expr:
            nif = nif or build_sched_nif(target, tmpdir())
            expr = expr.replace("NIF_LIB", nif)
        with VM(target) as vm:
            vm.eval(expr, timeout=60)
            time.sleep(1)
            for cmd, shown in cmds:
                r = run_example(vm, cmd, env)
                if r.rc != 0 or r.timed_out:
                    failures.append("%s: exit %s\n%s" % (cmd, r.rc, r.describe()))
                    continue
                missing = shape_mismatches(shown, r.out)
                if missing:
                    failures.append("%s: output lacks lines shaped as README's\n  %s\noutput:\n%s"
                                    % (cmd, "\n  ".join(missing), r.out[:4000]))
                else:
                    log("ok: %s (%d lines shown)" % (cmd, sum(1 for l in shown if l.strip() not in ("", "..."))))
    check(not failures, "%d README example(s) do not do what README shows" % len(failures),
          "\n\n".join(failures))

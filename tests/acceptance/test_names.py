"""Elixir names (issue 14): an Elixir workload's functions print as
Demo.Hot.spin/1 in the table, folded stacks and --pstack; --blame accepts
both spellings; --erlang-names prints the raw atoms.

Needs Debian's `elixir` (tests/run-all.sh installs it); the workload
(tests/workloads/elixir/demo_hot.ex) is compiled with elixirc and runs on
the stock OTP 25 VM with Elixir's ebin on the code path.
"""

import os
import re
import shutil
import time

from xbtest import (VM, WORKLOADS, check, log, per_vm, run_cmd, run_dir, run_tool, skip)

TOOL = "erlang-sample"
ELIXIR_EBIN = "/usr/lib/elixir/lib/elixir/ebin"
ROW = re.compile(r"^\s*(\d+)\s+(.+?)\s+(\d+\.\d+)%\s+(\[.*\])$")


def elixir_ebin():
    """tests/workloads/elixir/*.ex compiled with elixirc (once per run)."""
    if not shutil.which("elixirc") or not os.path.isdir(ELIXIR_EBIN):
        skip("Debian's elixir is not installed (tests/run-all.sh installs it)")
    out = os.path.join(run_dir(), "ebin-elixir")
    if os.path.exists(os.path.join(out, "Elixir.Demo.Hot.beam")):
        return out
    os.makedirs(out, exist_ok=True)
    src = os.path.join(WORKLOADS, "elixir", "demo_hot.ex")
    r = run_cmd(["elixirc", "-o", out, src], timeout=120)
    check(r.rc == 0, "elixirc failed", r.describe() + "\n" + r.out)
    return out


def rows(text):
    return [(int(m.group(1)), m.group(2), m.group(4)) for m in map(ROW.match, text.splitlines()) if m]


def sample(vm, *args):
    r = run_tool(TOOL, *(list(args) + [vm.pid]), timeout=60)
    check(r.rc == 0, "erlang-sample %s failed" % " ".join(map(str, args)), r.describe())
    return r


@per_vm(only=["stock"])
def test_elixir_names(target):
    ebin = elixir_ebin()
    with VM(target, extra_args=["-pa", ELIXIR_EBIN, "-pa", ebin]) as vm:
        vm.eval("'Elixir.Demo.Hot':start()")
        time.sleep(0.5)

        r = sample(vm, "-d", "3", "-t", "20")
        names = {n: c for c, n, tag in rows(r.out) if tag == "[Erlang]"}
        log("table: %s" % sorted(names.items(), key=lambda kv: -kv[1])[:4])
        check(names.get("Demo.Hot.spin/1", 0) > 0.3 * sum(names.values()),
              "Demo.Hot.spin/1 is not the hottest Erlang row", r.out)
        check("anonymous fn/3 in Demo.Hot.loop/1" in names,
              "the fun in loop/1 is not 'anonymous fn/3 in Demo.Hot.loop/1'", r.out)
        check("'Elixir." not in r.out and "Elixir." not in r.out,
              "raw Elixir atoms in the table", r.out)

        r = sample(vm, "-d", "2", "--format", "folded")
        check(re.search(r"(^|;)Demo\.Hot\.loop/1;Demo\.Hot\.spin/1 \d+$", r.out, re.M),
              "no folded stack ...;Demo.Hot.loop/1;Demo.Hot.spin/1", r.out[:2000])
        check("Elixir." not in r.out, "raw Elixir atoms in folded output", r.out[:2000])

        r = sample(vm, "--pstack")
        check(re.search(r"process <[\d.]+> Demo\.Hot$", r.out, re.M),
              "--pstack does not name the process Demo.Hot", r.out)
        check(re.search(r"\] ?$", r.out, re.M) and re.search(r" Demo\.Hot\.loop/1 \[Erlang\]$", r.out, re.M),
              "--pstack does not show Demo.Hot.loop/1", r.out)
        check("Elixir." not in r.out, "raw Elixir atoms in --pstack", r.out)

        # --blame with either spelling of an Erlang function: its callers.
        for fn in ("Demo.Hot.spin/1", "'Elixir.Demo.Hot':spin/1", "Elixir.Demo.Hot:spin"):
            r = sample(vm, "-d", "2", "--blame", fn)
            b = rows(r.out)
            check(b and b[0][1] == "Demo.Hot.loop/1" and b[0][0] > 0.9 * sum(c for c, _, _ in b),
                  "--blame %s: the caller Demo.Hot.loop/1 is not the top row" % fn, r.out)

        r = sample(vm, "-d", "2", "-t", "20", "--erlang-names")
        raw = {n for c, n, tag in rows(r.out) if tag == "[Erlang]"}
        check("'Elixir.Demo.Hot':spin/1" in raw and not any(n.startswith("Demo.") for n in raw),
              "--erlang-names does not print 'Elixir.Demo.Hot':spin/1", r.out)
        r = sample(vm, "-d", "2", "--erlang-names", "--blame", "Demo.Hot.spin/1")
        b = rows(r.out)
        check(b and b[0][1] == "'Elixir.Demo.Hot':loop/1",
              "--erlang-names --blame Demo.Hot.spin/1: top row is not 'Elixir.Demo.Hot':loop/1", r.out)

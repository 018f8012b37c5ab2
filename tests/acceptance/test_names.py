"""Elixir names: an Elixir workload's functions print as
Demo.Hot.spin/1 in the table, folded stacks and --pstack; --blame accepts
both spellings; --erlang-names prints the raw atoms.

Needs Debian's `elixir` (tests/run-all.sh installs it); the workload
(tests/workloads/elixir/demo_hot.ex) is compiled with elixirc and runs on
the stock OTP 25 VM with Elixir's ebin on the code path.
"""

import os
import json
import re
import shutil
import sys

from xbtest import (VM, WORKLOADS, check, log, per_vm, run_cmd, run_dir, run_tool, skip_because, tmpdir)
from xbsample import wait_running

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_formats import go_pprof, load_speedscope, pprof_top, speedscope_validator, validate  # noqa: E402

TOOL = "erlang-sample"
ELIXIR_EBIN = "/usr/lib/elixir/lib/elixir/ebin"
ROW = re.compile(r"^\s*(\d+)\s+(.+?)\s+(\d+\.\d+)%\s+(\[.*\])$")


def elixir_ebin():
    """tests/workloads/elixir/*.ex compiled with elixirc (once per run)."""
    if not shutil.which("elixirc") or not os.path.isdir(ELIXIR_EBIN):
        skip_because("needs-package", None, "Debian's elixir is not installed (tests/run-all.sh installs it)")
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
        wait_running(vm, "'Elixir.Demo.Hot'")

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

        # --dump (its process name and stack) and the flame graph's frames
        r = sample(vm, "--dump", "--format", "json")
        mine = [p for p in json.loads(r.out) if p["name"] == "Demo.Hot"]
        check(mine and any(f.startswith("Demo.Hot.") for f in mine[0]["stack"]),
              "--dump: no process Demo.Hot with Demo.Hot.* frames", r.out[:3000])
        check("Elixir." not in r.out, "raw Elixir atoms in --dump", r.out[:3000])
        # erlang-heapsample spells them the same (and --erlang-names the
        # atoms); --contents takes the registered name either way
        r = run_tool("erlang-heapsample", "--format", "json", "-t", "0", vm.pid, timeout=60)
        check(r.rc == 0, "erlang-heapsample failed", r.describe())
        hot = [p for p in json.loads(r.out) if p.get("registered_name") == "Demo.Hot"]
        # (its current function: Demo.Hot.spin/1, Enum.reduce_range/5 or
        # the fun in loop/1, as the sampled table spells them)
        check(hot, "erlang-heapsample: no row registered as Demo.Hot", r.out[:3000])
        check(hot[0]["name"] == "Demo.Hot" and
              re.match(r"(Demo\.Hot\.|Enum\.|anonymous fn/\d+ in Demo\.Hot\.)", hot[0]["current_function"]),
              "erlang-heapsample: Demo.Hot's row not in Elixir spelling", hot[0])
        check("Elixir." not in r.out, "raw Elixir atoms in erlang-heapsample's rows", r.out[:3000])
        r = run_tool("erlang-heapsample", "--format", "json", "-t", "0", "--erlang-names", vm.pid, timeout=60)
        check(r.rc == 0 and any(p.get("registered_name") == "'Elixir.Demo.Hot'" for p in json.loads(r.out)),
              "erlang-heapsample --erlang-names: no 'Elixir.Demo.Hot'", r.out[:3000])
        for spelled in ("Demo.Hot", "Elixir.Demo.Hot"):
            r = run_tool("erlang-heapsample", "--contents", spelled, vm.pid, timeout=60)
            check(r.rc == 0 and re.search(r"^heap of <[\d.]+> \(Demo\.Hot\)", r.out, re.M),
                  "erlang-heapsample --contents %s: not the heap of Demo.Hot" % spelled, r.describe())
        svg = os.path.join(tmpdir(), "names.svg")
        sample(vm, "-d", "2", "-o", svg)
        text = open(svg, encoding="utf-8").read()
        check("Demo.Hot.spin/1" in text and "Elixir.Demo" not in text,
              "the flame graph does not name Demo.Hot.spin/1 (or has raw Elixir atoms)")

        # --blame with either spelling of an Erlang function: its callers.
        for fn in ("Demo.Hot.spin/1", "'Elixir.Demo.Hot':spin/1", "Elixir.Demo.Hot:spin"):
            r = sample(vm, "-d", "2", "--blame", fn)
            b = rows(r.out)
            check(b and b[0][1] == "Demo.Hot.loop/1" and b[0][0] > 0.9 * sum(c for c, _, _ in b),
                  "--blame %s: the caller Demo.Hot.loop/1 is not the top row" % fn, r.out)
        # a misspelt one: refused before sampling, the function named
        r = run_tool(TOOL, "-d", "30", "--blame", "Demo.Hot.spn", vm.pid, timeout=30)
        check(r.rc == 2 and len(r.lines_err) == 1 and "close: Demo.Hot.spin/1" in r.err,
              "--blame Demo.Hot.spn: not refused with Demo.Hot.spin/1 as the closest name", r.describe())

        r = sample(vm, "-d", "2", "-t", "20", "--erlang-names")
        raw = {n for c, n, tag in rows(r.out) if tag == "[Erlang]"}
        check("'Elixir.Demo.Hot':spin/1" in raw and not any(n.startswith("Demo.") for n in raw),
              "--erlang-names does not print 'Elixir.Demo.Hot':spin/1", r.out)
        r = sample(vm, "-d", "2", "--erlang-names", "--blame", "Demo.Hot.spin/1")
        b = rows(r.out)
        check(b and b[0][1] == "'Elixir.Demo.Hot':loop/1",
              "--erlang-names --blame Demo.Hot.spin/1: top row is not 'Elixir.Demo.Hot':loop/1", r.out)
        # the raw atoms in folded stacks and --pstack too (the process's
        # registered name as well)
        r = sample(vm, "-d", "2", "--format", "folded", "--erlang-names")
        check(re.search(r"(^|;)'Elixir\.Demo\.Hot':loop/1;'Elixir\.Demo\.Hot':spin/1 \d+$", r.out, re.M)
              and not re.search(r"(^|;)Demo\.Hot\.", r.out, re.M),
              "--erlang-names --format folded: not ...;'Elixir.Demo.Hot':loop/1;'Elixir.Demo.Hot':spin/1", r.out[:2000])
        r = sample(vm, "--pstack", "--erlang-names")
        check(re.search(r"process <[\d.]+> 'Elixir\.Demo\.Hot'$", r.out, re.M) and
              re.search(r" 'Elixir\.Demo\.Hot':loop/1 \[Erlang\]$", r.out, re.M),
              "--erlang-names --pstack: not the raw atoms", r.out)


def picture_names(vm, *extra):
    """One run written as speedscope and pprof: (speedscope's frames as
    {name: file}, its stacks' names root first with weights, go tool pprof
    -top's [(name, flat %)], and -raw's text)."""
    d = tmpdir()
    ss, pp = os.path.join(d, "names.speedscope.json"), os.path.join(d, "names.pb.gz")
    sample(vm, "-d", "2", "-o", ss, "-o", pp, *extra)
    doc = load_speedscope(ss)
    validate(speedscope_validator(), doc, ss)
    frames = doc["shared"]["frames"]
    stacks = [([frames[i]["name"] for i in st], w) for p in doc["profiles"]
              for st, w in zip(p["samples"], p["weights"])]
    rows, _ = pprof_top(pp, 10)
    return {f["name"]: f.get("file") for f in frames}, stacks, [(n, pct) for n, pct, _ in rows], go_pprof("-raw", pp)


@per_vm(only=["stock"])
def test_elixir_names_in_speedscope_and_pprof(target):
    """From a real run of the Elixir workload: speedscope's frames and go
    tool pprof's functions are Demo.Hot.spin/1, Demo.Hot.loop/1 and the
    anonymous fn, with demo_hot.ex as their file; nothing spelt
    'Elixir.'; --erlang-names gives the raw atoms in both."""
    ebin = elixir_ebin()
    with VM(target, extra_args=["-pa", ELIXIR_EBIN, "-pa", ebin]) as vm:
        vm.eval("'Elixir.Demo.Hot':start()")
        wait_running(vm, "'Elixir.Demo.Hot'")
        files, stacks, top, raw = picture_names(vm)
        for fn in ("Demo.Hot.spin/1", "Demo.Hot.loop/1", "anonymous fn/3 in Demo.Hot.loop/1"):
            check(fn in files, "speedscope has no frame %s" % fn, "\n".join(sorted(files)[:40]))
            check((files[fn] or "").endswith("demo_hot.ex"), "speedscope: %s has file %r, not demo_hot.ex"
                  % (fn, files[fn]))
        check(not [n for n in files if "Elixir." in n], "raw Elixir atoms in speedscope: %s"
              % [n for n in files if "Elixir." in n][:5])
        spin = sum(w for st, w in stacks if st[-1:] == ["Demo.Hot.spin/1"])
        under = sum(w for st, w in stacks if st[-2:] == ["Demo.Hot.loop/1", "Demo.Hot.spin/1"])
        check(spin > 0 and under >= 0.8 * spin, "speedscope: %d of %d Demo.Hot.spin/1 samples under "
              "Demo.Hot.loop/1" % (under, spin))
        flat = dict(top)
        check(flat.get("Demo.Hot.spin/1", 0) > 30, "go tool pprof -top: Demo.Hot.spin/1 is not on top: %s" % top)
        check("Elixir." not in raw, "raw Elixir atoms in the pprof file (go tool pprof -raw)", raw[-3000:])
        check(re.search(r"^\s+\d+: 0x[0-9a-f]+ M=\d+ Demo\.Hot\.spin/1 \S*demo_hot\.ex:\d+ ", raw, re.M),
              "pprof: no location Demo.Hot.spin/1 in demo_hot.ex", raw[-3000:])
        log("speedscope and pprof: Demo.Hot.spin/1 %.1f %% (pprof), %d of %d samples under loop/1"
            % (flat["Demo.Hot.spin/1"], under, spin))
        files, _, top, raw = picture_names(vm, "--erlang-names")
        check("'Elixir.Demo.Hot':spin/1" in files and not [n for n in files if n.startswith("Demo.")],
              "--erlang-names: speedscope frames %s" % sorted(files)[:20])
        check(dict(top).get("'Elixir.Demo.Hot':spin/1", 0) > 30 and "Demo.Hot.spin" not in raw,
              "--erlang-names: go tool pprof -top %s" % top, raw[-2000:])

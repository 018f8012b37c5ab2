"""The BPF capture path (src/sampling/capture.bpf.c) on the real kernel,
against real VMs, through tests/tools/bpf_capture_check.

The check program loads the program, opens a cpu-clock event per VM thread
in BPF mode (sampler opts.bpf + attach), collects records for a while and,
for every sample whose captured process is the one named by --pid-term
(the pid term at offset 0 of the captured struct process, formatted as the
VM prints it), walks that process's Erlang stack in the CAPTURED memory
only: from E up to beam_normal_exit, noting the return addresses on the
way.  In the JIT, Erlang code runs on the process's own stack, so the user
stack copy [rsp, hend) holds it; in the interpreter, and in the JIT's C
calls and context switches, the separate tail copy does.
"""

import os
import re
import time

from xbtest import VM, check, log, per_vm, run_cmd, run_tool, skip, timeout, tool_path

CHECK = os.path.join("tests", "tools", "bpf_capture_check")
DEEP_CHAIN = "xb_deep:d/1,xb_deep:c/1,xb_deep:b/1,xb_deep:a/1"


def need_root():
    if os.geteuid() != 0:
        skip("BPF capture needs root (CAP_BPF and CAP_PERFMON)")


def parse(out):
    """The check program's 'key: value' lines: {key: [values...]}."""
    d = {}
    for line in out.splitlines():
        m = re.match(r"^(\w+): (.*)$", line)
        if m:
            d.setdefault(m.group(1), []).append(m.group(2))
    return d


def fields(text):
    """'a 1 b 2 (c 3)' -> {'a': 1, 'b': 2, 'c': 3} for the numeric pairs."""
    return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)\b", text)}


@per_vm()
@timeout(120)
def test_bpf_capture_deep_stack(target):
    """xb_deep (a -> b -> c -> d -> leaf, spinning): records arrive for the
    scheduler threads, and in >= 99 % of the samples whose captured c_p is
    xb_deep the captured memory holds the whole Erlang stack: the return
    addresses into d, c, b, a, in that order, then beam_normal_exit."""
    need_root()
    with VM(target) as vm:
        pid_term = vm.eval("xb_deep:start()")
        check(re.match(r"^<\d+\.\d+\.\d+>$", pid_term), "xb_deep:start() returned %r" % pid_term)
        time.sleep(0.3)
        r = run_tool(CHECK, "-d", "2", "--pid-term", pid_term, "--chain", DEEP_CHAIN,
                     "--show-bad", "5", vm.pid, timeout=60)
    check(r.rc == 0 and not r.timed_out, "bpf_capture_check failed (exit %s)" % r.rc, r.describe())
    d = parse(r.out)
    for key in ("thread", "bpf", "cost", "target", "samples"):
        check(key in d, "no '%s:' line in the output" % key, r.out)
    sched = []
    for t in d["thread"]:
        m = re.match(r"(\d+) ([scio])(\d+) records (\d+)", t)
        if m and m.group(2) == "s":
            sched.append((int(m.group(1)), int(m.group(4))))
    check(sched, "no scheduler threads were attached", r.out)
    sched_records = sum(n for _, n in sched)
    check(sched_records >= 200, "only %d records from the scheduler threads in 2 s" % sched_records, r.out)
    bpf = fields(d["bpf"][0])
    check(bpf["ring_full"] == 0 and bpf["malformed"] == 0,
          "records lost (ring full) or malformed: %s" % d["bpf"][0], r.out)
    tgt = fields(d["target"][0])
    n, ok = tgt["samples"], tgt["chain_ok"]
    check(n >= 200, "only %d samples of xb_deep %s were captured" % (n, pid_term), r.out + r.err)
    check(ok >= 0.99 * n,
          "the whole stack (d, c, b, a, beam_normal_exit) was captured in only %d of %d samples "
          "of xb_deep (%.1f %%, want >= 99 %%)" % (ok, n, 100.0 * ok / n), r.out + r.err)
    log("%s: %d scheduler records; xb_deep %s: %d samples, whole stack captured in %d "
        "(%d from the user stack [rsp, hend), %d from the tail copy)"
        % (target.name, sched_records, pid_term, n, ok, tgt["in_heap"], tgt["tail"]))
    log("example: %s" % d.get("example", ["?"])[0])
    log("cost: %s; %s" % (d["cost"][0], d["bytes"][0] if "bytes" in d else ""))


def test_bpf_capture_unprivileged():
    """Without privilege (as nobody) loading the program fails with one
    line that names CAP_BPF and CAP_PERFMON -- no crash, no libbpf noise."""
    need_root()
    path = tool_path(CHECK)
    probe = run_cmd(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/test",
                     "-x", path], timeout=10)
    if probe.rc != 0:
        skip("%s is not executable by nobody (directory permissions)" % path)
    r = run_cmd(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", path, "--open-only"],
                timeout=30)
    check(r.rc == 2, "exit %s, want 2 (BPF refused)" % r.rc, r.describe())
    lines = [l for l in r.err.splitlines() if l.strip()]
    check(len(lines) == 1, "want exactly one line on stderr, got %d" % len(lines), r.describe())
    check("CAP_BPF" in lines[0] and "CAP_PERFMON" in lines[0],
          "the message does not name CAP_BPF and CAP_PERFMON: %s" % lines[0])
    log(lines[0])


def test_bpf_capture_loads():
    """As root the program passes the kernel's verifier."""
    need_root()
    r = run_tool(CHECK, "--open-only", timeout=30)
    check(r.rc == 0 and "loaded: yes" in r.out, "the program did not load", r.describe())

"""Names on stripped distribution builds through debuginfod.

OTP 29's stripped beam.smp names none of its internal functions, so
`--blame copy_struct` cannot work there.  With DEBUGINFOD_URLS set (the
opt-in), the tools ask elfutils' debuginfod client for the beam's debug info
by build-id.  Here a local `debuginfod` on loopback serves the DWARF of our
own OTP 29 build to the tool looking at its stripped copy: the blame works,
-v says what was fetched, a second run takes it from the cache, and a file
whose build-id differs (served by a fake server) is refused.

Needs the VMs otp29-jit and otp29-jit-stripped (tests/build-vms.sh default
builds them) and Debian's debuginfod (tests/run-all.sh installs it).
"""

import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request

import xbtest
from xbtest import VM, check, load_target, log, run_cmd, run_tool, timeout, tmpdir
from xbsample import wait_running  # noqa: E402

TOOL = "erlang-sample"


def build_id(path):
    r = run_cmd(["readelf", "-n", path], timeout=30)
    m = re.search(r"Build ID: ([0-9a-f]+)", r.out)
    check(m, "no build-id in %s" % path, r.out)
    return m.group(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fetch_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:  # (no HEAD in debuginfod)
            return r.status == 200 and r.read(4) == b"\x7fELF"
    except Exception:
        return False


def blame(vm, env):
    return run_tool(TOOL, "-v", "-d", "3", "--blame", "copy_struct", vm.pid, env=env, timeout=90)


@timeout(240)
def test_debuginfod_stripped_otp29():
    stripped, full = load_target("otp29-jit-stripped"), load_target("otp29-jit")
    for t in (stripped, full):
        if not t.present:
            xbtest.skip_because("target-not-built", t, t.missing)
    if not shutil.which("debuginfod"):
        xbtest.skip_because("needs-package", None, "Debian's debuginfod is not installed (tests/run-all.sh "
                            "installs it)")
    bid = build_id(stripped.beam)
    check(bid == build_id(full.beam), "the stripped beam's build-id differs from the full build's")
    d = tmpdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBUGINFOD_")}
    srv = subprocess.Popen(["debuginfod", "-F", os.path.dirname(full.beam), "-p", str(port),
                            "-d", os.path.join(d, "db.sqlite"), "-t", "0"],
                           stdin=subprocess.DEVNULL, stdout=open(os.path.join(d, "srv.log"), "wb"),
                           stderr=subprocess.STDOUT, env=env, start_new_session=True)
    xbtest._track(srv, "debuginfod")
    base = "http://127.0.0.1:%d" % port
    t0 = time.monotonic()
    while not fetch_ok("%s/buildid/%s/debuginfo" % (base, bid)):
        check(srv.poll() is None, "debuginfod exited", open(os.path.join(d, "srv.log")).read()[-2000:])
        check(time.monotonic() - t0 < 120, "debuginfod did not index %s within 120 s" % full.beam)
        time.sleep(0.5)
    log("debuginfod on port %d indexed the OTP 29 build in %.1f s" % (port, time.monotonic() - t0))

    with VM(stripped) as vm:
        vm.eval("xb_copy:start()")
        wait_running(vm, "xb_sender")
        r = blame(vm, {"DEBUGINFOD_URLS": ""})
        check(r.rc == 2 and "matches 'copy_struct'" in r.err,
              "without debuginfod the stripped OTP 29 should have no copy_struct", r.describe())
        # refused before sampling, in one line naming the release attached
        # and why (README: --blame)
        lines = [l for l in r.err.splitlines() if l.startswith(TOOL + ":")]
        check(len(lines) == 1 and r.elapsed < 10 * xbtest.time_scale(), "the refusal is not one line "
              "before sampling (%.1f s)" % r.elapsed, r.describe())
        check(re.search(r"no function of this VM \(OTP 29[\d.]*, erts [\d.]+, jit, debug info: dynsym\)", lines[0])
              and "a stripped beam names only its exported functions" in lines[0] and "DEBUGINFOD_URLS" in lines[0],
              "the refusal does not name OTP 29, the JIT and the stripped beam", lines[0])
        log("without debuginfod: %s" % lines[0])

        cache = os.path.join(d, "cache")
        denv = {"DEBUGINFOD_URLS": base, "DEBUGINFOD_CACHE_PATH": cache}
        r = blame(vm, denv)
        check(r.rc == 0, "--blame copy_struct with debuginfod failed", r.describe())
        check(re.search(r"debuginfod: debug info for beam\.smp \(build-id %s\) fetched from %s"
                        % (bid, re.escape(base)), r.err), "-v does not say what was fetched", r.err)
        rows = re.findall(r"^\s*(\d+)\s+(\S+)\s+\d+\.\d+%\s+\[Erlang\]$", r.out, re.M)
        log("with debuginfod: " + "; ".join("%s %s" % (n, c) for c, n in rows[:3]))
        check(rows and rows[0][1] == "xb_copy:send_loop/2",
              "copy_struct is not blamed on xb_copy:send_loop/2", r.out)
        r = blame(vm, denv)
        check(r.rc == 0 and "debuginfod: debug info for beam.smp (build-id %s) from the cache" % bid in r.err,
              "the second run did not use the cache", r.describe())

        # A server that answers with another build's file: refused.  (Any
        # beam with DWARF and another build-id will do: the default suite
        # builds otp25-jit-dwarf; the check must run, not be skipped.)
        other = next((t for t in map(load_target, ("otp25-jit-dwarf", "otp25-emu-dwarf", "otp27-jit"))
                      if t.present), None)
        check(other is not None, "no other VM with DWARF is built to serve a wrong file: run "
              "tests/build-vms.sh default")
        if other is not None:
            root = os.path.join(d, "fake")
            os.makedirs(os.path.join(root, "buildid", bid))
            shutil.copy(other.beam, os.path.join(root, "buildid", bid, "debuginfo"))

            class Quiet(http.server.SimpleHTTPRequestHandler):
                def __init__(self, *a, **k):
                    super().__init__(*a, directory=root, **k)

                def log_message(self, *a):
                    pass

            httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
            th = threading.Thread(target=httpd.serve_forever, daemon=True)
            th.start()
            try:
                fenv = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % httpd.server_address[1],
                        "DEBUGINFOD_CACHE_PATH": os.path.join(d, "cache2")}
                r = blame(vm, fenv)
                check(r.rc == 2 and "does not have build-id %s: ignored" % bid in r.err,
                      "a file with another build-id was not refused", r.describe())
                log("a server answering with %s's beam.smp for build-id %s: refused" % (other.name, bid))
            finally:
                httpd.shutdown()

#!/usr/bin/python3
"""The last lines of tests/run-all.sh: the results of its steps added up.

    summary.py [--meson BUILDDIR STATUS]... [--pytest RESULTS.json STATUS]...
               [--failure TEXT]... [--started EPOCH [--time-limit SECONDS]]

--meson: `meson test -C BUILDDIR --logbase unit` ran with exit STATUS; each
    case of the C unit tests (a TAP subtest, BUILDDIR/meson-logs/unit.json)
    counts, and a test program that failed past its cases (a sanitizer
    report aborts it, LeakSanitizer's exit status) counts once more.
--pytest: a pytest run with --results RESULTS.json ended with STATUS; its
    counts add up; an exit other than 0 (all passed), 1 (some failed) or 5
    (nothing selected: a phase -k or -m left empty) without a recorded
    refusal counts as one failure, and so do pytest runs that all selected
    nothing.
--failure: one more failure (run-all.sh: the mutation check).
--time-limit: a run longer than SECONDS since EPOCH is one more failure.

Prints the failures, then exactly one line "N passed, N failed, N skipped"
(.ci/run reads it).  A run in which nothing passed is a failure.  Exit
status 1 if anything failed, else 0."""

import argparse
import json
import os
import sys
import time


def meson(builddir, status, counts, failures):
    label = "" if os.path.basename(os.path.normpath(builddir)) == "build" else "@" + os.path.basename(
        os.path.normpath(builddir)).replace("build-", "")
    path = os.path.join(builddir, "meson-logs", "unit.json")
    try:
        with open(path) as f:
            tests = [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError) as e:
        counts["failed"] += 1
        failures.append("meson test -C %s: exit %s, no results (%s)" % (builddir, status, e))
        return
    bad_before = counts["failed"]
    for t in tests:
        out = (t.get("stdout") or "").splitlines()
        failed_cases = 0
        for i, line in enumerate(out):
            if line.startswith("ok "):
                counts["skipped" if "# SKIP" in line.upper() else "passed"] += 1
            elif line.startswith("not ok "):
                name = line[7:].split("#")[0].strip()
                detail = out[i + 1][2:] if i + 1 < len(out) and out[i + 1].startswith("# ") else ""
                counts["failed"] += 1
                failed_cases += 1
                failures.append("unit.%s%s: %s" % (name, label, detail or "failed"))
        if t.get("result") not in ("OK", "SKIP") and not failed_cases:
            err = (t.get("stderr") or "").splitlines()
            case = [l[7:] for l in err if l.startswith("# case ")]
            counts["failed"] += 1
            failures.append("meson test -C %s %s: %s (exit %s)%s; its log: %s" % (
                builddir, t.get("name"), t.get("result"), t.get("returncode"),
                " after case %s" % case[-1] if case else "",
                os.path.join(builddir, "meson-logs", "unit.txt")))
    if str(status) != "0" and counts["failed"] == bad_before:
        counts["failed"] += 1
        failures.append("meson test -C %s: exit %s" % (builddir, status))


def pytest_results(path, status, counts, failures):
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        counts["failed"] += 1
        failures.append("pytest: exit %s, no results (%s)" % (status, e))
        return
    for k in ("passed", "failed", "skipped"):
        counts[k] += r.get(k, 0)
    failures.extend(r.get("failures", []))
    if str(status) not in ("0", "1", "5") and not r.get("failed"):
        counts["failed"] += 1
        failures.append("pytest: exit %s (interrupted, or an internal or usage error)" % status)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--meson", nargs=2, action="append", default=[], metavar=("BUILDDIR", "STATUS"))
    ap.add_argument("--pytest", nargs=2, action="append", default=[], metavar=("RESULTS", "STATUS"))
    ap.add_argument("--failure", action="append", default=[], metavar="TEXT")
    ap.add_argument("--started", type=float, metavar="EPOCH")
    ap.add_argument("--time-limit", type=float, metavar="SECONDS")
    a = ap.parse_args()
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    for d, st in a.meson:
        meson(d, st, counts, failures)
    for p, st in a.pytest:
        pytest_results(p, st, counts, failures)
    if a.pytest and all(str(st) == "5" for _, st in a.pytest):
        counts["failed"] += 1
        failures.append("pytest: no test selected (by the suite, -k or -m): that is a failure")
    for text in a.failure:
        counts["failed"] += 1
        failures.append(text)
    if a.started is not None:
        took = time.time() - a.started
        print("run-all.sh: the tests took %d min %02d s" % (took // 60, took % 60))
        if a.time_limit and took > a.time_limit:
            counts["failed"] += 1
            failures.append("run-all.sh: the tests took %d min %02d s, over their limit of %d min %02d s"
                            % (took // 60, took % 60, a.time_limit // 60, a.time_limit % 60))
    if counts["passed"] == 0:
        failures.append("no test passed (%(skipped)d skipped, %(failed)d failed): that is a failure" % counts)
        counts["failed"] += 1
    if failures:
        print("failed (%d):" % len(failures))
        for l in failures:
            print("  " + (l if len(l) <= 300 else l[:297] + "..."))
    print("%(passed)d passed, %(failed)d failed, %(skipped)d skipped" % counts, flush=True)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""libFuzzer targets for every decoder of remote or file data:
the JIT symfile parser, perf and BPF sample records, term and atom text,
the DWARF layout reader, perf map escaping, the text parsers (perf maps,
/proc/PID/maps, perf script), /proc/PID/maps on its own (fuzz_maps: what
is accepted prints back in the kernel's format and parses the same, within
the input's length), and erlang-heapsample's readers of the VM's
memory (fuzz_heap: the process table, a process struct with its links,
monitors, messages and dictionary, its heap walked whole or sampled, over
memory made of the input).  tests/fuzz/build.sh builds them with clang,
ASan and UBSan into build-fuzz/; each runs from its seed corpus
(tests/fuzz/corpus/TARGET, written by tests/fuzz/seeds.c; the DWARF
target's seed is compiled from tests/fuzz/dwarf_seed.c by this test) for
a while: 10 s each in the default suite (60 s of fuzzing in all, two
targets at a time), 120 s each in the `fuzz` suite.  A crash, a
sanitizer report, a leak, a timeout (5 s per input) or an out-of-memory
(2 GB) fails the test; the input is kept under tests/out/fuzz/ to
reproduce it (build-fuzz/tests/fuzz/TARGET FILE).
"""

import concurrent.futures
import os
import re
import shutil

from xbtest import ROOT, check, log, no_asan, run_cmd, skip_because, suite, timeout, tmpdir

TARGETS = ["symfile", "records", "terms", "text", "dwarf", "heap", "layout", "maps"]
FUZZ = os.path.join(ROOT, "tests", "fuzz")


def build():
    if not shutil.which("clang"):
        skip_because("needs-package", None, "clang (libFuzzer, with libfuzzer-14-dev or clang's runtime)")
    r = run_cmd([os.path.join(FUZZ, "build.sh")], timeout=900)
    check(r.rc == 0, "tests/fuzz/build.sh failed", r.describe() + r.out[-2000:])
    return os.path.join(ROOT, r.out.strip().splitlines()[-1], "tests", "fuzz")


def run_one(bindir, t, seconds):
    """Fuzz target T for SECONDS from a copy of its seeds: (target, corpus
    directory, crash-file prefix, Result)."""
    corpus = os.path.join(tmpdir(), t)
    seeds = os.path.join(FUZZ, "corpus", t)
    if os.path.isdir(seeds):
        shutil.copytree(seeds, corpus)
    else:
        os.makedirs(corpus)
    if t == "dwarf":
        # The DWARF seed is an object file, compiled here from its source
        # (no binary in the repository).
        r = run_cmd(["cc", "-g", "-c", "-o", os.path.join(corpus, "seed.o"),
                     os.path.join(FUZZ, "dwarf_seed.c")], timeout=60)
        if r.rc != 0:
            return t, corpus, None, r
    art = os.path.join(tmpdir(), "crash-%s-" % t)
    r = run_cmd([os.path.join(bindir, "fuzz_" + t), "-max_total_time=%d" % seconds, "-timeout=5",
                 "-rss_limit_mb=2048", "-malloc_limit_mb=2048", "-print_final_stats=1",
                 "-artifact_prefix=" + art, corpus], timeout=seconds + 120,
                env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                         UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"))
    return t, corpus, art, r


def run_all(seconds):
    """Every target for SECONDS, two at a time (one per CPU of the CI
    machines: the fuzzing time per target is what counts, not the wall
    time)."""
    bindir = build()
    total = 0
    report = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda t: run_one(bindir, t, seconds), TARGETS))
    for t, corpus, art, r in results:
        if art is None:
            check(False, "cc -g -c tests/fuzz/dwarf_seed.c failed", r.describe())
        crashes = [f for f in os.listdir(tmpdir()) if f.startswith(os.path.basename(art))]
        if crashes or r.rc != 0:
            keep = os.path.join(ROOT, "tests", "out", "fuzz")
            os.makedirs(keep, exist_ok=True)
            for f in crashes:
                shutil.copy(os.path.join(tmpdir(), f), keep)
            err = [l for l in r.err.splitlines() if re.search(r"ERROR|SUMMARY|runtime error|#\d+ 0x", l)]
            check(False, "fuzz_%s failed (exit %s); input kept in tests/out/fuzz/%s" %
                  (t, r.rc, crashes[0] if crashes else "?"), "\n".join(err[:25]))
        m = re.search(r"stat::number_of_executed_units:\s*(\d+)", r.err)
        n = int(m.group(1)) if m else 0
        check(n > 0, "fuzz_%s ran no input" % t, r.err[-1500:])
        cov = re.findall(r"cov: (\d+)", r.err)
        total += n
        report.append("%s %d execs (cov %s, corpus %d)" % (t, n, cov[-1] if cov else "?", len(os.listdir(corpus))))
    log("%d s each: %s; %d executions in all" % (seconds, "; ".join(report), total))


@timeout(1100)
@no_asan("the fuzz targets are an ASan/UBSan build of their own (build-fuzz/)")
def test_fuzz_short():
    run_all(10)


@suite("fuzz")
@timeout(2000)
def test_fuzz_long():
    run_all(120)

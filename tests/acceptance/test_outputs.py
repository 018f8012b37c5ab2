"""erlang-sample's outputs against real VMs: every format of the
same workload tells the same story, read by its real consumer (speedscope's
schema, go tool pprof, headless Chromium); --blame in stack formats; bad
output paths and formats fail cleanly and leave nothing behind.
(tests/acceptance/test_formats.py checks the writers on synthetic
profiles in more depth.)"""

import calendar
import gzip
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_formats import (check_svg_file, go_pprof, load_speedscope, png_pixels, pprof_top,  # noqa: E402
                          pprof_traces, speedscope_validator, stacks_of, start_chromium, validate)
from xbtest import asan, VM, check, log, per_vm, run_cmd, run_tool, timeout, tmpdir, tool_path  # noqa: E402
from xbsample import SplitClock, wait_running  # noqa: E402

TOOL = "erlang-sample"
CHAIN = ["xb_deep:a/1", "xb_deep:b/1", "xb_deep:c/1", "xb_deep:d/1", "xb_deep:leaf/1"]
LEAF = "xb_deep:leaf/1"
# the frames that mark what a stack lacks (include/xb/profile.h, frames.h, by.h)
MARKS = {"[truncated]", "[callers unknown]", "[no Erlang code above]", "[no process]", "[process unknown]"}


def has_chain(frames):
    """frames root first: does it hold CHAIN in order, ending at the leaf?"""
    for i in range(len(frames) - len(CHAIN) + 1):
        if frames[i:i + len(CHAIN)] == CHAIN:
            return True
    return False


def pprof_seconds(text):
    """go tool pprof's "1.63s", "2.01ms", "300us", "20ns" in seconds."""
    m = re.match(r"^([\d.]+)(s|ms|us|µs|ns)$", text)
    check(m, "not a pprof duration: %r" % text)
    return float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}[m.group(2)]


def run_ok(vm, *args, timeout_s=60):
    r = run_tool(TOOL, *(list(args) + [str(vm.pid)]), timeout=timeout_s)
    check(r.rc == 0 and not r.timed_out, "erlang-sample %s: exit %s" % (" ".join(args), r.rc),
          r.describe())
    return r


def folded_stacks(path):
    out = []
    for line in open(path, encoding="utf-8"):
        frames, n = line.rstrip("\n").rsplit(" ", 1)
        out.append((frames.split(";"), int(n)))
    return out


def chain_stats(stacks):
    """(samples, samples in LEAF, of those with the whole chain) of
    [(frames root first, count)]."""
    total = sum(n for _, n in stacks)
    leaf = sum(n for f, n in stacks if f and f[-1] == LEAF)
    whole = sum(n for f, n in stacks if f and f[-1] == LEAF and has_chain(f))
    return total, leaf, whole


SVG_NS = "{http://www.w3.org/2000/svg}"


def svg_stacks(root):
    """The flame graph's frames as [(frames root first, samples)], one per
    drawn frame: its name and its ancestors' (the root "all" left out),
    and its width in samples (data-w: it and its callees).  A frame's
    parent is the frame one row below (FRAME_H pixels lower: the root is at
    the bottom) whose [data-x, data-x + data-w) holds its own."""
    g = root.find(".//%sg[@id='frames']" % SVG_NS)
    check(g is not None, "no <g id=frames> in the SVG")
    nodes = []
    for fr in g.findall(SVG_NS + "g"):
        m = re.match(r"(.*) \(([\d,]+) samples?, [\d.]+%\)$", fr.find(SVG_NS + "title").text, re.S)
        check(m, "frame title %r" % fr.find(SVG_NS + "title").text)
        nodes.append((m.group(1), int(fr.get("data-x")), int(fr.get("data-w")),
                      float(fr.find(SVG_NS + "rect").get("y"))))
    ys = sorted({y for _, _, _, y in nodes}, reverse=True)  # the root's row first
    depth = {y: i for i, y in enumerate(ys)}
    check(all(abs((ys[i] - ys[i + 1]) - (ys[0] - ys[1])) < 0.01 for i in range(len(ys) - 1)),
          "the SVG's rows are not evenly spaced: %s" % ys[:10])
    by_depth = {}
    for i, (name, x, w, y) in enumerate(nodes):
        by_depth.setdefault(depth[y], []).append(i)
    parent = {}
    for i, (name, x, w, y) in enumerate(nodes):
        d = depth[y]
        if d == 0:
            continue
        ps = [j for j in by_depth.get(d - 1, []) if nodes[j][1] <= x and x + w <= nodes[j][1] + nodes[j][2]]
        check(len(ps) == 1, "frame %r at row %d: %d parents" % (name, d, len(ps)))
        parent[i] = ps[0]
    out = []
    for i, (name, x, w, y) in enumerate(nodes):
        path, j = [], i
        while j in parent:
            path.append(nodes[j][0])
            j = parent[j]
        check(nodes[j][0] == "all", "frame %r does not sit on the root" % name)
        out.append((list(reversed(path)), w))
    return out


@per_vm(only=["stock", "otp25-emu-dwarf", "otp25-jit-dwarf"])
@timeout(180)
@asan("every output writer")
def test_deep_chain_in_every_format(target):
    """One run, five outputs (-o repeated: the table, folded, flamegraph,
    speedscope, pprof of the same samples): a->b->c->d->leaf in order on
    >= 80 % of the leaf's samples in each stack format, and the leaf's
    share the same in all five within 1 point."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_deep:start()")
        wait_running(vm, "xb_deep")
        d = tmpdir()
        files = {fmt: os.path.join(d, "deep." + ext) for fmt, ext in
                 (("table", "table"), ("folded", "folded"), ("speedscope", "speedscope.json"),
                  ("pprof", "pb.gz"), ("flamegraph", "svg"))}
        args = ["-d", "4", "-t", "1000"]
        for f in files.values():
            args += ["-o", f]
        run_ok(vm, *args)
        shares = {}
        # table
        text = open(files["table"]).read()
        total = leaf = 0
        for line in text.splitlines()[1:]:
            m = re.match(r"^\s*(\d+)\s+(.+?)\s+(\d+\.\d+)%\s+(\[.*\])$", line)
            check(m, "unparseable table row %r" % line, text)
            total += int(m.group(1))
            leaf += int(m.group(1)) if m.group(2) == LEAF else 0
        m = re.match(r"processed (\d+)/", text)
        check(m and int(m.group(1)) == total and total >= 500, "table rows do not add up", text)
        shares["table"] = 100.0 * leaf / total
        # folded
        total, leaf, whole = chain_stats(folded_stacks(files["folded"]))
        check(whole >= 0.8 * leaf and leaf > 0, "folded: %d of %d leaf samples carry the chain"
              % (whole, leaf))
        shares["folded"] = 100.0 * leaf / total
        # speedscope, validated against speedscope's schema
        doc = load_speedscope(files["speedscope"])
        validate(speedscope_validator(), doc, files["speedscope"])
        st = [(frames, w) for p in doc["profiles"] for frames, w in stacks_of(doc, p)]
        total, leaf, whole = chain_stats(st)
        check(whole >= 0.8 * leaf and leaf > 0, "speedscope: %d of %d leaf samples carry the chain"
              % (whole, leaf))
        shares["speedscope"] = 100.0 * leaf / total
        # pprof, read by go tool pprof
        rows, out = pprof_top(files["pprof"], 20)
        flat = {name: pct for name, pct, _ in rows}
        check(LEAF in flat, "go tool pprof -top has no %s" % LEAF, out)
        shares["pprof"] = flat[LEAF]
        traces, tout = pprof_traces(files["pprof"])
        whole = leafw = 0.0
        for c, frames in traces:  # leaf first
            w = pprof_seconds(c)
            if frames and frames[0] == LEAF:
                leafw += w
                whole += w if has_chain(list(reversed(frames))) else 0
        check(leafw > 0 and whole >= 0.8 * leafw, "pprof: %.0f of %.0f leaf samples carry the chain"
              % (whole, leafw), tout[:3000])
        # flamegraph: the leaf frames' widths (their <title> carries samples and %),
        # and where they sit: on a->b->c->d, in that order, row above row
        root, _ = check_svg_file(files["flamegraph"])
        titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
        pcts = [float(m.group(1)) for t in titles
                for m in [re.match(r"^xb_deep:leaf/1 \(.*?([\d.]+)%\)$", t)] if m]
        check(pcts, "no xb_deep:leaf/1 frame in the SVG", "\n".join(titles[:30]))
        shares["flamegraph"] = sum(pcts)
        total, leaf, whole = chain_stats([(f, w) for f, w in svg_stacks(root) if f and f[-1] == LEAF])
        check(whole >= 0.8 * leaf and leaf > 0, "flamegraph: %d of %d leaf samples sit on the chain"
              % (whole, leaf))
        log("flamegraph: %d of %d leaf samples on a;b;c;d, row above row" % (whole, leaf))
        log("leaf share by format: " + ", ".join("%s %.2f %%" % kv for kv in shares.items()))
        lo, hi = min(shares.values()), max(shares.values())
        check(hi - lo <= 1.0, "the leaf's share differs by %.1f points between formats: %s"
              % (hi - lo, shares))


def stacks_in_four_formats(txt, js, svg, pb):
    """The stacks of one run written as folded (TXT), speedscope (JS), a
    flame graph (SVG) and pprof (PB), root first, each with its samples:
    (speedscope's document, [(format, [(frames, samples)])]).  The flame
    graph's stacks are each frame with its own samples (its width less its
    callees'); pprof's as go tool pprof -traces reads them (leaf first,
    reversed), in samples (sample type samples/count)."""
    folded = folded_stacks(txt)  # parses as folded: "frames count" lines
    doc = load_speedscope(js)
    sc = [(frames, w) for p in doc["profiles"] for frames, w in stacks_of(doc, p)]
    root, _ = check_svg_file(svg)
    drawn = svg_stacks(root)
    below = {}
    for f, w in drawn:
        if len(f) > 1:
            below[tuple(f[:-1])] = below.get(tuple(f[:-1]), 0) + w
    flame = [(f, w - below.get(tuple(f), 0)) for f, w in drawn if w > below.get(tuple(f), 0)]
    pp = [(list(reversed(frames)), int(c)) for c, frames in pprof_traces(pb, "-sample_index=samples")[0]]
    return doc, [("folded (.txt)", folded), ("speedscope (.json)", sc), ("flamegraph (.svg)", flame),
                 ("pprof (.pb.gz)", pp)]


@per_vm(only=["stock", "otp25-emu-dwarf"])
@timeout(120)
def test_truncated_root_and_format_by_extension(target):
    """From a real run: -o p.json and -o p.txt without --format pick
    speedscope (validated by speedscope's schema) and folded by the
    extension (and -o p.svg, -o p.pb.gz the flame graph and pprof); with
    --max-callchain-depth 3 every stack through the deep chain's leaf (5
    Erlang frames and more) keeps its innermost 3 frames under a
    "[truncated]" root, in all four (the flame graph's frames row above
    row, pprof's as go tool pprof -traces reads them), never a root that
    is not one."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_deep:start()")
        wait_running(vm, "xb_deep")
        d = tmpdir()
        js, txt, svg, pb = (os.path.join(d, "p." + e) for e in ("json", "txt", "svg", "pb.gz"))
        run_ok(vm, "-d", "2", "--max-callchain-depth", "3", "-o", js, "-o", txt, "-o", svg, "-o", pb)
        doc, formats = stacks_in_four_formats(txt, js, svg, pb)
        validate(speedscope_validator(), doc, js)
        # each Erlang frame's "file": its module's source, from the line table
        files = {f["name"]: f.get("file") for f in doc["shared"]["frames"]}
        check((files.get(LEAF) or "").endswith("tests/workloads/xb_deep.erl"),
              "speedscope: %s has file %r, not its module's source" % (LEAF, files.get(LEAF)))
        want = ["[truncated]", "xb_deep:c/1", "xb_deep:d/1", LEAF]
        erl = re.compile(r"^[^:]+:[^:/]+/\d+$")
        for what, stacks in formats:
            # root to the leaf; below it, native frames the leaf called
            # (memcpy: the depth limit counts native frames apart)
            through = [(f[:f.index(LEAF) + 1], f[f.index(LEAF) + 1:], n) for f, n in stacks if LEAF in f]
            n_leaf = sum(n for _, _, n in through)
            check(n_leaf >= 200, "%s: only %d samples through %s" % (what, n_leaf, LEAF))
            # ("[callers unknown]" above the leaf is a right answer too:
            # a sample whose stack moved before it was read)
            bad = [(f + below, n) for f, below, n in through
                   if (f != want and f[0] != "[callers unknown]") or any(erl.match(x) for x in below)]
            check(not bad, "%s: stacks through the leaf that are not %s: %s" % (what, ";".join(want), bad[:5]))
            n_want = sum(n for f, _, n in through if f == want)
            check(n_want >= 0.95 * n_leaf, "%s: only %d of %d samples through the leaf are %s"
                  % (what, n_want, n_leaf, ";".join(want)))
            deep = [f for f, _ in stacks if sum(1 for x in f if erl.match(x)) > 3]
            check(not deep, "%s: stacks with more than 3 Erlang frames" % what, str(deep[:3]))
            log("%s: %d samples through the leaf, all under [truncated]" % (what, n_leaf))
        # the same samples in all four
        n = {what.split()[0]: sum(c for f, c in st if LEAF in f) for what, st in formats}
        check(len(set(n.values())) == 1, "samples through the leaf differ between the formats: %s" % n)


@per_vm(only=["stock", "otp25-emu-dwarf"])
@timeout(120)
def test_truncated_native_root_in_every_format(target):
    """The native side of the depth limit ("a stack cut at
    --max-callchain-depth says so in every format"): with
    --max-callchain-depth 2, samples in the garbage collector (called from
    Erlang code through more than two C frames) are cut before any Erlang
    frame: their stacks are the two innermost native frames under a
    "[truncated]" root, in folded, speedscope, the flame graph and pprof
    alike, no stack holds more than two unwound native frames, and the four
    formats hold the same number of such samples."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_gc:start()")
        wait_running(vm, "xb_alloc")
        d = tmpdir()
        txt, js, svg, pb = (os.path.join(d, "p." + e) for e in ("txt", "json", "svg", "pb.gz"))
        run_ok(vm, "-d", "2", "--max-callchain-depth", "2", "-o", txt, "-o", js, "-o", svg, "-o", pb)
        _, formats = stacks_in_four_formats(txt, js, svg, pb)
        erl = re.compile(r"^[^:]+:[^:/]+/\d+( \(.*\))?$")
        gc = re.compile(r"garbage_collect|sweep|_gc_|gc_")
        counts = {}
        for what, stacks in formats:
            def native(f):
                # ("[unknown]" is a native frame with no name: stripped code)
                return [x for x in f if not erl.match(x) and x not in MARKS]
            # two unwound frames, and where the unwinding reached Erlang
            # code the frame that runs it (the JIT's global::garbage_collect
            # stub, process_main) on top
            wide = [f for f, _ in stacks if len(native(f)) > 3]
            check(not wide, "%s: stacks with more than 2 native frames (and the one running Erlang "
                  "code)" % what, str(wide[:3]))
            cut = [(f, n) for f, n in stacks if f and f[0] == "[truncated]" and not any(erl.match(x) for x in f)]
            # (the flame graph draws a frame narrower than its pixel budget
            # into its parent: there a cut stack may end early)
            bad = [f for f, _ in cut if (len(native(f)) != 2 or len(f) != 3) and
                   not (what.startswith("flamegraph") and len(f) < 3)]
            check(not bad, "%s: native stacks under [truncated] that are not two native frames" % what,
                  str(bad[:3]))
            n_cut = sum(n for _, n in cut)
            n_gc = sum(n for f, n in cut if any(gc.search(x) for x in f))
            # (the collector's functions are static: named where the beam
            # has DWARF or .symtab, "[unknown]" in the stripped stock one)
            check(n_cut >= 100 and (n_gc >= 30 or target.debug != "dwarf"),
                  "%s: only %d samples cut under [truncated], %d of them in the garbage collector"
                  % (what, n_cut, n_gc), str(sorted(cut, key=lambda c: -c[1])[:5]))
            counts[what] = n_cut
            log("%s: %d native stacks cut under [truncated], %d in the garbage collector; e.g. %s" % (
                what, n_cut, n_gc, ";".join(max(cut, key=lambda c: c[1])[0])))
        check(len(set(counts.values())) == 1, "the formats hold different numbers of cut stacks: %s" % counts)


@per_vm(only=["stock", "otp25-emu-dwarf"])
@timeout(180)
def test_blame_gc_stacks(target):
    """--blame erts_garbage_collect in every stack format, from one run
    (-o repeated): every stack has the GC function, the workload's own
    function calls it (not only lists:), and the four formats hold the same
    samples (folded's count, speedscope's weights, the flame graph's root,
    pprof's traces)."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_gc:start()")
        wait_running(vm, "xb_alloc")
        d = tmpdir()
        files = {fmt: os.path.join(d, "gc." + ext) for fmt, ext in
                 (("folded", "folded"), ("speedscope", "speedscope.json"), ("pprof", "pb.gz"),
                  ("flamegraph", "svg"))}
        args = ["-d", "3", "--blame", "erts_garbage_collect"]
        for f in files.values():
            args += ["-o", f]
        run_ok(vm, *args)
        gcfn = re.compile(r"^(erts_garbage_collect\w*|global::garbage_collect)$")
        mine_fn = "xb_gc:alloc_loop/1"
        # folded
        stacks = folded_stacks(files["folded"])
        total = sum(n for _, n in stacks)
        check(total >= 100, "only %d GC samples" % total)
        for frames, n in stacks:
            check(any(gcfn.match(x) for x in frames), "folded: a stack without the GC function: %s"
                  % ";".join(frames))
        mine = sum(n for fr, n in stacks if mine_fn in fr)
        check(mine >= 0.5 * total, "%s is a caller in only %d of %d GC samples" % (mine_fn, mine, total))
        # speedscope: the same stacks, validated
        doc = load_speedscope(files["speedscope"])
        validate(speedscope_validator(), doc, files["speedscope"])
        st = [(frames, w) for p in doc["profiles"] for frames, w in stacks_of(doc, p)]
        check(sum(w for _, w in st) == total, "speedscope holds %d samples, folded %d"
              % (sum(w for _, w in st), total))
        check(all(any(gcfn.match(x) for x in f) for f, _ in st), "speedscope: a stack without the GC function")
        check(sum(w for f, w in st if mine_fn in f) == mine, "speedscope and folded disagree on %s" % mine_fn)
        # flame graph: the root holds them all, and every sample passes
        # through a GC frame (frames narrower than the merge width are
        # merged into their parent: 1 % allowed)
        root, _ = check_svg_file(files["flamegraph"])
        drawn = svg_stacks(root)
        roots = [t.text for t in root.iter(SVG_NS + "title") if (t.text or "").startswith("all ")]
        check(roots and re.match(r"all \(%s samples?," % format(total, ","), roots[0]),
              "the flame graph's root is not %d samples: %s" % (total, roots[:1]))
        through = sum(w for f, w in drawn if f and gcfn.match(f[-1]) and not any(gcfn.match(x) for x in f[:-1]))
        check(through >= 0.99 * total, "flame graph: %d of %d samples under a GC frame" % (through, total))
        # pprof, read by go tool pprof
        traces, tout = pprof_traces(files["pprof"])
        weights = [(pprof_seconds(c), frames) for c, frames in traces]
        allw = sum(w for w, _ in weights)
        gcw = sum(w for w, fr in weights if any(gcfn.match(x) for x in fr))
        minew = sum(w for w, fr in weights if mine_fn in fr)
        check(allw > 0 and gcw == allw, "pprof: %.3f of %.3f s without the GC function" % (allw - gcw, allw),
              tout[:3000])
        check(abs(minew / allw - mine / total) <= 0.01, "pprof: %s in %.1f %% of the time, folded %.1f %%"
              % (mine_fn, 100 * minew / allw, 100.0 * mine / total))
        log("%d GC samples, %d under %s; the same in speedscope, the flame graph (%d under a GC frame) and pprof"
            % (total, mine, mine_fn, through))


@per_vm(only=["stock"])
@timeout(150)
def test_real_flamegraph_in_chromium(target):
    """A flame graph of a real VM renders in headless Chromium with its
    frames' names in the DOM, and the search highlights them."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        f = os.path.join(tmpdir(), "split.svg")
        run_ok(vm, "-d", "2", "-o", f)
        check_svg_file(f)
        driver = start_chromium(os.path.join(tmpdir(), "chromium-profile"))
        try:
            driver.get("file://" + f)
            names = driver.execute_script(
                "return Array.from(document.querySelectorAll('title')).map(t => t.textContent);")
            check(any(n.startswith("xb_split:hot_a/1 ") for n in names),
                  "hot_a/1 is not in the SVG's DOM", "\n".join(names[:30]))
            res = driver.execute_script("return window.fg.search('hot_a');")
            check(res and res["frames"] >= 1 and 50 <= res["percent"] <= 95,
                  "search for hot_a: %r" % (res,))
            # rendered, with the highlight: many colours, the search's
            # among them (every other frame keeps its kind's)
            w, h, rows, bpp = png_pixels(driver.get_screenshot_as_png())
            colours = set()
            for row in rows[::3]:
                for i in range(0, len(row), bpp * 3):
                    colours.add(bytes(row[i:i + 3]))
            check(len(colours) > 20, "the screenshot is (nearly) blank: %d colours" % len(colours))
            log("search hot_a: %r; screenshot %dx%d, %d colours" % (res, w, h, len(colours)))
        finally:
            driver.quit()


@per_vm(only=["stock"])
def test_pprof_and_table_agree(target):
    """go tool pprof -top reads erlang-sample's profile and finds the same
    top functions and shares as the table of the same workload; -raw shows
    the Erlang functions' source file ("filename: the module's
    source file where known")."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        f, t = os.path.join(tmpdir(), "split.pprof"), os.path.join(tmpdir(), "split.table")
        # enough samples for the 75/25 check to mean something (a machine
        # busy with a previous test's leftovers gives the VM less CPU)
        for attempt in range(3):
            t0 = time.time()
            # the scheduler thread's CPU time, what an on-CPU sampler
            # measures (wall time counts preemption: a saturated run saw
            # its clock at 79.5 % and the samples at 72.5 %)
            clock = SplitClock(vm, nominal=75, cpu=target)
            run_ok(vm, "-d", "4", "-o", f, "-o", t)
            truth = clock.share()
            t1 = time.time()
            table = open(t).read()
            counts = {m.group(2): int(m.group(1))
                      for m in re.finditer(r"^\s*(\d+)\s+(xb_split:hot_[ab]/1)\s", table, re.M)}
            n = sum(counts.values())
            if n >= 1000:
                break
            log("only %d samples of hot_a/hot_b in 4 s: again" % n)
        check(n >= 1000, "only %d samples of hot_a/hot_b in 3 runs of 4 s" % n, table)
        rows, out = pprof_top(f, 5)
        names = [n for n, _, _ in rows]
        check(len(names) == len(set(names)), "a function twice in pprof -top (two frames of one "
              "function: with and without its file?)", out)
        top = {n: p for n, p, _ in rows}
        a, b = top.get("xb_split:hot_a/1", 0), top.get("xb_split:hot_b/1", 0)
        check(a + b > 50, "hot_a/hot_b are not pprof's top functions", out)
        # the same shares as the table of the same run, and the workload's
        ta = 100.0 * counts.get("xb_split:hot_a/1", 0) / n
        check(abs(100 * a / (a + b) - ta) <= 0.2, "pprof: hot_a %.2f %% of the two, the table %.2f %%"
              % (100 * a / (a + b), ta), out + table[:1000])
        check(abs(100 * a / (a + b) - truth) <= 5, "pprof: hot_a %.1f %%, hot_b %.1f %% (%d samples; xb_split's "
              "own clock: hot_a %.1f %%)" % (a, b, n, truth),
              out + table[:1000])
        with gzip.open(f) as g:
            check(len(g.read()) > 100, "the pprof file is empty")
        # filename: the module's source file, from its line table (no
        # --lines needed), and the native module for C frames
        raw = go_pprof("-raw", f)
        # profile.proto's period, time_nanos and duration_nanos, as go tool
        # pprof reads them: the rate's period, the run's start, its length
        m = re.search(r"^PeriodType: cpu nanoseconds\nPeriod: (\d+)\nTime: (\d+-\d+-\d+ \d+:\d+:\d+)"
                      r"(\.\d+)? \+0000 UTC\nDuration: ([0-9.]+)", raw, re.M)
        check(m, "go tool pprof -raw: no period type, period, time and duration", raw[:600])
        start = calendar.timegm(time.strptime(m.group(2), "%Y-%m-%d %H:%M:%S")) + float(m.group(3) or 0)
        check(abs(int(m.group(1)) - 1e9 / 997) <= 0.01 * 1e9 / 997, "period %s ns, not 1/997 s" % m.group(1),
              raw[:600])
        check(t0 - 1 <= start <= t1 and abs(float(m.group(4)) - 4.0) <= 0.2,
              "time %s (the run: %.1f .. %.1f) or duration %s s (-d 4) wrong" % (m.group(2), t0, t1, m.group(4)),
              raw[:600])
        locs = dict(re.findall(r"^\s+\d+: 0x[0-9a-f]+ M=\d+ (\S+) (\S*?):\d+ s=", raw, re.M))
        for fn in ("xb_split:hot_a/1", "xb_split:hot_b/1"):
            check(locs.get(fn, "").endswith("tests/workloads/xb_split.erl"),
                  "-raw: %s has filename %r, not its module's source file" % (fn, locs.get(fn)), raw[-3000:])


def leftovers(d, name):
    return [x for x in os.listdir(d) if name in x and x != name]


@per_vm(only=["stock"])
@asan("bad input")
def test_output_bad_input(target):
    """Unknown format, a format the extension contradicts, an unknown
    --blame function, a full disk, an unwritable or symlinked -o: one line,
    non-zero exit, nothing half-written left behind."""
    with VM(target, schedulers=1) as vm:
        d = tmpdir()

        def one_line(r, what, rc=None):
            lines = [l for l in r.err.splitlines() if l.strip()]
            check(r.rc not in (0, None) and (rc is None or r.rc == rc), "%s: exit %s" % (what, r.rc),
                  r.describe())
            check(len(lines) == 1, "%s: %d lines on stderr" % (what, len(lines)), r.describe())
            return lines[0]

        r = run_tool(TOOL, "--format", "png", "-d", "1", str(vm.pid), timeout=20)
        check("png" in one_line(r, "unknown format", 2), "does not name the format", r.err)
        out = os.path.join(d, "x.svg")
        r = run_tool(TOOL, "--format", "pprof", "-o", out, "-d", "1", str(vm.pid), timeout=20)
        one_line(r, "mismatched extension", 2)
        check(not os.path.exists(out) and not leftovers(d, "x.svg"), "a file was left behind")
        t0 = time.monotonic()
        r = run_tool(TOOL, "--blame", "no_such_function_xyz", "-d", "30", str(vm.pid), timeout=40)
        msg = one_line(r, "unknown --blame function", 2)
        check(time.monotonic() - t0 < 10, "the unknown function was found out only after sampling")
        check("no_such_function_xyz" in msg and "OTP 25" in msg, "message does not say what and "
              "which VM: %r" % msg)
        r = run_tool(TOOL, "--blame", "copy_struc", "-d", "30", str(vm.pid), timeout=40)
        msg = one_line(r, "misspelt --blame function", 2)
        check("copy_struct_x" in msg, "no close match named: %r" % msg)
        # an Erlang function misspelt (without its arity): the function
        r = run_tool(TOOL, "--blame", "xb_ctl:evl", "-d", "30", str(vm.pid), timeout=40)
        msg = one_line(r, "misspelt --blame Erlang function", 2)
        check("close: xb_ctl:eval/1" in msg, "the Erlang function is not the closest name: %r" % msg)
        # -o is opened only once attached: refused input leaves no file
        out = os.path.join(d, "blame.svg")
        r = run_tool(TOOL, "--blame", "no_such_function_xyz", "-o", out, "-d", "5", str(vm.pid), timeout=40)
        one_line(r, "unknown --blame function with -o", 2)
        check(not os.path.exists(out) and not leftovers(d, "blame.svg"), "-o left a file after a refused --blame")
        sleeper = subprocess.Popen(["sleep", "30"])
        try:
            out = os.path.join(d, "notbeam.folded")
            r = run_tool(TOOL, "-o", out, "-d", "1", str(sleeper.pid), timeout=20)
            msg = one_line(r, "-o with a PID that is not a BEAM")
            check("not" in msg and "BEAM" in msg.upper(), "does not say it is not a BEAM: %r" % msg)
            check(not os.path.exists(out) and not leftovers(d, "notbeam.folded"),
                  "-o left a file after refusing a process that is not a BEAM")
        finally:
            sleeper.kill()
            sleeper.wait()
        # a full disk: stdout is /dev/full
        with open("/dev/full", "w") as full:
            p = subprocess.run([tool_path(TOOL), "-d", "0.5", str(vm.pid)], stdout=full,
                               stderr=subprocess.PIPE, timeout=30)
        lines = [l for l in p.stderr.decode().splitlines() if l.strip()]
        check(p.returncode == 1 and len(lines) == 1 and "No space" in lines[0],
              "> /dev/full: exit %s, stderr %r" % (p.returncode, lines))
        # a file system that fills up while the file is written (a 4 KiB
        # tmpfs, one page; a flame graph is larger): one line, and nothing
        # left there, neither the file nor its temporary
        small = os.path.join(d, "small")
        os.makedirs(small)
        r = run_cmd(["mount", "-t", "tmpfs", "-o", "size=4k", "xbtest-small", small], timeout=20)
        check(r.rc == 0, "mount a 4 KiB tmpfs", r.describe())
        try:
            r = run_tool(TOOL, "-o", os.path.join(small, "x.svg"), "-d", "1", str(vm.pid), timeout=30)
            msg = one_line(r, "-o on a full file system", 1)
            check("No space" in msg and "x.svg" in msg, "does not say which file found the disk full: %r" % msg)
            check(os.listdir(small) == [], "left on the full file system: %s" % os.listdir(small))
        finally:
            run_cmd(["umount", small], timeout=20)
        # an unwritable directory
        r = run_tool(TOOL, "-o", os.path.join(d, "nodir", "x.txt"), "-d", "0.5", str(vm.pid), timeout=20)
        one_line(r, "unwritable -o", 1)
        # a symlink at the -o path: refused, its target untouched
        victim = os.path.join(d, "victim")
        with open(victim, "w") as v:
            v.write("victim\n")
        link = os.path.join(d, "out.txt")
        os.symlink(victim, link)
        r = run_tool(TOOL, "-o", link, "-d", "0.5", str(vm.pid), timeout=20)
        check("link" in one_line(r, "symlinked -o", 1), "does not say it is a link", r.err)
        check(open(victim).read() == "victim\n" and os.path.islink(link), "the symlink was followed")
        check(not leftovers(d, "out.txt"), "a temporary file was left behind: %s" % os.listdir(d))
        log("all refused with one line")


# Every rule of erlang-sample's table of options that do not go together
# (src/tools/erlang-sample.c, rules[]; and plan_outputs' -o rules), with
# the whole line it must give: (arguments before the PID, line).
REFUSED = [
    (["--wall", "--pstack"], "--wall is a profile of its own; drop --pstack"),
    (["--wall", "--lines"], "--wall is a profile of its own; drop --lines"),
    (["--wall", "--format", "json"], "--wall writes a profile (table, folded, flamegraph, speedscope or pprof), not json"),
    (["--wall", "--by", "cpu"], "--wall groups by process only; drop --by or use --by process"),
    (["--wall", "-F", "2000"], "--wall ticks at most 1000 times a second (-F 2000)"),
    (["--wall", "--period", "1000"], "--wall ticks at -F HZ; drop --period"),
    (["--wall-max-processes", "5"], "--wall-max-processes goes with --wall"),
    (["--pstack", "--blame", "copy_struct"], "--pstack and --blame are separate modes; pick one"),
    (["--dump", "--blame", "copy_struct", "--check"], "--dump is a mode of its own; drop --blame"),
    (["--dump", "--live"], "--dump is a mode of its own; drop --live"),
    (["--dump", "--by", "process"], "--dump is a mode of its own; drop --by"),
    (["--dump", "--format", "folded"], "--dump writes text (table) or json, not folded"),
    (["--check", "--blame", "copy_struct"], "--check is a mode of its own; drop --pstack/--blame"),
    (["--pstack", "--format", "json"], "--pstack prints text; drop --format json"),
    (["--check", "--format", "pprof"], "--check prints text; drop --format pprof"),
    (["--live", "--pstack"], "--live draws on the terminal; drop --pstack"),
    (["--live", "--format", "table"], "--live draws on the terminal; drop --format"),
    (["--live", "-o", "x.svg"], "--live draws on the terminal; drop --output"),
    (["--live"], "--live draws on a terminal, and standard output is not one; use the table or "
                 "--format folded -o FILE instead"),
    (["--schedulers", "--long-calls"],
     "--schedulers reports the long calls too; pick one of --schedulers and --long-calls"),
    (["--pstack", "--by", "process"], "--by groups the samples of a profile; --pstack already shows one "
                                      "stack per scheduler, with the process it runs: drop --by"),
    (["--check", "--by", "thread"], "--by groups the samples of a profile; --check samples nothing: drop --by"),
    (["--schedulers", "--by", "cpu"], "--by groups the samples of a profile; --schedulers already reports "
                                      "per scheduler, process and CPU: drop --by"),
    (["--long-calls", "--by", "cpu"], "--by groups the samples of a profile; --long-calls already reports "
                                      "per scheduler, process and CPU: drop --by"),
    (["--schedulers", "--check"], "--schedulers is a report of its own; drop --check"),
    (["--long-calls", "--only-erlang"], "--long-calls is a report of its own; drop --only-erlang"),
    (["--long-calls-ms", "5"], "--long-calls-ms goes with --schedulers or --long-calls"),
    (["--format", "json"], "--format json is for --dump and the reports of --schedulers and --long-calls; "
                           "a profile as JSON is --format speedscope"),
    (["--schedulers", "--format", "folded"], "--schedulers writes a table or JSON; drop --format folded"),
    (["--long-calls", "--format", "pprof"], "--long-calls writes a table or JSON; drop --format pprof"),
    (["--pstack", "-o", "a.txt", "-o", "b.txt"], "--pstack writes one result; pass one -o"),
    (["--check", "-o", "a.txt", "-o", "b.txt"], "--check writes one result; pass one -o"),
    (["--dump", "-o", "a.txt", "-o", "b.json"], "--dump writes one result; pass one -o"),
    (["-o", "a.txt"] * 2, "-o a.txt given twice"),
    (sum((["-o", "o%d.svg" % i] for i in range(7)), []), "at most 6 -o outputs"),
    (["--format", "pprof", "-o", "x.svg"],
     "--format pprof does not match -o x.svg (a flamegraph file); drop one or make them agree"),
    (["--schedulers", "-o", "x.svg"], "-o x.svg: --schedulers writes a table or JSON (.json), not flamegraph"),
    (["--dump", "--format", "table", "-o", "x.json"],
     "--format table does not match -o x.json (a json file); drop one or make them agree"),
]


def test_option_rules_refused():
    """Each rule of the table of options that do not go together (and of
    the -o rules): its own line, whole, exit 2, one line, before the PID is
    looked at (PID 1 is never read) and no file left.  Combinations that
    go together are not refused: they reach the PID (exit 1: PID 1 is
    not a VM we can read)."""
    d = os.path.join(tmpdir(), "out")
    os.mkdir(d)
    bad = []
    for args, want in REFUSED:
        args = [os.path.join(d, a) if a.endswith((".svg", ".txt", ".json")) else a for a in args]
        r = run_tool(TOOL, *(args + ["1"]), timeout=20)
        got = r.err.strip().replace(d + "/", "")
        if r.rc != 2 or len(r.lines_err) != 1 or got != "erlang-sample: " + want:
            bad.append("%s: exit %s, %r (want exit 2 and %r)" % (" ".join(args), r.rc, got, want))
    check(not bad, "%d of %d rules broken" % (len(bad), len(REFUSED)), "\n".join(bad))
    check(not os.listdir(d), "a refused command line left files: %s" % os.listdir(d))
    for args in (["--dump", "--format", "json", "-o", "x.json"], ["--long-calls", "-o", "x.txt"],
                 ["--by", "process", "--format", "pprof", "-o", "x.pb.gz"]):
        args = [os.path.join(d, a) if a.startswith("x.") else a for a in args]
        r = run_tool(TOOL, *(args + ["1"]), timeout=20)
        check(r.rc == 1 and len(r.lines_err) == 1, "%s: exit %s, %r: refused as a combination?"
              % (" ".join(args), r.rc, r.err))
    log("%d rules, each refused with its own line" % len(REFUSED))

"""Output formats: flame graph, speedscope and pprof, each checked
by its real consumer.  No VM: build/tests/tools/xb-format-writer writes the
synthetic profile of tests/tools/synth_profile.c (TRUTH below mirrors it) in
any format.

- speedscope: validated against speedscope's published schema
  (tests/data/speedscope-schema.json, Debian's python3-jsonschema); the
  chain's order, the weights, file/line, names (escaped JSON, invalid UTF-8
  as U+FFFD), one profile per group.
- pprof: Debian's golang-go, `go tool pprof -top` gives the same top
  functions and shares as the truth and the table (within 1 point),
  `-traces` the chain leaf first, `-raw` the filenames and lines.
- flame graph: Debian's chromium + chromium-driver driven by python3-selenium
  (headless, no network): screenshot not blank, every frame's <title> in
  the DOM, zoom (click) and reset, search (the Search control's prompt, and
  window.fg.search) with the highlighted count and matched share, text
  cut to fit as the browser measures it, colours per kind; the file parses
  as XML, holds no external reference, and escapes names; 50,000 distinct
  stacks stay under 10 MB.
- --blame: the filtered profile in every stack format.
- write errors: /dev/full fails every writer with one line.
"""

import json
import os
import re
import struct
import sys
import time
import xml.etree.ElementTree as ET
import zlib

from xbtest import (CACHE, ROOT, build_dir, check, load_target, log, run_cmd, run_tool, skip_because, timeout,
                    tmpdir)

WRITER = "tests/tools/xb-format-writer"
SVG_NS = "{http://www.w3.org/2000/svg}"
SCHEMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                      "speedscope-schema.json")

# tests/tools/synth_profile.c, synth_small(): (root -> leaf frame names, count,
# group).  Names are the bytes the profile holds.
INIT = b"proc_lib:init_p_do_apply/3"
CHAIN = [INIT, b"app:a/1", b"app:b/1", b"app:c/1", b"app:d/1", b"app:leaf/1"]
WEIRD = b"app:'we;ird<&>\"\n\t'/0"
BAD = b"bad\xff\xfename\x01/0"
UNI = "'\u00fcn\u00efc\u00f8d\u00e9':f/0".encode()
GC_TAIL = [b"global::garbage_collect", b"erts_garbage_collect_nobump", b"sweep_one_heap"]
GROUPS = ["<0.80.0> app_worker", "<0.81.0>", "scheduler 2"]
TRUTH = [
    (CHAIN, 4000, 0),
    ([INIT, b"app:a/1", b"app:other/1"], 2000, 1),
    (CHAIN[:5] + GC_TAIL, 1500, 0),
    ([INIT, b"app:other/1", b"xb_nif:work/1", b"beam_jit_call_nif", b"xb_nif_work",
      b"__memmove_avx_unaligned_erms"], 1000, 1),
    ([INIT, b"app:a/1", b"app:alloc/1", b"erts_mmap", b"__mmap", b"do_mmap",
      b"clear_page_erms"], 500, 1),
    ([INIT, b"app:a/1", WEIRD], 300, 0),
    ([INIT, b"app:a/1", BAD], 300, 0),
    ([INIT, b"app:a/1", UNI], 200, 0),
    ([b"[callers unknown]", b"app:hot/1"], 400, 2),
    ([b"[truncated]", b"app:deep/1"], 100, 2),
] + [([INIT, b"app:tiny_parent/0", b"app:tiny_%03d/0" % i], 1, 1) for i in range(200)]
TOTAL = sum(c for _, c, _ in TRUTH)
FILES = {b"app:a/1": ("app.erl", 10), b"app:leaf/1": ("app.erl", 50),
         INIT: ("proc_lib.erl", 241), b"sweep_one_heap": ("erl_gc.c", 1234)}


def leaf_shares():
    """Leaf frame -> share of all samples (percent)."""
    out = {}
    for frames, count, _ in TRUTH:
        out[frames[-1]] = out.get(frames[-1], 0) + count
    return {k: 100.0 * v / TOTAL for k, v in out.items()}


def display(name):
    """A name as the SVG and pprof show it (src/output/output_util.c,
    xb_display_name): invalid UTF-8 as U+FFFD, \\t \\n \\r, other controls
    \\xHH."""
    out = []
    for ch in name.decode("utf-8", "replace"):
        if ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\x%02x" % ord(ch))
        elif 0x80 <= ord(ch) <= 0x9f:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def write(fmt, *opts, name=None):
    path = os.path.join(tmpdir(), name or "out.%s" % fmt)
    r = run_tool(WRITER, *(list(opts) + [fmt, path]), timeout=120)
    check(r.rc == 0, "xb-format-writer %s failed" % fmt, r.describe())
    check(os.path.getsize(path) > 0, "%s: empty file" % path)
    return path


def debian_module(name, package):
    """Import a module that a Debian package provides (python3 may be
    another interpreter of the same version, e.g. pyenv's)."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    if "/usr/lib/python3/dist-packages" not in sys.path:
        sys.path.append("/usr/lib/python3/dist-packages")
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise AssertionError("%s is not installed (apt-get install %s; tests/run-all.sh does): %s"
                             % (package, package, e))


# ---------------------------------------------------------------------------
# the table and folded text: the truth as our existing writers print it

# Every frame of the synthetic profile that has a file and line
# (tests/tools/synth_profile.c, small_frames).
ALL_FILES = dict(FILES)
ALL_FILES.update({b"app:b/1": ("app.erl", 20), b"app:c/1": ("app.erl", 30),
                  b"app:d/1": ("app.erl", 40)})


def text_name(name):
    """A frame as the text outputs (table, folded) print it: with its
    source file and line when it has them (xb_fname_text)."""
    if name in ALL_FILES:
        return name + b" (%s:%d)" % (ALL_FILES[name][0].encode(), ALL_FILES[name][1])
    return name


def test_table_and_folded_match_truth():
    table = open(write("table"), "rb").read().decode("utf-8", "replace").splitlines()
    check(table[0].startswith("processed %d/" % TOTAL), "first line: %r" % table[0])
    rows = {}
    for line in table[1:]:
        m = re.match(r"\s*(\d+)\s+(.*\S)\s+([\d.]+)%\s+\[.*\]$", line)
        if m:
            rows[m.group(2)] = (int(m.group(1)), float(m.group(3)))
    for leaf, share in leaf_shares().items():
        if share < 1 or b"\n" in leaf or b"\xff" in leaf:
            continue
        got = rows.get(text_name(leaf).decode())
        check(got and abs(got[1] - share) < 0.01, "table row for %r: %r, want %.2f%%"
              % (leaf, got, share))
    folded = open(write("folded"), "rb").read()
    check(b";".join(text_name(f) for f in CHAIN) + b" 4000\n" in folded,
          "folded: the chain line is missing", folded[:500].decode("utf-8", "replace"))
    # Names from the VM reach neither file raw (the promise: "folded's ; and
    # newline"; no control characters, valid UTF-8): the weird names as
    # each output escapes them, and nothing else below 0x20 but line ends.
    prefix = b";".join(text_name(f) for f in [INIT, b"app:a/1"]) + b";"
    for want in (b"app:'we:ird<&>\"\\n\\t'/0 300\n", "bad\ufffd\ufffdname\\x01/0 300\n".encode()):
        check(prefix + want in folded, "folded: %r is not escaped as %r" % (want, prefix + want),
              folded.decode("utf-8", "replace")[:2000])
    rows_raw = open(write("table"), "rb").read()
    for what, data in (("folded", folded), ("table", rows_raw)):
        data.decode("utf-8")  # strict: invalid UTF-8 raises
        ctl = sorted({c for c in data if c < 0x20 and c != 0x0a})
        check(not ctl, "%s: control bytes %r written raw" % (what, ctl))
    got = rows.get("app:'we;ird<&>\"\\n\\t'/0")
    check(got and got[0] == 300, "table: the weird name's row (escaped, ';' kept) is %r" % (got,), "\n".join(table))


# ---------------------------------------------------------------------------
# speedscope

def speedscope_validator():
    jsonschema = debian_module("jsonschema", "python3-jsonschema")
    with open(SCHEMA) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(validator, doc, what):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    check(not errors, "%s does not validate against speedscope's schema: %s" % (
        what, "; ".join("%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors[:5])))


_VALIDATOR = []


def load_speedscope(path):
    """The speedscope document at PATH, checked: valid UTF-8, no raw
    control characters, and valid against speedscope's schema (every
    speedscope file the suite writes; each reader goes through
    here)."""
    raw = open(path, "rb").read()
    text = raw.decode("utf-8")  # strict: the file must be valid UTF-8
    for ch in text:
        check(ord(ch) >= 0x20 or ch == "\n", "raw control character %r in the JSON" % ch)
    doc = json.loads(text)
    if not _VALIDATOR:
        _VALIDATOR.append(speedscope_validator())
    validate(_VALIDATOR[0], doc, path)
    return doc


def stacks_of(doc, prof):
    names = [f["name"] for f in doc["shared"]["frames"]]
    check(len(prof["samples"]) == len(prof["weights"]), "samples and weights differ in length")
    for s in prof["samples"]:
        for i in s:
            check(isinstance(i, int) and 0 <= i < len(names), "frame index %r out of range" % i)
    return [([names[i] for i in s], w) for s, w in zip(prof["samples"], prof["weights"])]


def test_speedscope_schema_and_content():
    validator = speedscope_validator()
    # The validator is live: a broken document fails it.
    broken = {"$schema": "https://www.speedscope.app/file-format-schema.json",
              "shared": {"frames": [{"name": 1}]}, "profiles": [{"type": "sampled"}]}
    check(list(validator.iter_errors(broken)), "the schema accepts a broken document")

    doc = load_speedscope(write("speedscope"))
    validate(validator, doc, "the speedscope file")
    check(doc["$schema"] == "https://www.speedscope.app/file-format-schema.json", "$schema")
    check(doc.get("exporter", "").startswith("extrospect-beam"), "exporter: %r" % doc.get("exporter"))
    check(len(doc["profiles"]) == 1, "%d profiles without groups" % len(doc["profiles"]))
    prof = doc["profiles"][0]
    check(prof["type"] == "sampled" and prof["unit"] == "none" and prof["startValue"] == 0 and
          prof["endValue"] == TOTAL, "profile header: %r" % {k: v for k, v in prof.items()
                                                            if k not in ("samples", "weights")})
    stacks = stacks_of(doc, prof)
    check(sum(w for _, w in stacks) == TOTAL, "weights sum to %d, want %d"
          % (sum(w for _, w in stacks), TOTAL))
    want = sorted(([n.decode("utf-8", "replace") for n in f], c) for f, c, _ in TRUTH)
    check(sorted(stacks) == want, "stacks (root to leaf) differ from the truth",
          "first of ours: %r\nfirst wanted: %r" % (sorted(stacks)[:3], want[:3]))
    chain = [n.decode() for n in CHAIN]
    check([s for s, w in stacks if s == chain and w == 4000], "the chain a->b->c->d->leaf "
          "(4000) is not a sample root to leaf")
    # Leaf shares within 1 point.
    leaf = {}
    for s, w in stacks:
        leaf[s[-1]] = leaf.get(s[-1], 0) + w
    for name, share in leaf_shares().items():
        got = 100.0 * leaf.get(name.decode("utf-8", "replace"), 0) / TOTAL
        check(abs(got - share) <= 1.0, "%r: %.2f%% vs %.2f%%" % (name, got, share))
    frames = {f["name"]: f for f in doc["shared"]["frames"]}
    for name, (fname, line) in FILES.items():
        f = frames.get(name.decode())
        check(f and f.get("file") == fname and f.get("line") == line,
              "frame %r: %r, want file %s line %d" % (name, f, fname, line))
    check("file" not in frames["app:other/1"] and "line" not in frames["app:other/1"],
          "a frame without file/line got them")
    check(WEIRD.decode() in frames, "the name with ; < > & \" ' \\n \\t is not exact")
    check(BAD.decode("utf-8", "replace") in frames, "invalid UTF-8 is not U+FFFD")
    check(UNI.decode() in frames, "non-ASCII name changed")
    log("speedscope: %d frames, %d samples, valid" % (len(frames), len(stacks)))


def test_speedscope_groups_and_blame():
    validator = speedscope_validator()
    doc = load_speedscope(write("speedscope", "--groups"))
    validate(validator, doc, "the speedscope file (--groups)")
    profs = doc["profiles"]
    check([p["name"] for p in profs] == GROUPS, "profiles: %r, want one per group %r"
          % ([p["name"] for p in profs], GROUPS))
    for gi, p in enumerate(profs):
        want = sorted(([n.decode("utf-8", "replace") for n in f], c) for f, c, g in TRUTH
                      if g == gi)
        got = sorted(stacks_of(doc, p))
        check(got == want, "group %s: stacks differ (the group frame must not be in them)"
              % GROUPS[gi], "%r\n%r" % (got[:3], want[:3]))
        check(p["endValue"] == sum(c for _, c in want), "group %s endValue" % GROUPS[gi])
    check(not [f for f in doc["shared"]["frames"] if f["name"] in GROUPS],
          "group frames are in shared.frames")

    doc = load_speedscope(write("speedscope", "--blame", "erts_garbage_collect", name="b.json"))
    validate(validator, doc, "the speedscope file (--blame)")
    stacks = stacks_of(doc, doc["profiles"][0])
    check(stacks == [([n.decode() for n in CHAIN[:5] + GC_TAIL], 1500)],
          "--blame erts_garbage_collect: %r" % stacks)
    check("--blame erts_garbage_collect" in doc["name"], "name: %r" % doc["name"])


# ---------------------------------------------------------------------------
# pprof

def go_pprof(*args):
    home = os.path.join(tmpdir(), "gohome")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "cache"),
               GOPATH=os.path.join(home, "gopath"), GOTOOLCHAIN="local", GOFLAGS="",
               GOPROXY="off", PPROF_TMPDIR=home)
    if not os.path.exists("/usr/bin/go"):
        raise AssertionError("go is not installed (apt-get install golang-go; "
                             "tests/run-all.sh does)")
    r = run_cmd(["/usr/bin/go", "tool", "pprof"] + list(args), timeout=60, env=env)
    check(r.rc == 0, "go tool pprof %s failed" % " ".join(args), r.describe())
    return r.out


def pprof_top(path, n=12):
    out = go_pprof("-top", "-nodecount=%d" % n, path)
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%\s+(.*)$", line)
        if m:
            rows.append((m.group(6), float(m.group(2)), float(m.group(5))))
    check(rows, "no rows in go tool pprof -top", out)
    return rows, out


def pprof_traces(path, *opts):
    """go tool pprof -traces [OPTS]: [(value, frames leaf first)]."""
    out = go_pprof(*(list(opts) + ["-traces", path]))
    traces = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        m = re.match(r"\s*(\S+)\s+(.*)$", lines[0])
        if not m:
            continue
        frames = [m.group(2).strip()] + [l.strip() for l in lines[1:]]
        traces.append((m.group(1), frames))
    return traces, out


def test_pprof_read_by_go_tool():
    path = write("pprof", name="cpu.pb.gz")
    with open(path, "rb") as f:
        check(f.read(2) == b"\x1f\x8b", "not gzipped")
    rows, out = pprof_top(path)
    log("go tool pprof -top:\n" + "\n".join(out.splitlines()[:16]))
    check("Type: cpu" in out, "pprof does not see a CPU profile", out)
    shares = leaf_shares()
    # The top functions with the truth's shares, names as they are (pprof
    # "simplifies" names it takes for demangled C++: not ours).
    want = sorted(((s, display(n)) for n, s in shares.items() if s >= 0.9), reverse=True)
    got = {name: flat for name, flat, _ in rows}
    for share, name in want:
        check(name in got, "%r is not in pprof's top" % name, out)
        check(abs(got[name] - share) <= 1.0, "%r: flat %.2f%% in pprof, %.2f%% in the truth"
              % (name, got[name], share), out)
    top_names = [n for n, _, _ in rows[:4]]
    check(top_names == ["app:leaf/1", "app:other/1", "sweep_one_heap",
                        "__memmove_avx_unaligned_erms"], "top 4: %r" % top_names, out)
    cum = {name: c for name, _, c in rows}
    check(abs(cum.get("app:other/1", 0) - 100.0 * 3000 / TOTAL) <= 1.0,
          "app:other/1 cumulative share: %r" % cum.get("app:other/1"), out)

    traces, tout = pprof_traces(path)
    chain_leaf_first = [n.decode() for n in reversed(CHAIN)]
    check([f for _, f in traces if f == chain_leaf_first], "go tool pprof -traces: no trace "
          "app:leaf/1 <- app:d/1 <- ... <- proc_lib:init_p_do_apply/3", tout[:3000])
    gc = [n.decode() for n in reversed(CHAIN[:5] + GC_TAIL)]
    check([f for _, f in traces if f == gc], "the GC trace (native frames under app:d/1) is "
          "missing", tout[:3000])

    raw = go_pprof("-raw", path)
    locs = raw.split("Locations", 1)[-1]
    for name, (fname, line) in FILES.items():
        check(re.search(r"\s%s %s:%d " % (re.escape(display(name)), re.escape(fname), line), locs),
              "-raw: %r should be at %s:%d" % (name, fname, line), locs[:2500])
    for name, module in ((b"erts_garbage_collect_nobump", "beam.smp"),
                         (b"__memmove_avx_unaligned_erms", "libc.so.6"),
                         (b"xb_nif_work", "xb_nif.so"), (b"clear_page_erms", "kernel"),
                         (b"app:other/1", "")):
        check(re.search(r"\s%s %s:0 " % (re.escape(display(name)), re.escape(module)), locs),
              "-raw: the filename of %r should be %r" % (name, module), locs[:2500])
    check(display(WEIRD) in locs and display(BAD) in locs and UNI.decode() in locs,
          "-raw: names not kept", locs[:2500])
    check("Period: 1003009" in raw and "PeriodType: cpu nanoseconds" in raw,
          "period", raw[:600])
    check(re.search(r"samples/count\s+cpu/nanoseconds", raw), "sample types", raw[:600])


def test_big_profile_read_by_consumers():
    """A large profile (--big 5000: 5,000 distinct stacks, 1,800 names, far
    more than the 512 at which pprof's string table first grows) in the
    files users hand to other tools: the speedscope file validates against
    the schema and its weights sum to the folded total; go tool pprof reads
    the pprof file and counts the same total."""
    fo = write("folded", "--big", "5000", name="big.folded")
    counts = [int(l.rsplit(" ", 1)[1]) for l in open(fo, encoding="utf-8", errors="replace")]
    total = sum(counts)
    check(len(counts) >= 4000 and total > 0, "the big profile has %d stacks" % len(counts))
    ss = write("speedscope", "--big", "5000", name="big.speedscope.json")
    doc = load_speedscope(ss)
    validate(speedscope_validator(), doc, ss)
    nframes = len(doc["shared"]["frames"])
    check(nframes > 512, "only %d frames in the big profile" % nframes)
    weights = sum(sum(p["weights"]) for p in doc["profiles"])
    check(weights == total, "speedscope weights sum to %d, the folded total is %d" % (weights, total))
    pp = write("pprof", "--big", "5000", name="big.pb.gz")
    out = go_pprof("-top", "-sample_index=samples", "-nodecount=5", pp)
    m = re.search(r"of (\d+) total", out)
    check(m and int(m.group(1)) == total, "go tool pprof counts %s samples, the folded total is %d"
          % (m.group(1) if m else "no", total), out[:2000])
    log("big profile: %d stacks, %d samples, %d frames; speedscope valid, pprof read, totals equal"
        % (len(counts), total, nframes))


def test_pprof_groups_and_blame():
    path = write("pprof", "--groups", name="g.pb.gz")
    traces, out = pprof_traces(path)
    chain = [n.decode() for n in reversed(CHAIN)] + [GROUPS[0]]
    check([f for _, f in traces if f == chain], "--groups: the group is not the root frame",
          out[:3000])
    rows, _ = pprof_top(path, 40)
    cum = {name: c for name, _, c in rows}
    for gi, g in enumerate(GROUPS):
        share = 100.0 * sum(c for _, c, gg in TRUTH if gg == gi) / TOTAL
        check(abs(cum.get(g, -10) - share) <= 1.0, "group %s: cum %r, want %.2f" % (g, cum.get(g), share))

    path = write("pprof", "--blame", "erts_garbage_collect", name="b.pb.gz")
    rows, out = pprof_top(path)
    check(rows[0][0] == "sweep_one_heap" and rows[0][1] > 99.9, "--blame: %r" % rows[:3], out)
    check("--blame erts_garbage_collect" in out, "--blame comment missing", out)


# ---------------------------------------------------------------------------
# flame graph: the file itself

def check_svg_file(path):
    raw = open(path, "rb").read()
    text = raw.decode("utf-8")  # strict
    bad = [c for c in text if ord(c) < 0x20 and c != "\n"]
    check(not bad, "raw control characters in the SVG: %r" % bad[:5])
    root = ET.fromstring(raw)  # well-formed
    check(root.tag == SVG_NS + "svg", "root element %s" % root.tag)
    # No external resources: the only URI is the SVG namespace.
    uris = set(re.findall(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>)]*", text))
    check(uris <= {"http://www.w3.org/2000/svg"}, "URIs in the SVG: %r" % uris)
    for pat in (r"\bhref\s*=", r"\bsrc\s*=", r"url\(\s*['\"]?(?!#)", r"@import", r"<!DOCTYPE",
                r"<!ENTITY", r"<image\b", r"<foreignObject\b", r"\bfetch\(", r"XMLHttpRequest",
                r"\bimport\("):
        check(not re.search(pat, text), "the SVG matches %r (an external reference?)" % pat)
    return root, text


def frame_titles(root):
    frames = root.find(".//%sg[@id='frames']" % SVG_NS)
    check(frames is not None, "no <g id=frames>")
    out = []
    for g in frames.findall(SVG_NS + "g"):
        t = g.find(SVG_NS + "title").text
        m = re.match(r"(.*) \(([\d,]+) samples?, ([\d.]+)%\)$", t, re.S)
        check(m, "title %r" % t)
        out.append((m.group(1), int(m.group(2).replace(",", "")), float(m.group(3)), g))
    return out


def test_flamegraph_file():
    path = write("flamegraph", name="flame.svg")
    root, text = check_svg_file(path)
    titles = frame_titles(root)
    by_name = {}
    for name, n, pct, g in titles:
        by_name.setdefault(name, []).append((n, pct, g))
    # Frame totals (a frame's samples include its callees').
    check(by_name.get("all") and by_name["all"][0][0] == TOTAL, "root: %r" % by_name.get("all"))
    for name, want in ((b"app:leaf/1", 4000), (b"app:d/1", 5500), (b"app:a/1", 8800),
                       (b"sweep_one_heap", 1500), (WEIRD, 300), (BAD, 300), (UNI, 200),
                       (b"[callers unknown]", 400), (b"[truncated]", 100),
                       (b"app:tiny_parent/0", 200)):
        got = by_name.get(display(name))
        check(got and got[0][0] == want and abs(got[0][1] - 100.0 * want / TOTAL) < 0.01,
              "frame %r: %r, want %d samples" % (name, got and got[0][:2], want))
    # Names escaped: the raw text never holds them unescaped.
    check("<&>" not in text and "app:&apos;we;ird&lt;&amp;&gt;&quot;\\n\\t&apos;/0" in text,
          "the name with < & > \" ' \\n \\t is not escaped as expected")
    # Narrow frames merged, and the legend says so.
    check(not [n for n in by_name if n.startswith("app:tiny_0")],
          "frames under 0.1 % were drawn")
    merged = root.find(".//%stext[@id='merged']" % SVG_NS).text
    check(merged.startswith("200 frames narrower than 0.1%") and "merged into their parents" in merged,
          "legend: %r" % merged)
    legend = [t.text for t in root.iter(SVG_NS + "text") if t.get("class") == "legend"]
    for label in ("Erlang", "JIT glue", "VM (beam.smp)", "NIF / shared library", "kernel",
                  "synthetic"):
        check(label in legend, "legend lacks %r: %r" % (label, legend))
    # Children sorted by name, root at the bottom (larger y).
    y = {}
    for name, n, pct, g in titles:
        y[name] = float(g.find(SVG_NS + "rect").get("y"))
    for parent, child in zip(CHAIN, CHAIN[1:]):
        check(y[display(child)] < y[display(parent)], "%r is not above %r" % (child, parent))
    check(y["all"] > y[display(INIT)], "the root is not at the bottom")
    xs = {name: int(g.get("data-x")) for name, n, pct, g in titles}
    check(xs["app:a/1"] < xs["app:other/1"] < xs["app:tiny_parent/0"],
          "children of proc_lib:init_p_do_apply/3 not in name order")
    notes = " ".join(t.text for t in root.iter(SVG_NS + "text") if t.get("class") == "note")
    check("100 samples (0.95%) had deeper stacks, cut at --max-callchain-depth 128" in notes,
          "the [truncated] note: %r" % notes)
    # Same profile, same bytes.
    again = write("flamegraph", name="again.svg")
    check(open(again, "rb").read() == text.encode(), "two runs gave different SVGs")


def test_flamegraph_size_budget():
    # Shaped like a real run (synth_big: 50,000 distinct stacks of depth
    # 20-60 weighted as sampling would, or all alike), and the worst case
    # (synth_wide: 50,400 distinct stacks, 900 or 600 chains of 60 frames
    # each above 0.1 %): under 10 MB, the minimum width raised only when
    # needed.
    for opts, minimum in ((["--big", "50000", "--skew", "1"], "0.1%"),
                          (["--big", "50000", "--skew", "0"], "0.1%"),
                          (["--wide", "600"], "0.1%"), (["--wide", "900"], "0.2%")):
        path = write("flamegraph", *opts, name="big.svg")
        size = os.path.getsize(path)
        root, _ = check_svg_file(path)
        nframes = len(root.find(".//%sg[@id='frames']" % SVG_NS))
        merged = root.find(".//%stext[@id='merged']" % SVG_NS).text
        log("%s: %.2f MB, %d frames drawn; %s" % (" ".join(opts), size / 1e6, nframes, merged))
        check(size < 10e6, "%s: the SVG is %.1f MB" % (" ".join(opts), size / 1e6))
        check("narrower than %s of the samples" % minimum in merged,
              "%s: legend %r, want the minimum %s" % (" ".join(opts), merged, minimum))
        if minimum == "0.1%":
            check(nframes > 800, "%s: only %d frames drawn" % (" ".join(opts), nframes))


def test_flamegraph_blame():
    path = write("flamegraph", "--blame", "erts_garbage_collect", name="blame.svg")
    root, text = check_svg_file(path)
    names = {n: c for n, c, _, _ in frame_titles(root)}
    want = [display(n) for n in CHAIN[:5] + GC_TAIL]
    check(all(names.get(n) == 1500 for n in want), "--blame: the chain up to the GC: %r" % names)
    check("app:other/1" not in names and "app:leaf/1" not in names, "--blame kept other stacks")
    check("--blame erts_garbage_collect" in text, "the --blame note is missing")


# ---------------------------------------------------------------------------
# flame graph: in a browser

def png_pixels(data):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB/RGBA PNG."""
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            check(depth == 8 and ctype in (2, 6), "PNG type %d/%d" % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, rows, bpp


def start_chromium(profile_dir):
    webdriver = debian_module("selenium.webdriver", "python3-selenium")
    from selenium.webdriver.chrome.service import Service  # noqa: E402
    for exe, pkg in (("/usr/bin/chromium", "chromium"), ("/usr/bin/chromedriver", "chromium-driver")):
        if not os.path.exists(exe):
            raise AssertionError("%s is missing (apt-get install %s; tests/run-all.sh does)"
                                 % (exe, pkg))
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", "--user-data-dir=" + profile_dir,
              "--window-size=1200,420", "--hide-scrollbars", "--force-device-scale-factor=1"):
        opts.add_argument(a)
    service = Service("/usr/bin/chromedriver",
                      log_path=os.path.join(os.path.dirname(profile_dir), "chromedriver.log"))
    return webdriver.Chrome(service=service, options=opts)


def wait_alert(driver, seconds=10):
    """The page's prompt, once it is open."""
    from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
    deadline = time.monotonic() + seconds
    while True:
        try:
            alert = driver.switch_to.alert
            alert.text  # raises while there is none
            return alert
        except NoAlertPresentException:
            if time.monotonic() > deadline:
                raise AssertionError("the search prompt did not open")
            time.sleep(0.05)


JS_FRAMES = """
return Array.from(document.querySelectorAll('#frames > g')).map(function (g) {
  var r = g.querySelector('rect'), t = g.querySelector('text'), title = g.firstElementChild.textContent;
  return {name: title.substring(0, title.lastIndexOf(' (')), title: title,
          x: +r.getAttribute('x'), w: +r.getAttribute('width'), y: +r.getAttribute('y'),
          shown: getComputedStyle(g).display !== 'none', cls: g.getAttribute('class'),
          fill: getComputedStyle(r).fill,
          text: t ? t.textContent : '', textw: t && t.textContent ? t.getComputedTextLength() : 0};
});
"""


@timeout(150)
def test_flamegraph_in_chromium():
    path = write("flamegraph", name="flame.svg")
    check_svg_file(path)
    profile_dir = os.path.join(tmpdir(), "chromium-profile")
    os.makedirs(profile_dir)
    t0 = time.monotonic()
    driver = start_chromium(profile_dir)
    try:
        driver.set_page_load_timeout(30)
        driver.get("file://" + path)
        log("chromium up and the SVG loaded in %.1fs" % (time.monotonic() - t0))
        check(driver.execute_script("return document.documentElement.localName") == "svg",
              "chromium did not load an SVG document")
        check(driver.execute_script("return typeof window.fg") == "object",
              "the SVG's script did not run")

        # Rendered: the screenshot has many colours, among them the kinds'.
        w, h, rows, bpp = png_pixels(driver.get_screenshot_as_png())
        colours = set()
        for row in rows[::3]:
            for i in range(0, len(row), bpp * 3):
                colours.add(bytes(row[i:i + 3]))
        log("screenshot %dx%d, %d colours" % (w, h, len(colours)))
        check(len(colours) > 20, "the screenshot is (nearly) blank: %d colours" % len(colours))

        frames = {f["name"]: f for f in driver.execute_script(JS_FRAMES)}
        for name in [display(n) for n in CHAIN + GC_TAIL + [WEIRD, BAD, UNI]]:
            check(name in frames, "frame %r not in the DOM" % name)
        check(frames["app:leaf/1"]["title"] == "app:leaf/1 (4,000 samples, 38.10%)",
              "title: %r" % frames["app:leaf/1"]["title"])
        # Every visible label fits its frame as chromium measures it, and
        # cut labels end with "..".
        cut = 0
        for f in frames.values():
            if f["text"]:
                check(f["textw"] <= f["w"] - 2, "label %r (%.1f px) overflows its frame (%.1f px)"
                      % (f["text"], f["textw"], f["w"]))
                if f["text"] != f["name"]:
                    cut += 1
                    check(f["text"].endswith("..") and f["name"].startswith(f["text"][:-2]),
                          "label %r of %r" % (f["text"], f["name"]))
        check(cut > 0, "no label was cut")
        # Colours by kind.
        kinds = {"app:leaf/1": "Erlang", "global::garbage_collect": "JIT",
                 "sweep_one_heap": "VM", "xb_nif_work": "NIF", "clear_page_erms": "kernel",
                 "[callers unknown]": "mark"}
        fills = {k: frames[n]["fill"] for n, k in kinds.items()}
        check(len(set(fills.values())) == len(fills), "kinds share colours: %r" % fills)
        check(frames["app:d/1"]["fill"] != frames["sweep_one_heap"]["fill"], "Erlang = VM colour")

        # Zoom: click app:c/1.
        before = frames
        el = driver.execute_script(
            "return Array.from(document.querySelectorAll('#frames > g')).find("
            "function (g) { return g.firstElementChild.textContent.indexOf('app:c/1 (') === 0; })"
            ".querySelector('rect')")
        el.click()
        after = {f["name"]: f for f in driver.execute_script(JS_FRAMES)}
        check(abs(after["app:c/1"]["w"] - 1180) < 0.2 and abs(after["app:c/1"]["x"] - 10) < 0.2,
              "zoomed frame at %.1f+%.1f, want 10+1180" % (after["app:c/1"]["x"], after["app:c/1"]["w"]))
        check(abs(after["app:leaf/1"]["x"] - 10) < 0.2 and
              abs(after["global::garbage_collect"]["x"] - (10 + 1180.0 * 4000 / 5500)) < 0.5,
              "children of the zoomed frame: app:leaf/1 at %.1f, global::garbage_collect at %.1f"
              % (after["app:leaf/1"]["x"], after["global::garbage_collect"]["x"]))
        want_leaf = 1180.0 * 4000 / 5500
        check(abs(after["app:leaf/1"]["w"] - want_leaf) < 0.5 and
              abs(after["app:leaf/1"]["w"] - before["app:leaf/1"]["w"]) > 100,
              "app:leaf/1 width %.1f -> %.1f, want %.1f" % (before["app:leaf/1"]["w"],
                                                           after["app:leaf/1"]["w"], want_leaf))
        check(not after["app:other/1"]["shown"], "a frame outside the zoom is still shown")
        check(after["app:a/1"]["shown"] and abs(after["app:a/1"]["w"] - 1180) < 0.2 and
              "anc" in after["app:a/1"]["cls"], "an ancestor is not shown full width")
        check(driver.execute_script("return fg.zoomed() !== null"), "fg.zoomed()")
        # Reset zoom through its control.
        driver.find_element("id", "unzoom").click()
        reset = {f["name"]: f for f in driver.execute_script(JS_FRAMES)}
        for name in ("app:leaf/1", "app:other/1", "app:c/1", "sweep_one_heap"):
            check(reset[name]["shown"] and abs(reset[name]["w"] - before[name]["w"]) < 0.11 and
                  abs(reset[name]["x"] - before[name]["x"]) < 0.11,
                  "reset zoom: %s at %.1f+%.1f, was %.1f+%.1f" % (
                      name, reset[name]["x"], reset[name]["w"], before[name]["x"], before[name]["w"]))

        # Search through the control: its prompt takes a regular expression.
        driver.find_element("id", "search").click()
        alert = wait_alert(driver)
        alert.send_keys("app:(leaf|d)/")
        alert.accept()
        hits = driver.execute_script(
            "return document.querySelectorAll('#frames > g.hit').length")
        matched = driver.find_element("id", "matched").text
        share = 100.0 * 5500 / TOTAL  # app:d/1 holds app:leaf/1: counted once
        log("search app:(leaf|d)/: %d highlighted, %r" % (hits, matched))
        check(hits == 2, "%d frames highlighted, want 2" % hits)
        check(matched == "Matched: %.2f%% of samples, 2 frames" % share, "matched: %r" % matched)
        hit_fill = driver.execute_script(
            "return getComputedStyle(document.querySelector('#frames > g.hit > rect')).fill")
        check(hit_fill == "rgb(230, 0, 230)", "highlight colour %r" % hit_fill)
        # The function, with a text that is not a valid expression: a substring.
        res = driver.execute_script("return fg.search('[callers')")
        check(res["frames"] == 1 and abs(res["percent"] - 100.0 * 400 / TOTAL) < 0.01,
              "substring search: %r" % res)
        res = driver.execute_script("return fg.search('^app:(a|hot)/')")
        check(res["frames"] == 2 and abs(res["percent"] - 100.0 * 9200 / TOTAL) < 0.01,
              "regular expression search: %r" % res)
        # "/" opens the prompt too; Escape clears.
        webdriver = debian_module("selenium.webdriver", "python3-selenium")
        webdriver.ActionChains(driver).send_keys("/").perform()
        wait_alert(driver).dismiss()
        webdriver.ActionChains(driver).send_keys("\ue00c").perform()  # Escape
        check(driver.execute_script("return document.querySelectorAll('#frames > g.hit').length")
              == 0 and driver.find_element("id", "matched").text == "", "Escape did not clear")
        # Hover shows the frame's details.
        el = driver.execute_script(
            "return Array.from(document.querySelectorAll('#frames > g')).find("
            "function (g) { return g.firstElementChild.textContent.indexOf('app:b/1 (') === 0; })"
            ".querySelector('rect')")
        webdriver.ActionChains(driver).move_to_element(el).perform()
        details = driver.find_element("id", "details").text
        check(details.startswith("app:b/1 (5,500 samples"), "details on hover: %r" % details)
    finally:
        driver.quit()


# ---------------------------------------------------------------------------
# an empty profile (--blame of a function no stack holds), determinism

def test_empty_profile_and_same_bytes():
    opts = ("--blame", "no_such_function")
    doc = load_speedscope(write("speedscope", *opts, name="e.json"))
    validate(speedscope_validator(), doc, "the empty speedscope file")
    check(len(doc["profiles"]) == 1 and doc["profiles"][0]["samples"] == [] and
          doc["profiles"][0]["endValue"] == 0, "empty profile: %r" % doc["profiles"])
    out = go_pprof("-top", write("pprof", *opts, name="e.pb.gz"))
    check("Type: cpu" in out, "go tool pprof on the empty profile", out)
    root, _ = check_svg_file(write("flamegraph", *opts, name="e.svg"))
    check(len(root.find(".//%sg[@id='frames']" % SVG_NS)) == 0 and
          "no samples" in [t.text for t in root.iter(SVG_NS + "text")], "the empty flame graph")
    for fmt in ("speedscope", "pprof"):
        a, b = write(fmt, name="a." + fmt), write(fmt, name="b." + fmt)
        check(open(a, "rb").read() == open(b, "rb").read(), "%s: two runs differ" % fmt)


# ---------------------------------------------------------------------------
# write errors

def test_write_errors_are_errors():
    for fmt in ("flamegraph", "speedscope", "pprof"):
        r = run_tool(WRITER, fmt, "/dev/full")
        check(r.rc == 1, "%s to /dev/full: exit %s" % (fmt, r.rc), r.describe())
        lines = r.lines_err
        check(len(lines) == 1 and "No space left on device" in lines[0],
              "%s to /dev/full: %r" % (fmt, lines))


# ---------------------------------------------------------------------------
# generated release tables ("generated release tables written with
# designated indices ([XB_F_PROC_SIZE] = 776), not positional")

RELEASES = os.path.join(ROOT, "src", "beam", "releases")


def test_release_tables_designated_and_generated():
    """Every array in src/beam/releases/erts-*.c is written with
    designated indices (.off's [XB_F_*], .subtag's [0xN], .thread_fmt's
    [0] [1] [2]), none positionally; and erts-13.1.5.c is byte for byte
    what build/xb-gen-release writes from the DWARF of the OTP 25 VMs
    (the generator and the tables agree: neither was edited alone)."""
    tables = sorted(f for f in os.listdir(RELEASES) if re.match(r"erts-[\d.]+\.c$", f))
    check(tables, "no release tables in %s" % RELEASES)
    for name in tables:
        text = open(os.path.join(RELEASES, name)).read()
        # an element that is not designated: a value right after "{" or
        # on a line of its own inside a brace list
        positional = re.findall(r"=\s*\{\s*(?:\"|-?\d|XB_)[^\n]*", text) + \
            re.findall(r"^\t+(?:\"[^\"]*\"|-?\d+|XB_\w+),", text, re.M)
        check(not positional, "%s: positional initializers: %s" % (name, positional[:3]))
        m = re.search(r"\.thread_fmt = \{[^}]*\}", text)
        check(m and re.findall(r"\[(\d)\] = \"", m.group(0)) == ["0", "1", "2"],
              "%s: .thread_fmt is not [0] [1] [2]: %r" % (name, m and m.group(0)))
    emu, jit = load_target("otp25-emu-dwarf"), load_target("otp25-jit-dwarf")
    for t in (emu, jit):
        if not t.present:
            skip_because("target-not-built", t, "%s: %s" % (t.name, t.missing))
    src = os.path.join(CACHE, "src", "otp-25")
    check(os.path.isdir(src), "no OTP 25 source tree at %s (tests/build-vms.sh keeps it)" % src)
    r = run_cmd([os.path.join(build_dir(), "xb-gen-release"), "--erts", emu.info["erts"], "--otp", "25",
                 "--src", src, "--emu", emu.info["beam"], "--jit", jit.info["beam"]], timeout=120)
    check(r.rc == 0, "xb-gen-release failed", r.describe())
    mine = open(os.path.join(RELEASES, "erts-%s.c" % emu.info["erts"])).read()
    if r.out != mine:
        import difflib
        diff = "".join(difflib.unified_diff(mine.splitlines(True), r.out.splitlines(True), "committed",
                                            "generated", n=1))
        check(False, "erts-%s.c differs from what xb-gen-release writes (run scripts/gen-release-table 25)"
              % emu.info["erts"], diff[:4000])
    log("%d tables designated; erts-%s.c as generated" % (len(tables), emu.info["erts"]))


@timeout(240)
def test_format_bench_size_bound():
    """bench/format_bench prints each writer's cost and then the flame
    graph's size against the 10 MB bound for 50,000 distinct stacks (and
    the worst cases), and exits non-zero when a writer fails (an
    unwritable --dir).  The speedscope and pprof files it wrote (--keep)
    are read by their consumers: speedscope's schema, go tool pprof."""
    bench = os.path.join(build_dir(), "format_bench")
    kept = tmpdir()
    r = run_cmd([bench, "--rounds", "1", "--stacks", "2000", "--samples", "100000", "--dir", kept, "--keep"],
                timeout=200)
    check(r.rc == 0, "format_bench failed", r.describe() + r.out)
    written = {f.split(".", 2)[2]: os.path.join(kept, f) for f in os.listdir(kept) if f.startswith("format_bench.")}
    check({"speedscope.json", "pb.gz"} <= set(written), "format_bench --keep left %s" % sorted(written))
    validate(speedscope_validator(), load_speedscope(written["speedscope.json"]), written["speedscope.json"])
    rows, _ = pprof_top(written["pb.gz"])
    check(len(rows) >= 5, "go tool pprof -top: %d rows from the bench's profile" % len(rows))
    # the cost table: a row per writer (and the blame filter), median and
    # min milliseconds, bytes, and the ratio to the folded writer's time
    costs = dict(re.findall(r"^(table|folded|flamegraph|speedscope|pprof|blame filter \(memory\))\s+"
                            r"\d+\.\d\s+\d+\.\d\s+\d+\s+(\d+\.\d\d)$",
                            r.out.split("flame graph size bound", 1)[0], re.M))
    check(set(costs) == {"table", "folded", "flamegraph", "speedscope", "pprof", "blame filter (memory)"}
          and costs["folded"] == "1.00", "the cost table lacks a writer: %s" % sorted(costs), r.out)
    rows = re.findall(r"^(.+?)\s+(\d+)\s+(\d+\.\d\d)$", r.out.split("flame graph size bound: 10 MB", 1)[-1], re.M)
    check("flame graph size bound: 10 MB" in r.out and len(rows) == 4, "no size bound table", r.out)
    for what, size, ratio in rows:
        check(abs(int(size) / 1e7 - float(ratio)) <= 0.006 and int(size) < 1e7,
              "%s: %s bytes, %s of the bound" % (what.strip(), size, ratio), r.out)
    sizes = {what.strip(): int(size) for what, size, _ in rows}
    check(sizes["33,600 stacks, 600 chains > 0.1 % each"] > 5e6 and
          sizes["50,000 stacks, weighted as sampled"] > 1e5, "implausible SVG sizes: %s" % sizes, r.out)
    log("\n".join(r.out.splitlines()[-6:]))
    bad = run_cmd([bench, "--rounds", "1", "--stacks", "200", "--samples", "1000", "--dir",
                   os.path.join(tmpdir(), "no-such-dir")], timeout=200)
    check(bad.rc == 1 and "a writer failed" in bad.err, "format_bench with an unwritable --dir: exit %s" % bad.rc,
          bad.describe())

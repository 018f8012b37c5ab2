"""Man pages: every tool (an `erlang-*` executable in meson.build)
has man/TOOL.1; every option its --help lists is described there (an
option of a .TP paragraph) with the same default, and the man page
describes no option --help does not list; the pages format without a
warning (groff -ww, man --warnings).  `meson install` installs the pages
with the binaries.  The man pages are the option reference: README.md
points to them."""

import os
import re

from xbtest import ROOT, build_dir, check, log, no_asan, run_cmd, run_tool, tmpdir


def tools():
    with open(os.path.join(ROOT, "meson.build")) as f:
        return re.findall(r"executable\('(erlang-[\w-]+)'", f.read())


def help_options(text):
    longs, shorts = set(), set()
    for line in text.splitlines():
        m = re.match(r"^\s+(?:-(\w), )?--([\w-]+)", line)
        if m:
            longs.add(m.group(2))
            if m.group(1):
                shorts.add(m.group(1))
    return longs, shorts


def man_options(text):
    """Options of the .TP paragraphs: the line after each .TP."""
    longs, shorts = set(), set()
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip() != ".TP":
            continue
        tag = lines[i + 1]
        for m in re.finditer(r"\\-\\-([\w\\-]+)", tag):
            longs.add(m.group(1).replace("\\-", "-"))
        for m in re.finditer(r'(?:^|[ "])\\-(\w)(?:"|\s|$)', tag):
            shorts.add(m.group(1))
    return longs, shorts


# A default as --help and the man pages spell it: "(default 997)",
# "(default: the clock)", or "auto (default)" / "sample (the default
# where ...)" after the value.
DEFAULT_RES = [re.compile(r"\(default:? (?:the )?([^\s;,)]+)[;,)]"),
               re.compile(r"([-\w.]+)\s+\((?:the )?default(?:\)| where)")]


def defaults(text):
    return sorted({v for r in DEFAULT_RES for v in r.findall(text)})


def troff_text(s):
    s = re.sub(r"\\f[BIRP]", "", s).replace("\\-", "-")
    return s.replace("\\(lq", '"').replace("\\(rq", '"').replace("\\(<=", "<=")


def help_paragraphs(text):
    """{long option: its --help text, continuation lines included}."""
    paras, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s{1,8}(?:-(\w), )?--([\w-]+)", line)
        if m:
            cur = m.group(2)
            paras[cur] = line[m.end():]
        elif cur and re.match(r"^\s{10,}\S", line):
            paras[cur] += " " + line.strip()
        else:
            cur = None
    return paras


def man_paragraphs(text):
    """{long option: the text of the first .TP paragraph tagged with it}."""
    paras, lines, i = {}, text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == ".TP" and i + 1 < len(lines):
            j = i + 2
            while j < len(lines) and not lines[j].startswith((".TP", ".SH", ".SS")):
                j += 1
            body = troff_text(" ".join(lines[i + 2:j]))
            for m in re.finditer(r"\\-\\-([\w\\-]+)", lines[i + 1]):
                paras.setdefault(m.group(1).replace("\\-", "-"), body)
            i = j
        else:
            i += 1
    return paras


@no_asan("the parser on fixed text: none of our tools runs")
def test_defaults_parsed():
    """The default parser reads the spellings both sides use."""
    for text, want in [("samples per second (default 997)", ["997"]),
                       ("seed (default: clock)", ["clock"]), ("seed (default: the clock).", ["clock"]),
                       ("auto (default): bpf when", ["auto"]), ("sample (the default where X)", ["sample"]),
                       ("0 (default) reads", ["0"]), ("how long (default and 0: until ^C)", []),
                       ("no default here", [])]:
        check(defaults(text) == want, "defaults(%r) = %r, not %r" % (text, defaults(text), want))


def test_manpages_match_help():
    names = tools()
    check(names, "no erlang-* tools in meson.build")
    for tool in names:
        page = os.path.join(ROOT, "man", tool + ".1")
        check(os.path.exists(page), "%s has no man page (man/%s.1)" % (tool, tool))
        r = run_tool(tool, "--help", timeout=20)
        check(r.rc == 0, "%s --help failed" % tool, r.describe())
        hl, hs = help_options(r.out)
        with open(page) as f:
            ml, ms = man_options(f.read())
        check(hl, "%s --help lists no options" % tool, r.out)
        check(not hl - ml, "%s: options in --help but not in its man page: %s" % (tool, sorted(hl - ml)))
        check(not ml - hl, "%s: options in its man page but not in --help: %s" % (tool, sorted(ml - hl)))
        check(hs == ms, "%s: short options differ: --help %s, man page %s" % (tool, sorted(hs), sorted(ms)))
        with open(page) as f:
            mp = man_paragraphs(f.read())
        hp = help_paragraphs(r.out)
        differ = ["--%s: --help %s, man page %s" % (o, defaults(hp[o]) or "none", defaults(mp.get(o, "")) or "none")
                  for o in sorted(hp) if defaults(hp[o]) != defaults(mp.get(o, ""))]
        check(not differ, "%s: defaults differ between --help and the man page:\n  %s"
              % (tool, "\n  ".join(differ)))
        if os.path.exists("/usr/bin/groff"):
            g = run_cmd(["groff", "-ww", "-man", "-Tutf8", "-z", page], timeout=30)
            check(g.rc == 0 and not g.err.strip(), "%s.1: groff -ww warns" % tool, g.err)
        r = run_cmd(["man", "--warnings", "-l", "-Tutf8", page], timeout=30,
                    env=dict(os.environ, MANWIDTH="80")) if os.path.exists("/usr/bin/man") else None
        if r is not None:
            bad = [l for l in r.err.splitlines() if "warning" in l]
            check(r.rc == 0 and not bad, "%s.1 does not format cleanly" % tool, r.err)
        log("%s: %d long and %d short options in both, %d defaults alike"
            % (tool, len(hl), len(hs), sum(1 for o in hp if defaults(hp[o]))))


def test_meson_install_installs_man_pages():
    dest = tmpdir()
    r = run_cmd(["meson", "install", "-C", build_dir(), "--destdir", dest, "--no-rebuild"], timeout=120)
    check(r.rc == 0, "meson install failed", r.describe() + r.out[-2000:])
    found = {}
    for d, _, files in os.walk(dest):
        for f in files:
            found[f] = os.path.join(d, f)
    for tool in tools():
        check(tool in found and os.access(found[tool], os.X_OK), "%s not installed" % tool, r.out[-2000:])
        check(tool + ".1" in found and "/man1/" in found[tool + ".1"],
              "%s.1 not installed in a man1 directory" % tool, r.out[-2000:])

"""Man pages: every tool (an `erlang-*` executable in meson.build)
has man/TOOL.1; every option its --help lists is described there (an
option of a .TP paragraph), and the man page describes no option --help
does not list.  `meson install` installs the pages with the binaries."""

import os
import re

from xbtest import ROOT, build_dir, check, log, run_cmd, run_tool, tmpdir


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
        r = run_cmd(["man", "--warnings", "-l", "-Tutf8", page], timeout=30,
                    env=dict(os.environ, MANWIDTH="80")) if os.path.exists("/usr/bin/man") else None
        if r is not None:
            bad = [l for l in r.err.splitlines() if "warning" in l]
            check(r.rc == 0 and not bad, "%s.1 does not format cleanly" % tool, r.err)
        log("%s: %d long and %d short options in both" % (tool, len(hl), len(hs)))


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

"""The release tables (src/beam/releases/erts-*.c) are written with
designated indices ([XB_F_PROC_SIZE] = 776): a field a table does not list
would silently read as offset 0.  Every table must list every field of
enum xb_field (include/xb/release.h) in both flavours, each once.  And each
is what scripts/gen-release-table makes from its release's VM, for every
release VM tests/build-vms.sh built."""

import os
import re

from xbtest import ROOT, check, load_target, log, run_cmd, skip_because, tmpdir, tool_path

RELEASE_H = os.path.join(ROOT, "include", "xb", "release.h")
TABLES = os.path.join(ROOT, "src", "beam", "releases")


def enum_fields():
    text = open(RELEASE_H).read()
    body = text[text.index("enum xb_field {"):text.index("XB_F_COUNT")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"\b(XB_F_[A-Z0-9_]+)\s*,", body)


def test_every_table_lists_every_field():
    fields = enum_fields()
    check(len(fields) > 50, "only %d fields parsed from release.h" % len(fields))
    tables = sorted(f for f in os.listdir(TABLES) if re.match(r"erts-.*\.c$", f))
    check(tables, "no release tables in %s" % TABLES)
    for name in tables:
        text = open(os.path.join(TABLES, name)).read()
        for flavor in ("emu", "jit"):
            m = re.search(r"\.%s = \{\s*\.off = \{(.*?)\n\t\t\}," % flavor, text, re.S)
            check(m, "%s: no .%s.off block" % (name, flavor))
            listed = re.findall(r"\[(XB_F_[A-Z0-9_]+)\]\s*=", m.group(1))
            dup = sorted({f for f in listed if listed.count(f) > 1})
            missing = [f for f in fields if f not in listed]
            unknown = sorted(set(listed) - set(fields))
            check(not dup and not missing and not unknown,
                  "%s .%s: missing %s, listed twice %s, unknown %s"
                  % (name, flavor, missing[:8], dup[:8], unknown[:8]))
    log("%d tables x 2 flavours list all %d fields" % (len(tables), len(fields)))


def test_tables_match_their_release_vms():
    """Every committed table is what scripts/gen-release-table makes from the
    DWARF and source of its release's VM, for every release VM built (the
    default suite: OTP 25 and the newest downloadable OTP 29; the matrix:
    every erlang release Debian ships whose source can be downloaded,
    otpX.Y.Z-jit); and every such release has a committed table."""
    gen = os.path.join(ROOT, "scripts", "gen-release-table")
    env = dict(os.environ, XB_GEN_RELEASE=tool_path("xb-gen-release"))
    r = run_cmd([gen, "--list"], env=env, timeout=60)
    check(r.rc == 0, "gen-release-table --list failed", r.describe())
    releases = [l.split() for l in r.out.splitlines() if l.strip()]
    if not releases:
        skip_because("target-not-built", load_target("otp25-jit-dwarf"),
                     "no release VM with DWARF is built (tests/build-vms.sh)")
    out = os.path.join(tmpdir(), "tables")
    r = run_cmd([gen, "--outdir", out, "--all"], env=env, timeout=300)
    check(r.rc == 0, "gen-release-table --outdir DIR --all failed", r.describe() + "\n" + r.out)
    committed = sorted(f for f in os.listdir(TABLES) if re.match(r"erts-.*\.c$", f))
    for erts, otp_version, emu, jit, tree in releases:
        name = "erts-%s.c" % erts
        check(name in committed, "OTP %s (erts %s) has a release VM but no committed table: run "
              "scripts/gen-release-table %s and commit src/beam/releases" % (otp_version, erts, erts))
        want = open(os.path.join(TABLES, name)).read()
        got = open(os.path.join(out, name)).read()
        if got != want:
            import difflib
            diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                     "committed/" + name, "generated/" + name))[:60])
            check(False, "%s differs from what gen-release-table makes from OTP %s's VM "
                  "(emu %s, jit %s, source %s)" % (name, otp_version, emu, jit, tree), diff)
    made = set(e for e, *_ in releases)
    without = sorted(c[5:-2] for c in committed if c[5:-2] not in made)
    log("%d of %d committed tables regenerated identically from their release VMs (%s)%s"
        % (len(made), len(committed), ", ".join(sorted(made)),
           "; no VM built here for %s" % ", ".join(without) if without else ""))

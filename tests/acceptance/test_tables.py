"""The release tables (src/beam/releases/erts-*.c) are written with
designated indices ([XB_F_PROC_SIZE] = 776): a field a table does not list
would silently read as offset 0.  Every table must list every field of
enum xb_field (include/xb/release.h) in both flavours, each once."""

import os
import re

from xbtest import ROOT, check, log

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

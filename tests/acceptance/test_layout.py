"""The source layout follows the pipeline (issue 10: "the sample flows one
way", "no dependency circles"): a directory of src/ includes only the
headers of directories before it in

    base < native < beam < sampling < unwind < erlstack < profile < session
         < output < tools

(base: Linux plumbing; native: ELF symbols, x86 decoding, demangling;
beam: VM knowledge; sampling: perf events and BPF; unwind: libdwfl over a
sample; erlstack: the Erlang stack; profile: naming frames and
aggregating; session: the loop; output: sinks and writers; tools: main).  A header belongs to the directory whose .c
file implements it (same name), or as listed in OWNER.  Pure code: no VM.
"""

import glob
import os
import re

from xbtest import ROOT, check, log

ORDER = {"base": 0, "native": 1, "beam": 2, "sampling": 3, "unwind": 4, "erlstack": 5, "profile": 6,
         "session": 7, "output": 8, "tools": 9}
# README's Layout table: the directories that do not know BEAM
BEAM_FREE = {"base", "native", "sampling", "unwind"}
# headers with no .c of the same name: where they are implemented
OWNER = {"vm": "beam", "bpf_record": "sampling", "output": "output", "outputs": "output",
         "writers": "output", "hsout": "output", "version": "base", "sink": "session",
         "rsample": "profile"}


def test_layers_point_one_way():
    """Every #include "xb/X.h" in src/DIR/*.c, and in a header of DIR,
    names a header of DIR itself or of a directory before it; no header is
    of unknown owner."""
    src = os.path.join(ROOT, "src")
    owner = dict(OWNER)
    for c in glob.glob(os.path.join(src, "*", "*.c")):
        d = os.path.basename(os.path.dirname(c))
        owner.setdefault(os.path.basename(c)[:-2], d)
    headers = {os.path.basename(h)[:-2] for h in glob.glob(os.path.join(ROOT, "include", "xb", "*.h"))}
    check(not headers - set(owner), "headers of no known directory: %s (add them to OWNER)"
          % sorted(headers - set(owner)))
    dirs = {os.path.basename(os.path.dirname(c)) for c in glob.glob(os.path.join(src, "*", "*.c"))}
    check(dirs <= set(ORDER), "directories of src/ not in the pipeline order: %s" % sorted(dirs - set(ORDER)))
    bad, edges = [], set()
    files = [(c, os.path.basename(os.path.dirname(c))) for c in sorted(glob.glob(os.path.join(src, "*", "*.c")))]
    files += [(h, owner[os.path.basename(h)[:-2]])
              for h in sorted(glob.glob(os.path.join(ROOT, "include", "xb", "*.h")))]
    for c, d in files:
        with open(c) as f:
            text = f.read()
        for h in re.findall(r'^#include "xb/([A-Za-z0-9_]+)\.h"', text, re.M):
            hd = owner.get(h)
            if hd is None or hd == d:
                continue
            edges.add((d, hd))
            if ORDER[hd] >= ORDER[d]:
                bad.append("%s includes xb/%s.h (%s)" % (os.path.relpath(c, ROOT), h, hd))
    check(not bad, "includes against the pipeline's direction:\n  " + "\n  ".join(bad))
    # README's Layout: these know nothing of BEAM (plumbing: Linux, ELF,
    # perf events, libdwfl); BEAM knowledge is src/beam and what follows it.
    # (Headers are checked too, so nothing reaches beam/ through them.)
    beamless = [(d, hd) for d, hd in edges if d in BEAM_FREE and hd == "beam"]
    check(not beamless, "directories README says know nothing of BEAM include src/beam's headers: %s"
          % sorted(beamless))
    log("%d directory dependencies, all pointing back along the pipeline; %s include nothing of src/beam"
        % (len(edges), ", ".join(sorted(BEAM_FREE))))

"""The source layout follows the pipeline ("the sample flows one
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


def test_no_call_cycles_between_files():
    """No dependency circles between files either (one was
    found inside a directory: attach/discover.c and attach/vm.c calling each
    other): from the built objects' symbol tables (nm), file A depends on
    file B when A uses a function or object B defines; the graph of src/'s
    files has no cycle (strongly connected components of one file only)."""
    import collections
    import subprocess
    from xbtest import build_dir
    objs = {}
    for o in glob.glob(os.path.join(build_dir(), "*.p", "src_*.c.o")):
        # meson's object name: src_DIR_FILE.c.o (FILE may hold "_")
        objs.setdefault(os.path.basename(o)[len("src_"):-len(".c.o")].replace("_", "/", 1), o)
    check(len(objs) >= 40, "only %d objects of src/ found under %s: build first" % (len(objs), build_dir()))
    defs, uses = {}, collections.defaultdict(set)
    of = {o: name for name, o in objs.items()}
    # one nm for all (-A: each line "OBJECT:VALUE TYPE NAME" or "OBJECT: U NAME")
    out = subprocess.run(["nm", "-A"] + sorted(of), capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        path, _, rest = line.partition(".o:")
        name, parts = of.get(path + ".o"), rest.split()
        if name is None:
            continue
        if len(parts) == 3 and parts[1] in "TDBR":
            defs[parts[2]] = name
        elif len(parts) == 2 and parts[0] == "U":
            uses[name].add(parts[1])
    edges = {n: sorted({defs[u] for u in uses[n] if u in defs and defs[u] != n}) for n in objs}
    # Tarjan's strongly connected components, iteratively
    index, low, onstack, stack, cycles, counter = {}, {}, set(), [], [], [0]
    for root in sorted(objs):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                onstack.add(v)
            if i < len(edges[v]):
                work.append((v, i + 1))
                w = edges[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in onstack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    onstack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    cycles.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    check(not cycles, "files of src/ that depend on each other (a cycle): %s" % cycles)
    log("%d files of src/, %d dependencies between them, no cycle"
        % (len(objs), sum(len(e) for e in edges.values())))

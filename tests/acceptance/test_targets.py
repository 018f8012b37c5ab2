"""The VMs the struct-layout work is tested against (tests/build-vms.sh),
checked for what their info files say they are before a test relies on it:

- Debian's own VMs as users run them (sid-stock; trixie-stock and
  bookworm-stock in the matrix): erlang-base in a debootstrapped root,
  started as a container (xbtest.container_argv: new mount and PID
  namespaces, chroot).  vm.pid is the host pid of that root's stripped
  beam.smp, pid 1 of its namespace; killing the VM ends the namespace.
- layout-shifted builds (otp25-emu-shifted, otp25-jit-shifted;
  otp27-jit-shifted in the matrix): members inserted into struct process and
  struct ErtsSchedulerData_ (erts/emulator/beam/erl_process.h), an erts
  version no release table names; their DWARF (the answer key discovery is
  checked against) shows each inserted member where shifted= says and the
  members the tools read moved as moved= says.
- the VM-probes builds (otp25-jit-probes; otp27-jit-probes in the matrix):
  USE_VM_PROBES, struct process 16 bytes longer (OTP 25: before u; OTP 27:
  at its end), the erts version of a release that has a table.
- each one's -stripped sibling: .dynsym only, as Debian ships beam.smp.
"""

import os
import re
import shutil
import subprocess

from xbtest import (ROOT, VM, check, elf_sections, load_target, log, ns_pids, per_vm, run_tool,
                    skip_because, timeout, wait_for)

CONTAINERS = ["sid-stock", "trixie-stock", "bookworm-stock"]
SHIFTED = ["otp25-emu-shifted", "otp25-jit-shifted", "otp27-jit-shifted"]
PROBES = ["otp25-jit-probes", "otp27-jit-probes"]
TABLES = os.path.join(ROOT, "src", "beam", "releases")
STRUCTS = {"process": "struct process", "ErtsSchedulerData_": "struct ErtsSchedulerData_"}


def vm_facts(vm):
    """What the running VM says it is."""
    return {
        "version": vm.eval("erlang:system_info(version)").strip('"'),
        "otp_release": vm.eval("erlang:system_info(otp_release)").strip('"'),
        "flavor": vm.eval("erlang:system_info(emu_flavor)"),
        "os_pid": vm.eval("os:getpid()").strip('"'),
        "root_dir": vm.eval("code:root_dir()").strip('"'),
    }


def check_is_the_target(target, vm):
    facts = vm_facts(vm)
    check(facts["version"] == target.erts, "%s: the VM says erts %s, its info %s"
          % (target.name, facts["version"], target.erts))
    check(facts["flavor"] == target.flavor, "%s: the VM's emu_flavor is %s, its info says %s"
          % (target.name, facts["flavor"], target.flavor))
    check(facts["otp_release"] == str(target.otp), "%s: otp_release %s, info otp=%s"
          % (target.name, facts["otp_release"], target.otp))
    check(os.path.realpath("/proc/%d/exe" % vm.pid) == os.path.realpath(target.beam),
          "%s: vm.pid %d runs %s, not the target's beam %s"
          % (target.name, vm.pid, os.readlink("/proc/%d/exe" % vm.pid), target.beam))
    return facts


def check_stripped(target):
    secs, dyn = elf_sections(target.beam)
    check(".symtab" not in secs and ".debug_info" not in secs,
          "%s: %s has %s (a stripped sibling keeps .dynsym only)"
          % (target.name, target.beam, sorted(s for s in secs if s in (".symtab", ".debug_info"))))
    check(".dynsym" in secs and len(dyn) > 200, "%s: %s has no .dynsym (%d names)"
          % (target.name, target.beam, len(dyn)))
    return secs, dyn


def gdb_values(binary, exprs):
    """C expressions evaluated with binary's DWARF (cast to long; None where
    gdb cannot)."""
    if not shutil.which("gdb"):
        skip_because("needs-package", None, "gdb (tests/build-vms.sh installs it)")
    argv = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
    for e in exprs:
        argv += ["-ex", "echo XB-VALUE\\040", "-ex", "output (long)(%s)" % e, "-ex", "echo \\n"]
    p = subprocess.run(argv + [binary], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       universal_newlines=True, timeout=120)
    vals = [l[len("XB-VALUE "):] for l in p.stdout.splitlines() if l.startswith("XB-VALUE")]
    check(len(vals) == len(exprs), "gdb evaluated %d of %d expressions in %s"
          % (len(vals), len(exprs), binary), p.stdout[-2000:])
    return [int(v) if v.strip().lstrip("-").isdigit() else None for v in vals]


def offset(struct, member):
    return "&((%s *)0)->%s" % (STRUCTS[struct], member)


def end_of(struct, member):
    return "(char *)&((%s *)0)->%s + sizeof(((%s *)0)->%s)" % (
        STRUCTS[struct], member, STRUCTS[struct], member)


def parse_moved(text):
    """moved= "process.heap:+24 ErtsSchedulerData_.no:+40 ..." -> {(struct, member): 24, ...}"""
    out = {}
    for item in text.split():
        name, by = item.rsplit(":", 1)
        struct, member = name.split(".", 1)
        out[(struct, member)] = int(by)
    return out


def parse_inserted(text):
    """shifted=/probes= "process.xb_shift_a:24:after:fvalue ..." ->
    [(struct, member, bytes, "after"|"before", anchor)]"""
    out = []
    for item in text.split():
        if ":" not in item:
            continue   # (a note such as "(USE_VM_PROBES)")
        name, nbytes, where, anchor = item.split(":")
        struct, member = name.split(".", 1)
        out.append((struct, member, int(nbytes), where, anchor))
    return out


def check_layout_key(target, base, inserted):
    """The DWARF of target's beam against its unshifted base's: every
    inserted member where the info says, struct process larger by exactly
    the bytes inserted into it, every member of moved= moved by that much."""
    moved = parse_moved(target.info.get("moved", ""))
    check(moved, "%s: its info has no moved=" % target.name, repr(target.info))
    exprs, labels = [], []
    for struct, member, nbytes, where, anchor in inserted:
        exprs += [offset(struct, member), "sizeof(((%s *)0)->%s)" % (STRUCTS[struct], member),
                  end_of(struct, anchor) if where == "after" else offset(struct, anchor)]
        labels.append((struct, member, nbytes, where, anchor))
    keys = sorted(moved)
    exprs += [offset(s, m) for s, m in keys] + ["sizeof(struct process)"]
    got = gdb_values(target.beam, exprs)
    base_vals = gdb_values(base.beam, [offset(s, m) for s, m in keys] + ["sizeof(struct process)"])
    for i, (struct, member, nbytes, where, anchor) in enumerate(labels):
        off, size, at = got[3 * i:3 * i + 3]
        check(off is not None and size == nbytes, "%s: DWARF has no %d-byte %s.%s (offset %s, size %s)"
              % (target.name, nbytes, struct, member, off, size))
        where_ok = off == at if where == "after" else off + nbytes == at
        check(where_ok, "%s: %s.%s is at %s, not %s %s.%s (%s)"
              % (target.name, struct, member, off, where, struct, anchor, at))
    n = 3 * len(labels)
    for (struct, member), want, now, before in zip(keys, [moved[k] for k in keys], got[n:], base_vals):
        check(now is not None and before is not None and now - before == want,
              "%s: %s.%s is at %s, at %s in %s: moved %s, its info says %+d"
              % (target.name, struct, member, now, before, base.name,
                 None if now is None or before is None else now - before, want))
    grew = sum(nbytes for struct, _, nbytes, _, _ in inserted if struct == "process")
    size, base_size = got[-1], base_vals[-1]
    check(size - base_size == grew, "%s: sizeof(struct process) %d, %s's %d: +%d, inserted %d"
          % (target.name, size, base.name, base_size, size - base_size, grew))
    check(str(size) == target.info.get("process_size"), "%s: info process_size=%s, DWARF %d"
          % (target.name, target.info.get("process_size"), size))
    return size, base_size, moved


def unshifted_of(target):
    name = target.info.get("unshifted")
    check(name, "%s: its info names no unshifted= VM" % target.name, repr(target.info))
    base = load_target(name)
    if not base.present:
        skip_because("target-not-built", base, base.missing)
    return base


@per_vm(only=CONTAINERS)
@timeout(300)
def test_container_target(target):
    """A *-stock target is Debian's erlang-base of its suite, stripped, run
    as a container: vm.pid is the host pid of the root's beam.smp, pid 1 in
    a PID namespace of its own, its /proc/PID/exe and root inside the root;
    the workloads (compiled by the root's own erlc) run; killing the VM
    leaves no process in that namespace and no mount on the host."""
    root = os.path.realpath(target.chroot)
    check(target.container and os.path.isdir(root), "%s: no chroot= root (%s)"
          % (target.name, target.chroot))
    check(os.path.realpath(target.beam).startswith(root + "/"),
          "%s: beam %s is not inside its root %s" % (target.name, target.beam, root))
    check_stripped(target)
    with VM(target, schedulers=2) as vm:
        facts = check_is_the_target(target, vm)
        exe = os.readlink("/proc/%d/exe" % vm.pid)
        check(exe.startswith(root + "/"), "%s: /proc/%d/exe is %s, not inside %s"
              % (target.name, vm.pid, exe, root))
        check(os.path.realpath("/proc/%d/root" % vm.pid) == root,
              "%s: /proc/%d/root is %s, not %s" % (target.name, vm.pid,
                                                    os.readlink("/proc/%d/root" % vm.pid), root))
        check(vm.ns_pid == 1 and facts["os_pid"] == "1" and ns_pids(vm.pid) == [vm.pid, 1],
              "%s: beam.smp is pid %s in its namespace (NSpid %s), expected the namespace's pid 1"
              % (target.name, facts["os_pid"], ns_pids(vm.pid)))
        ns = {k: os.readlink("/proc/%d/ns/%s" % (vm.pid, k)) for k in ("pid", "mnt")}
        for k, v in ns.items():
            check(v != os.readlink("/proc/self/ns/%s" % k), "%s: the VM shares our %s namespace"
                  % (target.name, k))
        check(facts["root_dir"] == "/usr/lib/erlang", "%s: code:root_dir() is %s inside the container"
              % (target.name, facts["root_dir"]))
        with open(os.path.join(root, "etc", "debian_version")) as f:
            want = f.read()
        seen = vm.eval('element(2, file:read_file("/etc/debian_version"))')
        check(seen == '<<"%s">>' % want.replace("\n", "\\n"),
              "%s: the VM's /etc/debian_version is %s, its root's %r" % (target.name, seen, want))
        vm.start_workload("xb_split", 80)
        comms = []
        for tid in os.listdir("/proc/%d/task" % vm.pid):
            try:
                with open("/proc/%d/task/%s/comm" % (vm.pid, tid)) as f:
                    comms.append(f.read().strip())
            except OSError:
                pass
        # (scheduler threads: erl_process.c names them N_scheduler before
        # OTP 29, erts_sched_N since)
        scheds = [c for c in comms if re.match(r"^(\d+_scheduler|erts_sched_\d+)$", c)]
        check(len(scheds) == 2, "%s: not 2 scheduler threads under host pid %d" % (target.name, vm.pid),
              repr(comms))
        # the tools look at it from the host, as at any container: a
        # release with a table must attach; the others are for the layout
        # discovery work (logged)
        r = run_tool("erlang-sample", "--check", str(vm.pid), timeout=90)
        has_table = os.path.exists(os.path.join(TABLES, "erts-%s.c" % target.erts))
        first = next((l for l in (r.out + r.err).splitlines() if l.strip()), "")
        if has_table:
            check(r.rc == 0, "%s: erlang-sample --check %d (host pid of a release with a table) "
                  "failed" % (target.name, vm.pid), r.out + r.err)
        log("%s: %s, erts %s %s, host pid %d (pid 1 of %s), exe %s; --check exit %d: %s"
            % (target.name, target.info.get("source", "?"), facts["version"], facts["flavor"],
               vm.pid, ns["pid"], exe, r.rc, first[:160]))
    def left():
        out = []
        for p in os.listdir("/proc"):
            try:
                if p.isdigit() and os.readlink("/proc/%s/ns/pid" % p) == ns["pid"]:
                    with open("/proc/%s/stat" % p, "rb") as f:
                        st = f.read()
                    if st[st.rindex(b")") + 2:].split()[0] not in (b"Z", b"X"):
                        out.append(int(p))
            except (OSError, ValueError):
                pass
        return out
    check(wait_for(lambda: not left(), timeout=15), "%s: processes of the killed VM's namespace "
          "still running: %s" % (target.name, left()))
    with open("/proc/self/mountinfo") as f:
        mounts = [l.split()[4] for l in f]
    leaked = [m for m in mounts if m == root or m.startswith(root + "/")]
    check(not leaked, "%s: mounts left on the host inside the root: %s" % (target.name, leaked))


@per_vm(only=SHIFTED + [n + "-stripped" for n in SHIFTED])
@timeout(240)
def test_shifted_target(target):
    """A layout-shifted build runs an erts version no table names (its
    release's + a suffix), and its DWARF is the answer key: the members
    shifted= names where it says, struct process larger by the bytes
    inserted into it, the members of moved= moved that far (runs of members
    moving by different amounts).  Its -stripped sibling: the same VM,
    .dynsym only."""
    check(target.info.get("variant") == "shifted", "%s: info variant=%s"
          % (target.name, target.info.get("variant")))
    base = unshifted_of(target)
    check(target.erts.startswith(base.erts + ".") and target.erts != base.erts,
          "%s: erts %s is not a version after %s's %s" % (target.name, target.erts, base.name, base.erts))
    check(not os.path.exists(os.path.join(TABLES, "erts-%s.c" % target.erts)),
          "%s: a release table names erts %s" % (target.name, target.erts))
    inserted = parse_inserted(target.info.get("shifted", ""))
    check(len([i for i in inserted if i[0] == "process"]) >= 2
          and any(i[0] == "ErtsSchedulerData_" for i in inserted),
          "%s: shifted= names fewer than two insertions into struct process and one into "
          "ErtsSchedulerData_" % target.name, target.info.get("shifted"))
    with VM(target, schedulers=2) as vm:
        check_is_the_target(target, vm)
        vm.start_workload("xb_split", 80)
    if target.debug == "dynsym":
        check_stripped(target)
        log("%s: erts %s (%s), stripped; shifted %s" % (target.name, target.erts, target.flavor,
                                                       target.info.get("shifted")))
        return
    check(target.debug == "dwarf", "%s: debug=%s, expected dwarf" % (target.name, target.debug))
    size, base_size, moved = check_layout_key(target, base, inserted)
    shifts = sorted(set(v for (s, m), v in moved.items() if s == "process"))
    check(len(shifts) >= 3, "%s: struct process members move by only %s (runs of members should "
          "move by different amounts)" % (target.name, shifts))
    log("%s: erts %s (%s: %s); sizeof(struct process) %d (%s: %d); process members move by %s"
        % (target.name, target.erts, base.name, base.erts, size, base.name, base_size, shifts))


@per_vm(only=PROBES + [n + "-stripped" for n in PROBES])
@timeout(240)
def test_probes_target(target):
    """A VM-probes build (--enable-vm-probes: USE_VM_PROBES) keeps its
    release's erts version, which a table names, but struct process is 16
    bytes longer: dt_utag and dt_utag_flags (erts/emulator/beam/erl_process.h;
    OTP 25: right before u, so u.initial, current and what follows moved;
    OTP 27: at the end, so only the size changed).  Its -stripped sibling:
    the same VM, .dynsym only."""
    check(target.info.get("variant") == "probes", "%s: info variant=%s"
          % (target.name, target.info.get("variant")))
    base = unshifted_of(target)
    check(target.erts == base.erts, "%s: erts %s, %s's %s: a probes build keeps the version"
          % (target.name, target.erts, base.name, base.erts))
    check(os.path.exists(os.path.join(TABLES, "erts-%s.c" % target.erts)),
          "%s: no release table names erts %s (the point of this target)" % (target.name, target.erts))
    with VM(target, schedulers=2) as vm:
        check_is_the_target(target, vm)
        vm.start_workload("xb_split", 80)
    if target.debug == "dynsym":
        check_stripped(target)
        log("%s: erts %s, stripped" % (target.name, target.erts))
        return
    secs, _ = elf_sections(target.beam)
    check(".note.stapsdt" in secs, "%s: no .note.stapsdt (systemtap probes)" % target.name)
    inserted = parse_inserted(target.info.get("probes", ""))
    check(sorted(m for _, m, _, _, _ in inserted) == ["dt_utag", "dt_utag_flags"],
          "%s: probes= does not name dt_utag and dt_utag_flags" % target.name, target.info.get("probes"))
    size, base_size, moved = check_layout_key(target, base, inserted)
    check(size - base_size == 16, "%s: sizeof(struct process) %d, %s's %d: USE_VM_PROBES adds 16"
          % (target.name, size, base.name, base_size))
    # every member after dt_utag moved by 16, every one before it not at all
    keys = sorted(k for k in moved if k[0] == "process")
    offs = gdb_values(target.beam, [offset("process", "dt_utag")] + [offset(s, m) for s, m in keys])
    for (s, m), off in zip(keys, offs[1:]):
        want = 16 if off > offs[0] else 0
        check(moved[(s, m)] == want, "%s: process.%s (at %d, dt_utag at %d) moved by %d, expected %d"
              % (target.name, m, off, offs[0], moved[(s, m)], want))
    log("%s: erts %s as %s; sizeof(struct process) %d (%s: %d); dt_utag at %d; moved by 16: %s"
        % (target.name, target.erts, base.name, size, base.name, base_size, offs[0],
           ", ".join(m for (s, m) in keys if moved[(s, m)]) or "none of the members the tools read"))

"""The system-call filter (``harness.runners.seccomp``): its tables against the kernel headers, its
BPF program run through an interpreter written here, and both compilations applied for real.

The real runs start one probe script per runner (``sandbox`` through bwrap's ``--seccomp``,
``container`` through docker's ``--security-opt seccomp=``). It makes every denied call with
ctypes and records the errno, then does what model code must still be able to do (numpy, threads,
fork, subprocesses, socket pairs, torch where installed). The arguments are invalid, so a call
the filter let through fails in the kernel with another errno (EINVAL, EFAULT, EBADF, ESRCH).
A run without the filter shows that for the calls the kernel checks arguments of first.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import RunnerError
from harness.runners.base import RunJob
from harness.runners.container import ContainerRunner, container_argv
from harness.runners.sandbox import SandboxRunner, sandbox_argv
from harness.runners.sandbox import available as sandbox_available
from harness.runners.seccomp import (
    AUDIT_ARCH,
    CLONE_NAMESPACE_FLAGS,
    COMPAT_ONLY,
    DENIED,
    ENOSYS_CALLS,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    SECCOMP_RET_KILL_PROCESS,
    SYSCALLS,
    X32_SYSCALL_BIT,
    bpf_program,
    docker_profile,
    machine_arch,
    profile_path,
    program_fd,
    write_docker_profile,
)
from tests.conftest import SUBMISSIONS

ARCHES = sorted(SYSCALLS)
EPERM = SECCOMP_RET_ERRNO | errno.EPERM
ENOSYS = SECCOMP_RET_ERRNO | errno.ENOSYS
CLONE_SIGHAND = 0x00000800  # without CLONE_VM: EINVAL from the kernel, before anything happens
THREAD_FLAGS = 0x003D0F00  # glibc's pthread_create: VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|...
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_ARM = 0x40000028
BAD = 1  # a user pointer the kernel cannot read (page 0 is never mapped)
NEG = -1  # an invalid descriptor, pid or clock

# -- a classic BPF interpreter: an implementation independent of the module's assembler ------


def decode(program: bytes) -> list[tuple[int, int, int, int]]:
    """``struct sock_filter`` entries: (code, jt, jf, k)."""
    assert len(program) % 8 == 0
    return [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]


def run_bpf(program: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """What the kernel's seccomp would return for this call (``struct seccomp_data`` built here,
    little-endian as both supported architectures are)."""
    args = (*args, *[0] * (6 - len(args)))
    data = struct.pack("<iIQ6Q", nr, arch, 0x1000, *(a & (2**64 - 1) for a in args))
    insns = decode(program)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            (acc,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code in (0x15, 0x35, 0x25, 0x45):  # JEQ, JGE, JGT, JSET with a constant
            taken = {0x15: acc == k, 0x35: acc >= k, 0x25: acc > k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x05:  # JA
            pc += 1 + k
        elif code == 0x06:  # RET with a constant
            return k
        else:
            raise AssertionError(f"unexpected BPF instruction {code:#x} at {pc}")


@pytest.mark.parametrize("arch", ARCHES)
def test_program_opens_with_the_architecture_check(arch: str) -> None:
    """Read by hand: load arch, compare, kill on mismatch, then load the call number."""
    insns = decode(bpf_program(arch))
    assert insns[0] == (0x20, 0, 0, 4)  # ld [4]: seccomp_data.arch
    code, jt, jf, k = insns[1]
    assert (code, jt, k) == (0x15, 0, AUDIT_ARCH[arch])  # jeq AUDIT_ARCH_*, fall through
    assert insns[1 + 1 + jf] == (0x06, 0, 0, SECCOMP_RET_KILL_PROCESS)  # else: kill
    assert insns[2] == (0x20, 0, 0, 0)  # ld [0]: seccomp_data.nr
    assert insns[-1][0] == 0x06 and len(insns) <= 4096


def test_program_for_keyctl_and_read_by_hand_on_x86_64() -> None:
    """keyctl (250) jumps to `ret ERRNO|EPERM`; read (0) matches no jeq and reaches `ret ALLOW`."""
    insns = decode(bpf_program("x86_64"))
    keyctl = next(i for i, (c, _, _, k) in enumerate(insns) if c == 0x15 and k == 250)
    assert insns[keyctl + 1 + insns[keyctl][1]] == (0x06, 0, 0, 0x00050001)
    assert not [i for i in insns if i[0] == 0x15 and i[3] == 0]
    first_ret = next(i for i in insns[3:] if i[0] == 0x06)
    assert first_ret == (0x06, 0, 0, 0x7FFF0000)
    assert run_bpf(bpf_program("x86_64"), AUDIT_ARCH["x86_64"], 250) == EPERM
    assert run_bpf(bpf_program("x86_64"), AUDIT_ARCH["x86_64"], 0) == SECCOMP_RET_ALLOW


@pytest.mark.parametrize("arch", ARCHES)
def test_simulated_filter_denies_exactly_the_table(arch: str) -> None:
    program, table, audit = bpf_program(arch), SYSCALLS[arch], AUDIT_ARCH[arch]
    denied = {table[n] for n in DENIED if n in table}
    for name in DENIED:
        if name in table:
            assert run_bpf(program, audit, table[name]) == EPERM, name
    for nr in range(1024):
        if nr not in denied and nr not in (table["clone"], table["clone3"]):
            assert run_bpf(program, audit, nr) == SECCOMP_RET_ALLOW, nr
    assert run_bpf(program, audit, table["clone3"]) == ENOSYS


@pytest.mark.parametrize("arch", ARCHES)
def test_simulated_clone_is_denied_with_any_namespace_flag(arch: str) -> None:
    program, clone, audit = bpf_program(arch), SYSCALLS[arch]["clone"], AUDIT_ARCH[arch]
    for name, flag in CLONE_NAMESPACE_FLAGS.items():
        assert run_bpf(program, audit, clone, (flag | 17,)) == EPERM, name
        assert run_bpf(program, audit, clone, (flag | THREAD_FLAGS | (1 << 40),)) == EPERM, name
    assert run_bpf(program, audit, clone, (17,)) == SECCOMP_RET_ALLOW  # fork: SIGCHLD
    assert run_bpf(program, audit, clone, (THREAD_FLAGS,)) == SECCOMP_RET_ALLOW
    # Only clone's flags count: namespace bits in another argument, or another call, do not.
    assert run_bpf(program, audit, clone, (17, CLONE_NAMESPACE_FLAGS["CLONE_NEWUSER"])) == (
        SECCOMP_RET_ALLOW
    )


@pytest.mark.parametrize("arch", ARCHES)
def test_simulated_other_abis_are_killed(arch: str) -> None:
    program = bpf_program(arch)
    for foreign in (AUDIT_ARCH_I386, AUDIT_ARCH_ARM, *(a for a in AUDIT_ARCH.values())):
        if foreign != AUDIT_ARCH[arch]:
            assert run_bpf(program, foreign, 0) == SECCOMP_RET_KILL_PROCESS, hex(foreign)
            assert run_bpf(program, foreign, 250) == SECCOMP_RET_KILL_PROCESS, hex(foreign)


def test_simulated_x32_calls_are_denied_on_x86_64() -> None:
    program, audit = bpf_program("x86_64"), AUDIT_ARCH["x86_64"]
    for nr in (0, 39, 56, 250, 0x1FF):
        assert run_bpf(program, audit, X32_SYSCALL_BIT | nr) == EPERM


def test_unsupported_machine_is_a_clear_error() -> None:
    assert machine_arch("x86_64") == "x86_64" and machine_arch("arm64") == "aarch64"
    assert machine_arch() in ARCHES
    with pytest.raises(
        RunnerError, match=r"supports x86_64 and aarch64, and this machine is 'riscv64'"
    ):
        bpf_program("riscv64")


# -- the tables -------------------------------------------------------------------------------


def _header_numbers(path: Path, prefixes: tuple[str, ...]) -> dict[str, int]:
    numbers: dict[str, int] = {}
    for line in path.read_text().splitlines():
        match = re.match(r"#define (__NR\w*?)_(\w+)\s+(\d+)\s*$", line)
        if match and match[1] in prefixes:
            numbers[match[2]] = int(match[3])
    return numbers


def test_x86_64_table_matches_the_kernel_headers() -> None:
    """apt-get install linux-libc-dev provides them."""
    headers = [
        Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        Path("/usr/include/asm/unistd_64.h"),
    ]
    header = next((h for h in headers if h.is_file()), None)
    if header is None:
        pytest.skip("no x86_64 kernel headers (apt-get install linux-libc-dev)")
    numbers = _header_numbers(header, ("__NR",))
    assert {name: numbers.get(name) for name in SYSCALLS["x86_64"]} == SYSCALLS["x86_64"]


def test_aarch64_table_matches_the_generic_kernel_headers() -> None:
    header = Path("/usr/include/asm-generic/unistd.h")
    if not header.is_file():
        pytest.skip("no generic kernel headers (apt-get install linux-libc-dev)")
    numbers = _header_numbers(header, ("__NR", "__NR3264"))
    assert {name: numbers.get(name) for name in SYSCALLS["aarch64"]} == SYSCALLS["aarch64"]


def test_every_name_is_in_a_table_and_every_table_name_is_used() -> None:
    used = {*DENIED, *ENOSYS_CALLS, "clone"}
    for arch, table in SYSCALLS.items():
        assert set(table) <= used, arch
    assert set(DENIED) <= {n for table in SYSCALLS.values() for n in table}
    assert len(set(DENIED)) == len(DENIED) and not set(COMPAT_ONLY) & set(DENIED)


DOCKER_DOCUMENTED_BLOCKED = {
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
    "finit_module", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp",
    "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "mount", "move_pages",
    "name_to_handle_at", "nfsservctl", "open_by_handle_at", "perf_event_open", "personality",
    "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "query_module", "quotactl",
    "reboot", "request_key", "set_mempolicy", "setns", "settimeofday", "stime", "swapon",
    "swapoff", "sysfs", "_sysctl", "umount", "umount2", "unshare", "uselib", "userfaultfd",
    "ustat", "vm86", "vm86old",
}  # fmt: skip


def test_every_denied_call_has_a_probe() -> None:
    assert {call for _, call, _ in PROBES} == {*DENIED, *ENOSYS_CALLS, "clone"}


def test_at_least_what_docker_documents_as_blocked() -> None:
    """docs.docker.com/engine/security/seccomp: "Significant syscalls blocked by the default
    profile" (clone's namespace flags and clone3 are checked on their own)."""
    assert set(DOCKER_DOCUMENTED_BLOCKED) <= {*DENIED, *COMPAT_ONLY}


# -- the docker profile -----------------------------------------------------------------------


def _runc_denies(profile: dict[str, object], name: str, args: tuple[int, ...] = ()) -> int | None:
    """The errno runc's rules give (None: allowed): a rule matches when all its argument
    comparisons hold; SCMP_CMP_MASKED_EQ holds when ``(arg & value) == valueTwo``."""
    rules = profile["syscalls"]
    assert isinstance(rules, list)
    for rule in rules:
        if name not in rule["names"]:
            continue
        conds = rule.get("args") or []
        assert all(c["op"] == "SCMP_CMP_MASKED_EQ" for c in conds)
        if all((args[c["index"]] & c["value"]) == c["valueTwo"] for c in conds):
            assert rule["action"] == "SCMP_ACT_ERRNO"
            return int(rule["errnoRet"])
    return None


def test_docker_profile_states_the_same_table(tmp_path: Path) -> None:
    profile = docker_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert profile["archMap"] == [
        {
            "architecture": "SCMP_ARCH_X86_64",
            "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        },
        {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
    ]
    for name in (*DENIED, *COMPAT_ONLY):
        assert _runc_denies(profile, name) == errno.EPERM, name
    assert _runc_denies(profile, "clone3") == errno.ENOSYS == 38
    for name, flag in CLONE_NAMESPACE_FLAGS.items():
        assert _runc_denies(profile, "clone", (flag | 17,)) == errno.EPERM, name
    assert _runc_denies(profile, "clone", (17,)) is None
    assert _runc_denies(profile, "clone", (THREAD_FLAGS,)) is None
    assert _runc_denies(profile, "read") is None
    path = write_docker_profile(tmp_path / "p.json")
    assert json.loads(path.read_text()) == profile
    with profile_path() as held:
        assert json.loads(held.read_text()) == profile
    assert not held.exists()


def test_program_fd_holds_the_program_at_offset_zero() -> None:
    with program_fd() as fd:
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0 and not os.get_inheritable(fd)
        assert os.read(fd, 1 << 16) == bpf_program()
    with pytest.raises(OSError):
        os.fstat(fd)


# -- the runners' command lines ---------------------------------------------------------------


def test_sandbox_argv_passes_the_filter_before_the_end_of_bwrap_options(tmp_path: Path) -> None:
    job = RunJob(tmp_path / "b", tmp_path / "p", "model:M", tmp_path / "o")
    argv = sandbox_argv(job, as_root=True, seccomp_fd=9)
    end = argv.index("--")
    assert argv[end - 2 : end] == ["--seccomp", "9"] and argv.count("--seccomp") == 1
    assert "--seccomp" not in sandbox_argv(job, as_root=True)


def test_container_argv_passes_the_profile(tmp_path: Path) -> None:
    job = RunJob(tmp_path / "b", tmp_path / "p", "model:M", tmp_path / "o")
    argv = container_argv(job, "img:1", name="zsl-x", seccomp_profile=Path("/s/p.json"))
    at = argv.index("seccomp=/s/p.json")
    assert argv[at - 1] == "--security-opt" and at < argv.index("--")
    assert not [a for a in container_argv(job, "img:1", name="zsl-x") if "seccomp" in a]


def test_container_runner_hands_the_engine_a_profile_for_the_run(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile file exists, holding the profile, while the engine client runs; it is gone
    after the run. (The fake engine, ``tests/fake_container_cli.py``, behind a wrapper that
    keeps a copy of the file.)"""
    bin_dir = tmp_path / "bin"
    seen, fake = tmp_path / "seen.json", bin_dir / "docker-fake"
    (bin_dir / "docker").rename(fake)
    (bin_dir / "docker").write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in seccomp=*) cp "${a#seccomp=}" '
        f'"{seen}";; esac; done\nexec "{fake}" "$@"\n'
    )
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("FAKE_CONTAINER_MODE", "exit:0")
    job = _probe_package(tmp_path / "run")
    assert ContainerRunner().run(job).ok
    run = next(c for c in map(json.loads, fake_docker.read_text().splitlines()) if c[0] == "run")
    (option,) = [a for a in run if a.startswith("seccomp=")]
    assert run[run.index(option) - 1] == "--security-opt"
    assert json.loads(seen.read_text()) == docker_profile()
    assert not Path(option.removeprefix("seccomp=")).exists()


# -- for real: one probe per runner -----------------------------------------------------------

# (label, call, arguments): invalid arguments, so a call reaching the kernel fails there.
PROBES: list[tuple[str, str, tuple[int, ...]]] = [
    ("add_key", "add_key", (0, 0, 0, 0, 0)),
    ("keyctl", "keyctl", (99999,)),
    ("request_key", "request_key", (0, 0, 0, 0)),
    ("bpf", "bpf", (0, BAD, 8)),
    ("userfaultfd", "userfaultfd", (1 | 0x10000,)),
    ("perf_event_open", "perf_event_open", (0, 0, NEG, NEG, 0x100)),
    ("io_uring_setup", "io_uring_setup", (0, 0)),
    ("io_uring_enter", "io_uring_enter", (NEG, 0, 0, 0, 0, 0)),
    ("io_uring_register", "io_uring_register", (NEG, 0, 0, 0)),
    ("ptrace", "ptrace", (3, 0x3FFFFFFF, 0, 0)),
    ("process_vm_readv", "process_vm_readv", (0, 0, 0, 0, 0, 1)),
    ("process_vm_writev", "process_vm_writev", (0, 0, 0, 0, 0, 1)),
    ("kcmp", "kcmp", (0, 0, 99, 0, 0)),
    ("pidfd_getfd", "pidfd_getfd", (NEG, 0, 1)),
    ("unshare", "unshare", (1,)),
    ("setns", "setns", (NEG, 0)),
    ("sethostname", "sethostname", (BAD, 1)),
    ("setdomainname", "setdomainname", (BAD, 1)),
    ("mount", "mount", (0, BAD, 0, 0, 0)),
    ("umount2", "umount2", (BAD, 0xFFFF)),
    ("pivot_root", "pivot_root", (BAD, BAD)),
    ("chroot", "chroot", (BAD,)),
    ("fsopen", "fsopen", (0, 0xFFFF)),
    ("fsconfig", "fsconfig", (NEG, 99, 0, 0, 0)),
    ("fsmount", "fsmount", (NEG, 0xFFFF, 0)),
    ("fspick", "fspick", (NEG, BAD, 0xFFFF)),
    ("move_mount", "move_mount", (NEG, BAD, NEG, BAD, 0xFFFF)),
    ("open_tree", "open_tree", (NEG, BAD, 0xFFFFFFFF)),
    ("mount_setattr", "mount_setattr", (NEG, BAD, 0xFFFF, 0, 0)),
    ("name_to_handle_at", "name_to_handle_at", (NEG, BAD, 0, 0, 0xFFFF)),
    ("open_by_handle_at", "open_by_handle_at", (NEG, 0, 0)),
    ("init_module", "init_module", (0, 0, 0)),
    ("finit_module", "finit_module", (NEG, 0, 0xFFFF)),
    ("delete_module", "delete_module", (BAD, 0)),
    ("create_module", "create_module", (BAD, 0)),
    ("get_kernel_syms", "get_kernel_syms", (BAD,)),
    ("query_module", "query_module", (BAD, 99, 0, 0, 0)),
    ("kexec_load", "kexec_load", (0, 0, 0, 0xFFFFFFFF)),
    ("kexec_file_load", "kexec_file_load", (NEG, NEG, 0, 0, 0xFFFF)),
    ("reboot", "reboot", (0, 0, 0, 0)),  # wrong magic numbers: EINVAL even for root
    ("swapon", "swapon", (BAD, 0)),
    ("swapoff", "swapoff", (BAD,)),
    ("acct", "acct", (BAD,)),
    ("quotactl", "quotactl", (0xFFFFFFFF, 0, 0, 0)),
    ("quotactl_fd", "quotactl_fd", (NEG, 0, 0, 0)),
    ("settimeofday", "settimeofday", (BAD, BAD)),
    ("clock_settime", "clock_settime", (0xFFFF, BAD)),
    ("clock_adjtime", "clock_adjtime", (0xFFFF, BAD)),
    ("adjtimex", "adjtimex", (BAD,)),
    ("syslog", "syslog", (99, 0, 0)),
    ("vhangup", "vhangup", ()),
    ("iopl", "iopl", (4,)),
    ("ioperm", "ioperm", (0x10000, 1, 1)),
    ("modify_ldt", "modify_ldt", (99, 0, 0)),
    ("personality", "personality", (0x0040000,)),
    ("personality query", "personality", (0xFFFFFFFF,)),
    ("uselib", "uselib", (BAD,)),
    ("ustat", "ustat", (0, BAD)),
    ("sysfs", "sysfs", (99,)),
    ("_sysctl", "_sysctl", (BAD,)),
    ("nfsservctl", "nfsservctl", (0, 0, 0)),
    ("lookup_dcookie", "lookup_dcookie", (0, BAD, 0)),
    ("fanotify_init", "fanotify_init", (0xFFFFFFFF, 0)),
    ("mbind", "mbind", (0, 0, 99, 0, 0, 0)),
    ("set_mempolicy", "set_mempolicy", (99, 0, 0)),
    ("set_mempolicy_home_node", "set_mempolicy_home_node", (0, 0, 0, 1)),
    ("get_mempolicy", "get_mempolicy", (0, 0, 0, 0, 0xFFFF)),
    ("migrate_pages", "migrate_pages", (0x3FFFFFFF, 0, 0, 0)),
    ("move_pages", "move_pages", (0, 0, 0, 0, 0, 0xFFFF)),
    ("clone3", "clone3", (0, 0)),
    *(
        (f"clone {name}", "clone", (flag | CLONE_SIGHAND, 0, 0, 0, 0))
        for name, flag in CLONE_NAMESPACE_FLAGS.items()
    ),
]
# Calls the filter must let through: the kernel answers (EINVAL: CLONE_SIGHAND without CLONE_VM).
PASSING = [("clone without namespace flags", "clone", (CLONE_SIGHAND, 0, 0, 0, 0))]
# Calls the kernel may refuse with EPERM before reading the arguments: for an unprivileged caller
# (capability checks first), or by a setting (kernel.unprivileged_bpf_disabled before 6.x,
# kernel.io_uring_disabled=2, vm.unprivileged_userfaultfd=0 before 5.11). A run without the
# filter cannot tell them from a filtered one.
PRIVILEGE_FIRST = {
    "sethostname", "setdomainname", "pivot_root", "fsopen", "fsmount", "fspick", "move_mount",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "syslog", "vhangup", "fanotify_init",
    "bpf", "io_uring_setup", "userfaultfd",
}  # fmt: skip
EXPECTED = {
    label: errno.ENOSYS if call in ENOSYS_CALLS else errno.EPERM for label, call, _ in PROBES
}
DENIED_LABELS = sorted(EXPECTED)
# What a probe reports: {"errno": {label: errno or 0}, "works": {check: result}}.
Report = dict[str, dict[str, Any]]

# The probe, run as a predictions package's script (``python probe.py BUNDLE OUT``): the calls,
# then what must still work, one JSON line on stdout.
PROBE_SCRIPT = """\
import ctypes, json, os, socket, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

CALLS = json.loads(CALLS_JSON)
libc = ctypes.CDLL(None, use_errno=True)


def call(nr, args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a % 2**64) for a in args])
    return ctypes.get_errno() if result == -1 else 0


def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def numpy_sum():
    import numpy
    a = numpy.ones((200, 200))
    return float((a @ a).sum())


def socketpair():
    a, b = socket.socketpair()
    a.sendall(b"x")
    return b.recv(1).decode()


def torch_sum():
    try:
        import torch
    except ImportError:
        return "absent"
    return float((torch.ones(16, 16) @ torch.ones(16, 16)).sum())


CHECKS = {
    "uid": os.getuid,
    "numpy": numpy_sum,
    "threads": lambda: sum(ThreadPoolExecutor(4).map(lambda x: x * x, range(10))),
    "fork": fork,
    "subprocess": lambda: subprocess.run(["/bin/true"]).returncode,
    "socketpair": socketpair,
    "memfd": lambda: os.close(os.memfd_create("probe")) or "ok",
    "torch": torch_sum,
}
report = {"errno": {label: call(nr, args) for label, nr, args in CALLS}, "works": {}}
for name, check in CHECKS.items():
    try:
        report["works"][name] = check()
    except Exception as err:
        report["works"][name] = "failed: %r" % (err,)
print(json.dumps(report))
"""
WORKS = {
    "numpy": 200.0**3,
    "threads": 285,
    "fork": 7,
    "subprocess": 0,
    "socketpair": "x",
    "memfd": "ok",
}


def _probe_package(folder: Path) -> RunJob:
    """A copy of ESZSL (a valid package, for the container runner's checks) with the probe as
    its script, and the job that runs it."""
    table = SYSCALLS[machine_arch()]
    calls = [(label, table[c], args) for label, c, args in PROBES + PASSING if c in table]
    if machine_arch() == "x86_64":
        calls.append(("x32 getpid", X32_SYSCALL_BIT | 39, ()))
    package = folder / "pkg"
    shutil.copytree(SUBMISSIONS / "eszsl", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "probe.py").write_text(PROBE_SCRIPT.replace("CALLS_JSON", repr(json.dumps(calls))))
    (folder / "bundle").mkdir()
    (folder / "out").mkdir()
    return RunJob(
        folder / "bundle", package, "probe", folder / "out",
        timeout_s=300, memory_gb=4, cpus=2, script="probe.py",
    )  # fmt: skip


def _report(stdout: str, what: str) -> Report:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"{what} printed no report: {stdout[-2000:]}"
    report: Report = json.loads(lines[-1])
    return report


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder for the module's runs, with ZSL_HOME inside it (failure logs land there)."""
    folder = tmp_path_factory.mktemp("seccomp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_HOME", str(folder / "home"))
        yield folder


@pytest.fixture(scope="module")
def sandboxed(workdir: Path) -> Report:
    """The probe run by the sandbox runner itself (which must pass the filter to bwrap)."""
    if not sandbox_available():
        pytest.skip("bubblewrap (bwrap) is missing or cannot create a sandbox here")
    job = _probe_package(workdir / "sandbox")
    outcome = SandboxRunner().run(job)
    assert outcome.ok, (outcome.reason, outcome.stderr[-3000:])
    return _report(outcome.stdout, "the sandbox probe")


@pytest.fixture(scope="module")
def unfiltered(workdir: Path) -> Report:
    """The same probe in the same sandbox, without the filter."""
    if not sandbox_available():
        pytest.skip("bubblewrap (bwrap) is missing or cannot create a sandbox here")
    job = _probe_package(workdir / "unfiltered")
    done = subprocess.run(
        sandbox_argv(job, bwrap=shutil.which("bwrap") or "bwrap"),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return _report(done.stdout, "the unfiltered probe")


@pytest.fixture(scope="module")
def contained(workdir: Path, docker_session: object) -> Iterator[Report]:
    """The probe run by the container runner itself in the worker image (real docker)."""
    from tests.container_fixture import Engine, containers_left_behind, unavailable, zsl_containers

    if not isinstance(docker_session, Engine):
        unavailable(str(docker_session))
    assert isinstance(docker_session, Engine)
    before = zsl_containers(docker_session.docker_host)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", docker_session.docker_host)
        job = _probe_package(workdir / "container")
        outcome = ContainerRunner("docker").run(job)
        assert outcome.ok, (outcome.reason, outcome.stderr[-3000:])
        assert outcome.details["removed"] is True
        yield _report(outcome.stdout, "the container probe")
        assert containers_left_behind(docker_session.docker_host, before) == []


def _expected_errno(label: str, report: Report) -> int:
    if label not in report["errno"]:
        pytest.skip(f"{label}: no such call on {machine_arch()}")
    return EXPECTED[label]


@pytest.mark.slow
@pytest.mark.parametrize("label", DENIED_LABELS)
def test_sandbox_denies(label: str, sandboxed: Report) -> None:
    expected = _expected_errno(label, sandboxed)
    assert sandboxed["errno"][label] == expected, errno.errorcode.get(sandboxed["errno"][label])


@pytest.mark.slow
@pytest.mark.parametrize("label", DENIED_LABELS)
def test_container_denies(label: str, contained: Report) -> None:
    expected = _expected_errno(label, contained)
    assert contained["errno"][label] == expected, errno.errorcode.get(contained["errno"][label])


@pytest.mark.slow
def test_sandbox_lets_the_rest_through(sandboxed: Report) -> None:
    """Plain clone reaches the kernel; numpy, BLAS and pool threads, fork, subprocesses, socket
    pairs, memfd and torch work; the launcher dropped root (we are root here) under the filter."""
    assert sandboxed["errno"]["clone without namespace flags"] == errno.EINVAL
    if "x32 getpid" in sandboxed["errno"]:
        assert sandboxed["errno"]["x32 getpid"] == errno.EPERM
    works = sandboxed["works"]
    assert {k: works[k] for k in WORKS} == WORKS
    assert works["uid"] == (65534 if os.geteuid() == 0 else os.geteuid())
    try:
        import torch  # noqa: F401
    except ImportError:
        assert works["torch"] == "absent"
    else:
        assert works["torch"] == 16.0**3


@pytest.mark.slow
def test_container_lets_the_rest_through(contained: Report) -> None:
    assert contained["errno"]["clone without namespace flags"] == errno.EINVAL
    works = contained["works"]
    assert {k: works[k] for k in WORKS} == WORKS
    assert works["torch"] in ("absent", 16.0**3) and works["uid"] != 0


@pytest.mark.slow
def test_probe_tells_a_filtered_call_from_one_the_kernel_refused(
    unfiltered: Report,
) -> None:
    """Without the filter, the calls whose arguments the kernel checks first fail otherwise
    than with EPERM: the EPERMs above are the filter's."""
    results = unfiltered["errno"]
    assert isinstance(results, dict)
    telling = {label for label, call, _ in PROBES if call not in PRIVILEGE_FIRST} & set(results)
    assert {label: results[label] for label in telling if results[label] == errno.EPERM} == {}

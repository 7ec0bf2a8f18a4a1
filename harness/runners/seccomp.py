"""The system calls model code may not make: one table, for the sandbox and the container alike.

Runners ``sandbox`` and ``container`` both run model code under this filter. Everything is
allowed except the calls named here, which open kernel surface model code has no use for: the
kernel keyring, eBPF, ``userfaultfd``, perf events, io_uring, debugging other processes, new
namespaces, mounts, kernel modules and kexec, clocks, swap, quotas and NUMA policy. Missing
privileges refuse many of them anyway; the filter refuses them before any of their kernel code
runs. The list covers every call Docker's default seccomp profile documents as blocked, and
more (io_uring, the new mount API, ``pidfd_getfd``, ``adjtimex``). Python, numpy, BLAS
threads, torch on CPU and the CUDA driver (context, allocations, pinned memory) work under it.

See docs/runners.md.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import RunnerError

__all__ = [
    "AUDIT_ARCH",
    "CLONE_NAMESPACE_FLAGS",
    "COMPAT_ONLY",
    "DENIED",
    "ENOSYS_CALLS",
    "SECCOMP_RET_ALLOW",
    "SECCOMP_RET_ERRNO",
    "SECCOMP_RET_KILL_PROCESS",
    "SYSCALLS",
    "X32_SYSCALL_BIT",
    "bpf_program",
    "docker_profile",
    "machine_arch",
    "profile_path",
    "program_fd",
    "write_docker_profile",
]

# -- the table --------------------------------------------------------------------------------

#: Calls that fail with EPERM, whatever their arguments. A name missing from an architecture's
#: table (``iopl`` on aarch64) does not exist there and needs no rule.
DENIED: tuple[str, ...] = (
    # The kernel keyring: per-user state shared across sandboxes, and a history of bugs.
    "add_key",
    "keyctl",
    "request_key",
    # eBPF, userfaultfd, perf events, io_uring: the usual routes of kernel exploits.
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # Reading or changing other processes.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    # Namespaces (clone's CLONE_NEW* flags: CLONE_NAMESPACE_FLAGS) and the host's names.
    "unshare",
    "setns",
    "sethostname",
    "setdomainname",
    # Mounts, old API and new, and file handles (which bypass path lookup).
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "name_to_handle_at",
    "open_by_handle_at",
    # Kernel modules, kexec, reboot.
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    # The machine's state: swap, accounting, quotas, clocks, kernel log, terminals.
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "vhangup",
    # Hardware and legacy interfaces.
    "iopl",
    "ioperm",
    "modify_ldt",
    "personality",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "nfsservctl",
    "lookup_dcookie",
    "fanotify_init",
    # NUMA memory policy: placement on the host's nodes is not the model's to choose.
    "mbind",
    "set_mempolicy",
    "set_mempolicy_home_node",
    "get_mempolicy",
    "migrate_pages",
    "move_pages",
)

#: Calls that fail with ENOSYS, so that glibc falls back to an older call the filter can read.
ENOSYS_CALLS: tuple[str, ...] = ("clone3",)

#: 32-bit-only calls Docker blocks. The BPF program kills any 32-bit caller outright; the
#: docker profile names them for the compat ABIs it lists.
COMPAT_ONLY: tuple[str, ...] = ("stime", "umount", "vm86", "vm86old")

#: ``clone`` fails with EPERM when its flags hold any of these. CLONE_NEWTIME overlaps the exit
#: signal byte of ``clone`` (only ``clone3`` and ``unshare`` can ask for it), and no valid
#: signal has that bit, so denying it costs nothing.
CLONE_NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWTIME": 0x00000080,
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
NAMESPACE_MASK = sum(CLONE_NAMESPACE_FLAGS.values())

#: The system call numbers of each supported architecture, for every name the filter uses. The
#: x86_64 table is checked against the kernel headers by the tests; aarch64 uses the generic
#: numbering (``asm-generic/unistd.h``).
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "_sysctl": 156,
        "acct": 163,
        "add_key": 248,
        "adjtimex": 159,
        "bpf": 321,
        "chroot": 161,
        "clock_adjtime": 305,
        "clock_settime": 227,
        "clone": 56,
        "clone3": 435,
        "create_module": 174,
        "delete_module": 176,
        "fanotify_init": 300,
        "finit_module": 313,
        "fsconfig": 431,
        "fsmount": 432,
        "fsopen": 430,
        "fspick": 433,
        "get_kernel_syms": 177,
        "get_mempolicy": 239,
        "init_module": 175,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "io_uring_setup": 425,
        "ioperm": 173,
        "iopl": 172,
        "kcmp": 312,
        "kexec_file_load": 320,
        "kexec_load": 246,
        "keyctl": 250,
        "lookup_dcookie": 212,
        "mbind": 237,
        "migrate_pages": 256,
        "modify_ldt": 154,
        "mount": 165,
        "mount_setattr": 442,
        "move_mount": 429,
        "move_pages": 279,
        "name_to_handle_at": 303,
        "nfsservctl": 180,
        "open_by_handle_at": 304,
        "open_tree": 428,
        "perf_event_open": 298,
        "personality": 135,
        "pidfd_getfd": 438,
        "pivot_root": 155,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "ptrace": 101,
        "query_module": 178,
        "quotactl": 179,
        "quotactl_fd": 443,
        "reboot": 169,
        "request_key": 249,
        "set_mempolicy": 238,
        "set_mempolicy_home_node": 450,
        "setdomainname": 171,
        "sethostname": 170,
        "setns": 308,
        "settimeofday": 164,
        "swapoff": 168,
        "swapon": 167,
        "sysfs": 139,
        "syslog": 103,
        "umount2": 166,
        "unshare": 272,
        "uselib": 134,
        "userfaultfd": 323,
        "ustat": 136,
        "vhangup": 153,
    },
    "aarch64": {
        "acct": 89,
        "add_key": 217,
        "adjtimex": 171,
        "bpf": 280,
        "chroot": 51,
        "clock_adjtime": 266,
        "clock_settime": 112,
        "clone": 220,
        "clone3": 435,
        "delete_module": 106,
        "fanotify_init": 262,
        "finit_module": 273,
        "fsconfig": 431,
        "fsmount": 432,
        "fsopen": 430,
        "fspick": 433,
        "get_mempolicy": 236,
        "init_module": 105,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "io_uring_setup": 425,
        "kcmp": 272,
        "kexec_file_load": 294,
        "kexec_load": 104,
        "keyctl": 219,
        "lookup_dcookie": 18,
        "mbind": 235,
        "migrate_pages": 238,
        "mount": 40,
        "mount_setattr": 442,
        "move_mount": 429,
        "move_pages": 239,
        "name_to_handle_at": 264,
        "nfsservctl": 42,
        "open_by_handle_at": 265,
        "open_tree": 428,
        "perf_event_open": 241,
        "personality": 92,
        "pidfd_getfd": 438,
        "pivot_root": 41,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "ptrace": 117,
        "quotactl": 60,
        "quotactl_fd": 443,
        "reboot": 142,
        "request_key": 218,
        "set_mempolicy": 237,
        "set_mempolicy_home_node": 450,
        "setdomainname": 162,
        "sethostname": 161,
        "setns": 268,
        "settimeofday": 170,
        "swapoff": 225,
        "swapon": 224,
        "syslog": 116,
        "umount2": 39,
        "unshare": 97,
        "userfaultfd": 282,
        "vhangup": 58,
    },
}

#: ``seccomp_data.arch`` of each supported architecture (``AUDIT_ARCH_*`` of linux/audit.h).
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: Set in the number of an x32 call, which the kernel reports under AUDIT_ARCH_X86_64.
X32_SYSCALL_BIT = 0x40000000
# The machine names platform.machine() gives, by architecture.
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}

# -- the BPF program --------------------------------------------------------------------------

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# Classic BPF opcodes (linux/filter.h): load a word at an absolute offset, compare, return.
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]. Both supported
# architectures are little-endian (the arch check refuses big-endian aarch64), so the low half
# of args[0] comes first.
_NR_OFFSET = 0
_ARCH_OFFSET = 4
_ARG0_LOW_OFFSET = 16
# struct sock_filter: u16 code; u8 jt; u8 jf; u32 k, in the machine's byte order.
_INSN = struct.Struct("=HBBI")


@dataclass(frozen=True)
class _Insn:
    """One instruction; a jump names its targets by label (None: the next instruction)."""

    code: int
    k: int
    jt: str | None = None
    jf: str | None = None


def machine_arch(machine: str | None = None) -> str:
    """This machine's architecture as :data:`SYSCALLS` names it (``x86_64`` or ``aarch64``)."""
    machine = platform.machine() if machine is None else machine
    arch = _MACHINES.get(machine.lower())
    if arch is None:
        raise RunnerError(
            f"the system call filter supports x86_64 and aarch64, and this machine is"
            f" '{machine}': run model code on one of those"
        )
    return arch


def _assemble(items: list[_Insn | str]) -> bytes:
    """The program's bytes; a str item is a label for the instruction after it. BPF jumps
    forward only, by at most 255 instructions: a table outgrowing that is refused here."""
    where: dict[str, int] = {}
    code: list[_Insn] = []
    for item in items:
        if isinstance(item, str):
            where[item] = len(code)
        else:
            code.append(item)

    def offset(pc: int, label: str | None) -> int:
        jump = 0 if label is None else where[label] - pc - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"BPF jump from {pc} to '{label}' is {jump}, outside 0..255")
        return jump

    return b"".join(
        _INSN.pack(insn.code, offset(pc, insn.jt), offset(pc, insn.jf), insn.k)
        for pc, insn in enumerate(code)
    )


def bpf_program(arch: str | None = None) -> bytes:
    """The filter as a classic BPF program (the ``struct sock_filter`` array bwrap reads) for
    ``arch`` (default: this machine's, :func:`machine_arch`)."""
    arch = machine_arch() if arch is None else machine_arch(arch)
    table = SYSCALLS[arch]
    denied = sorted({table[name] for name in DENIED if name in table})
    items: list[_Insn | str] = [
        _Insn(_LD_W_ABS, _ARCH_OFFSET),
        _Insn(_JEQ_K, AUDIT_ARCH[arch], jf="kill"),
        _Insn(_LD_W_ABS, _NR_OFFSET),
    ]
    if arch == "x86_64":
        items.append(_Insn(_JGE_K, X32_SYSCALL_BIT, jt="eperm"))
    items.append(_Insn(_JEQ_K, table["clone"], jt="clone"))
    items += [_Insn(_JEQ_K, table[name], jt="enosys") for name in ENOSYS_CALLS]
    items += [_Insn(_JEQ_K, nr, jt="eperm") for nr in denied]
    items += [
        _Insn(_RET_K, SECCOMP_RET_ALLOW),
        "clone",
        _Insn(_LD_W_ABS, _ARG0_LOW_OFFSET),  # clone's flags: only the low 32 bits are read
        _Insn(_JSET_K, NAMESPACE_MASK, jt="eperm"),
        _Insn(_RET_K, SECCOMP_RET_ALLOW),
        "eperm",
        _Insn(_RET_K, SECCOMP_RET_ERRNO | errno.EPERM),
        "enosys",
        _Insn(_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS),
        "kill",
        _Insn(_RET_K, SECCOMP_RET_KILL_PROCESS),
    ]
    return _assemble(items)


@contextmanager
def program_fd(arch: str | None = None) -> Iterator[int]:
    """A descriptor holding :func:`bpf_program` at offset 0, closed after the block.

    For ``bwrap --seccomp FD``, which reads the program to end of file. It is a memfd,
    close-on-exec: pass it to the child with ``pass_fds``."""
    program = bpf_program(arch)
    fd = os.memfd_create("zsl-seccomp", os.MFD_CLOEXEC)
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


# -- the docker profile -----------------------------------------------------------------------


def docker_profile() -> dict[str, object]:
    """The filter as a runc seccomp profile (``docker run --security-opt seccomp=PATH``).

    runc's ``SCMP_CMP_MASKED_EQ`` matches when ``(arg & value) == valueTwo``, and the rules of a
    call are alternatives, so "clone with any namespace flag" is one rule per flag."""
    clone_rules: list[dict[str, object]] = [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": errno.EPERM,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
            "comment": name,
        }
        for name, flag in CLONE_NAMESPACE_FLAGS.items()
    ]
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        # Docker keeps the entry of the engine's own architecture, with its compat ABIs.
        "archMap": [
            {
                "architecture": "SCMP_ARCH_X86_64",
                "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            },
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
        ],
        "syscalls": [
            {
                "names": sorted({*DENIED, *COMPAT_ONLY}),
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": errno.EPERM,
            },
            {"names": list(ENOSYS_CALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
            *clone_rules,
        ],
    }


def write_docker_profile(path: Path) -> Path:
    """Write :func:`docker_profile` as JSON to ``path``; return ``path``."""
    path.write_text(json.dumps(docker_profile(), indent=1) + "\n")
    return path


@contextmanager
def profile_path() -> Iterator[Path]:
    """The docker profile in a private temporary folder, removed after the block. The engine's
    client reads it when the container is created."""
    with tempfile.TemporaryDirectory(prefix="zsl-seccomp-") as folder:
        yield write_docker_profile(Path(folder) / "seccomp.json")

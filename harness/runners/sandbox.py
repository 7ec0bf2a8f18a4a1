"""Runner ``sandbox``: the worker inside bubblewrap (``bwrap``), for untrusted model code.

See docs/runners.md.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

import harness
from harness.core.errors import RunnerError
from harness.core.gpus import Gpu, cuda_env, device_nodes, driver_lib_dirs, lease
from harness.runners.base import (
    PIDS_LIMIT,
    RunJob,
    RunLimits,
    RunOutcome,
    job_argv,
    run_job,
    runners,
    worker_env,
)
from harness.runners.failure import explain_failure
from harness.runners.seccomp import program_fd

__all__ = [
    "INSIDE_PACKAGE",
    "INSIDE_STATE",
    "NOBODY",
    "NOFILE_LIMIT",
    "SandboxRunner",
    "available",
    "library_address_space",
    "sandbox_argv",
]

INSIDE_BUNDLE = Path("/bundle")
INSIDE_PACKAGE = Path("/package")
INSIDE_OUT = Path("/out")
INSIDE_STATE = Path("/state")
NOBODY = 65534
NPROC_LIMIT = PIDS_LIMIT
FSIZE_LIMIT = 1 << 30
NOFILE_LIMIT = 1024
# The system parts Python and its compiled extensions need; /etc only what the loader reads.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
)

# Runs inside the sandbox before the worker: rlimits (a negative one is not set), then (as root)
# a drop to an unprivileged uid, then exec. argv: AS_BYTES CPU_S NPROC FSIZE NOFILE UID -- ARGV...
# Standard library only: it runs with -S (no site-packages, no .pth files: 20 ms less per run).
LAUNCHER = """\
import os, resource, sys
a = sys.argv[1:]
sep = a.index("--")
as_bytes, cpu_s, nproc, fsize, nofile, uid = (int(x) for x in a[:sep])
cmd = a[sep + 1:]
for lim, val in ((resource.RLIMIT_AS, as_bytes), (resource.RLIMIT_CPU, cpu_s),
                 (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, fsize),
                 (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0)):
    if val >= 0:
        resource.setrlimit(lim, (val, val))
if uid >= 0 and os.geteuid() == 0:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        sys.exit("sandbox launcher: could not drop root")
os.execv(cmd[0], cmd)
"""


@functools.cache
def _probe(bwrap: str) -> bool:
    path = shutil.which(bwrap)
    if path is None:
        return False
    try:
        done = subprocess.run(
            [path, "--ro-bind", "/", "/", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def available(bwrap: str = "bwrap") -> bool:
    """Whether ``bwrap`` is installed and can create a sandbox here (checked once, cached)."""
    return _probe(bwrap)


def _ro_binds(paths: list[str], *, existing: frozenset[str] = frozenset()) -> list[str]:
    """``--ro-bind`` for real directories, ``--symlink`` for links (``/lib -> usr/lib``).

    Folders above a bind (``/root/.pyenv`` above a pyenv Python) are created traversable
    (0755); bwrap would make them 0700, closed to the unprivileged model.
    """
    argv: list[str] = []
    seen: set[str] = set(existing)
    for path in paths:
        if path in seen or not os.path.lexists(path):
            continue
        seen.add(path)
        if os.path.islink(path) and os.path.dirname(path) == "/":
            argv += ["--symlink", os.readlink(path), path]
            continue
        for parent in reversed(Path(path).parents[:-1]):
            if str(parent) not in seen:
                seen.add(str(parent))
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", path, path]
    return argv


@functools.cache
def library_address_space() -> int:
    """Bytes of the shared objects (``*.so``, ``*.so.N``) installed in this Python environment's
    site-packages: the address space importing all of them could reserve."""
    total = 0
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for root in sorted(roots):
        for folder, _, files in os.walk(root):
            for name in files:
                if name.endswith(".so") or ".so." in name:
                    try:
                        total += os.stat(os.path.join(folder, name)).st_size
                    except OSError:
                        continue
    return total


def _python_dirs() -> list[str]:
    """The interpreter, the environment and the ``harness`` package, read-only at their paths."""
    dirs = {sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix}
    dirs.add(str(Path(harness.__file__).resolve().parent))
    # A venv's python is a link into the base installation; follow it in case it lives apart.
    dirs.add(str(Path(sys.executable).resolve().parent.parent))
    system = tuple(d for d in SYSTEM_DIRS)
    out = [d for d in sorted(dirs) if not d.startswith(tuple(s + "/" for s in system))]
    # Drop nested entries: binding a parent already binds its children.
    return [d for d in out if not any(d != o and d.startswith(o + "/") for o in out)]


def sandbox_argv(
    job: RunJob,
    *,
    bwrap: str = "bwrap",
    as_root: bool | None = None,
    channel: tuple[int, int] | None = None,
    assigned: tuple[Gpu, ...] = (),
    devices: Path | None = None,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The full command line that runs ``job``'s worker inside bubblewrap (pure: runs nothing,
    except, for a GPU job, asking the loader's cache where the driver's libraries are).

    ``as_root`` (default: whether this process is root) chooses between a user namespace (normal
    users) and a drop to ``nobody`` inside the sandbox (root); see docs/runners.md.
    ``channel``: a prediction pass's descriptors (requests, replies), which bwrap and the
    launcher pass on to the worker at the same numbers.
    ``assigned``: the ``job.gpus`` GPUs the job holds (``harness.core.gpus.lease``), whose
    nodes are bound from ``devices`` (default ``ZSL_DEV_DIR`` or ``/dev``).
    ``seccomp_fd``: a descriptor holding the system-call filter
    (:func:`harness.runners.seccomp.program_fd`), which bwrap reads and applies.
    """
    if len(assigned) != job.gpus:
        raise ValueError(f"job asks for {job.gpus} GPU(s) but {len(assigned)} are assigned")
    if as_root is None:
        as_root = os.geteuid() == 0
    inner = replace(
        job, bundle=INSIDE_BUNDLE, package=INSIDE_PACKAGE, out=INSIDE_OUT, state=INSIDE_STATE
    )
    python = sys.executable
    if as_root:
        # No user namespace (see docs/runners.md); keep only what the uid drop needs.
        unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        unshare += ["--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        unshare = ["--unshare-all"]
    env = {
        "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
        **worker_env(job, home=str(INSIDE_OUT)),
        # Only its own device nodes are bound: the driver counts the GPUs it can open from 0.
        **cuda_env(assigned, renumbered=True),
    }
    gpu_binds: list[str] = []
    gpu_dirs: list[str] = []
    if assigned:
        env["CUDA_CACHE_PATH"] = "/tmp/.nv/ComputeCache"
        for host, inside in device_nodes(assigned, devices):
            gpu_binds += ["--dev-bind", host, inside]
        gpu_dirs = ["/sys", *driver_lib_dirs()]
    setenv = [a for k, v in env.items() for a in ("--setenv", k, v)]
    cpu_s = math.ceil(job.timeout_s * max(job.cpus, 1)) + 10
    limits = [
        str(-1 if assigned else job.memory_bytes + library_address_space()),
        str(cpu_s),
        str(NPROC_LIMIT),
        str(min(FSIZE_LIMIT, job.out_bytes)),
        str(NOFILE_LIMIT),
        str(NOBODY if as_root else -1),
    ]
    return [
        bwrap,
        *unshare,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *setenv,
        # The private /tmp comes first: a Python or checkout living under /tmp (a CI clone) is
        # then bound on top of it instead of being hidden by it. Sized: tmpfs is memory.
        "--perms",
        "1777",
        "--size",
        str(job.memory_bytes),
        "--tmpfs",
        "/tmp",
        *_ro_binds(
            [*SYSTEM_DIRS, *ETC_FILES, *_python_dirs(), *_outside(gpu_dirs)],
            existing=frozenset({"/tmp"}),
        ),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *gpu_binds,
        *_phase_binds(job),
        "--ro-bind",
        str(job.package),
        str(INSIDE_PACKAGE),
        "--bind",
        str(job.out),
        str(INSIDE_OUT),
        "--chdir",
        str(INSIDE_OUT),
        *([] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]),
        "--",
        python,
        "-I",
        "-S",
        "-c",
        LAUNCHER,
        *limits,
        "--",
        *job_argv(inner, python=python, channel=channel),
    ]


def _phase_binds(job: RunJob) -> list[str]:
    """What a phase sees besides the package: a prediction pass its state (never a bundle),
    any other job its bundle."""
    if job.phase == "predict" and not job.check:
        if job.state is None:
            raise ValueError("a prediction pass needs its state folder")
        return ["--ro-bind", str(job.state), str(INSIDE_STATE)]
    return ["--ro-bind", str(job.bundle), str(INSIDE_BUNDLE)]


def _outside(dirs: list[str]) -> list[str]:
    """``dirs`` not inside a system folder already bound (``/usr/lib/…`` comes with ``/usr``)."""
    return [d for d in dirs if not d.startswith(tuple(s + "/" for s in SYSTEM_DIRS))]


def _explain(outcome: RunOutcome) -> RunOutcome:
    """bwrap reports a child killed by signal N as exit code 128 + N: say which signal."""
    code = outcome.exit_code
    if 128 < code < 128 + 65 and outcome.reason.startswith("exited"):
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            return outcome
        outcome.reason = f"killed by signal {name} (exit code {code})"
        if name == "SIGXCPU":
            outcome.reason += ": CPU time limit reached"
    return outcome


class SandboxRunner:
    """Bubblewrap isolation; see docs/runners.md for what the model can and cannot do."""

    name = "sandbox"

    def __init__(self, bwrap: str = "bwrap") -> None:
        self.bwrap = bwrap

    def run(self, job: RunJob) -> RunOutcome:
        if not available(self.bwrap):
            raise RunnerError(
                f"runner 'sandbox' needs bubblewrap, and '{self.bwrap}' is missing or cannot"
                " create a sandbox here: install it (`apt-get install bubblewrap`, `dnf install"
                " bubblewrap`) and allow user namespaces, or use runner 'container'"
            )
        bwrap = shutil.which(self.bwrap)
        assert bwrap is not None
        as_root = os.geteuid() == 0
        if as_root:
            os.chown(job.out, NOBODY, NOBODY)
        # lease refuses a job asking for more GPUs than there are.
        with lease(job.gpus) as assigned, program_fd() as seccomp_fd:
            outcome = run_job(
                job,
                lambda channel: sandbox_argv(
                    job,
                    bwrap=bwrap,
                    as_root=as_root,
                    channel=channel,
                    assigned=assigned,
                    seccomp_fd=seccomp_fd,
                ),
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                limits=RunLimits.for_job(job, sandbox_tmp=True),
                extra_fds=(seccomp_fd,),
            )
        if assigned:
            outcome.details["gpus"] = ",".join(g.cuda_id for g in assigned)
        return explain_failure(job, _explain(outcome))


runners.add("sandbox", SandboxRunner())

"""GPUs for runs: which GPUs the machine has, which ones a run gets, how runners pass them on.

**Discovery** (:func:`list_gpus`, the one place that looks). Where the NVIDIA driver's
``nvidia-smi`` is on ``PATH``, ``nvidia-smi --query-gpu=index,minor_number,uuid`` names every GPU:
its index (PCI bus order: what ``nvidia-smi``, docker's ``--gpus device=`` and CUDA under
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` count by), its device node ``/dev/nvidia<minor>`` and its UUID.
Without it, the device nodes ``/dev/nvidia<N>`` are listed (index = minor = N, no UUID). The
device folder is ``ZSL_DEV_DIR`` (default ``/dev``); tests point it at fake nodes in a temporary
folder, and ``nvidia-smi``, which describes the real ``/dev``, is then not asked. What runs may
use is restricted by ``ZSL_GPUS`` (indices or UUIDs, comma-separated; empty: no GPU), else by the
harness's own ``CUDA_VISIBLE_DEVICES`` where set: a harness running inside an allocation (a Ray
task that asked for GPUs, a Slurm job) uses only the GPUs it was given.

See docs/runners.md.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import RunnerError
from harness.core.home import zsl_home

__all__ = [
    "GPUS_ENV",
    "Gpu",
    "check_request",
    "container_gpu_args",
    "cuda_env",
    "device_nodes",
    "driver_lib_dirs",
    "lease",
    "lease_dir",
    "list_gpus",
    "parse_smi",
]

DEV_DIR_ENV = "ZSL_DEV_DIR"
GPUS_ENV = "ZSL_GPUS"
# The driver's nodes every CUDA process opens (those present are bound); the first two must be.
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
REQUIRED_NODES = ("nvidiactl", "nvidia-uvm")
# cuBLAS's deterministic workspace setting (CUDA >= 10.2), which deterministic torch requires.
CUBLAS_WORKSPACE = ":4096:8"
# The driver's user-space libraries a CUDA program loads (ldconfig names).
DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so")
SMI_QUERY = ("--query-gpu=index,minor_number,uuid", "--format=csv,noheader")
LEASE_POLL_S = 0.2
_NODE = re.compile(r"nvidia(\d+)")


@dataclass(frozen=True, order=True)
class Gpu:
    """One GPU: ``index`` (``nvidia-smi``'s, PCI bus order), ``minor`` (its device node
    ``/dev/nvidia<minor>``) and ``uuid`` (``GPU-…``, None where only the node is known)."""

    index: int
    minor: int
    uuid: str | None = None

    @property
    def node(self) -> str:
        return f"nvidia{self.minor}"

    @property
    def cuda_id(self) -> str:
        """How ``CUDA_VISIBLE_DEVICES`` and docker name it: the UUID where known (unambiguous
        whatever order CUDA counts in), else the index."""
        return self.uuid or str(self.index)

    @property
    def key(self) -> str:
        """Its lease file's name on this host."""
        return re.sub(r"[^A-Za-z0-9-]", "_", self.uuid) if self.uuid else self.node


def dev_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder of device nodes: ``ZSL_DEV_DIR``, else ``/dev``."""
    env = os.environ if env is None else env
    return Path(env.get(DEV_DIR_ENV) or "/dev")


def parse_smi(text: str) -> list[Gpu]:
    """GPUs from ``nvidia-smi --query-gpu=index,minor_number,uuid --format=csv,noheader``.

    >>> parse_smi("0, 0, GPU-1a\\n1, 3, GPU-2b\\n")
    [Gpu(index=0, minor=0, uuid='GPU-1a'), Gpu(index=1, minor=3, uuid='GPU-2b')]
    """
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        index, minor, uuid = fields
        gpus.append(Gpu(int(index), int(minor) if minor.isdigit() else int(index), uuid or None))
    return sorted(gpus)


def _query_smi() -> str | None:
    path = shutil.which("nvidia-smi")
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path, *SMI_QUERY], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def _node_gpus(devices: Path) -> list[Gpu]:
    try:
        names = os.listdir(devices)
    except OSError:
        return []
    return sorted(Gpu(int(m[1]), int(m[1])) for n in names if (m := _NODE.fullmatch(n)))


def _ids(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip() and v.strip().lower() != "none"]


def _matches(gpu: Gpu, ident: str) -> bool:
    if ident.isdigit():
        return gpu.index == int(ident)
    return gpu.uuid is not None and gpu.uuid.lower().startswith(ident.lower())


def list_gpus(
    devices: Path | None = None,
    *,
    smi: Callable[[], str | None] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Gpu]:
    """The GPUs runs may use on this machine (see docs/runners.md), in index order.

    ``devices``: the device folder (default :func:`dev_dir`); ``smi``: what ``nvidia-smi``
    answers (default: asked when ``devices`` is ``/dev``, None where it is absent or fails);
    ``env``: the environment holding ``ZSL_GPUS`` / ``CUDA_VISIBLE_DEVICES`` (default: ours).
    Raises :class:`RunnerError` when ``ZSL_GPUS`` names a GPU the machine does not have.
    """
    env = os.environ if env is None else env
    devices = dev_dir(env) if devices is None else devices
    if smi is None and devices == Path("/dev"):
        smi = _query_smi
    text = smi() if smi is not None else None
    found = parse_smi(text) if text else _node_gpus(devices)
    if GPUS_ENV in env:
        wanted = _ids(env[GPUS_ENV])
        unknown = [w for w in wanted if not any(_matches(g, w) for g in found)]
        if unknown:
            raise RunnerError(
                f"{GPUS_ENV}={env[GPUS_ENV]!r} names {', '.join(unknown)}, which this machine does"
                f" not have (it has {_names(found)}): set {GPUS_ENV} to indices or UUIDs that"
                " `nvidia-smi -L` lists, or unset it"
            )
    elif "CUDA_VISIBLE_DEVICES" in env:
        wanted = _ids(env["CUDA_VISIBLE_DEVICES"])
    else:
        return found
    return [g for g in found if any(_matches(g, w) for w in wanted)]


def _names(gpus: Sequence[Gpu]) -> str:
    if not gpus:
        return "no GPU"
    return f"{len(gpus)} GPU(s): " + ", ".join(str(g.index) for g in gpus)


def check_request(
    count: int, available: Sequence[Gpu], env: Mapping[str, str] | None = None
) -> None:
    """Refuse a run asking for ``count`` GPUs where only ``available`` are: a clear
    :class:`RunnerError` saying what was asked, what there is, and what to do."""
    if count <= len(available):
        return
    env = os.environ if env is None else env
    limit = next((f" ({k}={env[k]!r})" for k in (GPUS_ENV, "CUDA_VISIBLE_DEVICES") if k in env), "")
    raise RunnerError(
        f"the package asks for {count} GPU(s) (resources.gpus in submission.yaml), but this"
        f" machine offers {_names(available)}{limit}: run it on a machine with at least {count}"
        " NVIDIA GPU(s) and the driver installed (nvidia-smi lists them), or lower resources.gpus"
    )


def lease_dir(home: Path | None = None) -> Path:
    """Where this host's GPU leases live: ``ZSL_HOME/gpu-leases/<host>`` (per host, so a
    ``ZSL_HOME`` shared between machines does not make their GPU 0 one lease)."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"
    return (home or zsl_home()) / "gpu-leases" / host


def _try_take(folder: Path, gpus: Sequence[Gpu], count: int) -> list[tuple[Gpu, int]] | None:
    held: list[tuple[Gpu, int]] = []
    for gpu in gpus:
        fd = os.open(folder / f"{gpu.key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        held.append((gpu, fd))
        if len(held) == count:
            return held
    for _, fd in held:
        os.close(fd)
    return None


@contextmanager
def lease(
    count: int,
    *,
    gpus: Sequence[Gpu] | None = None,
    home: Path | None = None,
    wait_s: float | None = None,
    poll_s: float = LEASE_POLL_S,
) -> Iterator[tuple[Gpu, ...]]:
    """Hold ``count`` GPUs of ``gpus`` (default :func:`list_gpus`) no other lease holds, for the
    block; yields them (``()`` for ``count == 0``, which takes nothing and never waits).

    Refuses at once a ``count`` above what there is (:func:`check_request`); waits, polling every
    ``poll_s``, while other leases hold too many, at most ``wait_s`` seconds (None: until they
    end; every holder is a run bounded by its own wall clock), then raises :class:`RunnerError`.
    """
    if count <= 0:
        yield ()
        return
    gpus = list_gpus() if gpus is None else list(gpus)
    check_request(count, gpus)
    folder = lease_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while (held := _try_take(folder, gpus, count)) is None:
        if deadline is not None and time.monotonic() >= deadline:
            raise RunnerError(
                f"no {count} of this machine's {len(gpus)} GPU(s) came free within {wait_s:g} s:"
                f" other runs hold them (their leases: {folder}); try again when they end"
            )
        time.sleep(poll_s)
    try:
        yield tuple(gpu for gpu, _ in held)
    finally:
        for _, fd in held:
            os.close(fd)


def cuda_env(assigned: Sequence[Gpu], *, renumbered: bool = False) -> dict[str, str]:
    """The environment that shows a run its ``assigned`` GPUs, and only those.

    ``CUDA_VISIBLE_DEVICES`` is ``""`` without GPUs (CUDA sees none). With GPUs it names them by
    UUID where known; else by index, or, with ``renumbered`` (a sandbox that holds only their
    device nodes, where the driver counts the GPUs it can open from 0), by position.

    >>> cuda_env([])
    {'CUDA_VISIBLE_DEVICES': ''}
    >>> cuda_env([Gpu(2, 2)], renumbered=True)["CUDA_VISIBLE_DEVICES"]
    '0'
    """
    ids = [g.uuid or str(i if renumbered else g.index) for i, g in enumerate(assigned)]
    env = {"CUDA_VISIBLE_DEVICES": ",".join(ids)}
    if assigned:
        env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUBLAS_WORKSPACE_CONFIG=CUBLAS_WORKSPACE)
    return env


def device_nodes(assigned: Sequence[Gpu], devices: Path | None = None) -> list[tuple[str, str]]:
    """``(host path, path inside)`` of the device nodes a run with ``assigned`` GPUs needs: the
    control nodes present in ``devices`` (default :func:`dev_dir`) and each assigned GPU's own
    node, at ``/dev/NAME`` inside; none without GPUs. Raises :class:`RunnerError` when a
    required node is missing (the run could not use its GPU)."""
    if not assigned:
        return []
    devices = dev_dir() if devices is None else devices
    missing = [n for n in (*REQUIRED_NODES, *(g.node for g in assigned)) if not _exists(devices, n)]
    if missing:
        raise RunnerError(
            f"a GPU run needs {', '.join(str(devices / n) for n in missing)}, which do(es) not"
            " exist: load the NVIDIA driver's modules and create the nodes (as root:"
            " `nvidia-modprobe -u -c=0`, or run `nvidia-smi` once), then run again"
        )
    names = [n for n in CONTROL_NODES if _exists(devices, n)] + [g.node for g in assigned]
    return [(str(devices / n), f"/dev/{n}") for n in names]


def _exists(devices: Path, name: str) -> bool:
    return os.path.lexists(devices / name)


def _ldconfig_cache() -> str:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        done = subprocess.run(
            [ldconfig, "-p"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def driver_lib_dirs(ldconfig: str | None = None) -> list[str]:
    """Folders of the driver's user-space libraries (``libcuda``, ``libnvidia-ml``…), their
    links' targets included, from ``ldconfig -p``'s text (default: asked now).

    >>> driver_lib_dirs("\\tlibcuda.so.1 (libc6,x86-64) => /opt/nvidia/lib/libcuda.so.1\\n")
    ['/opt/nvidia/lib']
    """
    text = _ldconfig_cache() if ldconfig is None else ldconfig
    dirs: set[str] = set()
    for line in text.splitlines():
        name, sep, path = line.partition("=>")
        if sep and name.strip().startswith(DRIVER_LIBS):
            path = path.strip()
            dirs.update({os.path.dirname(path), os.path.dirname(os.path.realpath(path))})
    return sorted(dirs)


def container_gpu_args(engine: str, assigned: Sequence[Gpu]) -> list[str]:
    """The ``ENGINE run`` flags that give a container exactly its ``assigned`` GPUs.

    docker: ``--gpus "device=ID,…"`` (quoted: docker reads the value as CSV, so an unquoted
    ``device=0,2`` fails), IDs as :attr:`Gpu.cuda_id`. podman: one CDI device
    ``nvidia.com/gpu=INDEX`` each (the names ``nvidia-ctk cdi generate`` gives by default). Both
    also set ``CUBLAS_WORKSPACE_CONFIG``. Without GPUs: ``NVIDIA_VISIBLE_DEVICES=void`` and an
    empty ``CUDA_VISIBLE_DEVICES``, so an image from a CUDA base (whose ``ENV`` says
    ``NVIDIA_VISIBLE_DEVICES=all``) gets no GPU on a host whose default runtime is ``nvidia``.

    >>> container_gpu_args("docker", [Gpu(0, 0), Gpu(2, 2)])[:2]
    ['--gpus', '"device=0,2"']
    >>> container_gpu_args("/usr/bin/podman", [Gpu(1, 1, "GPU-b")])[:2]
    ['--device', 'nvidia.com/gpu=1']
    """
    if not assigned:
        return ["-e", "NVIDIA_VISIBLE_DEVICES=void", "-e", "CUDA_VISIBLE_DEVICES="]
    if os.path.basename(engine) == "podman":
        flags = [a for g in assigned for a in ("--device", f"nvidia.com/gpu={g.index}")]
    else:
        flags = ["--gpus", '"device=' + ",".join(g.cuda_id for g in assigned) + '"']
    return [*flags, "-e", f"CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE}"]

"""The runner interface: run the worker on a job inside some isolation, report what happened.

Every backend builds a command around the same worker entrypoint (``python -m harness.worker``)
and returns a :class:`RunOutcome`. A runner never reads test labels (it only sees the bundle) and
never scores; the harness reads the prediction files it leaves behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.registry import Registry

LOG_LIMIT_BYTES = 64 * 1024


@dataclass(frozen=True)
class RunJob:
    bundle: Path
    package: Path
    entrypoint: str
    out: Path
    seed: int = 0
    timeout_s: float = 1800.0
    memory_gb: float = 4.0
    cpus: int = 1
    gpus: int = 0


@dataclass
class RunOutcome:
    exit_code: int
    reason: str
    wall_s: float
    stdout: str = ""
    stderr: str = ""
    details: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Runner(Protocol):
    name: str

    def run(self, job: RunJob) -> RunOutcome: ...


runners: Registry[Runner] = Registry("runner")


def worker_argv(job: RunJob, python: str = sys.executable) -> list[str]:
    return [
        python,
        "-m",
        "harness.worker",
        str(job.bundle),
        str(job.package),
        job.entrypoint,
        str(job.out),
        "--seed",
        str(job.seed),
    ]


def truncate(data: bytes, limit: int = LOG_LIMIT_BYTES) -> str:
    """Keep the head and the tail of a log; say how much was cut."""
    if len(data) <= limit:
        return data.decode("utf-8", "replace")
    half = limit // 2
    cut = len(data) - 2 * half
    return (
        data[:half].decode("utf-8", "replace")
        + f"\n[... {cut} bytes cut ...]\n"
        + data[-half:].decode("utf-8", "replace")
    )


def run_process(argv: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float) -> RunOutcome:
    """Run ``argv`` in its own process group; on timeout kill the whole group."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        reason = "ok" if proc.returncode == 0 else f"exited with code {proc.returncode}"
        if proc.returncode < 0:
            reason = f"killed by signal {signal.Signals(-proc.returncode).name}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        reason = f"timed out after {timeout_s:g} s; process group killed"
    return RunOutcome(
        exit_code=proc.returncode if proc.returncode is not None else -9,
        reason=reason,
        wall_s=time.perf_counter() - start,
        stdout=truncate(out),
        stderr=truncate(err),
    )

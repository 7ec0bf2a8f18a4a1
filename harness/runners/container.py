"""Runner ``container``: the worker in a docker or podman container, for untrusted model code.

The container gets no network (``--network none``), a read-only root file system with a tmpfs
``/tmp`` sized to ``resources.memory_gb`` (and charged to the container's memory), no
capabilities, ``no-new-privileges``, limits on processes, memory (no swap beyond it) and CPUs
from the package's ``resources``, GPUs only when it asks for them (``--gpus N`` on docker, the
CDI device ``nvidia.com/gpu=all`` on podman), and three mounts: the bundle at ``/bundle`` and the
package at ``/package`` read-only, the output folder at ``/out`` read-write, whose size the
harness polls against ``memory_gb`` as for the other runners. The image comes from the package
manifest (``model.image``, checked against the OCI reference grammar when the manifest is
loaded, and placed after ``--`` so it can never be read as an option) and must hold Python and
the ``harness`` package at the harness version that scores it. The engine is ``docker`` unless
the runner is built with another or ``ZSL_CONTAINER_ENGINE`` names ``podman``. When the harness
stops a run (wall clock, output folder) it kills the client, then the container itself
(``kill``, then ``rm -f``), since it runs in the engine, not under us.

Weaker than ``sandbox`` on one point: the main fit's test features. An engine cannot hand the
container an open descriptor, so their file (outside the bundle, see ``harness.tasks``) is bound
read-only at ``/bundle-test/features.npy`` and the worker gets ``--test-features-path``; model
code running as the same user in the container can read that file during ``fit`` and so use
statistics of the whole test set. The record says so (``"test_features": "file"`` in the
outcome's details, where ``sandbox`` and ``local`` say ``"descriptor"``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

from harness.errors import RunnerError, SubmissionError
from harness.runners.base import RunJob, RunLimits, RunOutcome, job_argv, run_process, runners
from harness.submission.package import load_package

__all__ = [
    "ENGINES",
    "INSIDE_TEST_FEATURES",
    "PIDS_LIMIT",
    "ContainerRunner",
    "container_argv",
]

ENGINES = ("docker", "podman")
PIDS_LIMIT = 256
# Where the main fit's test features file is bound (read-only; see the module docstring).
INSIDE_TEST_FEATURES = "/bundle-test/features.npy"


def container_argv(
    job: RunJob, image: str, engine: str = "docker", *, name: str | None = None
) -> list[str]:
    """The ``ENGINE run …`` command line for ``job`` (pure: runs nothing).

    ``engine`` is the executable (a path or ``docker``/``podman``); the GPU flag follows its
    base name. ``name`` defaults to a fresh ``zsl-<uuid>``.
    """
    name = name or f"zsl-{uuid.uuid4().hex}"
    inner = replace(
        job,
        bundle=Path("/bundle"),
        package=Path("/package"),
        out=Path("/out"),
        test_features=None if job.test_features is None else Path(INSIDE_TEST_FEATURES),
    )
    test_mount: list[str] = []
    if job.test_features is not None:
        test_mount = ["-v", f"{job.test_features}:{INSIDE_TEST_FEATURES}:ro"]
    gpus: list[str] = []
    if job.gpus:
        if os.path.basename(engine) == "podman":
            gpus = ["--device", "nvidia.com/gpu=all"]
        else:
            gpus = ["--gpus", str(job.gpus)]
    return [
        engine,
        "run",
        "--rm",
        "--network",
        "none",
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--pids-limit",
        str(PIDS_LIMIT),
        "--memory",
        f"{job.memory_gb:g}g",
        "--memory-swap",
        f"{job.memory_gb:g}g",
        "--cpus",
        str(job.cpus),
        *gpus,
        "-v",
        f"{job.bundle}:/bundle:ro",
        "-v",
        f"{job.package}:/package:ro",
        *test_mount,
        "-v",
        f"{job.out}:/out:rw",
        "--tmpfs",
        f"/tmp:size={job.memory_bytes}",
        "--workdir",
        "/out",
        "--name",
        name,
        # The end of the options: whatever the image reference is, it is not read as one.
        "--",
        image,
        *job_argv(inner, python="python"),
    ]


class ContainerRunner:
    """docker/podman isolation; see the module docstring."""

    name = "container"

    def __init__(self, engine: str | None = None) -> None:
        self._engine = engine

    @property
    def engine(self) -> str:
        engine = self._engine or os.environ.get("ZSL_CONTAINER_ENGINE") or "docker"
        if os.path.basename(engine) not in ENGINES:
            raise RunnerError(
                f"container engine '{engine}' is not supported: set ZSL_CONTAINER_ENGINE to one"
                f" of {', '.join(ENGINES)}"
            )
        return engine

    def image(self, job: RunJob) -> str:
        try:
            model = load_package(job.package).manifest.model
        except SubmissionError as err:
            raise RunnerError(f"runner 'container': {err}") from None
        if model is None or not model.image:
            raise RunnerError(
                f"{job.package}/submission.yaml: runner 'container' needs model.image (an image"
                " with Python and the harness installed); set it, or use runner 'sandbox'"
            )
        return model.image

    def run(self, job: RunJob) -> RunOutcome:
        engine = self.engine
        path = shutil.which(engine)
        if path is None:
            raise RunnerError(
                f"runner 'container': '{engine}' is not on PATH; install docker or podman, or"
                " set ZSL_CONTAINER_ENGINE to the one you have"
            )
        name = f"zsl-{uuid.uuid4().hex}"
        argv = container_argv(job, self.image(job), path, name=name)
        env = dict(os.environ)  # the client's settings (DOCKER_HOST…); the container gets none
        # The engine bounds the container's memory and processes; the harness bounds /out.
        limits = RunLimits(out_dir=job.out, out_bytes=job.out_bytes)
        outcome = run_process(argv, env=env, cwd=job.out, timeout_s=job.timeout_s, limits=limits)
        outcome.details["container"] = name
        if job.test_features is not None:
            outcome.details["test_features"] = "file"
        if outcome.reason.startswith(("timed out", "output folder")):
            cleanup = [self._call([path, "kill", name]), self._call([path, "rm", "-f", name])]
            outcome.details["cleanup"] = cleanup
            outcome.reason += f"; container {name} killed and removed"
        return outcome

    @staticmethod
    def _call(argv: list[str]) -> int:
        try:
            return subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
            ).returncode
        except (OSError, subprocess.SubprocessError):
            return -1


runners.add("container", ContainerRunner())

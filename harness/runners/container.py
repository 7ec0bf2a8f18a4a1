"""Runner ``container``: the worker in a docker or podman container, for untrusted model code.

See docs/runners.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import harness
from harness.core.errors import RunnerError, SubmissionError
from harness.core.gpus import Gpu, container_gpu_args, lease
from harness.images.build import CONTAINER_UID, build_command
from harness.images.engine import (
    ENGINES,
    LABEL_VERSION,
    ImageError,
    ImageInfo,
    engine_path,
    inspect_image,
)
from harness.runners.base import (
    RunJob,
    RunLimits,
    RunOutcome,
    job_argv,
    run_job,
    runners,
    worker_env,
)
from harness.runners.failure import explain_failure
from harness.runners.seccomp import profile_path
from harness.submission.package import check_requirement, default_worker_image, load_package

__all__ = [
    "ENGINES",
    "INSIDE_STATE",
    "NOFILE_LIMIT",
    "PIDS_LIMIT",
    "ContainerRunner",
    "container_argv",
]

PIDS_LIMIT = 256
NOFILE_LIMIT = 1024  # as the sandbox's
# Where a prediction pass's state is bound (read-only).
INSIDE_STATE = "/state"


def container_env(job: RunJob) -> dict[str, str]:
    """The worker's environment in the container: the sandbox's (same seed, same threads)."""
    return worker_env(job, home="/out")


def container_argv(
    job: RunJob,
    image: str,
    engine: str = "docker",
    *,
    name: str | None = None,
    user: str = f"{CONTAINER_UID}:{CONTAINER_UID}",
    host_cpus: int | None = None,
    assigned: Sequence[Gpu] = (),
    seccomp_profile: Path | None = None,
) -> list[str]:
    """The ``ENGINE run …`` command line for ``job`` (pure: runs nothing).

    ``engine`` is the executable (a path or ``docker``/``podman``); the GPU flag follows its
    base name. ``name`` defaults to a fresh ``zsl-<uuid>``; ``user`` is ``UID:GID``;
    ``host_cpus`` caps ``--cpus`` (engines refuse more CPUs than the host has); ``assigned``
    are the GPUs the run holds (:func:`harness.core.gpus.lease`), exactly ``job.gpus`` of
    them: the container gets those and no other (:func:`~harness.core.gpus.container_gpu_args`).
    ``seccomp_profile``: a seccomp profile file for the engine
    (:func:`harness.runners.seccomp.write_docker_profile`), instead of its default one.
    """
    if len(assigned) != job.gpus:
        raise RunnerError(f"the run asks for {job.gpus} GPU(s) but holds {len(assigned)}")
    name = name or f"zsl-{uuid.uuid4().hex}"
    cpus = job.cpus if host_cpus is None else min(job.cpus, host_cpus)
    inner = replace(
        job, bundle=Path("/bundle"), package=Path("/package"), out=Path("/out"),
        state=Path(INSIDE_STATE),
    )  # fmt: skip
    if job.phase == "predict" and not job.check:
        if job.state is None:
            raise RunnerError("a prediction pass needs its state folder")
        # The protocol rides on the container's stdin and stdout (an engine cannot pass
        # descriptors); the worker moves it off them before any model code runs.
        phase_mount = ["-i", "-v", f"{job.state}:{INSIDE_STATE}:ro"]
        command = job_argv(inner, python="python", channel=(0, 1))
    else:
        phase_mount = ["-v", f"{job.bundle}:/bundle:ro"]
        command = job_argv(inner, python="python")
    gpus = container_gpu_args(engine, assigned)
    env = [a for k, v in container_env(job).items() for a in ("--env", f"{k}={v}")]
    return [
        engine,
        "run",
        "--init",
        "--network",
        "none",
        "--ipc",
        "private",
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        *([] if seccomp_profile is None else ["--security-opt", f"seccomp={seccomp_profile}"]),
        "--pids-limit",
        str(PIDS_LIMIT),
        "--memory",
        f"{job.memory_gb:g}g",
        "--memory-swap",
        f"{job.memory_gb:g}g",
        "--cpus",
        str(cpus),
        "--ulimit",
        f"nofile={NOFILE_LIMIT}:{NOFILE_LIMIT}",
        "--user",
        user,
        *gpus,
        *env,
        *phase_mount,
        "-v",
        f"{job.package}:/package:ro",
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
        *command,
    ]


class ContainerRunner:
    """docker/podman isolation; see docs/runners.md."""

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
        """The package's ``model.image``, else the harness's default worker image for its kind."""
        try:
            package = load_package(job.package)
        except SubmissionError as err:
            raise RunnerError(f"runner 'container': {err}") from None
        if package.manifest.model is None:
            return default_worker_image(job.gpus)
        return package.worker_image

    def resolve(self, engine: str, job: RunJob) -> ImageInfo:
        """The job's image as the engine holds it, checked against the package: present, of
        this harness version and holding the package's requirements when the harness built it."""
        reference = self.image(job)
        try:
            info = inspect_image(engine, reference)
        except ImageError as err:
            raise RunnerError(f"runner 'container': {err}") from None
        model = load_package(job.package).manifest.model
        wanted = [] if model is None else list(model.requirements)
        ours = reference in (default_worker_image(0), default_worker_image(1))
        build = build_command(reference, [job.package] if wanted else [])
        if info is None:
            how = (
                f"build it with `{build}` (offline: add --rootfs DIR)"
                if ours
                else f"pull it (`{Path(engine).name} pull {reference}`) or build it with `{build}`"
            )
            raise RunnerError(
                f"runner 'container': image '{reference}' is not in {Path(engine).name}'s image"
                f" store: {how}"
            )
        version = info.labels.get(LABEL_VERSION)
        if version is not None and version != harness.__version__:
            raise RunnerError(
                f"runner 'container': image '{reference}' holds harness {version}, this is"
                f" harness {harness.__version__}: rebuild it with `{build}`"
            )
        held = info.requirements
        if held is not None:
            missing = [r for r in wanted if check_requirement(r) not in held]
            if missing:
                raise RunnerError(
                    f"runner 'container': image '{reference}' was built without"
                    f" {', '.join(missing)} ({job.package}/submission.yaml model.requirements):"
                    f" rebuild it with `{build}`"
                )
        return info

    def run(self, job: RunJob) -> RunOutcome:
        try:
            path = engine_path(self.engine)
        except ImageError as err:
            raise RunnerError(f"runner 'container': {err}") from None
        info = self.resolve(path, job)
        name = f"zsl-{uuid.uuid4().hex}"
        if os.geteuid() == 0:
            # The worker is not root in the container: it gets the output folder, as in sandbox.
            os.chown(job.out, CONTAINER_UID, CONTAINER_UID)
            user = f"{CONTAINER_UID}:{CONTAINER_UID}"
        else:
            user = f"{os.getuid()}:{os.getgid()}"
        env = dict(os.environ)  # the client's settings (DOCKER_HOST…); the container gets none
        # The engine bounds the container's memory and processes; the harness bounds /out.
        limits = RunLimits(out_dir=job.out, out_bytes=job.out_bytes)
        # GPUs are held until the container is gone: a concurrent run gets other ones.
        with lease(job.gpus) as assigned, profile_path() as seccomp_profile:
            argv = container_argv(
                job,
                info.id,
                path,
                name=name,
                user=user,
                host_cpus=os.cpu_count() or 1,
                assigned=assigned,
                seccomp_profile=seccomp_profile,
            )
            try:
                outcome = run_job(
                    job,
                    lambda channel: _on_channel(argv, channel),
                    env=env,
                    limits=limits,
                )
                stopped = outcome.reason.startswith(("timed out", "output folder"))
                if stopped:
                    outcome.details["kill"] = self._call([path, "kill", name])
                state = self._state(path, name)
            finally:
                removed = self._call([path, "rm", "-f", name])
        outcome.details.update(container=name, image=info.pinned, removed=removed == 0)
        if stopped:
            outcome.reason += f"; container {name} killed and removed"
        else:
            _explain(outcome, state, job)
        return explain_failure(job, outcome)

    @staticmethod
    def _call(argv: list[str]) -> int:
        try:
            return subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
            ).returncode
        except (OSError, subprocess.SubprocessError):
            return -1

    @staticmethod
    def _state(engine: str, name: str) -> dict[str, object]:
        """The ended container's ``State`` (``ExitCode``, ``OOMKilled``); empty if unknown."""
        argv = [engine, "container", "inspect", "--format", "{{json .State}}", "--", name]
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
            )
            state = json.loads(done.stdout) if done.returncode == 0 else {}
        except (OSError, subprocess.SubprocessError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}


def _on_channel(argv: list[str], channel: tuple[int, int] | None) -> list[str]:
    """The engine client started with a prediction pass's pipes as its stdin and stdout (the
    container's, with ``-i``), or ``argv`` as it is without a channel."""
    if channel is None:
        return argv
    requests, replies = channel
    # Python, not sh: dash cannot redirect descriptors above 9. Standard library only (-S).
    code = (
        f"import os, sys; os.dup2({requests}, 0); os.dup2({replies}, 1); os.close({requests});"
        f" os.close({replies}); os.execvp(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-I", "-S", "-c", code, *argv]


def _explain(outcome: RunOutcome, state: dict[str, object], job: RunJob) -> None:
    """Say what ended the container: an out-of-memory kill anywhere in it fails the run (as the
    other runners' cgroup does), and 128 + N from the init is signal N."""
    if state.get("OOMKilled") is True:
        outcome.reason = (
            f"killed by the out-of-memory killer: the container passed its memory bound of"
            f" {job.memory_gb:g} GiB (resources.memory_gb)"
        )
        if outcome.exit_code == 0:
            outcome.exit_code = -signal.SIGKILL
        return
    code = outcome.exit_code
    if 128 < code < 128 + 65 and outcome.reason.startswith("exited"):
        with contextlib.suppress(ValueError):
            name = signal.Signals(code - 128).name
            outcome.reason = f"killed by signal {name} (exit code {code})"


runners.add("container", ContainerRunner())

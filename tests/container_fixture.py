"""A real container engine for the container runner's tests: docker, started here if need be.

:func:`docker_engine` finds a docker daemon that answers (``DOCKER_HOST``, else the default
socket) or starts one (``dockerd`` on PATH and root: no iptables, no bridge, overlay2, its own
data root under :data:`CACHE` so images outlive the session, its own socket and pidfile), builds
the harness's default worker image offline once (``zsl image build --rootfs``: the Debian root
file system and the assembled tree are cached under :data:`CACHE` too; an image from the same
inputs is not rebuilt), yields the engine, and stops the daemon it started. Where no engine can
be had the tests skip, saying why, except under ``ZSL_REQUIRE_DOCKER=1`` (CI), where they fail.

Under pytest-xdist each worker that needs an engine and finds none starts its own daemon (its
state folder is named after the worker), and the image builds, which share the cached root file
system, take turns under a lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.images import ImageInfo, build_image

__all__ = [
    "CACHE",
    "REQUIRED",
    "Engine",
    "containers_left_behind",
    "docker_engine",
    "unavailable",
    "zsl_containers",
]

REQUIRED = os.environ.get("ZSL_REQUIRE_DOCKER") == "1"
# Outside HOME and TMPDIR: the worker's in-process check watches those for writes, and the
# daemon writes to its data root for the whole session.
CACHE = Path(os.environ.get("ZSL_TEST_CONTAINER_CACHE") or "/var/cache/zsl-harness-test")
READY_S = 60.0
#: The pytest-xdist worker this process is ("gw0", ...), or "" outside xdist.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


@dataclass(frozen=True)
class Engine:
    docker_host: str  # the DOCKER_HOST the harness's client uses
    image: ImageInfo  # the default worker image, built offline
    build_s: float  # how long making sure of the image took this session
    started: bool  # whether this session started the daemon


def unavailable(reason: str) -> None:
    """Skip, or fail under ``ZSL_REQUIRE_DOCKER=1``."""
    if REQUIRED:
        pytest.fail(f"ZSL_REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


def _answers(host: str) -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    env = {**os.environ, "DOCKER_HOST": host}
    try:
        done = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            env=env,
            capture_output=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _start_dockerd(state: Path) -> tuple[str, int] | str:
    """Start dockerd under ``state``; (DOCKER_HOST, pid) or why it could not."""
    dockerd = shutil.which("dockerd")
    if dockerd is None or shutil.which("docker") is None:
        return "docker is not installed (apt-get install docker.io)"
    if os.geteuid() != 0:
        return "dockerd is installed but not running, and only root can start it here"
    state.mkdir(parents=True, exist_ok=True)
    sock = state / "docker.sock"
    host = f"unix://{sock}"
    log = (state / "dockerd.log").open("ab")
    argv = [
        dockerd,
        "--iptables=false",
        "--ip6tables=false",
        "--bridge=none",
        "--storage-driver=overlay2",
        "--pidfile",
        str(state / "dockerd.pid"),
        "--data-root",
        str(state / "data"),
        "--exec-root",
        str(state / "exec"),
        "--host",
        host,
    ]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
    )
    log.close()
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"dockerd exited with code {proc.returncode} (see {state / 'dockerd.log'})"
        if _answers(host):
            return host, proc.pid
        time.sleep(0.2)
    _stop(proc.pid)
    return f"dockerd did not answer within {READY_S:g} s (see {state / 'dockerd.log'})"


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid if not Path(f"/proc/{pid}").exists() else 0
        if done:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def zsl_containers(docker_host: str) -> list[str]:
    """Names of the containers (running or not) the runner made: ``zsl-*``."""
    done = subprocess.run(
        ["docker", "ps", "-a", "--filter", "name=zsl-", "--format", "{{.Names}}"],
        env={**os.environ, "DOCKER_HOST": docker_host},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


#: How long a container that appeared during a test may take to go before it counts as left
#: behind: the other xdist workers' runs share the daemon, and their containers come and go.
LEFT_BEHIND_WAIT_S = 60.0


def containers_left_behind(docker_host: str, before: list[str]) -> list[str]:
    """The ``zsl-*`` containers that appeared since ``before`` (:func:`zsl_containers` when the
    test began) and are still there after :data:`LEFT_BEHIND_WAIT_S`: what the test left.

    Under pytest-xdist the workers share one daemon (CI's): a container another worker's test
    runs at this moment is new too, but it goes when that run ends; one this test left stays.
    """
    deadline = time.monotonic() + LEFT_BEHIND_WAIT_S
    while True:
        new = sorted(set(zsl_containers(docker_host)) - set(before))
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(0.5)


@contextmanager
def _build_lock() -> Iterator[None]:
    """One image build at a time across the session's processes (xdist workers share
    :data:`CACHE`'s root file system and trees, and may share one daemon)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "build.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_worker_image(host: str) -> tuple[ImageInfo, float] | str:
    """The default worker image on the engine at ``host``, built offline under the build lock
    (an image from the same inputs is not rebuilt), and how long making sure of it took; or
    why it could not be built."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", host)
        patch.setenv("ZSL_HOME", str(CACHE / "home"))  # the cached root file system trees
        began = time.perf_counter()
        try:
            with _build_lock():
                image, _ = build_image(rootfs=CACHE / "rootfs-bookworm", quiet=True)
        except HarnessError as err:
            return f"the worker image could not be built offline: {err}"
        return image, time.perf_counter() - began


@contextmanager
def docker_engine() -> Iterator[Engine | str]:
    """The engine with the worker image built, or why there is none (see the module docstring)."""
    started: int | None = None
    candidates = [os.environ.get("DOCKER_HOST", ""), "unix:///var/run/docker.sock"]
    host = next((h for h in candidates if h and _answers(h)), None)
    if host is None:
        outcome = _start_dockerd(CACHE / (f"dockerd-{WORKER}" if WORKER else "dockerd"))
        if isinstance(outcome, str):
            yield outcome
            return
        host, started = outcome
    try:
        built = build_worker_image(host)
    except BaseException:
        if started is not None:
            _stop(started)
        raise
    if isinstance(built, str):
        if started is not None:
            _stop(started)
        yield built
        return
    try:
        yield Engine(host, built[0], built[1], started is not None)
    finally:
        if started is not None:
            _stop(started)


if __name__ == "__main__":
    # `.ci/run` builds the image ahead of the suite, on its daemon (DOCKER_HOST), while lint
    # and mypy leave a core free; the session's first container test then finds it built, or
    # waits on the build lock until it is. On a fresh machine that is debootstrap's minute.
    import sys

    done = build_worker_image(os.environ["DOCKER_HOST"])
    if isinstance(done, str):
        sys.exit(f"tests/container_fixture.py: {done}")
    print(f"tests/container_fixture.py: worker image {done[0].pinned} ready in {done[1]:.0f} s")

"""Interrupting the suite leaves no server running (issue 28): a timeout's SIGTERM to .ci/run, or
to the test command (`make test`, which passes it on to pytest), must not leave the docker daemon
or the PostgreSQL cluster .ci/run started running, nor the PostgreSQL cluster the session starts
itself when it is given none (tests/store_fixtures.py; tests/conftest.py turns SIGTERM into an
interrupt, so that fixtures are torn down and atexit handlers run).

Runs the real script, as root, with a docker daemon of its own (a fresh data/exec root, its own
socket) and a throwaway PostgreSQL cluster (its own name and port): the daemon and cluster other
jobs on the machine use are not touched. The test command stands in for `make test`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts a docker daemon and a PostgreSQL cluster

ROOT = Path(__file__).resolve().parents[1]
TOOLS = (
    "dockerd",
    "docker",
    "pg_createcluster",
    "pg_ctlcluster",
    "pg_lsclusters",
    "pg_dropcluster",
)


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (.ci/run starts dockerd and a PostgreSQL cluster)"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        return f"missing {', '.join(absent)}"
    return None


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(word) for word in out.stdout.split()]


def _wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f".ci/run ended ({proc.returncode}) before {path.name} appeared")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {path.name} after {seconds} s")
        time.sleep(0.2)
    time.sleep(0.2)  # written, not half-written


def _cluster(version: str, name: str) -> list[str] | None:
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        fields = line.split()
        if fields[:2] == [version, name]:
            return fields
    return None


def _mount(path: Path) -> tuple[str, str] | None:
    """(file system type, its size option) of the mount at ``path``; None when none is."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if point == str(path):
            size = next((o for o in options.split(",") if o.startswith("size=")), "")
            return kind, size
    return None


@pytest.fixture
def scratch() -> Iterator[Path]:
    # Short: the daemon's sockets live under it (a unix socket path has at most 107 bytes).
    path = Path(tempfile.mkdtemp(prefix="zslci-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("target", ["script", "command"])
def test_sigterm_stops_the_docker_daemon_and_postgres_cluster_it_started(
    target: str, scratch: Path
) -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    version = sorted(os.listdir("/usr/lib/postgresql"), key=float)[-1]
    cluster = f"zslci{os.getpid()}{target[0]}"
    docker_dir = scratch / "d"
    marker = scratch / "command.pid"
    env = {
        **os.environ,
        "ZSL_CI_APT": "0",
        "ZSL_CI_DOCKER_DIR": str(docker_dir),
        "ZSL_CI_PG_CLUSTER": cluster,
        "ZSL_CI_TMPFS_SIZE": "64m",
        "TMPDIR": str(scratch),  # where it makes its tmpfs's mount point
        # Stands in for `make test`: records its pid and environment, then waits to be stopped.
        "ZSL_CI_COMMAND": f"env > {scratch}/command.env; echo $$ > {marker}; exec sleep 600",
    }
    for key in ("DOCKER_HOST", "ZSL_TEST_POSTGRES_URL"):
        env.pop(key, None)
    proc = subprocess.Popen(
        [str(ROOT / ".ci" / "run")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        _wait_for(marker, proc, 120)
        command_pid = int(marker.read_text())
        docker_pid = int((docker_dir / "dockerd.pid").read_text())
        data = Path(_cluster(version, cluster)[5])  # type: ignore[index]
        postgres_pid = int((data / "postmaster.pid").read_text().split()[0])
        pids = [command_pid, docker_pid, postgres_pid, *_children(docker_pid)]
        assert all(_alive(pid) for pid in pids), pids
        seen = (scratch / "command.env").read_text()
        assert f"DOCKER_HOST=unix://{docker_dir}/docker.sock" in seen
        assert "ZSL_TEST_POSTGRES_URL=postgresql://zsl_test:" in seen
        assert "ZSL_REQUIRE_DOCKER=1" in seen and "ZSL_REQUIRE_POSTGRES=1" in seen
        # The command's TMPDIR: a tmpfs of the size asked for, mounted for it in TMPDIR.
        tmpdir = Path(next(line for line in seen.splitlines() if line.startswith("TMPDIR="))[7:])
        assert tmpdir.parent == scratch and tmpdir.name.startswith("zsl-ci-tmpfs."), seen
        assert _mount(tmpdir) == ("tmpfs", "size=65536k"), _mount(tmpdir)

        os.kill(proc.pid if target == "script" else command_pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
        log = out.decode(errors="replace")
        # TERM to the script: 128 + 15; TERM to the command: the command's status, passed on.
        assert proc.returncode == 143, log
        left = [pid for pid in pids if _alive(pid)]
        assert not left, f"still running: {left}\n{log}"
        assert _cluster(version, cluster)[3] == "down", log  # type: ignore[index]
        assert "dockerd stopped" in log and f"cluster {version} {cluster} stopped" in log, log
        assert _mount(tmpdir) is None and not tmpdir.exists(), log  # unmounted and removed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if _cluster(version, cluster) is not None:
            subprocess.run(["pg_dropcluster", "--stop", version, cluster], check=False)


SESSION_TEST = """
import os, time
from pathlib import Path

from tests import store_fixtures


def test_waits_with_a_postgres_cluster_up():
    store_fixtures.postgres_admin_url()  # starts the session's cluster
    Path(os.environ["MARKER"]).write_text(str(store_fixtures._Server.tmp))
    time.sleep(600)
"""


def test_sigterm_to_pytest_stops_the_postgres_cluster_the_session_started(scratch: Path) -> None:
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and not shutil.which("initdb"):
        pytest.skip("no PostgreSQL server binaries (initdb) to start a cluster with")
    (scratch / "test_wait.py").write_text(SESSION_TEST)
    (scratch / "pytest.ini").write_text("[pytest]\n")
    marker = scratch / "cluster"
    env = {**os.environ, "MARKER": str(marker), "PYTHONPATH": str(ROOT)}
    for key in ("ZSL_TEST_POSTGRES_URL", "ZSL_REQUIRE_POSTGRES"):
        env.pop(key, None)
    proc = subprocess.Popen(
        # The project's conftest as a plugin: its SIGTERM handling is what is under test.
        [
            *(
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "tests.conftest",
                "-p",
                "no:cacheprovider",
            ),
            *("-c", str(scratch / "pytest.ini"), str(scratch / "test_wait.py")),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    postgres_pid = None
    try:
        _wait_for(marker, proc, 120)
        data = Path(marker.read_text()) / "data"
        postgres_pid = int((data / "postmaster.pid").read_text().split()[0])
        assert _alive(postgres_pid)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        log = out.decode(errors="replace")
        assert proc.returncode == 2, log  # pytest's "interrupted"
        assert "SIGTERM: tearing the session down" in log, log
        assert not _alive(postgres_pid), log
        assert not data.exists(), log  # the atexit handler ran to its end
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if postgres_pid is not None and _alive(postgres_pid):
            os.kill(postgres_pid, signal.SIGKILL)

"""Runner ``container`` for real: docker, the worker image built offline, reference methods and
the hostile corpus's runtime cases (``test_sandbox.py``'s, contained the same way or harder).

The engine and the image come from ``tests/container_fixture.py`` (the ``docker`` fixture):
skipped without docker, failed instead under ``ZSL_REQUIRE_DOCKER=1`` (CI). Every test checks
on the way out that no ``zsl-`` container is left, running or stopped.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.core.errors import RunnerError
from harness.pipeline import run_submission
from tests.conftest import REPO, SPECS, SUBMISSIONS, needs_bwrap, stored_runs
from tests.container_fixture import Engine

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"


def _package(tmp_path: Path, body: str, *, time_s: int = 120, memory_gb: float = 2) -> Path:
    """A copy of ESZSL whose ``fit`` first runs ``body`` (hostile code under test)."""
    dest = tmp_path / "pkg"
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = dest / "submission.yaml"
    text = manifest.read_text().replace("time_s: 600", f"time_s: {time_s}")
    manifest.write_text(text.replace("memory_gb: 2", f"memory_gb: {memory_gb}"))
    hook = "\n".join("        " + line for line in body.strip().splitlines())
    code = (dest / "model.py").read_text()
    code += (
        "\n\nclass Hostile(ESZSL):\n    def fit(self, task):\n"
        f"{hook}\n        return super().fit(task)\n"
    )
    (dest / "model.py").write_text(code)
    manifest.write_text(manifest.read_text().replace("model:ESZSL", "model:Hostile"))
    return dest


def _refused(package: Path, db: str, match: str) -> RunnerError:
    with pytest.raises(RunnerError, match=match) as err:
        run_submission(package, DEMO, runner="container", database_url=db, quiet=True)
    assert stored_runs(db) == 0
    return err.value


# -- the image --------------------------------------------------------------------------------


def test_the_worker_image_is_what_the_runner_needs(docker: Engine) -> None:
    """Non-root, `python` present, the harness at this version, byte-code compiled ahead (the
    root is read-only at run time), nothing to pull."""
    tag = f"zsl-worker:{harness.__version__}"
    assert docker.image.reference == tag and docker.image.id.startswith("sha256:")
    probe = (
        "import os, sys, importlib.util, harness, harness.worker.phases;"
        "spec = importlib.util.find_spec('harness.worker.phases');"
        "print(os.getuid(), os.getcwd(), harness.__version__, sys.version_info[:2],"
        " os.path.exists(importlib.util.cache_from_source(spec.origin)))"
    )
    argv = ["docker", "run", "--rm", "--read-only", "--network", "none", "--cap-drop", "ALL"]
    done = subprocess.run(
        [*argv, "--", docker.image.id, "python", "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split(None, 2)[:2] == ["10001", "/out"]
    assert f"{harness.__version__} (3, 11) True" in done.stdout


def test_the_build_ahead_of_the_suite_finds_the_sessions_image(docker: Engine) -> None:
    """`.ci/run` builds the image before the suite (``python -m tests.container_fixture``); run
    the same way now, it finds this session's image (same inputs: not rebuilt) and says so."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.container_fixture"],
        env={**os.environ, "DOCKER_HOST": docker.docker_host},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert f"worker image {docker.image.pinned} ready in" in done.stdout


# -- reference methods: the sandbox's scores, bit for bit -------------------------------------


@needs_bwrap
@pytest.mark.parametrize("method", ["eszsl", "sae"])
def test_reference_method_scores_like_the_sandbox(docker: Engine, method: str) -> None:
    boxed = run_submission(SUBMISSIONS / method, DEMO, runner="container", store=False, quiet=True)
    sandbox = run_submission(SUBMISSIONS / method, DEMO, runner="sandbox", store=False, quiet=True)
    assert boxed.runner == "container"
    assert boxed.predictions_hashes == sandbox.predictions_hashes
    assert [(e.metric, e.value) for e in boxed.scores] == [
        (e.metric, e.value) for e in sandbox.scores
    ]
    assert boxed.environment["image"] == docker.image.pinned
    assert "image" not in sandbox.environment
    assert boxed.logs["inductive_check"] == sandbox.logs["inductive_check"] == "separate runs"
    assert boxed.model_state == sandbox.model_state  # the same fitted state, to the bit


def test_a_package_missing_a_requirement_in_the_image_is_told_the_command(docker: Engine) -> None:
    with pytest.raises(
        RunnerError, match=r"built without torch<2\.15,>=2\.13 .*`zsl image build --package "
    ):
        run_submission(SUBMISSIONS / "ale", DEMO, runner="container", store=False, quiet=True)


def test_a_missing_image_is_told_the_command(docker: Engine, tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, "pass")
    manifest = package / "submission.yaml"
    manifest.write_text(
        manifest.read_text().replace("  entrypoint:", "  image: zsl-no-such-image:1\n  entrypoint:")
    )
    _refused(
        package,
        db,
        r"'zsl-no-such-image:1' is not in docker's image store: pull it .*`zsl image build --tag zsl-no-such-image:1`",
    )


# -- the hostile corpus's runtime cases -------------------------------------------------------


def test_no_network(docker: Engine, tmp_path: Path, db: str) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        package = _package(
            tmp_path,
            f"""
import socket
for addr in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("172.17.0.1", 2375)):
    try:
        socket.create_connection(addr, timeout=2).close()
    except OSError as err:
        print("no route", addr, err)
    else:
        raise SystemExit("LEAK: connected to %s" % (addr,))
raise RuntimeError("network is unreachable, as it should be")
""",
        )
        _refused(package, db, r"exited with code 3; .*network is unreachable, as it should be")
    finally:
        server.close()


def test_host_secrets_and_frozen_labels_are_invisible(
    docker: Engine, tmp_path: Path, db: str, isolated_home: Path
) -> None:
    run_submission(SUBMISSIONS / "eszsl", DEMO, runner="container", store=False, quiet=True)
    labels = sorted(isolated_home.rglob("*labels*.npy"))
    assert labels, "the frozen demo should hold label arrays"
    package = _package(
        tmp_path,
        f"""
import os
seen = [p for p in ({str(labels[0])!r}, {str(isolated_home)!r}, "/var/run/docker.sock",
                    {os.environ["DOCKER_HOST"].removeprefix("unix://")!r})
        if os.path.exists(p)]
try:
    open("/etc/shadow").read()
    seen.append("/etc/shadow")
except OSError:
    pass
raise RuntimeError("visible: %s uid %d" % (seen, os.getuid()))
""",
    )
    _refused(package, db, r"exited with code 3; .*visible: \[\] uid 10001")


def test_writes_outside_out_are_refused(docker: Engine, tmp_path: Path, db: str) -> None:
    package = _package(
        tmp_path,
        """
import os
ok = []
for path in ("/package/evil.txt", "/bundle/evil.txt", "/usr/evil.txt", "/etc/evil.txt",
             "/evil.txt", "/bundle-test/evil.txt", __file__ + ".evil"):
    try:
        open(path, "w").write("x")
        ok.append(path)
    except OSError:
        pass
open("/tmp/scratch", "w").write("fine")
open("/out/scratch", "w").write("fine")
raise RuntimeError("written outside: %s" % ok)
""",
    )
    _refused(package, db, r"written outside: \[\]")
    assert sorted(p.name for p in package.iterdir()) == ["README.md", "model.py", "submission.yaml"]


def test_fork_bomb_is_contained(docker: Engine, tmp_path: Path, db: str) -> None:
    package = _package(
        tmp_path,
        """
import os, time
for i in range(100000):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
""",
    )
    _refused(package, db, r"exited with code 3; .*(BlockingIOError|Resource temporarily)")


def test_memory_hog_is_killed_by_the_memory_bound(docker: Engine, tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, "import numpy as np\nnp.ones((8 << 30) // 8)", memory_gb=1)
    _refused(package, db, r"out-of-memory killer: the container passed its memory bound of 1 GiB")


def test_writing_tmp_past_memory_is_killed(docker: Engine, tmp_path: Path, db: str) -> None:
    """/tmp is a tmpfs charged to the container's memory: filling it is filling memory."""
    package = _package(
        tmp_path,
        """
chunk = b"x" * (64 << 20)
for i in range(40):
    with open("/tmp/fill-%d" % i, "wb") as handle:
        handle.write(chunk)
""",
        memory_gb=1,
    )
    _refused(package, db, r"out-of-memory killer|No space left on device")


def test_infinite_loop_is_killed_and_the_container_removed(
    docker: Engine, tmp_path: Path, db: str
) -> None:
    package = _package(tmp_path, "while True:\n    pass", time_s=3)
    err = _refused(
        package,
        db,
        r"timed out in fit_validation after 3 s, .*container zsl-[0-9a-f]+ killed and removed",
    )
    name = re.search(r"container (zsl-[0-9a-f]+)", str(err))
    assert name is not None
    # the `docker` fixture checks that no zsl- container is left; this one by name too
    done = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name={name[1]}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == ""


def test_a_daemon_the_model_leaves_dies_with_the_container(
    docker: Engine, tmp_path: Path, db: str
) -> None:
    """setsid + double fork: the worker sweeps it, and the container's end kills the rest."""
    package = _package(
        tmp_path,
        """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
""",
    )
    record = run_submission(package, DEMO, runner="container", database_url=db, quiet=True)
    assert record.scores and stored_runs(db) == 1


def test_crash_mid_run_names_the_signal(docker: Engine, tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    _refused(package, db, r"SIGSEGV")

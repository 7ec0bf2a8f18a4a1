"""Runner ``sandbox``: the argv it builds, and honest and hostile models run for real under bwrap."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from harness.core.errors import RunnerError
from harness.pipeline import run_submission
from harness.runners.base import RunJob
from harness.runners.sandbox import SandboxRunner, library_address_space, sandbox_argv
from tests.conftest import SPECS, SUBMISSIONS, needs_bwrap, stored_runs

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"


def _package(tmp_path: Path, body: str, *, time_s: int = 60, memory_gb: float = 2) -> Path:
    """A copy of ESZSL whose ``fit`` first runs ``body`` (hostile code under test)."""
    dest = tmp_path / "pkg"
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = dest / "submission.yaml"
    text = manifest.read_text().replace("time_s: 600", f"time_s: {time_s}")
    manifest.write_text(text.replace("memory_gb: 2", f"memory_gb: {memory_gb}"))
    code = (dest / "model.py").read_text()
    hook = "\n".join("        " + line for line in body.strip().splitlines())
    code += (
        "\n\nclass Hostile(ESZSL):\n    def fit(self, task):\n"
        f"{hook}\n        return super().fit(task)\n"
    )
    (dest / "model.py").write_text(code)
    manifest.write_text(manifest.read_text().replace("model:ESZSL", "model:Hostile"))
    return dest


def _refused(package: Path, db: str, match: str) -> None:
    with pytest.raises(RunnerError, match=match):
        run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert stored_runs(db) == 0


def test_argv_binds_read_only_and_leaves_only_out_writable(tmp_path: Path) -> None:
    job = RunJob(tmp_path / "b", tmp_path / "p", "model:M", tmp_path / "o", seed=7, memory_gb=1)
    argv = sandbox_argv(job, bwrap="/usr/bin/bwrap", as_root=False)
    assert argv[:2] == ["/usr/bin/bwrap", "--unshare-all"]
    for flag in ("--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    pairs = list(zip(argv, argv[1:], argv[2:], strict=False))
    assert ("--ro-bind", str(tmp_path / "b"), "/bundle") in pairs
    assert ("--ro-bind", str(tmp_path / "p"), "/package") in pairs
    assert [p for p in pairs if p[0] == "--bind"] == [("--bind", str(tmp_path / "o"), "/out")]
    # No GPU asked for: no device node bound, and CUDA is shown none (tests/runners/test_gpus.py).
    assert "--dev-bind" not in argv and ("--setenv", "CUDA_VISIBLE_DEVICES", "") in pairs
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs - 4 : tmpfs + 2] == [
        "--perms",
        "1777",
        "--size",
        str(1 << 30),
        "--tmpfs",
        "/tmp",
    ]
    assert "/etc/shadow" not in argv and os.environ.get("ZSL_HOME", "") not in argv
    tail = argv[argv.index("-c") + 2 :]
    address_space = str((1 << 30) + library_address_space())  # memory + the libraries' size
    assert tail[:7] == [address_space, "1810", "256", str(1 << 30), "1024", "-1", "--"]
    assert tail[-6:] == ["/bundle", "/package", "model:M", "/out", "--seed", "7"]


def test_argv_as_root_has_no_user_namespace_and_drops_to_nobody(tmp_path: Path) -> None:
    job = RunJob(tmp_path / "b", tmp_path / "p", "model:M", tmp_path / "o")
    argv = sandbox_argv(job, as_root=True)
    assert "--unshare-all" not in argv and "--unshare-net" in argv and "--unshare-pid" in argv
    tail = argv[argv.index("-c") + 2 :]
    assert tail[5] == "65534"


def test_missing_bwrap_is_a_clear_error(tmp_path: Path) -> None:
    job = RunJob(tmp_path, tmp_path, "model:M", tmp_path)
    with pytest.raises(RunnerError, match="install it"):
        SandboxRunner(bwrap="no-such-bwrap-here").run(job)


@needs_bwrap
def test_eszsl_in_the_sandbox_scores_like_local() -> None:
    local = run_submission(SUBMISSIONS / "eszsl", DEMO, runner="local", store=False, quiet=True)
    boxed = run_submission(SUBMISSIONS / "eszsl", DEMO, runner="sandbox", store=False, quiet=True)
    assert boxed.runner == "sandbox"
    assert boxed.predictions_hashes == local.predictions_hashes
    assert [(e.metric, e.value) for e in boxed.scores] == [
        (e.metric, e.value) for e in local.scores
    ]


@needs_bwrap
def test_no_network(tmp_path: Path, db: str) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        package = _package(
            tmp_path,
            f"""
import socket
import tempfile
for addr in (("127.0.0.1", {port}), ("1.1.1.1", 53)):
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


@needs_bwrap
def test_secrets_and_frozen_labels_are_invisible(
    tmp_path: Path, db: str, isolated_home: Path
) -> None:
    run_submission(SUBMISSIONS / "eszsl", DEMO, store=False, quiet=True)  # freezes the demo
    labels = sorted(isolated_home.rglob("*labels*.npy"))
    assert labels, "the frozen demo should hold label arrays"
    package = _package(
        tmp_path,
        f"""
import os
seen = [p for p in ("/etc/shadow", "/etc/passwd", {str(labels[0])!r}, {str(isolated_home)!r})
        if os.path.exists(p)]
raise RuntimeError("visible: %s" % seen)
""",
    )
    _refused(package, db, r"exited with code 3; .*visible: \[\]")


@needs_bwrap
def test_writes_outside_out_are_refused(tmp_path: Path, db: str) -> None:
    package = _package(
        tmp_path,
        """
import os, sysconfig
import harness.worker.phases as phases
# The harness's byte-code, which every later phase reads (tests/conftest.py writes it), and the
# environment's packages: a module planted or touched there would run in the next pass.
cache = os.path.join(os.path.dirname(phases.__file__), "__pycache__")
ok = []
for path in ("/package/evil.txt", "/bundle/evil.txt", "/usr/evil.txt", "/etc/evil.txt",
             __file__ + ".evil", os.path.join(cache, "phases.cpython-311.pyc"),
             os.path.join(cache, "evil.pyc"),
             os.path.join(sysconfig.get_paths()["purelib"], "evil.py")):
    try:
        open(path, "w").write("x")
        ok.append(path)
    except OSError:
        pass
try:
    os.utime(phases.__file__, (0, 0))  # an older source time would invalidate its byte-code
    ok.append("utime " + phases.__file__)
except OSError:
    pass
open("/tmp/scratch", "w").write("fine")
open("/out/scratch", "w").write("fine")
raise RuntimeError("written outside: %s" % ok)
""",
    )
    _refused(package, db, r"written outside: \[\]")
    assert sorted(p.name for p in package.iterdir()) == ["README.md", "model.py", "submission.yaml"]


@needs_bwrap
def test_fork_bomb_is_contained(tmp_path: Path, db: str) -> None:
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


@needs_bwrap
def test_memory_hog_hits_the_address_space_limit(tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, "import numpy as np\nnp.ones((8 << 30) // 8)", memory_gb=1)
    _refused(package, db, r"exited with code 3; .*MemoryError")


@needs_bwrap
def test_infinite_loop_is_killed_at_the_wall_clock_limit(tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, "while True:\n    pass", time_s=2)
    _refused(
        package,
        db,
        r"timed out in fit_validation after 2 s, the run's wall clock \(resources\.time_s: 2,"
        r" every phase of the run together\); process group killed",
    )


@needs_bwrap
def test_crash_mid_run_names_the_signal(tmp_path: Path, db: str) -> None:
    package = _package(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    _refused(package, db, r"killed by signal SIGSEGV")


@needs_bwrap
def test_huge_stdout_is_truncated_and_the_run_still_judged(tmp_path: Path, db: str) -> None:
    package = _package(
        tmp_path, "import sys\nfor _ in range(2000):\n    sys.stdout.write('y' * 10000 + '\\n')"
    )
    record = run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert record.scores and stored_runs(db) == 1
    from harness.bundles import write_model_bundles
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec

    write_model_bundles(load_benchmark(load_spec(DEMO)), tmp_path / "bundles", tmp_path / "s")
    bundle = tmp_path / "bundles" / "main"
    out = tmp_path / "out"
    out.mkdir()
    outcome = SandboxRunner().run(RunJob(bundle, package, "model:Hostile", out, timeout_s=60))
    assert outcome.ok, outcome.stderr
    assert "bytes cut" in outcome.stdout and len(outcome.stdout) < 70_000


def test_python_under_tmp_is_bound_over_the_private_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout/venv under /tmp (e.g. a CI clone) must stay visible inside the sandbox."""
    import harness.runners.sandbox as sandbox_module

    # Under /tmp itself, wherever TMPDIR (and so tmp_path) is: .ci/run points it at a tmpfs.
    clone = Path(tempfile.mkdtemp(prefix="clone-", dir="/tmp"))
    venv = clone / ".venv"
    venv.mkdir()
    monkeypatch.setattr(sandbox_module, "_python_dirs", lambda: [str(venv)])
    job = RunJob(bundle=Path("/b"), package=Path("/p"), entrypoint="m:M", out=Path("/o"))
    try:
        argv = sandbox_module.sandbox_argv(job, as_root=True)
    finally:
        shutil.rmtree(clone)
    tmpfs = argv.index("--tmpfs")
    bind = next(
        i for i in range(len(argv) - 2) if argv[i : i + 3] == ["--ro-bind", str(venv), str(venv)]
    )
    assert tmpfs < bind
    dirs = [argv[i + 1] for i, a in enumerate(argv) if a == "--dir"]
    assert "/tmp" not in dirs and str(venv.parent) in dirs

"""The default runner is the strongest the machine offers; no run outlives itself or sees secrets.

Issue 10, items 9 and 15: under the old default (``local``) a model read the caller's
environment through ``/proc/$PPID/environ`` and a ``setsid`` daemon kept a 5-second run alive
for 46 s; a predictions package's generator ran with no isolation at all. Issue 29, item 5: a
package whose image the engine holds (its ``model.image``, or the worker image built with its
requirements) runs in that image by default, not in a sandbox without its requirements.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
import harness.runners.sandbox as sandbox_module
from harness.bundles import write_model_bundles
from harness.cli.main import app
from harness.core.errors import RunnerError
from harness.data.prepare import load_benchmark
from harness.images.engine import LABEL_REQUIREMENTS, LABEL_VERSION
from harness.pipeline import generate_prediction_files, read_all, run_submission
from harness.runners.base import RunJob
from harness.runners.local import LocalRunner
from harness.runners.sandbox import SandboxRunner
from harness.spec import load_spec
from harness.store import create_tables, load_runs, make_engine
from harness.submission.package import load_package
from tests.conftest import REPO, SPECS, SUBMISSIONS, needs_bwrap
from tests.runners.test_sandbox import _package

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"
FAKE_ENGINE = Path(__file__).parents[1] / "fake_container_cli.py"
AWS_SECRET = "FAKE-aws-secret-4f9c2e7d1b"
DB_PASSWORD = "FAKE-db-password-8a3d6c"


# -- which runner (item 9) ------------------------------------------------------------------


@needs_bwrap
def test_default_is_the_sandbox_where_bubblewrap_works(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.runners import default_runner

    assert default_runner(load_package(SUBMISSIONS / "eszsl")) == "sandbox"
    record = run_submission(SUBMISSIONS / "eszsl", DEMO, store=False, quiet=True)
    assert record.runner == "sandbox"
    assert "warning" not in capsys.readouterr().err


def _no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "available", lambda bwrap="bwrap": False)


def _with_image(tmp_path: Path) -> Path:
    dest = tmp_path / "imaged"
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = dest / "submission.yaml"
    text = manifest.read_text()
    manifest.write_text(
        text.replace("  entrypoint: model:ESZSL", "  entrypoint: model:ESZSL\n  image: zsl:1")
    )
    return dest


def test_without_bubblewrap_a_container_engine_is_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.runners import default_runner

    _no_sandbox(monkeypatch)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_ENGINE}" "$@"\n')
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("ZSL_CONTAINER_ENGINE", raising=False)
    assert default_runner(load_package(_with_image(tmp_path))) == "container"
    assert capsys.readouterr().err == ""
    # No image: a container cannot run it, so local, loudly.
    assert default_runner(load_package(SUBMISSIONS / "eszsl")) == "local"
    assert "use it only for code you trust" in capsys.readouterr().err


def test_with_nothing_stronger_local_comes_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_sandbox(monkeypatch)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("ZSL_CONTAINER_ENGINE", str(tmp_path / "no-such" / "podman"))
    record = run_submission(_with_image(tmp_path), DEMO, store=False, quiet=True)
    assert record.runner == "local"
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "runner 'local'" in err


# -- an image made for the package comes first (issue 29, item 5) ----------------------------


def _declaring(tmp_path: Path, name: str, lines: str) -> Path:
    """A copy of eszsl whose ``model`` section also holds ``lines``."""
    dest = tmp_path / name
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = dest / "submission.yaml"
    entry = "  entrypoint: model:ESZSL"
    manifest.write_text(manifest.read_text().replace(entry, f"{entry}\n{lines}"))
    return dest


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_an_image_made_for_the_package_comes_before_the_sandbox(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.runners import default_runner

    monkeypatch.setattr(sandbox_module, "available", lambda bwrap="bwrap": True)
    imaged = load_package(_declaring(tmp_path, "imaged", "  image: ghcr.io/someone/zsl:1"))
    assert default_runner(imaged) == "container"
    # Declared requirements: the worker image `zsl image build --package` built with them.
    wanted = load_package(_declaring(tmp_path, "wanted", '  requirements: ["Light_GBM==4.5.0"]'))
    labels = {LABEL_VERSION: harness.__version__, LABEL_REQUIREMENTS: '["Light_GBM==4.5.0"]'}
    monkeypatch.setenv("FAKE_IMAGE_LABELS", json.dumps(labels))
    assert default_runner(wanted) == "container"
    assert _calls(fake_docker)[-1][-1] == f"zsl-worker:{harness.__version__}"
    # The worker image built without them is no image for the package: the sandbox is.
    monkeypatch.setenv("FAKE_IMAGE_LABELS", json.dumps({**labels, LABEL_REQUIREMENTS: "[]"}))
    assert default_runner(wanted) == "sandbox"
    monkeypatch.setenv("FAKE_CONTAINER_MODE", "noimage")
    assert default_runner(wanted) == "sandbox"
    assert default_runner(imaged) == "sandbox"
    # A package that declares neither asks the engine nothing.
    asked = len(_calls(fake_docker))
    assert default_runner(load_package(SUBMISSIONS / "eszsl")) == "sandbox"
    assert len(_calls(fake_docker)) == asked


def test_without_an_engine_an_image_is_not_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.runners import default_runner

    monkeypatch.setattr(sandbox_module, "available", lambda bwrap="bwrap": True)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("ZSL_CONTAINER_ENGINE", str(tmp_path / "no-such" / "docker"))
    package = load_package(_declaring(tmp_path, "wanted", '  requirements: ["lightgbm"]'))
    assert default_runner(package) == "sandbox"
    assert capsys.readouterr().err == ""


def test_the_real_engine_holding_the_packages_image_is_chosen(
    docker: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.runners import default_runner
    from tests.container_fixture import Engine

    assert isinstance(docker, Engine)
    monkeypatch.setattr(sandbox_module, "available", lambda bwrap="bwrap": True)
    image = docker.image.reference
    assert default_runner(load_package(_declaring(tmp_path, "a", f"  image: {image}"))) == (
        "container"
    )
    # The session's worker image was built without lightgbm: not an image for this package.
    wanted = load_package(_declaring(tmp_path, "b", '  requirements: ["lightgbm==4.5.0"]'))
    assert default_runner(wanted) == "sandbox"
    absent = load_package(_declaring(tmp_path, "c", "  image: zsl-test-absent-image:1"))
    assert default_runner(absent) == "sandbox"


def test_help_says_local_is_for_trusted_code_only() -> None:
    cli = CliRunner()
    for command in (["run", "--help"], ["submission", "generate", "--help"]):
        result = cli.invoke(app, command)
        assert result.exit_code == 0
        text = " ".join(result.output.split())
        assert "--runner" in text and "trusted code" in text and "default: the strongest" in text


# -- nothing outlives the run (item 9) ------------------------------------------------------------

DAEMON = """
import os, sys
token, marker = {token!r}, os.path.join(os.getcwd(), "marker")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        # The daemon: out of the session and the process group, holding stdout open.
        code = "import sys, time; time.sleep(4); open(sys.argv[2], 'w').write('alive')"
        os.execv(sys.executable, [sys.executable, "-c", code, token, marker])
    os._exit(0)
os.wait()
"""


def _bundle(tmp_path: Path) -> Path:
    """The main fit's model bundle of the demo (what a fit run gets)."""
    write_model_bundles(load_benchmark(load_spec(DEMO)), tmp_path / "bundles", tmp_path / "s")
    return tmp_path / "bundles" / "main"


def _alive(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if entry.isdigit() and token.encode() in cmdline.split(b"\0"):
            found.append(int(entry))
    return found


@pytest.mark.parametrize(
    "runner",
    [
        "local",
        pytest.param("sandbox", marks=needs_bwrap),
        "local-without-cgroups",
        pytest.param("sandbox-without-cgroups", marks=needs_bwrap),
    ],
)
def test_a_setsid_daemon_dies_with_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: str
) -> None:
    if runner.endswith("-without-cgroups"):
        monkeypatch.setattr("harness.runners.cgroup.MOUNTINFO", tmp_path / "no-mountinfo")
    token = f"zsl-daemon-{os.getpid()}-{runner}"
    package = _package(tmp_path, DAEMON.format(token=token))
    out = tmp_path / "out"
    out.mkdir()
    job = RunJob(_bundle(tmp_path), package, "model:Hostile", out, timeout_s=60)
    start = time.monotonic()
    chosen = LocalRunner() if runner.startswith("local") else SandboxRunner()
    outcome = chosen.run(job)
    assert outcome.ok, outcome.reason + outcome.stderr
    assert time.monotonic() - start < 4  # returned before the daemon's sleep ended
    assert _alive(token) == []
    time.sleep(max(0.0, 5 - (time.monotonic() - start)))
    assert not (out / "marker").exists()
    assert _alive(token) == []


# -- secrets (item 9) -----------------------------------------------------------------------

PEEK = """
import os
print("ENVIRON-DUMP", sorted(os.environ.items()))
for pid in ["self", str(os.getppid())] + sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        print("PROC-ENVIRON", pid, open("/proc/%s/environ" % pid, "rb").read())
    except OSError as err:
        print("PROC-ENVIRON", pid, "denied:", err)
"""


def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("ZSL_DATABASE_URL", f"postgresql://zsl:{DB_PASSWORD}@db.invalid/zsl")
    monkeypatch.setenv("VIRTUAL_ENV", "/home/someone/FAKE-venv-path")
    monkeypatch.setenv("PYTHONPATH", "/home/someone/FAKE-pythonpath")


@needs_bwrap
def test_default_runner_keeps_the_callers_secrets_out_of_the_logs(tmp_path: Path) -> None:
    """``zsl run`` started with secrets in its environment: the model dumps its own environment
    and every ``/proc/*/environ`` it can open, its parent's included; the stored logs hold none
    of the secrets. (The harness is a separate process: /proc/PID/environ shows the environment
    a process started with, so setting variables inside pytest would prove nothing.)"""
    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    env = dict(os.environ)
    env.update(
        AWS_SECRET_ACCESS_KEY=AWS_SECRET,
        ZSL_DATABASE_URL=f"postgresql://zsl:{DB_PASSWORD}@db.invalid/zsl",
        VIRTUAL_ENV="/home/someone/FAKE-venv-path",
    )
    package = _package(tmp_path, PEEK)
    argv = [sys.executable, "-m", "harness.cli.main", "run", str(package), "--spec", str(DEMO)]
    done = subprocess.run(
        [*argv, "--database-url", db],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,  # the checkout under test comes first on sys.path (python -m)
    )
    assert done.returncode == 0, done.stderr
    engine = make_engine(db)
    create_tables(engine)
    (record,) = load_runs(engine)
    logs = record.logs["stdout"]
    assert "ENVIRON-DUMP" in logs and "PROC-ENVIRON" in logs  # it did look
    for secret in (AWS_SECRET, DB_PASSWORD, "FAKE-venv-path"):
        assert secret not in logs


def test_local_passes_an_allow_listed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _secrets(monkeypatch)
    code = 'import os\nprint("ENVIRON-DUMP", sorted(os.environ.items()))'
    record = run_submission(_package(tmp_path, code), DEMO, runner="local", store=False, quiet=True)
    logs = record.logs["stdout"]
    assert "ENVIRON-DUMP" in logs and "'PATH'" in logs
    for secret in (AWS_SECRET, DB_PASSWORD, "FAKE-venv-path", "FAKE-pythonpath"):
        assert secret not in logs


@needs_bwrap
def test_local_harness_is_not_dumpable_while_a_model_runs(tmp_path: Path) -> None:
    """A model running as the harness's (non-root) user cannot read the harness's environ.

    The harness runs as uid 65534 in a user namespace (bwrap), so neither it nor the model has
    root's CAP_SYS_PTRACE; a dumpable harness hands its environ to any process of its user."""
    package = _package(
        tmp_path,
        """
import os
try:
    print("PEEK-READ", open("/proc/%d/environ" % os.getppid(), "rb").read())
except OSError as err:
    print("PEEK-DENIED", err)
""",
    )
    out = tmp_path / "out"
    out.mkdir()
    bundle = _bundle(tmp_path)
    harness_side = (
        "import sys\n"
        "from pathlib import Path\n"
        "from harness.runners.base import RunJob\n"
        "from harness.runners.local import LocalRunner\n"
        "b, p, o = (Path(a) for a in sys.argv[1:4])\n"
        "outcome = LocalRunner().run(RunJob(b, p, 'model:Hostile', o, timeout_s=60))\n"
        "print(outcome.reason)\n"
        "print(outcome.stdout)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    argv = ["bwrap", "--dev-bind", "/", "/", "--unshare-user", "--uid", "65534", "--gid", "65534"]
    argv += ["--die-with-parent", "--", sys.executable, "-c", harness_side]
    done = subprocess.run(
        [*argv, str(bundle), str(package), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,  # the checkout under test comes first on sys.path (python -c)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok\n"), done.stdout + done.stderr
    assert "PEEK-DENIED" in done.stdout and "PEEK-READ" not in done.stdout
    assert AWS_SECRET not in done.stdout


# -- a predictions package's generator runs in a runner (item 15) -----------------------------


def _baseline(tmp_path: Path) -> Path:
    dest = tmp_path / "baseline"
    shutil.copytree(
        SUBMISSIONS / "nearest-seen-class-transfer",
        dest,
        ignore=shutil.ignore_patterns("__pycache__", "predictions"),
    )
    return dest


@needs_bwrap
def test_shipped_generator_writes_its_files_in_the_sandbox(tmp_path: Path) -> None:
    package = load_package(_baseline(tmp_path))
    bench = load_benchmark(load_spec(DEMO))
    generate_prediction_files(package, bench, runner="sandbox")
    settings = [*bench.spec.settings, *bench.spec.validation_settings()]
    read_all(bench, {s: package.prediction_path("demo", s) for s in settings})
    record = run_submission(package.root, DEMO, store=False, quiet=True)
    assert record.runner == "predictions" and record.scores


@needs_bwrap
def test_generator_is_isolated_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    _secrets(monkeypatch)
    canary = tmp_path / "canary.txt"
    canary.write_text("host file")
    root = _baseline(tmp_path)
    (root / "make_predictions.py").write_text(
        f"""
import os, socket, sys
leaks = [p for p in ({str(canary)!r}, {str(isolated_home)!r}, "/etc/shadow") if os.path.exists(p)]
leaks += [k for k in ("AWS_SECRET_ACCESS_KEY", "ZSL_DATABASE_URL") if k in os.environ]
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    leaks.append("network")
except OSError:
    pass
try:
    open(os.path.join(os.path.dirname(__file__), "evil.txt"), "w").write("x")
    leaks.append("package writable")
except OSError:
    pass
sys.exit("isolated, leaks: %r" % leaks)
"""
    )
    bench = load_benchmark(load_spec(DEMO))
    with pytest.raises(
        RunnerError, match=r"(?s)generator on runner 'sandbox'.*isolated, leaks: \[\]"
    ):
        generate_prediction_files(load_package(root), bench)
    assert not (root / "evil.txt").exists()


@needs_bwrap
@pytest.mark.parametrize(
    "plant",
    [
        "os.symlink('/etc/shadow', out + '/zsl.safetensors')",
        "os.symlink('../bundle/task.json', out + '/zsl.safetensors')",
        "os.mkfifo(out + '/zsl.safetensors')",
        "os.mkdir(out + '/zsl.safetensors')",
    ],
)
def test_generator_outputs_are_copied_without_following_links(tmp_path: Path, plant: str) -> None:
    """An untrusted generator's files are read like a model's outputs: no link, no special file."""
    root = _baseline(tmp_path)
    (root / "make_predictions.py").write_text(f"import os, sys\nout = sys.argv[2]\n{plant}\n")
    bench = load_benchmark(load_spec(DEMO))
    with pytest.raises(RunnerError, match=r"zsl\.safetensors"):
        generate_prediction_files(load_package(root), bench, runner="sandbox")
    assert not (root / "predictions").exists()


def test_cli_generate_takes_a_runner(tmp_path: Path) -> None:
    root = _baseline(tmp_path)
    cli = CliRunner()
    result = cli.invoke(
        app, ["submission", "generate", str(root), "--spec", str(DEMO), "--runner", "local"]
    )
    assert result.exit_code == 0, result.output
    assert (root / "predictions" / "demo.zsl.safetensors").is_file()
    bad = cli.invoke(
        app, ["submission", "generate", str(root), "--spec", str(DEMO), "--runner", "lcoal"]
    )
    assert bad.exit_code == 1 and "unknown runner 'lcoal'" in bad.output

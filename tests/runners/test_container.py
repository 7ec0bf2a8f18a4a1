"""Runner ``container``: the exact docker/podman argv, and its behaviour against a fake CLI."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from harness.core.errors import RunnerError, SubmissionError
from harness.core.gpus import Gpu
from harness.images.engine import LABEL_REQUIREMENTS, LABEL_VERSION
from harness.pipeline import run_submission
from harness.runners.base import RunJob
from harness.runners.container import ContainerRunner, container_argv
from harness.submission.package import load_package
from tests.conftest import SPECS, SUBMISSIONS, stored_runs
from tests.fake_container_cli import IMAGE_ID

DEMO = SPECS / "demo.yaml"
JOB = RunJob(Path("/b"), Path("/p"), "model:M", Path("/o"), seed=3, memory_gb=2.5, cpus=2)

COMMON = [
    "run", "--init", "--network", "none", "--ipc", "private", "--read-only", "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges", "--pids-limit", "256", "--memory", "2.5g",
    "--memory-swap", "2.5g", "--cpus", "2", "--ulimit", "nofile=1024:1024",
    "--user", "10001:10001",
]  # fmt: skip
NO_GPU = ["-e", "NVIDIA_VISIBLE_DEVICES=void", "-e", "CUDA_VISIBLE_DEVICES="]
ENV = [
    "--env", "HOME=/out", "--env", "TMPDIR=/tmp", "--env", "LANG=C.UTF-8",
    "--env", "PYTHONHASHSEED=3", "--env", "PYTHONDONTWRITEBYTECODE=1",
    "--env", "PYTHONNOUSERSITE=1", "--env", "OMP_NUM_THREADS=2",
    "--env", "OPENBLAS_NUM_THREADS=2", "--env", "MKL_NUM_THREADS=2",
]  # fmt: skip
MOUNTS_AND_COMMAND = [
    "-v", "/b:/bundle:ro", "-v", "/p:/package:ro", "-v", "/o:/out:rw",
    "--tmpfs", f"/tmp:size={int(2.5 * (1 << 30))}", "--workdir", "/out", "--name", "zsl-x",
    "--", "img:1", "python", "-m", "harness.worker.phases", "fit",
    "/bundle", "/package", "model:M", "/out", "--seed", "3",
]  # fmt: skip


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_cpu_argv(engine: str) -> None:
    argv = container_argv(JOB, "img:1", engine, name="zsl-x")
    assert argv == [engine, *COMMON, *NO_GPU, *ENV, *MOUNTS_AND_COMMAND]


def test_cpus_are_capped_at_the_hosts() -> None:
    """Engines refuse --cpus beyond the host's; the threads the worker uses stay declared."""
    argv = container_argv(JOB, "img:1", name="zsl-x", host_cpus=1)
    assert argv[argv.index("--cpus") + 1] == "1" and "OMP_NUM_THREADS=2" in argv


def test_a_prediction_pass_gets_its_state_and_the_protocol_on_stdin_and_stdout() -> None:
    """Issue 26: no test feature is ever mounted (a fit reading /bundle-test/features.npy scored
    H 96.6); a pass gets the fitted state read-only, no bundle, and talks to the harness over
    the container's standard streams (``-i``), which the worker moves off before model code."""
    job = replace(JOB, phase="predict", state=Path("/w/state"), conversation=lambda r, w: True)
    argv = container_argv(job, "img:1", "docker", name="zsl-x")
    assert "-i" in argv and "/w/state:/state:ro" in argv
    assert not any(a.endswith(":/bundle:ro") or "features" in a for a in argv)
    assert argv[argv.index("img:1") + 1 :] == [
        "python", "-m", "harness.worker.phases", "predict", "/package", "model:M", "/state",
        "--requests", "0", "--replies", "1", "--seed", "3",
    ]  # fmt: skip
    fit = container_argv(JOB, "img:1", "docker", name="zsl-x")
    assert "-i" not in fit and "/b:/bundle:ro" in fit and not any("state" in a for a in fit)


def test_gpu_argv_docker_and_podman() -> None:
    """Exactly the leased GPUs, by id (docker) or CDI index (podman); none, and the NVIDIA
    runtime told so, without."""
    job = RunJob(Path("/b"), Path("/p"), "model:M", Path("/o"), 3, 1800, 2.5, 2, gpus=2)
    held = (Gpu(0, 0), Gpu(2, 2, "GPU-c"))
    docker = container_argv(job, "img:1", "/usr/bin/docker", name="zsl-x", assigned=held)
    cublas = ["-e", "CUBLAS_WORKSPACE_CONFIG=:4096:8"]
    gpu = ["--gpus", '"device=0,GPU-c"', *cublas]
    assert docker == ["/usr/bin/docker", *COMMON, *gpu, *ENV, *MOUNTS_AND_COMMAND]
    podman = container_argv(job, "img:1", "podman", name="zsl-x", assigned=held)
    gpu = ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=2", *cublas]
    assert podman == ["podman", *COMMON, *gpu, *ENV, *MOUNTS_AND_COMMAND]
    with pytest.raises(RunnerError, match=r"asks for 2 GPU\(s\) but holds 1"):
        container_argv(job, "img:1", "docker", assigned=held[:1])


def test_default_name_is_unique() -> None:
    a, b = container_argv(JOB, "i"), container_argv(JOB, "i")
    name = a[a.index("--name") + 1]
    assert name.startswith("zsl-") and name != b[b.index("--name") + 1]


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _package(tmp_path: Path, *, time_s: int = 600, image: bool = True) -> Path:
    dest = tmp_path / "pkg"
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = dest / "submission.yaml"
    text = manifest.read_text().replace("time_s: 600", f"time_s: {time_s}")
    if image:
        text = text.replace(
            "  entrypoint: model:ESZSL", "  entrypoint: model:ESZSL\n  image: zsl:1"
        )
    manifest.write_text(text)
    return dest


@pytest.mark.slow
def test_run_through_the_fake_engine_scores_like_local(fake_docker: Path, tmp_path: Path) -> None:
    package = _package(tmp_path)
    boxed = run_submission(package, DEMO, runner="container", store=False, quiet=True)
    local = run_submission(package, DEMO, runner="local", store=False, quiet=True)
    assert boxed.runner == "container"
    assert boxed.predictions_hashes == local.predictions_hashes
    assert boxed.environment["image"] == f"zsl:1@{IMAGE_ID}" and "image" not in local.environment
    calls = _calls(fake_docker)
    # Per phase (two fits, then each fit's two prediction passes): inspect, run, state, rm.
    assert len(calls) == 4 * 6
    phases = []
    for inspect, run, state, rm in zip(*[iter(calls)] * 4, strict=True):
        assert inspect == ["image", "inspect", "--format", "{{json .}}", "--", "zsl:1"]
        assert run[:3] == ["run", "--init", "--network"] and run[run.index("--") + 1] == IMAGE_ID
        name = run[run.index("--name") + 1]
        assert state[:2] == ["container", "inspect"] and state[-1] == name
        assert rm == ["rm", "-f", name]
        phases.append(run[run.index("harness.worker.phases") + 1])
    assert phases == ["fit", "predict", "predict", "fit", "predict", "predict"]


@pytest.mark.slow
def test_timeout_kills_and_removes_the_container(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CONTAINER_MODE", "sleep")
    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    with pytest.raises(
        RunnerError, match=r"timed out in fit_validation after 1 s.*killed and removed"
    ):
        run_submission(_package(tmp_path, time_s=1), DEMO, runner="container", database_url=db)
    _, run, kill, _, rm = _calls(fake_docker)
    name = run[run.index("--name") + 1]
    assert kill == ["kill", name] and rm == ["rm", "-f", name]
    assert stored_runs(db) == 0


def test_nonzero_exit_is_a_runner_error(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CONTAINER_MODE", "exit:125")
    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    with pytest.raises(RunnerError, match="runner 'container': exited with code 125"):
        run_submission(_package(tmp_path), DEMO, runner="container", database_url=db, quiet=True)
    assert [c[0] for c in _calls(fake_docker)] == ["image", "run", "container", "rm"]
    assert stored_runs(db) == 0


def test_missing_engine_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ZSL_CONTAINER_ENGINE", "podman")
    job = RunJob(tmp_path, _package(tmp_path), "model:ESZSL", tmp_path)
    with pytest.raises(RunnerError, match="'podman' is not on PATH: install docker or podman"):
        ContainerRunner().run(job)


def test_unknown_engine_is_a_clear_error(tmp_path: Path) -> None:
    job = RunJob(tmp_path, _package(tmp_path, image=False), "model:ESZSL", tmp_path)
    with pytest.raises(RunnerError, match="not supported: set ZSL_CONTAINER_ENGINE"):
        ContainerRunner("lxc").run(job)


def test_a_package_without_an_image_takes_the_default_for_its_kind(tmp_path: Path) -> None:
    package = _package(tmp_path, image=False)
    job = RunJob(tmp_path, package, "model:ESZSL", tmp_path)
    assert ContainerRunner().image(job) == f"zsl-worker:{harness.__version__}"
    manifest = package / "submission.yaml"
    manifest.write_text(manifest.read_text().replace("gpus: 0", "gpus: 1"))
    assert ContainerRunner().image(job) == f"zsl-worker:{harness.__version__}-gpu"


def test_missing_default_image_names_the_build_command(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CONTAINER_MODE", "noimage")
    job = RunJob(tmp_path, _package(tmp_path, image=False), "model:ESZSL", tmp_path)
    with pytest.raises(
        RunnerError,
        match=r"is not in docker's image store: build it with `zsl image build` \(offline: add --rootfs DIR\)",
    ):
        ContainerRunner().run(job)
    assert [c[:2] for c in _calls(fake_docker)] == [["image", "inspect"]]  # nothing started


def test_image_of_another_version_or_without_a_requirement_is_refused(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path, image=False)
    manifest = package / "submission.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "  entrypoint: model:ESZSL",
            '  entrypoint: model:ESZSL\n  requirements: ["torch==2.13.0"]',
        )
    )
    job = RunJob(tmp_path, package, "model:ESZSL", tmp_path)
    labels = {LABEL_VERSION: "0.0.1", LABEL_REQUIREMENTS: "[]"}
    monkeypatch.setenv("FAKE_IMAGE_LABELS", json.dumps(labels))
    with pytest.raises(
        RunnerError, match=r"holds harness 0\.0\.1, .*rebuild it with `zsl image build --package "
    ):
        ContainerRunner().run(job)
    labels[LABEL_VERSION] = harness.__version__
    monkeypatch.setenv("FAKE_IMAGE_LABELS", json.dumps(labels))
    with pytest.raises(
        RunnerError, match=r"built without torch==2\.13\.0 .*`zsl image build --package "
    ):
        ContainerRunner().run(job)
    assert all(c[0] == "image" for c in _calls(fake_docker))


# -- the image reference (issue 10, item 8) ---------------------------------------------------

BAD_IMAGES = [
    "--env-file=/etc/shadow",  # became a docker flag and leaked part of a host file
    "-v/:/host",
    "zsl:1 --privileged",
    "zsl:1\n--privileged",
    "Ubuntu:22.04",  # repositories are lowercase
    "zsl@sha256:short",
    "zsl@sha256:" + "a" * 63,
    "zsl:=1",
    "a=b",
    "",
    "zsl:",
    "zsl:-tag",
    "zsl:" + "t" * 129,
    "/zsl",
]
GOOD_IMAGES = [
    "zsl:1",
    "python",
    "ghcr.io/org/zsl-worker:0.1",
    "localhost:5000/team/zsl_worker:v1.2-rc",
    "registry.example.com/a/b/c@sha256:" + "0123456789abcdef" * 4,
    "zsl:1@sha256:" + "f" * 64,
]


def _manifest_with_image(tmp_path: Path, image: str) -> Path:
    dest = _package(tmp_path, image=False)
    manifest = dest / "submission.yaml"
    text = manifest.read_text().replace(
        "  entrypoint: model:ESZSL", f"  entrypoint: model:ESZSL\n  image: {json.dumps(image)}"
    )
    manifest.write_text(text)
    return dest


@pytest.mark.parametrize("image", BAD_IMAGES)
def test_validate_refuses_what_is_not_an_image_reference(tmp_path: Path, image: str) -> None:
    package = _manifest_with_image(tmp_path, image)
    with pytest.raises(SubmissionError, match=r"submission\.yaml:\d+: model\.image: ") as err:
        load_package(package)
    # a header and one problem line, whatever the value holds (no line of its own)
    assert len(str(err.value).splitlines()) == 2
    result = CliRunner().invoke(app, ["submission", "validate", str(package)])
    assert result.exit_code == 1 and "model.image" in result.output


@pytest.mark.parametrize("image", GOOD_IMAGES)
def test_validate_accepts_image_references(tmp_path: Path, image: str) -> None:
    model = load_package(_manifest_with_image(tmp_path, image)).manifest.model
    assert model is not None and model.image == image


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_options_end_before_the_image(engine: str) -> None:
    argv = container_argv(JOB, "img:1", engine, name="zsl-x")
    assert argv[argv.index("--") + 1] == "img:1"
    assert argv.index("--") == argv.index("img:1") - 1 and argv.count("--") == 1


@pytest.mark.slow
def test_out_folder_bound_stops_the_container_and_removes_it(
    fake_docker: Path, tmp_path: Path
) -> None:
    """The harness polls /out (a host folder) for every runner; then it kills the container."""
    package = _package(tmp_path)
    manifest = package / "submission.yaml"
    manifest.write_text(manifest.read_text().replace("memory_gb: 2", "memory_gb: 0.25"))
    model = package / "model.py"
    model.write_text(
        model.read_text()
        + "\nimport time\nopen('flood', 'wb').write(b'x' * (300 << 20))\ntime.sleep(60)\n"
    )
    with pytest.raises(RunnerError, match=r"output folder exceeded its bound of 0\.25 GiB.*killed"):
        run_submission(package, DEMO, runner="container", store=False, quiet=True)
    _, run, kill, _, rm = _calls(fake_docker)
    name = run[run.index("--name") + 1]
    assert kill == ["kill", name] and rm == ["rm", "-f", name]

"""`zsl submission validate` and `zsl run` check model.requirements against the runner's
environment (issue 29, item 5).

A package declaring ``lightgbm==4.5.0`` used to pass validation and then fail in the sandbox with
ModuleNotFoundError. Now validation and the plan of every run compare the declared requirements
with what the runner's Python has installed (the harness's own interpreter for ``sandbox`` and
``local``; the image for ``container``) and refuse, before any model code runs, with every unmet
requirement and the two ways out: an image with them, or an install into the Python named.
"""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
import harness.runners.environments as environments
from harness.cli.main import app
from harness.core.errors import SubmissionError
from harness.images.engine import LABEL_REQUIREMENTS, LABEL_VERSION, engine_path
from harness.runners.environments import (
    LIST_DISTRIBUTIONS,
    check_requirements,
    image_distributions,
    refuse_unmet,
)
from harness.submission.package import load_package
from tests import hostile
from tests.conftest import REPO, SPECS

cli = CliRunner()
DEMO = SPECS / "demo.yaml"
NUMPY = metadata.version("numpy")
PYTHON = sys.executable
MIXED = [
    "numpy>=1.20",
    "Scikit_Learn>=1.0",  # installed as scikit-learn
    "zsl-absent-dist==4.5.0",
    "numpy<1",
    'lightgbm==4.5.0; python_version < "3"',  # not for this Python
]


def _package(tmp_path: Path, requirements: list[str], *, image: str | None = None) -> Path:
    root = hostile.copy_eszsl(tmp_path)
    manifest = root / "submission.yaml"
    extra = f"\n  requirements: {json.dumps(requirements)}"
    if image is not None:
        extra += f"\n  image: {image}"
    manifest.write_text(
        manifest.read_text().replace(
            "  entrypoint: model:ESZSL", "  entrypoint: model:ESZSL" + extra
        )
    )
    return root


def _refusal(root: Path, runner: str, spec: str) -> str:
    """What validation and runs print for :data:`MIXED` in the harness's Python."""
    return (
        f"error: {root}/submission.yaml:11: model.requirements: 2 of 5 not met by runner"
        f" '{runner}' (its Python: {PYTHON}):\n"
        "  zsl-absent-dist==4.5.0: zsl-absent-dist is not installed\n"
        f"  numpy<1: numpy {NUMPY} is installed\n"
        f"Run it in a container: `zsl image build --package {root}`, then `zsl run {root}"
        f" --spec {spec} --runner container` (a run without --runner picks that image once it"
        " exists).\n"
        f"Or install them into the Python runner '{runner}' uses: `{shlex.quote(PYTHON)} -m pip"
        " install zsl-absent-dist==4.5.0 'numpy<1'`\n"
    )


@pytest.mark.parametrize("runner", ["sandbox", "local"])
def test_validate_lists_every_unmet_requirement_and_what_to_do(tmp_path: Path, runner: str) -> None:
    root = _package(tmp_path, MIXED)
    result = cli.invoke(app, ["submission", "validate", str(root), "--runner", runner])
    assert result.exit_code == 1
    assert result.output == _refusal(root, runner, "SPEC")


def test_validate_names_the_requirements_it_found(tmp_path: Path) -> None:
    root = _package(tmp_path, [r for r in MIXED if r not in ("zsl-absent-dist==4.5.0", "numpy<1")])
    result = cli.invoke(app, ["submission", "validate", str(root), "--runner", "local"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == (
        "  model.requirements: numpy>=1.20, Scikit_Learn>=1.0 installed for runner 'local' (its"
        f' Python: {PYTHON}); not for this environment (marker): lightgbm==4.5.0; python_version < "3"'
    )


def test_a_run_is_refused_before_any_model_code_runs(tmp_path: Path) -> None:
    root = _package(tmp_path, MIXED)
    marker = tmp_path / "model-code-ran"
    model = root / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\n" + model.read_text())
    for extra in ([], ["--dry-run"]):
        argv = ["run", str(root), "--spec", str(DEMO), "--runner", "local", "--no-store", *extra]
        result = cli.invoke(app, argv)
        assert result.exit_code == 1
        assert result.output.endswith(_refusal(root, "local", str(DEMO))), result.output
        assert not marker.exists()


# -- the container's environment: its image --------------------------------------------------

IMAGE_ID = "sha256:" + "7" * 64
#: A docker stand-in that answers `image inspect` with an image the harness did not build (no
#: labels of its own) and `run` with $FAKE_LISTING, logging each argv.
FAKE_DOCKER = """\
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["image", "inspect"]:
    labels = json.loads(os.environ.get("FAKE_LABELS", "{}"))
    print(json.dumps({"Id": "%s", "Config": {"Labels": labels}}))
elif sys.argv[1] == "run":
    sys.stdout.write(os.environ["FAKE_LISTING"])
"""


@pytest.fixture
def listing_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in on PATH as ``docker``; returns its argv log. Listings are not cached
    across tests (the stand-in's image id is the same in each)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = tmp_path / "fake_docker.py"
    script.write_text(FAKE_DOCKER % IMAGE_ID)
    docker = bin_dir / "docker"
    docker.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.delenv("ZSL_CONTAINER_ENGINE", raising=False)
    monkeypatch.setattr(environments, "_listed", {})
    return log


def _listing(monkeypatch: pytest.MonkeyPatch, pairs: list[list[str]], **markers: str) -> None:
    answer = {"distributions": pairs, "markers": {"python_version": "3.12", **markers}}
    monkeypatch.setenv("FAKE_LISTING", json.dumps(answer))


def test_an_image_not_built_by_the_harness_is_asked_what_it_holds(
    tmp_path: Path, listing_engine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = "ghcr.io/someone/lgbm:1"
    root = _package(
        tmp_path,
        ["LightGBM==4.5.0", "numpy>=2", "scipy", 'torch; python_version < "3.12"'],
        image=image,
    )
    _listing(monkeypatch, [["lightgbm", "4.4.0"], ["numpy", "2.1.0"], ["numpy", "1.0"]])
    package = load_package(root)
    found = check_requirements(package, "container")
    assert found is not None and found.image == f"{image}@{IMAGE_ID}" and not found.labelled
    # torch's marker is the image's Python's (3.12), not this one's (3.11).
    assert found.not_here == ('torch; python_version < "3.12"',)
    with pytest.raises(SubmissionError) as err:
        refuse_unmet(found, package, spec=DEMO)
    assert str(err.value) == (
        f"{root}/submission.yaml:11: model.requirements: 2 of 4 not met by runner 'container'"
        f" (image {image}@{IMAGE_ID}):\n"
        "  LightGBM==4.5.0: LightGBM 4.4.0 is installed\n"
        "  scipy: scipy is not installed\n"
        f"Add them to image '{image}', or build one with them: `zsl image build --tag {image}"
        f" --package {root}`"
    )
    calls = [json.loads(line) for line in listing_engine.read_text().splitlines()]
    runs = [c for c in calls if c[0] == "run"]
    assert len(runs) == 1
    (run,) = runs
    for flags in (["--network", "none"], ["--cap-drop", "ALL"], ["--", IMAGE_ID, "python"]):
        assert any(run[i : i + len(flags)] == flags for i in range(len(run))), flags
    assert "--read-only" in run and run[-4:] == ["-I", "-S", "-c", LIST_DISTRIBUTIONS]
    # Listed once per image id: the next check asks the engine only about the image.
    check_requirements(package, "container")
    calls = [json.loads(line) for line in listing_engine.read_text().splitlines()]
    assert [c[0] for c in calls].count("run") == 1


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("not json", "unreadable answer"),
        ("[" * 50_000, "unreadable answer"),  # nested past the parser's recursion limit
        ('{"distributions": {}}', "lacks 'distributions' or 'markers'"),
        ('{"distributions": [["a"]], "markers": {}}', r"not a \[name, version\] pair"),
        ('{"distributions": [["a", 1]], "markers": {}}', r"not a \[name, version\] pair"),
    ],
)
def test_a_malformed_listing_is_refused(
    tmp_path: Path, listing_engine: Path, monkeypatch: pytest.MonkeyPatch, answer: str, problem: str
) -> None:
    monkeypatch.setenv("FAKE_LISTING", answer)
    package = load_package(_package(tmp_path, ["numpy"], image="someone/x:1"))
    with pytest.raises(harness.core.errors.RunnerError, match=problem):
        check_requirements(package, "container")


def test_an_image_the_harness_built_is_judged_by_its_labels(
    tmp_path: Path, listing_engine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _package(tmp_path, ["lightgbm==4.5.0"])
    package = load_package(root)
    labels = {LABEL_VERSION: harness.__version__, LABEL_REQUIREMENTS: '["lightgbm==4.5.0"]'}
    monkeypatch.setenv("FAKE_LABELS", json.dumps(labels))
    found = check_requirements(package, "container")
    assert found is not None and found.ok and found.labelled
    image = f"zsl-worker:{harness.__version__}"
    assert found.summary() == (
        f"model.requirements: lightgbm==4.5.0 built into runner 'container' (image"
        f" {image}@{IMAGE_ID})"
    )
    assert "run" not in [json.loads(line)[0] for line in listing_engine.read_text().splitlines()]
    monkeypatch.setenv("FAKE_LABELS", json.dumps({**labels, LABEL_REQUIREMENTS: "[]"}))
    with pytest.raises(
        harness.core.errors.RunnerError,
        match=rf"image '{image}' was built without lightgbm==4\.5\.0 .*: rebuild it with"
        rf" `zsl image build --package {root}`",
    ):
        check_requirements(package, "container")


def test_the_listing_runs_in_the_real_image(docker: object) -> None:
    """The worker image the session built (tests/container_fixture.py): what its Python holds,
    read from its metadata in a container without network; no container is left behind."""
    from tests.container_fixture import Engine

    assert isinstance(docker, Engine)
    listed = image_distributions(engine_path(), docker.image)
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert listed.versions["numpy"] == pins["numpy"]
    assert listed.versions["zsl-harness"] == harness.__version__
    assert listed.markers["python_version"] == "3.11"
    assert listed.markers["sys_platform"] == "linux"

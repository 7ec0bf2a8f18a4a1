"""Honest archives unpack with no friction; `zsl submission init` makes a package that runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import SubmissionError
from harness.data.prepare import load_benchmark
from harness.pipeline import generate_prediction_files, run_submission
from harness.spec import load_spec
from harness.submission.package import load_package
from harness.submission.scaffold import write_template
from harness.submission.unpack import open_package, unpack_package
from tests import hostile
from tests.conftest import SPECS, SUBMISSIONS

DEMO = SPECS / "demo.yaml"


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
@pytest.mark.parametrize("wrap", [True, False])
def test_honest_archives_load_with_the_folder_hash(tmp_path: Path, fmt: str, wrap: bool) -> None:
    archive = hostile.package_archive(tmp_path, fmt, wrap=wrap)
    package = open_package(archive, tmp_path / "work")
    assert package.name == "eszsl"
    assert package.hash() == load_package(SUBMISSIONS / "eszsl").hash()
    assert (package.root / "model.py").read_bytes() == (SUBMISSIONS / "eszsl/model.py").read_bytes()


def test_folders_pass_through(tmp_path: Path) -> None:
    assert unpack_package(SUBMISSIONS / "eszsl", tmp_path / "unused") == SUBMISSIONS / "eszsl"
    assert not (tmp_path / "unused").exists()
    assert open_package(SUBMISSIONS / "eszsl", tmp_path).name == "eszsl"


def test_destination_and_suffix_are_checked(tmp_path: Path) -> None:
    archive = hostile.package_archive(tmp_path, "zip")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(SubmissionError, match="taken: already exists; unpack into a new folder"):
        unpack_package(archive, tmp_path / "taken")
    rar = tmp_path / "eszsl.rar"
    rar.write_bytes(b"Rar!")
    with pytest.raises(SubmissionError, match=r"a \.zip, \.tar\.gz or \.tgz archive"):
        unpack_package(rar, tmp_path / "out")
    corrupt = tmp_path / "bad.zip"
    corrupt.write_bytes(b"PK not really")
    with pytest.raises(SubmissionError, match=r"bad\.zip: not a readable zip archive"):
        unpack_package(corrupt, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert unpack_package(archive, tmp_path / "empty-is-fine").name == "eszsl"


def test_macos_metadata_is_skipped(tmp_path: Path) -> None:
    archive = hostile.zip_of(
        tmp_path / "mac.zip",
        {
            "eszsl/submission.yaml": (SUBMISSIONS / "eszsl/submission.yaml").read_bytes(),
            "eszsl/model.py": (SUBMISSIONS / "eszsl/model.py").read_bytes(),
            "__MACOSX/eszsl/._model.py": b"\0\5\26\7",
        },
    )
    assert open_package(archive, tmp_path / "work").name == "eszsl"


def test_cli_validates_archives(tmp_path: Path) -> None:
    archive = hostile.package_archive(tmp_path, "tar.gz")
    result = CliRunner().invoke(app, ["submission", "validate", str(archive)])
    assert result.exit_code == 0, result.output
    assert f"ok {archive}: eszsl 1.0 (model) sha256:" in " ".join(result.output.split())
    bomb = hostile.zip_bomb(tmp_path / "bomb.zip", uncompressed_mib=200)
    result = CliRunner().invoke(app, ["submission", "validate", str(bomb)])
    assert result.exit_code == 1
    assert "a compression bomb?" in result.output


@pytest.mark.slow
def test_init_makes_a_model_package_that_runs_on_the_demo(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["submission", "init", "my-method", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "my-method"
    assert sorted(p.name for p in root.iterdir()) == ["README.md", "model.py", "submission.yaml"]
    result = CliRunner().invoke(app, ["submission", "validate", str(root)])
    assert result.exit_code == 0, result.output
    record = run_submission(root, DEMO, store=False, quiet=True)
    top1 = record.score("zsl", "top1")
    assert top1 is not None and top1.value > 3 / 20  # far above chance (1/20)
    again = CliRunner().invoke(app, ["submission", "init", "my-method", "--out", str(tmp_path)])
    assert again.exit_code == 1
    assert "already exists" in again.output


@pytest.mark.slow
def test_init_predictions_package_generates_and_runs(tmp_path: Path) -> None:
    root = write_template("my-files", tmp_path, kind="predictions")
    package = load_package(root)
    generate_prediction_files(package, load_benchmark(load_spec(DEMO)))
    record = run_submission(root, DEMO, store=False, quiet=True)
    assert record.runner == "predictions"
    top1 = record.score("zsl", "top1")
    assert top1 is not None and top1.value > 3 / 20


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["../evil"], "a package name is letters, digits"),
        (["ok", "--kind", "both"], "--kind 'both': choose 'model' or 'predictions'"),
    ],
)
def test_init_refuses_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["submission", "init", *args, "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert message in result.output

"""Submission packages: the shipped ones validate; malformed ones get one clear message."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core.errors import SubmissionError
from harness.submission.package import load_package
from tests.conftest import SUBMISSIONS


@pytest.mark.parametrize("name", sorted(p.name for p in SUBMISSIONS.iterdir() if p.is_dir()))
def test_shipped_packages_validate(name: str) -> None:
    package = load_package(SUBMISSIONS / name)
    assert package.name == name
    assert package.hash().startswith("sha256:")


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "eszsl"
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_hash_covers_every_file(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = load_package(root).hash()
    (root / "notes.txt").write_text("x")
    assert load_package(root).hash() != before
    (root / "notes.txt").unlink()
    assert load_package(root).hash() == before
    # Byte-code is not ignored any more but refused (tests/submission/test_package_integrity.py).
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"cache")
    with pytest.raises(SubmissionError, match=r"__pycache__ is a byte-code cache folder"):
        load_package(root)


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (
            lambda t: t.replace("kind: model", "kind: modle"),
            r"kind: must be one of 'predictions', 'model'; got 'modle'\. Did you mean 'model'\?",
        ),
        (lambda t: t + "colour: red\n", r"colour: unknown key"),
        (
            lambda t: t.replace("entrypoint: model:ESZSL", "entrypoint: missing:ESZSL"),
            r"module 'missing' not found",
        ),
        (
            lambda t: t.replace("entrypoint: model:ESZSL", "entrypoint: model"),
            r"model\.entrypoint: String should match",
        ),
        (lambda t: t.replace("name: eszsl", "name: ../evil"), r"name: String should match"),
        (
            lambda t: t.replace("  memory_gb: 2", "  memory_gb: -2"),
            r"resources\.memory_gb: Input should be greater than 0",
        ),
        (
            lambda t: t.replace("kind: model", "kind: [model"),
            r"submission\.yaml:\d+: not valid YAML",
        ),
        (
            lambda t: t.replace("kind: model", "kind: predictions"),
            r"submission\.yaml:\d+: kind: 'predictions' must not have a 'model' section",
        ),
    ],
)
def test_malformed_manifests(tmp_path: Path, edit, pattern: str) -> None:  # type: ignore[no-untyped-def]
    root = _copy(tmp_path)
    manifest = root / "submission.yaml"
    manifest.write_text(edit(manifest.read_text()))
    with pytest.raises(SubmissionError, match=pattern):
        load_package(root)


def _line(text: str, fragment: str) -> int:
    """The 1-based line of the first line of ``text`` that holds ``fragment``."""
    return next(n for n, line in enumerate(text.splitlines(), start=1) if fragment in line)


def _manifest_error(tmp_path: Path, edit: Callable[[str], str]) -> tuple[Path, str, str]:
    """Edit a copy's manifest; its path, its new text, and the message ``load_package`` raises."""
    root = _copy(tmp_path)
    manifest = root / "submission.yaml"
    text = edit(manifest.read_text())
    manifest.write_text(text)
    with pytest.raises(SubmissionError) as info:
        load_package(root)
    return manifest, text, str(info.value)


def test_manifest_problems_name_the_file_the_line_and_the_key(tmp_path: Path) -> None:
    manifest, text, message = _manifest_error(
        tmp_path,
        lambda t: t.replace(
            "kind: model", "kind: modle"
        ).replace(  # a value outside a literal's choices
            "  gpus: 0\n", "  gpus: two\n  network: true\n"
        ),  # a wrong type, an unknown key
    )
    assert message == (
        f"3 problems in {manifest}:\n"
        f"  {manifest}:{_line(text, 'kind:')}: kind: must be one of 'predictions', 'model';"
        " got 'modle'. Did you mean 'model'?\n"
        f"  {manifest}:{_line(text, 'gpus:')}: resources.gpus: Input should be a valid integer,"
        " unable to parse string as an integer; got 'two'\n"
        f"  {manifest}:{_line(text, 'network:')}: resources.network: unknown key 'network'."
        " Allowed keys: cpus, gpus, memory_gb, time_s"
    )


def test_unknown_manifest_keys_suggest_the_closest_and_list_the_allowed(tmp_path: Path) -> None:
    manifest, text, message = _manifest_error(tmp_path, lambda t: t.replace("authors:", "autors:"))
    assert message == (
        f"2 problems in {manifest}:\n"
        f"  {manifest}:1: authors: required key is missing\n"  # a missing key: its mapping's line
        f"  {manifest}:{_line(text, 'autors:')}: autors: unknown key 'autors'. Did you mean"
        " 'authors'? Allowed keys: authors, bibtex, code, declarations, description, kind, model,"
        " name, paper, predictions, resources, seed, url, version"
    )


def test_a_whole_manifest_check_is_placed_at_the_key_it_names(tmp_path: Path) -> None:
    manifest, text, message = _manifest_error(
        tmp_path, lambda t: t.replace("kind: model", "kind: predictions")
    )
    assert message == (
        f"1 problem in {manifest}:\n"
        f"  {manifest}:{_line(text, 'kind:')}: kind: 'predictions' must not have a 'model' section"
    )


def test_links_and_missing_manifest_are_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "link").symlink_to("/etc/passwd")
    with pytest.raises(SubmissionError, match="link is a symbolic link"):
        load_package(root)
    with pytest.raises(SubmissionError, match=r"no submission\.yaml"):
        load_package(tmp_path)


# --- item 10b: prediction files not generated yet; item 21: the prediction-file scaffold -----


def test_missing_prediction_files_name_the_command_that_writes_them(tmp_path: Path) -> None:
    from harness.core.errors import PredictionError
    from harness.submission.scaffold import write_template

    root = write_template("files", tmp_path, kind="predictions")
    package = load_package(root)
    with pytest.raises(PredictionError) as info:
        package.prediction_files("demo", ["zsl", "gzsl"], spec="specs/demo.yaml")
    assert str(info.value) == (
        f"{package.root}: 2 prediction file(s) for benchmark 'demo' not found:"
        " predictions/demo.zsl.safetensors, predictions/demo.gzsl.safetensors; write them with"
        " its generator (make_predictions.py): `zsl submission generate"
        f" {package.root} --spec specs/demo.yaml`"
    )
    # Without a generator there is no command to name: the files are the package's to add.
    manifest = root / "submission.yaml"
    manifest.write_text(manifest.read_text().replace("  generator: make_predictions.py\n", ""))
    with pytest.raises(PredictionError) as info:
        load_package(root).prediction_files("demo", ["zsl"])
    assert str(info.value) == (
        f"{package.root}: 1 prediction file(s) for benchmark 'demo' not found:"
        " predictions/demo.zsl.safetensors; the package has no predictions.generator, so add the"
        " files themselves (predictions.files: predictions/{benchmark}.{setting}.safetensors)"
    )
    (root / "predictions").mkdir()
    (root / "predictions" / "demo.zsl.safetensors").write_bytes(b"")
    assert load_package(root).prediction_files("demo", ["zsl"]) == {
        "zsl": (root / "predictions" / "demo.zsl.safetensors").resolve()
    }


def test_prediction_file_scaffold_describes_prediction_files(tmp_path: Path) -> None:
    from harness.submission.scaffold import write_template

    where = write_template("files", tmp_path, kind="predictions")
    files = load_package(where)
    model = load_package(write_template("code", tmp_path, kind="model"))
    assert files.manifest.description == (
        "Prediction files, one per benchmark and setting, written by make_predictions.py from"
        " the benchmark's task bundle (it fits the example ridge regression of model.py)."
        " Replace the generator, or the files, with your method's predictions."
    )
    assert model.manifest.description.startswith("Ridge regression from features to class")
    readme = (files.root / "README.md").read_text()
    assert readme.startswith(
        "# files\n\nA prediction-file package made by `zsl submission init --kind predictions`:"
        " `zsl run` scores\nthe prediction files it holds and runs none of its code.\n"
    )
    for needle in (
        "`predictions/<benchmark>.<setting>.safetensors`",
        "`make_predictions.py BUNDLE_DIR OUT_DIR`",
        f"zsl submission generate {where} --spec specs/demo.yaml\n",
        f"zsl submission validate {where} --spec specs/demo.yaml\n",
        f"zsl run {where} --spec specs/demo.yaml\n",
    ):
        assert needle in readme, needle
    # The model's protocol is the model package's business, not this one's.
    assert (
        "keep the protocol" not in readme
        and "keep the protocol" in (model.root / "README.md").read_text()
    )

"""``zsl image build`` without an engine: its inputs, their checks, the commands it suggests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from harness.core.errors import SubmissionError
from harness.images import BuildInputs, ImageError, build_command, collect_requirements
from harness.images.build import source_tree
from harness.images.rootfs import _label, base_identity, rootfs_python
from harness.submission.package import check_requirement, load_package
from tests.conftest import SUBMISSIONS

VERSION = harness.__version__


def test_requirements_are_pep508_names_from_an_index() -> None:
    assert check_requirement("torch==2.13.0") == "torch==2.13.0"
    assert check_requirement("scikit-image >= 0.22") == "scikit-image>=0.22"
    for bad in (
        "-r /etc/passwd",
        "--index-url=http://evil",
        "foo @ file:///etc/shadow",
        "bar @ https://example.com/x.whl",
        "",
        "x" * 201,
        "torch==2.13.0\n--pre",
    ):
        with pytest.raises(ValueError):
            check_requirement(bad)


def test_a_package_with_a_bad_requirement_is_refused_naming_the_key(tmp_path: Path) -> None:
    dest = tmp_path / "pkg"
    shutil.copytree(SUBMISSIONS / "ale", dest, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = dest / "submission.yaml"
    manifest.write_text(
        manifest.read_text().replace('"torch>=2.13,<2.15"', '"t @ file:///etc/shadow"')
    )
    with pytest.raises(
        SubmissionError, match=r"submission\.yaml:10: model\.requirements: .*direct reference"
    ):
        load_package(dest)


def test_requirements_of_packages_and_folders_of_packages() -> None:
    assert collect_requirements([SUBMISSIONS / "eszsl"]) == ()
    assert collect_requirements([SUBMISSIONS / "ale"]) == ("torch<2.15,>=2.13",)
    assert collect_requirements([SUBMISSIONS]) == ("torch<2.15,>=2.13",)
    assert collect_requirements([], gpu=True) == ("torch",)
    with pytest.raises(ImageError, match="neither a package"):
        collect_requirements([SUBMISSIONS.parent / "specs"])


def test_digest_covers_requirements_pins_base_and_source(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "harness").mkdir(parents=True)
    (source / "pyproject.toml").write_text("[project]\n")
    (source / "harness" / "worker.py").write_text("x = 1\n")
    (source / "harness" / "__pycache__").mkdir()
    (source / "harness" / "__pycache__" / "worker.cpython-311.pyc").write_bytes(b"\0")
    inputs = BuildInputs(source, (), "numpy==2\n", gpu=False)
    digest = inputs.digest("base")
    assert digest == BuildInputs(source, (), "numpy==2\n", gpu=False).digest("base")
    assert digest != inputs.digest("other-base")
    assert digest != BuildInputs(source, ("torch",), "numpy==2\n", gpu=False).digest("base")
    assert digest != BuildInputs(source, (), "numpy==3\n", gpu=False).digest("base")
    (source / "harness" / "worker.py").write_text("x = 2\n")
    assert digest != inputs.digest("base")
    copied = inputs.copy_source(tmp_path / "copy")
    assert sorted(str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()) == [
        "harness/worker.py",
        "pyproject.toml",
    ]


def test_the_shipped_containerfile_and_source_tree() -> None:
    root = source_tree()
    assert (root / "harness" / "images" / "Containerfile").is_file()
    text = (root / "harness" / "images" / "Containerfile").read_text()
    assert "compileall" in text and "USER ${UID}" in text and "ARG BASE=python:3.11-slim" in text


def test_build_commands_in_messages() -> None:
    assert build_command(f"zsl-worker:{VERSION}") == "zsl image build"
    assert build_command(f"zsl-worker:{VERSION}-gpu") == "zsl image build --gpu"
    assert (
        build_command("my/img:1", [Path("pkg")], offline=True)
        == "zsl image build --tag my/img:1 --package pkg --rootfs DIR"
    )


def test_rootfs_checks(tmp_path: Path) -> None:
    assert base_identity(tmp_path / "missing").startswith("debootstrap:bookworm")
    (tmp_path / "empty").mkdir()
    assert base_identity(tmp_path / "empty").startswith("debootstrap:")
    bad = tmp_path / "bad"
    (bad / "usr" / "bin").mkdir(parents=True)
    (bad / "etc").mkdir()
    with pytest.raises(ImageError, match="not a root file system with Python"):
        base_identity(bad)
    (bad / "usr" / "bin" / "python3.11").write_text("")
    (bad / "usr" / "bin" / "python3").symlink_to("python3.11")
    assert rootfs_python(bad) == "3.11"
    assert base_identity(bad).startswith("rootfs:python3.11:sha256:")


def test_labels_are_quoted_for_docker_import() -> None:
    assert _label("k", '["a==1", "b>=2; python_version > \\"3\\""]') == (
        'LABEL k="[\\"a==1\\", \\"b>=2; python_version > \\\\\\"3\\\\\\"\\"]"'
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "--privileged"], "--tag: "),
        (["--tag", "Bad:Tag x"], "--tag: "),
        (["--base-image", "a=b"], "--base-image: "),
        (["--engine", "lxc"], "not supported"),
    ],
)
def test_cli_refuses_bad_options_in_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["image", "build", *args])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output

"""The code that runs is the code that was hashed.

Attack (issue 10, item 3): a ``__pycache__/model.cpython-311.pyc`` compiled as an
*unchecked-hash* pyc from other source ran instead of the benign ``model.py`` beside it, and the
package hash was the same with or without it. Rule: every file Python could import or run in
place of the source (byte-code, ``__pycache__``, extension modules and shared libraries, ``.pth``
files) is refused by package validation, folders and archives alike, with a message naming the
file and what to do; every other file is hashed (nothing is silently ignored); and the worker
imports source only, so even a package that skipped validation runs its ``.py`` files.

Validation refusals go through ``run_submission`` under the ``sandbox`` and ``local`` runners on
a temporary SQLite database that must stay empty; the bypass cases run the worker directly.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.bundles import write_model_bundles
from harness.cli.main import app
from harness.core.errors import SubmissionError
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.pipeline import run_submission
from harness.runners import RunJob, default_runner, runners
from harness.runners.sandbox import available
from harness.spec import load_spec
from harness.submission.loader import check_entrypoint
from harness.submission.package import Package, load_package
from harness.submission.unpack import open_package
from tests import hostile
from tests.conftest import REPO, SPECS, SUBMISSIONS, stored_runs

DEMO = SPECS / "demo.yaml"
RUNNERS = [
    pytest.param(
        "sandbox",
        marks=pytest.mark.skipif(
            not available(), reason="bubblewrap (bwrap) is missing or cannot create a sandbox here"
        ),
    ),
    "local",
]
PYCACHE = (
    "__pycache__ is a byte-code cache folder: Python runs the .pyc files in it instead of the"
    " source the package hash covers. Delete it and ship only the .py source"
)
BYTECODE = (
    "is compiled Python byte-code, which Python runs instead of (or without) the .py source."
    " Delete it and ship the .py source"
)
NATIVE = (
    "is a compiled extension module or shared library, which Python imports in preference to"
    " .py source. Delete it and ship source; compiled dependencies belong in"
    " model.requirements or model.image"
)
PTH = "is a .pth file, whose import lines Python runs at start-up. Delete it"
EXTENSION = importlib.machinery.EXTENSION_SUFFIXES[0]  # .cpython-311-x86_64-linux-gnu.so here


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zsl-home-integrity")


@pytest.fixture(autouse=True)
def isolated_home(shared_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One frozen demo for the whole module (the cases only read it)."""
    monkeypatch.setenv("ZSL_HOME", str(shared_home))
    monkeypatch.delenv("ZSL_DATABASE_URL", raising=False)
    return shared_home


@pytest.fixture
def bench() -> PreparedBenchmark:
    return load_benchmark(load_spec(DEMO))


@pytest.fixture
def db(db: str) -> Iterator[str]:
    """The shared fresh store, which must hold no run afterwards: every case here is refused."""
    yield db
    assert stored_runs(db) == 0, "a refused submission left a record"


def _refused(package: Path, runner: str, db: str, message: str) -> None:
    with pytest.raises(SubmissionError) as info:
        run_submission(package, DEMO, runner=runner, database_url=db, store=True, quiet=True)
    assert str(info.value) == message


# --- validation: refused, with the file named ----------------------------------------------


@pytest.mark.parametrize("runner", RUNNERS)
def test_hidden_bytecode_beside_benign_source(tmp_path: Path, runner: str, db: str) -> None:
    root = hostile.source_model_package(tmp_path)
    clean = load_package(root).hash()
    hostile.malicious_pyc(hostile.cache_path(root / "model.py"))
    _refused(root, runner, db, f"{root.resolve()}: {PYCACHE}")
    # No hash can be made that leaves the byte-code out: it was identical with or without it.
    manifest = load_package(hostile.source_model_package(tmp_path / "twin")).manifest
    with pytest.raises(SubmissionError, match=re.escape(PYCACHE)):
        Package(root.resolve(), manifest).hash()
    for pyc in (root / "__pycache__").iterdir():
        pyc.unlink()
    (root / "__pycache__").rmdir()
    assert load_package(root).hash() == clean


@pytest.mark.parametrize("runner", RUNNERS)
def test_sourceless_pyc_without_model_py(tmp_path: Path, runner: str, db: str) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / "model.py").unlink()
    hostile.malicious_pyc(root / "model.pyc")
    _refused(root, runner, db, f"{root.resolve()}: model.pyc {BYTECODE}")


@pytest.mark.parametrize("runner", RUNNERS)
def test_extension_module_named_like_the_entrypoint(tmp_path: Path, runner: str, db: str) -> None:
    root = hostile.source_model_package(tmp_path)
    # Junk bytes: the refusal comes before anything would try to load it.
    (root / f"model{EXTENSION}").write_bytes(b"\x7fELF not really" + bytes(64))
    _refused(root, runner, db, f"{root.resolve()}: model{EXTENSION} {NATIVE}")


@pytest.mark.parametrize(
    "name", [f"helpers/scale{EXTENSION}", "model.abi3.so", "libblas.so.3", "x.pyd", "x.dylib"]
)
def test_every_native_suffix_is_refused(tmp_path: Path, name: str) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / name).write_bytes(b"junk")
    with pytest.raises(SubmissionError) as info:
        load_package(root)
    assert str(info.value) == f"{root.resolve()}: {name} {NATIVE}"


@pytest.mark.parametrize("runner", RUNNERS)
def test_pth_file(tmp_path: Path, runner: str, db: str) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / "zz_startup.pth").write_text("import os; os.system('touch /tmp/pwned')\n")
    _refused(root, runner, db, f"{root.resolve()}: zz_startup.pth {PTH}")


@pytest.mark.parametrize("runner", RUNNERS)
def test_pycache_in_a_subpackage(tmp_path: Path, runner: str, db: str) -> None:
    root = hostile.source_model_package(tmp_path)
    hostile.malicious_pyc(hostile.cache_path(root / "helpers" / "scale.py"))
    _refused(root, runner, db, f"{root.resolve()}: helpers/{PYCACHE}")


def test_several_offenders_name_the_first_and_count_the_rest(tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    hostile.malicious_pyc(hostile.cache_path(root / "helpers" / "scale.py"))
    hostile.malicious_pyc(root / "zz.pyo")
    (root / "a.pth").write_text("")
    with pytest.raises(SubmissionError) as info:
        load_package(root)
    assert str(info.value) == f"{root.resolve()}: a.pth {PTH} (2 more such file(s))"


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
@pytest.mark.parametrize("runner", RUNNERS)
def test_hidden_bytecode_inside_an_archive(tmp_path: Path, fmt: str, runner: str, db: str) -> None:
    root = hostile.source_model_package(tmp_path / "src")
    hostile.malicious_pyc(hostile.cache_path(root / "model.py"))
    archive = hostile.archive_of_folder(root, tmp_path / f"pkg.{fmt}")
    pattern = re.escape(f"{tmp_path / 'work'}/") + r"pkg-\w+/package/pkg: " + re.escape(PYCACHE)
    with pytest.raises(SubmissionError) as info:
        open_package(archive, tmp_path / "work")
    assert re.fullmatch(pattern, str(info.value)), info.value
    with pytest.raises(SubmissionError) as info:
        run_submission(archive, DEMO, runner=runner, database_url=db, store=True, quiet=True)
    assert re.fullmatch(r"/\S+/package/pkg: " + re.escape(PYCACHE), str(info.value)), info.value


def test_tool_folders_are_hashed_not_ignored(tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    hashes = {load_package(root).hash()}
    (root / ".pytest_cache" / "v").mkdir(parents=True)
    (root / ".pytest_cache" / "v" / "lastfailed").write_text("{}")
    hashes.add(load_package(root).hash())
    (root / ".ipynb_checkpoints").mkdir()
    (root / ".ipynb_checkpoints" / "model-checkpoint.py").write_text("print('x')\n")
    hashes.add(load_package(root).hash())
    assert len(hashes) == 3
    assert ".pytest_cache/v/lastfailed" in [
        p.relative_to(root.resolve()).as_posix() for p in load_package(root).files()
    ]


def _old_style_hash(root: Path) -> str:
    """The hash formula the stored run records were made with (sorted pathlib walk)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            rel = path.relative_to(root).as_posix()
            digest.update(f"{rel}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return "sha256:" + digest.hexdigest()


@pytest.mark.parametrize(
    "name", sorted(p.parent.name for p in SUBMISSIONS.glob("*/submission.yaml"))
)
def test_shipped_package_hashes_are_unchanged(name: str) -> None:
    # Stored records bind these hashes: the new walk must order and hash files as before.
    package = load_package(SUBMISSIONS / name)
    assert package.hash() == _old_style_hash(package.root)


def test_hash_orders_nested_files_as_before(tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / "helpers.txt").write_text("a sibling that sorts differently as a string\n")
    (root / "helpers" / "a-b").write_text("x")
    assert load_package(root).hash() == _old_style_hash(root.resolve())


def test_validate_lists_what_a_reviewer_should_look_at(tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / "weights.bin").write_bytes(b"\0" * 16)
    (root / "helpers" / "fast.pyx").write_text("# cython\n")
    (root / "LICENSE").write_text("MIT\n")
    (root / "README.md").write_text("# readme\n")
    result = CliRunner().invoke(app, ["submission", "validate", str(root)])
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())  # the console wraps long lines at its width
    assert words == (
        f"ok {root}: source-only 1.0 (model) {load_package(root).hash()}"
        " entrypoint model:Model: imports, builds with Model() and has fit(task),"
        " save(directory), load(directory) and predict(features, candidates) (checked in runner"
        f" '{default_runner(load_package(root))}')"
        " 8 files hashed"
        " review: helpers/fast.pyx (neither .py source nor plain data)"
        " review: weights.bin (neither .py source nor plain data)"
    )


# --- validation bypassed: the worker still runs only the source -----------------------------


def _bundle(bench: PreparedBenchmark, tmp_path: Path) -> Path:
    """The main fit's model bundle (what a fit run gets)."""
    write_model_bundles(bench, tmp_path / "bundles", tmp_path / "secret")
    return tmp_path / "bundles" / "main"


def _worker(bundle: Path, package: Path, entrypoint: str, out: Path) -> dict[str, object]:
    """``python -m harness.worker.phases`` on ``package`` with no validation in front of it, and
    without PYTHONDONTWRITEBYTECODE: the loader itself must neither read nor write byte-code."""
    out.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(out), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.worker.phases",
            "fit",
            str(bundle),
            str(package),
            entrypoint,
            str(out),
        ],
        env=env,
        cwd=out,
        capture_output=True,
        text=True,
        timeout=300,
    )
    status: dict[str, object] = json.loads((out / "worker.json").read_text())
    status["returncode"] = done.returncode
    return status


def _cache_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.pyc"))


def test_worker_ignores_hidden_bytecode(bench: PreparedBenchmark, tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    planted = [
        hostile.malicious_pyc(hostile.cache_path(root / "model.py")),
        hostile.malicious_pyc(hostile.cache_path(root / "helpers" / "scale.py")),
    ]
    before = _cache_files(root)
    status = _worker(_bundle(bench, tmp_path), root, "model:Model", tmp_path / "out")
    assert status["exit_code"] == 0, status  # the byte-code would have failed the run
    assert not (tmp_path / "out" / "pwned").exists(), "the hidden byte-code ran"
    assert _cache_files(root) == before  # and nothing was cached into the package
    assert all(p.is_file() for p in planted)


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_runners_ignore_hidden_bytecode(
    bench: PreparedBenchmark, tmp_path: Path, runner: str
) -> None:
    root = hostile.source_model_package(tmp_path)
    hostile.malicious_pyc(hostile.cache_path(root / "model.py"))
    hostile.malicious_pyc(hostile.cache_path(root / "helpers" / "scale.py"))
    out = tmp_path / "out"
    out.mkdir()
    job = RunJob(
        bundle=_bundle(bench, tmp_path),
        package=root,
        entrypoint="model:Model",
        out=out,
        timeout_s=300,
        memory_gb=2,
    )
    outcome = runners.get(runner).run(job)
    assert outcome.ok, (outcome.reason, outcome.stderr[-2000:])  # the byte-code fails a run
    assert "hidden byte-code ran" not in outcome.stderr
    assert not (out / "pwned").exists(), "the hidden byte-code ran"


def test_worker_never_imports_a_sourceless_pyc(bench: PreparedBenchmark, tmp_path: Path) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / "model.py").unlink()
    hostile.malicious_pyc(root / "model.pyc")
    status = _worker(_bundle(bench, tmp_path), root, "model:Model", tmp_path / "out")
    assert not (tmp_path / "out" / "pwned").exists(), "the sourceless byte-code ran"
    assert status["exit_code"] == 3
    assert status["message"] == (
        f"SubmissionError: entrypoint 'model:Model': no module 'model' as .py source in {root}"
        " (byte-code and compiled extension modules are never imported)"
    )


def test_worker_prefers_source_to_an_extension_module(
    bench: PreparedBenchmark, tmp_path: Path
) -> None:
    root = hostile.source_model_package(tmp_path)
    (root / f"model{EXTENSION}").write_bytes(b"\x7fELF not really" + bytes(64))
    status = _worker(_bundle(bench, tmp_path), root, "model:Model", tmp_path / "out")
    assert status["exit_code"] == 0, status  # default import would try (and fail) to load the .so


@pytest.mark.slow
@pytest.mark.parametrize(
    ("entrypoint", "message"),
    [
        (
            "json:JSONDecoder",
            "SubmissionError: entrypoint 'json:JSONDecoder': module 'json' comes from {json},"
            " not from the package's .py source; give the package's module another name",
        ),
        (
            "model:Missing",
            "SubmissionError: entrypoint 'model:Missing': {root}/model.py defines no class"
            " 'Missing'",
        ),
        (
            "model:np",
            "SubmissionError: entrypoint 'model:np': {root}/model.py defines no class 'np'",
        ),
    ],
)
def test_worker_entrypoint_must_be_a_class_of_the_package(
    bench: PreparedBenchmark, tmp_path: Path, entrypoint: str, message: str
) -> None:
    root = hostile.source_model_package(tmp_path)
    status = _worker(_bundle(bench, tmp_path), root, entrypoint, tmp_path / "out")
    assert status["exit_code"] == 3
    json_origin = importlib.util.find_spec("json")
    assert json_origin is not None
    assert status["message"] == message.format(root=root, json=json_origin.origin)


@pytest.mark.parametrize(
    "entrypoint", ["model", "model:", ":Model", "model:Model:x", "../model:Model", "mo del:M", ""]
)
def test_entrypoint_is_checked_again_by_the_loader(entrypoint: str) -> None:
    with pytest.raises(SubmissionError) as info:
        check_entrypoint(entrypoint)
    assert str(info.value) == (
        f"entrypoint {entrypoint!r}: expected 'module:Class' (a dotted module path inside the"
        " package, a colon, a class name; ASCII letters, digits and _)"
    )
    assert check_entrypoint("pkg.sub.model:Model") == ("pkg.sub.model", "Model")


# --- the test suite itself leaves no byte-code in the shipped packages ----------------------


def test_importing_a_submission_in_tests_writes_no_bytecode() -> None:
    assert sys.dont_write_bytecode, "tests/conftest.py must set sys.dont_write_bytecode"
    path = SUBMISSIONS / "eszsl" / "model.py"
    spec = importlib.util.spec_from_file_location("integrity_eszsl", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not hostile.cache_path(path).exists()


def test_no_bytecode_under_submissions() -> None:
    left = sorted(
        p.relative_to(SUBMISSIONS).as_posix()
        for p in SUBMISSIONS.rglob("*")
        if p.name == "__pycache__" or p.suffix in (".pyc", ".pyo")
    )
    assert left == [], f"byte-code under submissions/ makes those packages invalid: {left}"

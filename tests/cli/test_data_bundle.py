"""`zsl data bundle` (issue 29, item 4): the task a predictions generator gets, written for
prediction files made outside the harness, and the example script that makes them without it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness import bundles
from harness.bundles import Bundle, write_bundle
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.data.prepare import load_benchmark
from harness.spec import load_spec
from harness.store import load_runs, open_store
from tests.conftest import REPO, SPECS

DEMO = SPECS / "demo.yaml"
EXAMPLE = REPO / "docs" / "examples" / "make_prediction_files.py"
GUIDE = REPO / "docs" / "guides" / "prediction-files.md"

runner = CliRunner()


def _zsl(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_bundle_writes_the_generator_bundle_and_names_the_hash(tmp_path: Path) -> None:
    out = tmp_path / "bundles" / "demo"
    code, stdout, stderr = _zsl("data", "bundle", str(DEMO), "--out", str(out))
    assert code == 0, stderr
    bench = load_benchmark(load_spec(DEMO))
    files = _files(out)
    size = sum(len(data) for data in files.values())
    assert stdout.splitlines() == [
        f"wrote the task bundle of demo v1 to {out} ({len(files)} files,"
        f" {size / 2**20:.1f} MiB; no test labels)",
        f"  benchmark_hash: {bench.hash} (every prediction file carries it)",
        f"  main fit ({out}): settings zsl, gzsl, scale",
        f"  validation fit ({out / 'validation'}): settings zsl_val, gzsl_val, scale_val",
        f"  class_order_hash of each setting: {out / 'task.json'}",
        "then: one prediction file per setting (6), e.g. in a predictions package"
        " predictions/demo.<setting>.safetensors; see docs/guides/prediction-files.md",
    ]
    # What write_bundle writes for a generator, file for file (the test order is a fresh
    # secret draw per bundle, so only the test images and rows differ).
    reference = write_bundle(bench, tmp_path / "reference")
    assert sorted(files) == sorted(_files(reference))
    shuffled = {"test/features.npy", "validation/test/features.npy"}
    shuffled |= {name for name in files if name.endswith("/rows.npy")}
    for name in sorted(set(files) - shuffled):
        assert files[name] == (reference / name).read_bytes(), name
    assert not [name for name in files if "label" in name and "test" in name]
    bundle = Bundle(out)
    task = json.loads(files["task.json"])
    assert task["benchmark_hash"] == bench.hash
    assert task["class_order_hashes"] == {
        s: bench.class_order_hash(s) for s in bench.spec.prediction_settings()
    }
    for setting in bench.spec.prediction_settings():  # each setting's images, in file order
        features, candidates = bundle.test(setting)
        np.testing.assert_array_equal(features, bench.array("features")[bench.rows(setting)])
        np.testing.assert_array_equal(candidates, bench.columns(setting))
    assert out.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in out.parent.iterdir()] == ["demo"]  # no temporary folder left


def test_bundle_goes_into_an_empty_folder_and_refuses_one_with_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, stderr = _zsl("data", "bundle", str(DEMO), "--out", str(empty))
    assert code == 0, stderr
    assert (empty / "task.json").is_file()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    for out in (kept, kept / "notes.txt"):
        code, stdout, stderr = _zsl("data", "bundle", str(DEMO), "--out", str(out))
        assert (code, stdout) == (1, "")
        assert stderr == (
            f"error: {out}: not an empty folder; a task bundle is written into a new or empty"
            " folder (choose another --out)\n"
        )
    assert _files(kept) == {"notes.txt": b"mine"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "kept"]


def test_a_failed_bundle_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_benchmark(load_spec(DEMO))

    def half(bench: object, out: Path) -> Path:
        (out / "task.json").write_text("{}")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundles, "write_bundle", half)
    out = tmp_path / "b"
    with pytest.raises(HarnessError, match=rf"^cannot write {re.escape(str(out))}: \[Errno 28\]"):
        bundles.export_bundle(bench, out)
    assert list(tmp_path.iterdir()) == []


def test_the_guide_shows_the_example_script_as_shipped() -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), re.MULTILINE | re.DOTALL)
    assert EXAMPLE.read_text() in blocks


@pytest.mark.slow  # a bundle, the script, and a scored run (about 3 s)
def test_prediction_files_made_outside_the_harness_are_scored(tmp_path: Path) -> None:
    bundle = tmp_path / "demo-bundle"
    assert _zsl("data", "bundle", str(DEMO), "--out", str(bundle))[0] == 0
    package = tmp_path / "ridge-outside"
    # The script as a user runs it, in a process where `import harness` fails.
    blocked = (
        "import runpy, sys; sys.modules['harness'] = None;"
        f" sys.argv = [{str(EXAMPLE)!r}, *sys.argv[1:]];"
        f" runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [sys.executable, "-I", "-c", blocked, str(bundle), str(package / "predictions")],
        check=True,
        cwd=tmp_path,
        env=env,
    )
    (package / "submission.yaml").write_text(
        'name: ridge-outside\nversion: "1.0"\nauthors: [Someone]\nkind: predictions\n'
        "predictions:\n  files: predictions/{benchmark}.{setting}.safetensors\n"
    )
    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    code, stdout, stderr = _zsl("run", str(package), "--spec", str(DEMO), "--database-url", db)
    assert code == 0, stderr
    assert stdout.startswith("ridge-outside on demo")
    [record] = load_runs(open_store(db))
    spec = load_spec(DEMO)
    assert (record.submission.name, record.runner) == ("ridge-outside", "predictions")
    assert sorted(record.predictions_hashes) == sorted(spec.prediction_settings())
    top1 = record.score("zsl", "top1")
    # Far above chance (1/20): rows and columns are in the contract's order.
    assert top1 is not None and top1.value > 0.5

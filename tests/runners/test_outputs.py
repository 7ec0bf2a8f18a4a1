"""Reading a run's output folder without trust, and mapping the worker's rows back.

The folder is writable by model code for the whole run. Attacks: links out of it (to
/etc/shadow, /proc/self/environ, the frozen labels, a file elsewhere), a fifo, a folder or a
hard link where a file should be, an oversized or malformed file. Rule: every one is a
RunnerError naming the file (never a traceback, never a PredictionError from reading the
target), and nothing is stored.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import harness.pipeline as pipeline
from harness.core.errors import RunnerError
from harness.data.prepare import load_benchmark
from harness.pipeline import read_all, run_submission
from harness.runners.local import LocalRunner
from harness.spec import load_spec
from tests.conftest import SPECS, SUBMISSIONS, stored_runs

DEMO = SPECS / "demo.yaml"
SHAPE = (5, 3)
# The harness-side reader is imported inside the tests that use it, so that the end-to-end
# tests below also run (and fail) against a harness without it.


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    np.save(folder / "zsl.scores.npy", np.arange(15, dtype=np.float32).reshape(SHAPE))
    (folder / "worker.json").write_text('{"exit_code": 0}')
    return folder


def _read(out: Path, name: str = "zsl.scores.npy") -> np.ndarray:
    from harness.runners.outputs import FLOATS, OutputDir

    with OutputDir(out) as folder:
        return folder.read_array(name, shape=SHAPE, dtypes=FLOATS)


def test_an_honest_file_reads_back(out: Path) -> None:
    from harness.runners.outputs import read_worker_status

    np.testing.assert_array_equal(_read(out), np.arange(15).reshape(SHAPE))
    assert read_worker_status(out) == {"exit_code": 0}


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    make(path)


def _etc_shadow(path: Path) -> None:
    path.symlink_to("/etc/shadow")


def _proc_environ(path: Path) -> None:
    path.symlink_to("/proc/self/environ")


def _relative_link(path: Path) -> None:
    outside = path.parent.parent / "elsewhere.npy"
    np.save(outside, np.ones(SHAPE, dtype=np.float32))
    path.symlink_to(os.path.relpath(outside, path.parent))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _hard_link(path: Path) -> None:
    outside = path.parent.parent / "hard.npy"
    np.save(outside, np.ones(SHAPE, dtype=np.float32))
    os.link(outside, path)


def _oversized(path: Path) -> None:
    np.save(path, np.ones((SHAPE[0] * 1000, SHAPE[1]), dtype=np.float64))


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(200))


def _wrong_shape(path: Path) -> None:
    np.save(path, np.ones((SHAPE[0] + 1, SHAPE[1]), dtype=np.float32))


def _wrong_dtype(path: Path) -> None:
    np.save(path, np.ones(SHAPE, dtype=np.int32))


def _truncated(path: Path) -> None:
    np.save(path, np.ones(SHAPE, dtype=np.float32))
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size - 4)


def _pickled(path: Path) -> None:
    array = np.empty(SHAPE, dtype=object)
    np.save(path, array, allow_pickle=True)


CASES = {
    "link to /etc/shadow": (_etc_shadow, r"is a symbolic link; the harness never follows links"),
    "link to /proc/self/environ": (_proc_environ, r"is a symbolic link"),
    "relative link out": (_relative_link, r"is a symbolic link"),
    "fifo": (_fifo, r"is a fifo, not a file the worker wrote"),
    "folder": (_folder, r"is a folder, not a file the worker wrote"),
    "hard link": (_hard_link, r"has 2 hard links"),
    "oversized": (_oversized, r"holds \d+ bytes, more than the \d+ its expected content can take"),
    "garbage": (_garbage, r"not a valid \.npy file"),
    "wrong shape": (_wrong_shape, r"holds float32 \(6, 3\); expected"),
    "wrong dtype": (_wrong_dtype, r"holds int32 \(5, 3\); expected"),
    "truncated": (_truncated, r"bytes where the header says"),
    "pickled object array": (_pickled, r"holds object \(5, 3\); expected"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_array_file_is_a_runner_error_naming_it(out: Path, case: str) -> None:
    make, message = CASES[case]
    target = out / "zsl.scores.npy"
    _replace(target, make)
    with pytest.raises(RunnerError, match=message) as info:
        _read(out)
    assert str(info.value).startswith(f"{target}: ")


@pytest.mark.parametrize(
    "make", [_etc_shadow, _proc_environ, _fifo, _folder, _garbage], ids=lambda f: f.__name__
)
def test_hostile_worker_json_is_a_runner_error_naming_it(out: Path, make) -> None:  # type: ignore[no-untyped-def]
    from harness.runners.outputs import read_worker_status

    target = out / "worker.json"
    _replace(target, make)
    with pytest.raises(RunnerError) as info:
        read_worker_status(out)
    assert str(info.value).startswith(f"{target}: ")


def test_copy_goes_through_the_checked_descriptor(out: Path, tmp_path: Path) -> None:
    """For a generator's prediction files: copied only when they are files of the folder."""
    from harness.runners.outputs import OutputDir

    with OutputDir(out) as folder:
        dest = folder.copy_to("zsl.scores.npy", tmp_path / "kept" / "zsl.npy", limit=1 << 20)
        np.testing.assert_array_equal(np.load(dest), np.arange(15).reshape(SHAPE))
        _replace(out / "zsl.scores.npy", _etc_shadow)
        with pytest.raises(RunnerError, match=r"zsl\.scores\.npy: is a symbolic link"):
            folder.copy_to("zsl.scores.npy", tmp_path / "kept" / "other.npy", limit=1 << 20)
        with pytest.raises(RunnerError, match=r"worker\.json: holds \d+ bytes, more than the 4"):
            folder.copy_to("worker.json", tmp_path / "kept" / "w.json", limit=4)
    assert not (tmp_path / "kept" / "other.npy").exists()


def test_worker_json_must_be_an_object_of_bounded_size(out: Path) -> None:
    from harness.runners.outputs import read_worker_status

    (out / "worker.json").write_text("[1, 2]")
    with pytest.raises(RunnerError, match=r"worker\.json: must hold a JSON object"):
        read_worker_status(out)
    (out / "worker.json").write_text(" " * (2 << 20) + "{}")
    with pytest.raises(RunnerError, match=r"worker\.json: holds \d+ bytes, more than"):
        read_worker_status(out)


def test_missing_file_and_linked_folder(out: Path, tmp_path: Path) -> None:
    with pytest.raises(RunnerError, match=r"gzsl\.scores\.npy: missing"):
        _read(out, "gzsl.scores.npy")
    with pytest.raises(RunnerError, match=r"not a file name of the output folder"):
        _read(out, "../out/zsl.scores.npy")
    link = tmp_path / "linked-out"
    link.symlink_to(out)
    with pytest.raises(RunnerError, match=r"cannot open the run's output folder"):
        _read(link)


# --- mapping the passes' rows back into each setting's frozen order -----------------------


def test_prediction_files_map_shuffled_rows_into_the_frozen_order(tmp_path: Path) -> None:
    """Shuffled row j holds j in every column: the file of a setting must list, row by row, the
    shuffled rows of that setting's images in the frozen test order."""
    from harness.bundles import write_model_bundles
    from harness.runners.judge import _Outputs, _prediction_files, pass_settings

    bench = load_benchmark(load_spec(DEMO))
    rowmap = write_model_bundles(bench, tmp_path / "bundles", tmp_path / "secret")
    settings = bench.spec.prediction_settings()
    outputs = {}
    for fit in rowmap.n_rows:
        for s in pass_settings(bench, [x for x in settings if rowmap.fits[x] == fit]):
            n = rowmap.n_rows[fit]
            raw = np.repeat(np.arange(n, dtype=np.float64)[:, None], len(s.candidates), 1)
            outputs[s.name] = _Outputs(s, (raw,))
    paths = _prediction_files(outputs, rowmap, bench, tmp_path / "predictions")
    predictions = read_all(bench, paths)
    for setting in settings:
        scores = predictions[setting].scores
        assert scores is not None
        np.testing.assert_array_equal(scores[:, 0], rowmap.rows[setting])
        # the rows hold exactly the setting's images
        features = np.load(rowmap.test_features[rowmap.fits[setting]])
        np.testing.assert_array_equal(
            features[rowmap.rows[setting]], bench.array("features")[bench.rows(setting)]
        )


# --- the pipeline: a fit whose outputs were tampered with after the worker ----------------


def _worker_files(out: Path) -> list[Path]:
    """Every file of the state the fit saved (``out/state``)."""
    return sorted(p for p in (out / "state").iterdir() if p.suffix in (".npy", ".npz"))


class _Tamper:
    """The local runner, then ``action`` on a fit's output folder, as a lingering process
    would."""

    name = "local"

    def __init__(self, action: Callable[[Path], None]) -> None:
        self.action = action

    def run(self, job):  # type: ignore[no-untyped-def]
        outcome = LocalRunner().run(job)
        if job.phase == "fit":
            self.action(job.out)
        return outcome


def _every_file(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def action(out: Path) -> None:
        files = _worker_files(out)
        assert files, "the worker wrote no prediction output"
        for path in files:
            _replace(path, make)

    return action


def _frozen_labels(home: Path) -> Callable[[Path], None]:
    labels = sorted(home.rglob("*labels*.npy"))

    def make(path: Path) -> None:
        path.symlink_to(labels[0])

    return make


def _moved_out(path: Path) -> None:
    """The worker's own file moved out of the folder, and linked back: readable, valid."""
    outside = path.parent.parent / f"moved-{path.name}"
    shutil.copyfile(path.with_name(path.name + ".orig"), outside)
    path.symlink_to(outside)


def _keep_original(out: Path) -> None:
    for path in _worker_files(out):
        shutil.copyfile(path, path.with_name(path.name + ".orig"))


TAMPER = {
    "etc-shadow": _etc_shadow,
    "proc-environ": _proc_environ,
    "fifo": _fifo,
    "folder": _folder,
    "oversized": _oversized,
    "garbage": _garbage,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", [*sorted(TAMPER), "frozen-labels", "valid-file-outside"])
def test_tampered_outputs_are_refused_and_nothing_is_stored(
    case: str, tmp_path: Path, db: str, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "frozen-labels":
        load_benchmark(load_spec(DEMO))  # freezes the demo, labels included
        action = _every_file(_frozen_labels(isolated_home))
    elif case == "valid-file-outside":
        every = _every_file(_moved_out)

        def action(out: Path) -> None:
            _keep_original(out)
            every(out)
    else:
        action = _every_file(TAMPER[case])
    monkeypatch.setattr(pipeline.runners, "get", lambda name: _Tamper(action))
    with pytest.raises(RunnerError) as info:
        run_submission(SUBMISSIONS / "eszsl", DEMO, runner="local", database_url=db, quiet=True)
    assert "/state" in str(info.value) and "Traceback" not in str(info.value)
    assert stored_runs(db) == 0


@pytest.mark.slow
@pytest.mark.parametrize("make", [_proc_environ, _etc_shadow], ids=lambda f: f.__name__)
def test_tampered_worker_json_is_refused(
    make: Callable[[Path], None], tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old harness never read worker.json; now a run without a readable one is refused."""

    def action(out: Path) -> None:
        _replace(out / "worker.json", make)

    monkeypatch.setattr(pipeline.runners, "get", lambda name: _Tamper(action))
    with pytest.raises(RunnerError, match=r"/worker\.json: is a symbolic link"):
        run_submission(SUBMISSIONS / "eszsl", DEMO, runner="local", database_url=db, quiet=True)
    assert stored_runs(db) == 0

"""Errors that explain (issue 14, items 8 and 10): a failed run names what the worker said, the
line of the package it comes from, and the log that holds the rest, under every runner.

Each case is a real tiny model package (``model.py`` written here, lines numbered in the
strings below) run end to end on the demo benchmark with the ``local`` runner, the ``sandbox``
(bubblewrap) and the ``container`` runner (through the fake engine of
``tests/fake_container_cli.py``, which runs the worker on this machine).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.errors import PredictionError, RunnerError
from harness.data.prepare import load_benchmark
from harness.pipeline import run_submission
from harness.runners.base import RunJob, RunOutcome
from harness.runners.failure import explain_failure, traceback_location
from harness.runners.outputs import WORKER_JSON
from harness.runners.protocol import nonfinite_message
from harness.spec import load_spec
from harness.submission.predictions import read_predictions, write_predictions
from harness.worker.phases import raised_at
from tests.conftest import SPECS, stored_runs
from tests.tiny_packages import RUNNERS, use_runner, write_tiny_package

DEMO = SPECS / "demo.yaml"


# Line numbers matter: the messages name them.
WRONG_SHAPE = """\
import numpy as np


class Tiny:
    def fit(self, task):
        pass

    def predict(self, features, candidates):
        return np.zeros((len(features), 2))
"""

FIT_RAISES = """\
import numpy as np


class Tiny:
    def fit(self, task):
        raise RuntimeError("diverged at epoch 3")

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""

PREDICT_RAISES = """\
import numpy as np


class Tiny:
    def fit(self, task):
        pass

    def predict(self, features, candidates):
        raise ValueError("no scores for these features")
"""

NO_PREDICT = """\
import numpy as np


class Tiny:
    def fit(self, task):
        pass
"""

RETURNS_NAN = """\
import numpy as np


class Tiny:
    def fit(self, task):
        pass

    def predict(self, features, candidates):
        scores = np.zeros((len(features), len(candidates)))
        scores[3, 2] = np.nan
        return scores
"""

LIBRARY_RAISES = """\
import numpy as np


class Tiny:
    def fit(self, task):
        self.w_ = np.linalg.inv(np.zeros((2, 2)))

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""

HELPER_RAISES = """\
from helpers import check


class Tiny:
    def fit(self, task):
        check(task)

    def predict(self, features, candidates):
        return None
"""
HELPER = """\
def check(task):
    raise KeyError("attributes")
"""


def _package(tmp_path: Path, code: str) -> Path:
    helpers = {"helpers/__init__.py": HELPER} if "helpers" in code else {}
    return write_tiny_package(tmp_path, code, files=helpers)


def _refused(tmp_path: Path, code: str, runner: str, db: str) -> tuple[str, Path]:
    """Run the package; return the runner's part of the error (before the pipeline's stderr
    tail) and the log it names, after checking the log holds what the worker said."""
    package = _package(tmp_path, code)
    with pytest.raises(RunnerError) as info:
        run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    assert stored_runs(db) == 0
    message = str(info.value)
    head = f"tiny on runner '{runner}': "
    assert message.startswith(head), message
    found = re.search(r"\n  log: (\S+\.log)(?:\n  stderr ends:|$)", message)
    assert found is not None, message
    log = Path(found.group(1))
    assert log.parent.name == "logs" and log.is_file(), message
    text = log.read_text()
    assert "--- worker.json ---" in text and "--- stderr ---" in text
    return message[len(head) : found.start()], log


def _columns() -> dict[str, int]:
    bench = load_benchmark(load_spec(DEMO))
    return {s: len(bench.columns(s)) for s in bench.spec.prediction_settings()}


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_wrong_shape_names_the_setting_and_where_predict_is_defined(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    use_runner(runner, request)
    said, _ = _refused(tmp_path, WRONG_SHAPE, runner, db)
    match = re.fullmatch(
        r"exited with code 4; protocol violation: predict returned shape \((\d+), 2\) for"
        r" setting '(\w+)'; expected \(n_test, n_candidates\) = \((\d+), (\d+)\)"
        r"\n  at: model\.py:8, where predict is defined",
        said,
    )
    assert match is not None, said
    rows, setting, expected_rows, columns = match.groups()
    assert rows == expected_rows and int(columns) == _columns()[setting]


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_exception_in_fit_names_its_line(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    use_runner(runner, request)
    said, log = _refused(tmp_path, FIT_RAISES, runner, db)
    assert said == (
        "exited with code 3; model error: fit() raised RuntimeError: diverged at epoch 3"
        "\n  at: model.py:6, in fit"
    )
    text = log.read_text()
    assert re.search(r'File "[^"]*/model\.py", line 6, in fit', text), text
    assert json.loads(text.split("--- worker.json ---\n")[1].split("\n---")[0])["location"] == (
        "model.py:6, in fit"
    )


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_exception_in_predict_names_its_line_and_setting(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    use_runner(runner, request)
    said, _ = _refused(tmp_path, PREDICT_RAISES, runner, db)
    match = re.fullmatch(
        r"exited with code 3; model error: predict\(\) raised ValueError: no scores for these"
        r" features \(setting (\w+)\)\n  at: model\.py:9, in predict",
        said,
    )
    assert match is not None, said
    assert match.group(1) in _columns()


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_missing_method_names_the_class(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    use_runner(runner, request)
    said, _ = _refused(tmp_path, NO_PREDICT, runner, db)
    assert said == (
        "exited with code 4; protocol violation: model:Tiny has no predict() method; a model"
        " class defines fit(task), save(directory), load(directory) (a classmethod) and"
        " predict(features, candidates)\n  at: model.py:4, where Tiny is defined"
    )


NO_SAVE = """\
import numpy as np


class Tiny:
    def fit(self, task):
        pass

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_class_without_save_and_load_is_shown_the_lines_to_add(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    """Fit and each prediction pass are separate runs (issue 26): a model class must save its
    fitted state and load it back; one that cannot is refused before it is fitted, and told
    the lines that do it (arrays in state.npz)."""
    use_runner(runner, request)
    package = write_tiny_package(tmp_path, NO_SAVE, save_load=False)
    with pytest.raises(RunnerError) as info:
        run_submission(package, DEMO, runner=runner, database_url=db, quiet=True)
    message = str(info.value)
    assert "model:Tiny has no save() method and no load() method" in message
    assert 'np.savez(directory / "state.npz", **fitted)' in message
    assert "def load(cls, directory):" in message
    assert stored_runs(db) == 0


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_nan_names_predict_setting_row_and_column(
    runner: str, tmp_path: Path, db: str, request: pytest.FixtureRequest
) -> None:
    """Old: the scorer refused a temporary prediction file ('/tmp/zsl-run-…/predictions/
    zsl.safetensors: scores contain NaN or inf'). Now the worker refuses the call itself."""
    use_runner(runner, request)
    said, _ = _refused(tmp_path, RETURNS_NAN, runner, db)
    match = re.fullmatch(
        r"exited with code 3; model error: predict\(\), setting (\w+), row 3, column 2: score"
        r" nan is not finite \(1 of the (\d+) x (\d+) scores of that call are NaN or inf\);"
        r" predict must return finite scores \(rows are the call's features, columns its"
        r" candidates\)\n  at: model\.py:8, where predict is defined",
        said,
    )
    assert match is not None, said
    setting, _rows, columns = match.groups()
    assert int(columns) == _columns()[setting]


@pytest.mark.slow
def test_library_and_helper_failures_name_the_last_line_in_the_package(
    tmp_path: Path, db: str
) -> None:
    said, _ = _refused(tmp_path / "library", LIBRARY_RAISES, "local", db)
    assert said == (
        "exited with code 3; model error: fit() raised LinAlgError: Singular matrix"
        "\n  at: model.py:6, in fit"
    )
    said, _ = _refused(tmp_path / "helper", HELPER_RAISES, "local", db)
    assert said == (
        "exited with code 3; model error: fit() raised KeyError: 'attributes'"
        "\n  at: helpers/__init__.py:2, in check"
    )


# --- the pieces, without a run -------------------------------------------------------------


def test_nonfinite_message_names_the_first_bad_cell() -> None:
    scores = np.zeros((5, 4), np.float32)
    assert nonfinite_message("zsl", scores) is None
    scores[3, 2] = np.nan
    scores[4, 0] = np.inf
    assert nonfinite_message("zsl", scores) == (
        "predict(), setting zsl, row 3, column 2: score nan is not finite (2 of the 5 x 4"
        " scores of that call are NaN or inf); predict must return finite scores (rows are"
        " the call's features, columns its candidates)"
    )
    # Top-K answers: the column is the candidate the kept score belongs to.
    top = np.array([[1.0, 0.5], [np.inf, 0.2]])
    message = nonfinite_message("gzsl", top, np.array([[7, 3], [9, 1]]))
    assert message is not None and message.startswith(
        "predict(), setting gzsl, row 1, column 9: score inf is not finite"
    )


def test_raised_at_takes_the_last_frame_inside_the_package(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text("def f():\n    return 1 / 0\n")
    namespace: dict[str, Any] = {}
    exec(compile((package / "mod.py").read_text(), str(package / "mod.py"), "exec"), namespace)
    with pytest.raises(ZeroDivisionError) as info:
        namespace["f"]()
    assert raised_at(info.value, package) == "mod.py:2, in f"
    assert raised_at(info.value, tmp_path / "elsewhere") is None
    with pytest.raises(SyntaxError) as syntax:
        compile("x = (\n", str(package / "broken.py"), "exec")
    assert raised_at(syntax.value, package) == "broken.py:1"


def test_generator_traceback_location() -> None:
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/package/make_predictions.py", line 40, in <module>\n'
        '  File "/package/make_predictions.py", line 31, in main\n'
        '  File "/usr/lib/python3/numpy/core.py", line 9, in save\n'
        "OSError: disk full\n"
    )
    assert traceback_location(stderr, Path("/host/pkg")) == "make_predictions.py:31, in main"
    assert traceback_location("no traceback", Path("/host/pkg")) is None


def test_explain_failure_reads_worker_json_and_writes_the_log(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / WORKER_JSON).write_text(
        json.dumps(
            {
                "exit_code": 4,
                "message": "predict returned shape (2, 3)\nfor zsl",
                "location": "model.py:8, where predict is defined",
            }
        )
    )
    job = RunJob(tmp_path / "bundle", tmp_path / "pkg", "model:Tiny", out)
    outcome = RunOutcome(4, "exited with code 4", 1.0, stdout="out", stderr="worker: says")
    logs = tmp_path / "logs"
    explained = explain_failure(job, outcome, logs=logs)
    (log,) = logs.iterdir()
    assert explained.reason == (
        "exited with code 4; protocol violation: predict returned shape (2, 3) | for zsl"
        f"\n  at: model.py:8, where predict is defined\n  log: {log}"
    )
    assert explained.details["log"] == str(log)
    assert "--- stderr ---\nworker: says\n" in log.read_text()
    # A worker.json that reports another exit code is not this run's verdict; a timeout keeps
    # its reason and gains the log.
    killed = RunOutcome(-9, "timed out after 5 s; process group killed", 5.0)
    explained = explain_failure(job, killed, logs=logs)
    assert re.fullmatch(
        r"timed out after 5 s; process group killed\n  log: \S+\.log", explained.reason
    )
    ok = RunOutcome(0, "ok", 1.0)
    assert explain_failure(job, ok, logs=logs).reason == "ok" and "log" not in ok.details


def test_explain_failure_without_a_writable_log_folder_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    job = RunJob(tmp_path, tmp_path, "model:Tiny", tmp_path / "missing-out")
    outcome = explain_failure(job, RunOutcome(3, "exited with code 3", 1.0), logs=blocker / "x")
    assert outcome.reason.startswith("exited with code 3\n  log not written (")
    assert outcome.reason.endswith(": set ZSL_HOME to a writable folder)")


# --- item 10: prediction files name the package's file, setting, row and column -------------


def test_nan_in_a_prediction_file_names_its_package_path_setting_row_and_column(
    tmp_path: Path,
) -> None:
    path = tmp_path / "unpacked" / "predictions" / "demo.zsl.safetensors"
    meta = {"benchmark_hash": "sha256:b", "class_order_hash": "sha256:c", "setting": "zsl"}
    scores = np.zeros((6, 4), np.float32)
    scores[3, 2] = np.nan
    write_predictions(path, scores, **meta)
    with pytest.raises(PredictionError) as info:
        read_predictions(path, **meta, shape=(6, 4), name="predictions/demo.zsl.safetensors")
    assert str(info.value) == (
        "predictions/demo.zsl.safetensors: setting zsl, row 3, column 2: score nan is not"
        " finite (1 row(s) hold NaN or inf); scores must be finite numbers (rows in the"
        " setting's frozen test order, columns in its candidate order)"
    )
    # Without a name the path is the file's own.
    with pytest.raises(PredictionError, match=rf"^{re.escape(str(path))}: setting zsl, row 3"):
        read_predictions(path, **meta, shape=(6, 4))


def test_topk_nan_names_the_candidate_column(tmp_path: Path) -> None:
    path = tmp_path / "demo.zsl.safetensors"
    meta = {"benchmark_hash": "sha256:b", "class_order_hash": "sha256:c", "setting": "zsl"}
    indices = np.array([[0, 1], [2, 3], [4, 1]], np.int64)
    top = np.array([[2.0, 1.0], [3.0, 1.0], [1.0, np.inf]], np.float32)
    write_predictions(path, topk_indices=indices, topk_scores=top, **meta)
    with pytest.raises(PredictionError) as info:
        read_predictions(path, **meta, shape=(3, 5), topk=2, name="predictions/x.safetensors")
    assert str(info.value) == (
        "predictions/x.safetensors: setting zsl, row 2, column 1: topk_scores holds inf, which"
        " is not finite (place 1 of the row's top-2 list); scores must be finite numbers"
    )

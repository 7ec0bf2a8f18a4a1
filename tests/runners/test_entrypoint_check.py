"""``zsl submission validate`` imports a model package's entrypoint in a runner and checks it
against the model protocol (issue 14, item 9): each problem with its file and line, exit 1.

Each case is a real tiny package (``model.py`` written here, lines numbered in the strings
below); the check runs the worker's check mode (``python -m harness.worker.phases --check``) in the
``sandbox`` (bubblewrap), the ``local`` runner, and the ``container`` runner through the fake
engine of ``tests/fake_container_cli.py``, which runs the worker on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import RunnerError
from harness.runners import default_runner
from harness.runners.entrypoint_check import (
    EntrypointProblem,
    check_entrypoint,
    read_check,
)
from harness.runners.outputs import CHECK_JSON
from harness.submission.package import load_package
from tests.conftest import SUBMISSIONS, needs_bwrap
from tests.tiny_packages import RUNNERS, use_runner, write_tiny_package

# Line numbers matter: the messages name them.
GOOD = """\
import numpy as np


class RidgeModel:
    def fit(self, task):
        self.seen = task.train_labels

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""

IMPORT_ERROR = """\
import numpy as np
import numpyy


class RidgeModel:
    pass
"""

NO_FIT = """\
import numpy as np


class RidgeModel:
    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""

PREDICT_SIGNATURE = """\
import numpy as np


class RidgeModel:
    def fit(self, task):
        pass

    def predict(self, features):
        return np.zeros((len(features), 3))
"""

NOT_A_CLASS = """\
import numpy as np


def make_model():
    return None
"""

NEEDS_ARGUMENTS = """\
import numpy as np


class RidgeModel:
    def __init__(self, alpha):
        self.alpha = alpha

    def fit(self, task):
        pass

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""

PLANTS_THE_FINDINGS = """\
import numpy as np

open("check.json", "w").write('{"entrypoint": "model:RidgeModel", "problems": []}')


class RidgeModel:
    def fit(self, task):
        pass

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""


def _package(tmp_path: Path, code: str, entrypoint: str = "model:RidgeModel") -> Path:
    return write_tiny_package(tmp_path, code, entrypoint=entrypoint)


def _validate(package: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["submission", "validate", str(package)])
    return result.exit_code, result.output


def _refused(package: Path, *problems: str) -> None:
    """``zsl submission validate`` fails naming the runner that checked and exactly
    ``problems``, one per line."""
    code, output = _validate(package)
    runner = default_runner(load_package(package))
    count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
    expected = (
        f"error: {package}: entrypoint {load_package(package).manifest.model.entrypoint}"  # type: ignore[union-attr]
        f" (checked in runner '{runner}'): {count}\n" + "".join(f"  {p}\n" for p in problems)
    )
    assert (code, output[-len(expected) :]) == (1, expected), output


@pytest.mark.parametrize("runner", RUNNERS)
def test_class_typo_names_the_classes_and_the_one_meant(
    runner: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    use_runner(runner, request)
    package = load_package(_package(tmp_path, GOOD, "model:Ridge"))
    found = check_entrypoint(package, runner=runner)
    assert found.runner == runner
    assert [str(p) for p in found.problems] == [
        "model.py:4: entrypoint 'Ridge' not found in module 'model'; the module defines:"
        " RidgeModel; did you mean 'RidgeModel'?"
    ]


def test_validate_refuses_a_class_typo(tmp_path: Path) -> None:
    _refused(
        _package(tmp_path, GOOD, "model:RidgeModle"),
        "model.py:4: entrypoint 'RidgeModle' not found in module 'model'; the module defines:"
        " RidgeModel; did you mean 'RidgeModel'?",
    )


def test_validate_refuses_a_missing_module(tmp_path: Path) -> None:
    # Package loading finds this one without importing anything (nothing runs in a runner).
    package = _package(tmp_path, GOOD, "models:RidgeModel")
    assert _validate(package) == (
        1,
        f"error: {package}/submission.yaml: model.entrypoint module 'models' not found in the"
        " package (looked for models.py)\n",
    )


@pytest.mark.parametrize("runner", RUNNERS[:2])  # the container runner loads the package
def test_check_mode_names_the_entrypoint_line_of_a_missing_module(
    runner: str, tmp_path: Path
) -> None:
    """What the worker finds where package loading was bypassed (the runner's own check)."""
    package = load_package(_package(tmp_path, GOOD))
    (package.root / "model.py").rename(package.root / "ridge.py")
    assert [str(p) for p in check_entrypoint(package, runner=runner).problems] == [
        "submission.yaml:6: entrypoint 'model:RidgeModel': no module 'model' in the package;"
        " its modules: ridge"
    ]


def test_validate_names_the_import_error_and_its_line(tmp_path: Path) -> None:
    _refused(
        _package(tmp_path, IMPORT_ERROR),
        "model.py:2: importing module 'model' raised ModuleNotFoundError: No module named 'numpyy'",
    )


def test_validate_refuses_a_class_without_fit(tmp_path: Path) -> None:
    _refused(
        _package(tmp_path, NO_FIT),
        "model.py:4: class 'RidgeModel' has no fit() method; a model class defines fit(task),"
        " save(directory), load(directory) (a classmethod) and predict(features, candidates)",
    )


def test_validate_refuses_predict_that_cannot_take_the_candidates(tmp_path: Path) -> None:
    _refused(
        _package(tmp_path, PREDICT_SIGNATURE),
        "model.py:8: RidgeModel.predict(features) cannot be called as predict(features,"
        " candidates), as the worker calls it: too many positional arguments",
    )


def test_validate_refuses_an_entrypoint_that_is_not_a_class(tmp_path: Path) -> None:
    _refused(
        _package(tmp_path, NOT_A_CLASS, "model:make_model"),
        "model.py:4: entrypoint 'make_model' in module 'model' is a function, not a class; the"
        " entrypoint names the model class, which the worker builds as Class() and whose"
        " fit(task) and predict(features, candidates) it calls",
    )


def test_validate_refuses_a_class_that_needs_arguments(tmp_path: Path) -> None:
    _refused(
        _package(tmp_path, NEEDS_ARGUMENTS),
        "model.py:5: RidgeModel() raised TypeError: RidgeModel.__init__() missing 1 required"
        " positional argument: 'alpha'; the worker builds the model with no arguments (give"
        " every __init__ parameter a default)",
    )


def test_validate_passes_a_good_package_and_says_which_runner_checked(tmp_path: Path) -> None:
    package = _package(tmp_path, GOOD)
    code, output = _validate(package)
    runner = default_runner(load_package(package))
    assert code == 0, output
    assert (
        "  entrypoint model:RidgeModel: imports, builds with RidgeModel() and has fit(task),"
        " save(directory), load(directory) and predict(features, candidates) (checked in"
        f" runner '{runner}')\n"
    ) in output


def test_validate_passes_the_shipped_model_packages() -> None:
    for name in ("eszsl", "sae"):
        code, output = _validate(SUBMISSIONS / name)
        assert code == 0 and "imports, builds with" in output, output


def test_a_module_that_ends_the_process_at_import_is_reported(tmp_path: Path) -> None:
    package = load_package(_package(tmp_path, "import os\n\nos._exit(7)\n"))
    assert [str(p) for p in check_entrypoint(package, runner="local").problems] == [
        "the process importing model:RidgeModel exited with code 7 (sys.exit or os._exit at"
        " import?) before it reported"
    ]


@needs_bwrap
def test_findings_the_model_planted_are_refused(tmp_path: Path) -> None:
    package = load_package(_package(tmp_path, PLANTS_THE_FINDINGS))
    found = check_entrypoint(package, runner="sandbox")
    assert [str(p) for p in found.problems] == [
        "model code created check.json in the output folder; the name is reserved for the"
        " worker's findings"
    ]


def test_check_json_is_read_without_trust(tmp_path: Path) -> None:
    (tmp_path / CHECK_JSON).write_text(json.dumps({"problems": [{"file": 3, "message": "x"}]}))
    with pytest.raises(RunnerError, match=r"problems\[0\] needs a message and a file or null"):
        read_check(tmp_path)
    (tmp_path / CHECK_JSON).write_text(
        json.dumps({"problems": [{"file": "m.py", "line": 2, "message": "bad"}]})
    )
    assert read_check(tmp_path) == [EntrypointProblem("m.py", 2, "bad")]
    (tmp_path / CHECK_JSON).unlink()
    (tmp_path / CHECK_JSON).symlink_to("/etc/passwd")
    with pytest.raises(RunnerError, match="is a symbolic link"):
        read_check(tmp_path)

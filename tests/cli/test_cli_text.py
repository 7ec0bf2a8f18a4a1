"""What the command line says (issue 29, item 11), each problem as a class.

- A failed run's error: message, package line and log on lines of their own, and the stderr
  excerpt only where it says something the message does not.
- A timeout names the phase and ``resources.time_s`` (its value, how to raise it).
- A heartbeat while a phase runs silent.
- A download without network is one paragraph, not a traceback.
- Dataset names in any case.
- ``spec describe``: hashes whole and labelled, names as written, empty lists as "none".
- Seen-class baselines declare ``seen_only`` and get no below-chance warning there.
- The standard splits of CUB and SUN say where their classes come from.
- The scaffold carries no test-only comment, and its hint is never wrapped.
"""

from __future__ import annotations

import io
import re
import socket
import urllib.error
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import spec as spec_cli
from harness.cli.main import app
from harness.core.errors import RunnerError, SubmissionError
from harness.records import RunRecord
from harness.runners import progress
from harness.runners.base import RunOutcome
from harness.runners.failure import failure_message, timeout_reason
from harness.runners.judge import PassConversation, PassSetting, check_ran
from harness.runners.progress import ProgressEvent, ProgressReader, current_sink, reporting
from harness.scoring import below_chance
from harness.submission.package import load_package
from harness.submission.scaffold import template_text, write_template
from tests.conftest import SHARED_DATA, SPECS, SUBMISSIONS
from tests.store_records import make_record
from tests.tiny_packages import write_tiny_package

runner = CliRunner()
LOG = "/home/me/.cache/zsl-harness/logs/x.log"


# -- a failed run's error --------------------------------------------------------------------


def test_a_failed_run_says_message_line_and_log_once_each() -> None:
    """The traceback's last line and the worker's own report repeat the message: left out."""
    reason = (
        "exited with code 3; model error: fit() raised RuntimeError: diverged at epoch 3"
        f"\n  at: model.py:6, in fit\n  log: {LOG}"
    )
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/package/model.py", line 6, in fit\n'
        "RuntimeError: diverged at epoch 3\n"
        "worker: fit() raised RuntimeError: diverged at epoch 3\n"
        "worker: at model.py:6, in fit\n"
    )
    outcome = RunOutcome(3, reason, 1.0, stderr=stderr)
    assert failure_message("tiny on runner 'sandbox'", outcome) == (
        "tiny on runner 'sandbox': exited with code 3; model error: fit() raised RuntimeError:"
        " diverged at epoch 3\n"
        "  at: model.py:6, in fit\n"
        f"  log: {LOG}"
    )


def test_stderr_that_says_more_is_shown_on_lines_of_its_own() -> None:
    outcome = RunOutcome(
        -9, f"killed by signal SIGKILL\n  log: {LOG}", 1.0, stderr="loading 3 GB\n  Killed\n"
    )
    assert failure_message("gen on runner 'local'", outcome) == (
        f"gen on runner 'local': killed by signal SIGKILL\n  log: {LOG}\n"
        "  stderr ends:\n    loading 3 GB\n      Killed"
    )


# -- timeouts --------------------------------------------------------------------------------


def test_a_timeout_names_the_phase_and_resources_time_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_MAX_TIME_S", "7200")
    reason = f"timed out after 12.5 s; process group killed\n  log: {LOG}"
    assert timeout_reason(reason, "predict_zsl", 600) == (
        "timed out in predict_zsl after 600 s, the run's wall clock (resources.time_s: 600,"
        " every phase of the run together); process group killed\n"
        "  to give it more time: raise resources.time_s in the package's submission.yaml (up to"
        " 7200 s here: ZSL_MAX_TIME_S=7200)\n"
        f"  log: {LOG}"
    )
    # At the machine's cap, raising resources.time_s cannot help: the cap is named instead.
    assert timeout_reason("timed out after 7200 s; process group killed", None, None) == (
        "timed out after 7200 s, the run's wall clock (resources.time_s: 7200, every phase of"
        " the run together); process group killed\n"
        "  to give it more time: resources.time_s is capped at 7200 s here"
        " (ZSL_MAX_TIME_S=7200): raise that cap, or make the run faster"
    )
    assert timeout_reason("exited with code 3", "fit_main", 600) == "exited with code 3"


def test_a_generator_timeout_names_resources_time_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A predictions package's generator runs on the same clock (check_ran)."""
    monkeypatch.setenv("ZSL_MAX_TIME_S", "7200")
    outcome = RunOutcome(-9, f"timed out after 30 s; process group killed\n  log: {LOG}", 30.0)
    with pytest.raises(RunnerError) as stopped:
        check_ran(outcome, "files generator", "sandbox")
    assert str(stopped.value) == (
        "files generator on runner 'sandbox': timed out after 30 s, the run's wall clock"
        " (resources.time_s: 30, every phase of the run together); process group killed\n"
        "  to give it more time: raise resources.time_s in the package's submission.yaml (up to"
        " 7200 s here: ZSL_MAX_TIME_S=7200)\n"
        f"  log: {LOG}"
    )


def test_a_prediction_pass_names_the_setting_it_was_predicting() -> None:
    settings = [
        PassSetting(name, i, np.arange(3), None, 10) for i, name in enumerate(["zsl", "gzsl"])
    ]
    features = np.zeros((4, 2), np.float32)
    canonical = PassConversation("main", settings, [], features)
    assert canonical.phase() == "predict_zsl"  # loading its state, before the first chunk
    canonical.asked = "gzsl"
    assert canonical.phase() == "predict_gzsl"
    check = PassConversation("validation", settings, [], features, canon={})
    assert check.phase() == "check_validation"


SLOW_FIT = """\
import time

import numpy as np


class Tiny:
    def fit(self, task):
        time.sleep(30)

    def predict(self, features, candidates):
        return np.zeros((len(features), len(candidates)))
"""


@pytest.mark.slow  # a real run stopped at its 1 s wall clock
def test_zsl_run_says_which_phase_timed_out_and_how_to_raise_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZSL_MAX_TIME_S", "7200")
    package = write_tiny_package(tmp_path, SLOW_FIT)
    manifest = package / "submission.yaml"
    manifest.write_text(manifest.read_text().replace("time_s: 120", "time_s: 1"))
    result = runner.invoke(
        app,
        ["run", str(package), "--spec", str(SPECS / "demo.yaml"), "--runner", "local"],
        env={"COLUMNS": "60"},
    )
    assert result.exit_code == 1
    error = result.output[result.output.index("error: ") :]
    assert re.fullmatch(
        re.escape(
            "error: tiny on runner 'local': timed out in fit_validation after 1 s, the run's"
            " wall clock (resources.time_s: 1, every phase of the run together); process group"
            " killed\n"
            "  to give it more time: raise resources.time_s in the package's submission.yaml"
            " (up to 7200 s here: ZSL_MAX_TIME_S=7200)\n"
            "  log: "
        )
        + r"\S+\.log\n",
        error,
    ), error


# -- the heartbeat ---------------------------------------------------------------------------


class Collect:
    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []

    def event(self, event: ProgressEvent, elapsed_s: float) -> None:
        self.events.append(event)

    def rejected(self, message: str, elapsed_s: float) -> None:
        raise AssertionError(message)


def test_a_silent_phase_gets_a_heartbeat_and_an_ended_one_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = Collect()
    with reporting(sink):
        reader = ProgressReader(current_sink())
        reader.tick()  # no phase running: nothing to say
        monkeypatch.setattr(progress, "HEARTBEAT_S", 3600.0)
        reader.feed(progress.event_line("fit", "validation", "start"))
        reader.tick()  # running, but not silent for long yet
        monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
        reader.tick()
        reader.feed(progress.event_line("fit", "validation", "done", seconds=1.0))
        reader.tick()
    assert [(e.phase, e.fit, e.state) for e in sink.events] == [
        ("fit", "validation", "start"),
        ("fit", "validation", "running"),
        ("fit", "validation", "done"),
    ]
    beat = sink.events[1]
    assert beat.seconds is not None and beat.seconds >= 0
    shown = ProgressEvent("fit", "validation", "running", seconds=60.4).describe()
    assert shown == "validation fit running (60 s so far)"
    predicting = ProgressEvent("predict", "main", "running", "zsl", 31.0).describe()
    assert predicting == "predict zsl running (31 s so far)"


def test_the_worker_cannot_send_a_heartbeat_of_its_own() -> None:
    with pytest.raises(ValueError, match="phase, fit or state missing or unknown"):
        ProgressEvent.parse({"phase": "fit", "fit": "main", "state": "running"})


# -- downloads without network ---------------------------------------------------------------


@pytest.mark.slow  # imports torch and torchvision
def test_features_extract_download_without_network_is_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    def offline(url: str, dst: str, **kwargs: Any) -> None:
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))

    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    images = tmp_path / "images" / "n01440764"
    images.mkdir(parents=True)
    (images / "a.jpg").write_bytes(b"not decoded before the weights")
    result = runner.invoke(
        app,
        ["features", "extract", "--images", str(images.parent), "--weights", "IMAGENET1K_V1",
         "--backbone", "resnet18", "--out", str(tmp_path / "out"), "--download"],
    )  # fmt: skip
    checkpoint = tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    assert result.exit_code == 1
    assert result.output == (
        "error: cannot download weights ResNet18_Weights.IMAGENET1K_V1 from"
        " https://download.pytorch.org/models/resnet18-f37072fd.pth: [Errno -2] Name or service"
        " not known. Nothing was saved. Check the network and run again, or fetch that file"
        f" elsewhere and put it at {checkpoint} (TORCH_HOME moves torch's cache), or give a"
        " weights file with --weights\n"
    )


# -- dataset names in any case ---------------------------------------------------------------


@pytest.mark.skipif(not (SHARED_DATA / "xlsa17" / "APY").is_dir(), reason="no shared xlsa17")
def test_synthetic_xlsa17_takes_dataset_names_in_any_case(tmp_path: Path) -> None:
    source = str(SHARED_DATA / "xlsa17")
    result = runner.invoke(
        app,
        ["data", "synthetic-xlsa17", "--source", source, "--out", str(tmp_path / "s"),
         "--dataset", "aPy", "--dim", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        f"{tmp_path / 's' / 'APY' / 'res101.mat'}: synthetic 2-d features"
    )
    result = runner.invoke(
        app,
        ["data", "synthetic-xlsa17", "--source", source, "--out", str(tmp_path / "t"),
         "--dataset", "apz"],
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.output == (
        "error: --dataset 'apz': not an xlsa17 dataset; choose from AWA1, AWA2, CUB, SUN, APY"
        " (in any case)\n"
    )


# -- spec describe ---------------------------------------------------------------------------


def test_describe_prints_hashes_whole_and_names_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    console = Console(
        file=out, width=40, highlight=False, markup=False, emoji=False, soft_wrap=True
    )
    monkeypatch.setattr(spec_cli, "stdout", console)
    bench, glove, index = "sha256:" + "a" * 64, "sha256:" + "c" * 64, "sha256:" + "d" * 64
    files = {"glove_6B_50d_emb.npy": glove, "glove_6B_index.parquet": index}
    spec_cli._print_facts(
        [
            ("benchmark hash", bench),
            ("n_classes", 32),
            (
                "provenance",
                {"class_embeddings": {"glove": {"model": "glove-6b-50d", "model_files": files}}},
            ),
            ("mutual_exclusivity_violations", {"unseen": [], "all": 0}),
            ("release_overlaps", {"trainval_loc&test_seen_loc": 0, "train_or_val_loc_in_test": 2}),
            ("dropped_without_embedding", []),
            ("classes", "[bold]x[/bold]"),
        ]
    )
    assert out.getvalue().splitlines() == [
        f" benchmark hash                  {bench}",
        " n classes                       32",
        " provenance",
        "                                   class_embeddings:",
        "                                     glove:",
        "                                       model: glove-6b-50d",
        "                                       model_files:",
        f"                                         glove_6B_50d_emb.npy: {glove}",
        f"                                         glove_6B_index.parquet: {index}",
        " mutual-exclusivity violations   0 among unseen classes, 0 among all classes",
        " release overlaps                trainval_loc&test_seen_loc 0, train_or_val_loc_in_test 2",
        " dropped without embedding       none",
        " classes                         [bold]x[/bold]",
    ]


@pytest.mark.skipif(not (SHARED_DATA / "xlsa17" / "APY").is_dir(), reason="no shared xlsa17")
def test_describe_release_only_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(SHARED_DATA / "xlsa17"))
    spec = SPECS / "xlsa17" / "apy-ps.yaml"
    result = runner.invoke(app, ["spec", "describe", str(spec), "--release-only"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert " mutual-exclusivity violations   0 among unseen classes, 0 among all classes" in lines
    assert " structural ratio                1.411 over 12 unseen classes (0 excluded)" in lines
    overlaps = next(line for line in lines if line.startswith(" release overlaps "))
    assert overlaps.split(None, 2)[2].startswith(
        "trainval_loc&test_seen_loc 0, trainval_loc&test_unseen_loc 0,"
    )


@pytest.mark.skipif(not (SHARED_DATA / "xlsa17" / "CUB").is_dir(), reason="no shared xlsa17")
@pytest.mark.parametrize(
    ("name", "source"),
    [
        (
            "cub",
            "CUB's standard split holds out the 50 test classes of Akata et al. (ALE, TPAMI 2016;"
            " SJE, CVPR 2015), the split GBU Table I reports (150 seen + 50 unseen); its"
            " testclasses.txt is published with Reed et al.'s CUB data (CVPR 2016,"
            " cvpr2016_cub), in the xlsa17 spelling ('001.Black_footed_Albatross')",
        ),
        (
            "sun",
            "SUN's standard split holds out the 72 test classes of Jayaraman & Grauman (NIPS"
            " 2014), the split GBU Table I reports (645 seen + 72 unseen); copy them from that"
            " paper's published split, in the xlsa17 spelling (att_splits.mat allclasses_names)",
        ),
    ],
)
def test_the_standard_splits_without_shipped_classes_say_where_they_come_from(
    name: str, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(SHARED_DATA / "xlsa17"))
    spec = SPECS / "xlsa17" / f"{name}-ss.yaml"
    assert "TODO" not in spec.read_text()
    result = runner.invoke(app, ["spec", "describe", str(spec), "--release-only"])
    assert result.exit_code == 1
    dataset = name.upper()
    assert result.output == (
        f"error: {spec}: xlsa17-{name}-ss v1 needs 1 input this machine lacks:\n"
        f"  - standard split classes (data.params.test_classes): {spec}: the standard split of"
        f" {dataset} needs data.params.test_classes, its unseen classes (xlsa17 names), which the"
        f" xlsa17 release does not ship and its files cannot give. {source}: list them there.\n"
    )


# -- seen-class baselines ----------------------------------------------------------------------

FUNCTIONS = {
    ("zsl", "top1"): "per_class_top_k_accuracy",
    ("zsl", "top5"): "per_class_top_k_accuracy",
    ("gzsl", "seen"): "gzsl_seen_accuracy",
    ("gzsl", "unseen"): "gzsl_unseen_accuracy",
    ("gzsl", "H"): "gzsl_harmonic_mean",
}


def _seen_only_record(declared: list[str] | None) -> RunRecord:
    """50 unseen, 150 seen classes; GZSL unseen accuracy and H 0, ZSL top-1 below chance."""
    record = make_record(zsl_top1=0.018, gzsl=(0.9, 0.0, 0.0))
    scores = [
        e.model_copy(update={"function": FUNCTIONS[(e.setting, e.metric)]}) for e in record.scores
    ]
    submission = record.submission.model_copy(
        update={"declarations": {} if declared is None else {"seen_only": declared}}
    )
    return record.model_copy(update={"scores": scores, "submission": submission})


def test_a_declared_seen_only_setting_gets_no_below_chance_warning() -> None:
    warned = [w.split(" = ")[0] for w in below_chance(_seen_only_record(None))]
    assert warned == ["zsl top1", "gzsl unseen", "gzsl H"]
    warned = [w.split(" = ")[0] for w in below_chance(_seen_only_record(["gzsl"]))]
    assert warned == ["zsl top1"]  # every other score keeps its warning
    # GZSL top-1 over all candidates is not 0 by design for a seen-class baseline: at 0 it
    # still means shifted columns, and is warned about.
    record = _seen_only_record(["gzsl"])
    top1 = record.scores[0].model_copy(update={"setting": "gzsl", "value": 0.0})
    shifted = record.model_copy(update={"scores": [*record.scores, top1]})
    warned = [w.split(" = ")[0] for w in below_chance(shifted)]
    assert warned == ["zsl top1", "gzsl top1"]


def test_the_shipped_seen_class_baselines_declare_it_and_no_other_package_does() -> None:
    declared = {
        path.parent.name: load_package(path.parent).manifest.declarations.seen_only
        for path in sorted(SUBMISSIONS.glob("*/submission.yaml"))
    }
    assert {name: d for name, d in declared.items() if d} == {
        "flat-seen-classifier": ["gzsl"],
        "nearest-seen-class-transfer": ["gzsl"],
    }


def test_seen_only_is_for_gzsl_settings(tmp_path: Path) -> None:
    package = write_tiny_package(tmp_path, "class Tiny:\n    pass\n")
    manifest = package / "submission.yaml"
    manifest.write_text(manifest.read_text() + "declarations:\n  seen_only: [zsl]\n")
    with pytest.raises(SubmissionError) as refused:
        load_package(package)
    assert f"{manifest}:11: declarations.seen_only[0]: must be one of 'gzsl'; got 'zsl'" in str(
        refused.value
    )


# -- the scaffold ----------------------------------------------------------------------------


def test_the_scaffold_carries_no_test_only_comment(tmp_path: Path) -> None:
    for kind in ("model", "predictions"):
        root = write_template(f"pkg-{kind}", tmp_path, kind=kind)
        for path in sorted(root.glob("*.py")):
            text = path.read_text()
            assert "copied block" not in text and "tests/" not in text, path
            assert "\n\n\n\n" not in text, path  # the markers' lines leave no gap behind
    assert "def write_state(" in template_text("model.py")


def test_submission_init_prints_its_hint_whole(tmp_path: Path) -> None:
    out = tmp_path / "a" / "rather" / "long" / "folder" / "for" / "packages"
    result = runner.invoke(
        app, ["submission", "init", "my-method-name", "--out", str(out)], env={"COLUMNS": "40"}
    )
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"created {out / 'my-method-name'} (model); next: zsl submission validate"
        f" {out / 'my-method-name'}\n"
    )

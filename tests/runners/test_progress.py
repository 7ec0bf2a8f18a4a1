"""The worker's progress reaches the user while a run goes on (issue 14, item 19).

A real tiny model package runs on the demo benchmark under the ``local`` runner, the ``sandbox``
(bubblewrap) and the ``container`` runner (the fake engine of ``tests/fake_container_cli.py``):
the events arrive in order, ``zsl run`` prints them as ``[  12.3 s] zsl: fit done (11.8 s)``,
and a model writing garbage to the channel (its stderr) neither breaks the run nor goes unsaid.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cli.main import app
from harness.pipeline import run_submission
from harness.runners import progress
from harness.runners.progress import (
    MARKER,
    ConsoleProgress,
    ProgressEvent,
    ProgressReader,
    event_line,
    reporting,
    strip_events,
)
from tests.conftest import SPECS
from tests.tiny_packages import RUNNERS, use_runner, write_tiny_package

DEMO = SPECS / "demo.yaml"


TINY = """\
import numpy as np


class Tiny:
    def fit(self, task):
        self.offset = float(len(task.train_labels))

    def predict(self, features, candidates):
        return features[:, :1] + candidates[None, :] / self.offset
    def save(self, directory):
        np.save(directory / "offset.npy", np.float64(self.offset))

    @classmethod
    def load(cls, directory):
        model = cls()
        model.offset = float(np.load(directory / "offset.npy"))
        return model
"""

# Writes to the progress channel: broken JSON, a well-formed object with a negative duration,
# unknown phases, and a long line with no marker; then fits like TINY.
HOSTILE = """\
import sys

import numpy as np


class Tiny:
    def fit(self, task):
        sys.stderr.write("zsl-progress: {not json\\n")
        sys.stderr.write('zsl-progress: {"phase": "fit", "fit": "main", "state": "done",'
                         ' "seconds": -5}\\n')
        for n in range(4):
            sys.stderr.write('zsl-progress: {"phase": "train%d"}\\n' % n)
        sys.stderr.write("x" * 100_000 + "\\n")
        sys.stderr.flush()
        self.offset = float(len(task.train_labels))

    def predict(self, features, candidates):
        return features[:, :1] + candidates[None, :] / self.offset
    def save(self, directory):
        np.save(directory / "offset.npy", np.float64(self.offset))

    @classmethod
    def load(cls, directory):
        model = cls()
        model.offset = float(np.load(directory / "offset.npy"))
        return model
"""


def _events(fit: str, settings: list[str]) -> list[tuple[str, str, str, str | None]]:
    found = [("fit", fit, "start", None), ("fit", fit, "done", None)]
    for setting in settings:
        found += [("predict", fit, "start", setting), ("predict", fit, "done", setting)]
    return [*found, ("check", fit, "start", None), ("check", fit, "done", None)]


#: What a CPU run on the demo benchmark reports, in order (the validation fit comes first).
DEMO_EVENTS = _events("validation", ["zsl_val", "gzsl_val", "scale_val"]) + _events(
    "main", ["zsl", "gzsl", "scale"]
)

DEMO_LINES = [
    "zsl: validation fit started",
    "zsl: validation fit done (X s)",
    "zsl: predict zsl_val started",
    "zsl: predict zsl_val done (X s)",
    "zsl: predict gzsl_val started",
    "zsl: predict gzsl_val done (X s)",
    "zsl: predict scale_val started",
    "zsl: predict scale_val done (X s)",
    "zsl: inductive check of the validation fit started",
    "zsl: inductive check of the validation fit done (X s)",
    "zsl: fit started",
    "zsl: fit done (X s)",
    "zsl: predict zsl started",
    "zsl: predict zsl done (X s)",
    "zsl: predict gzsl started",
    "zsl: predict gzsl done (X s)",
    "zsl: predict scale started",
    "zsl: predict scale done (X s)",
    "zsl: inductive check of the fit started",
    "zsl: inductive check of the fit done (X s)",
]


class Collect:
    def __init__(self) -> None:
        self.events: list[tuple[ProgressEvent, float]] = []
        self.rejects: list[str] = []

    def event(self, event: ProgressEvent, elapsed_s: float) -> None:
        self.events.append((event, elapsed_s))

    def rejected(self, message: str, elapsed_s: float) -> None:
        self.rejects.append(message)


def _package(tmp_path: Path, code: str) -> Path:
    return write_tiny_package(tmp_path, code)


def _run(tmp_path: Path, code: str, runner: str, request: pytest.FixtureRequest) -> Collect:
    use_runner(runner, request)
    sink = Collect()
    with reporting(sink):
        record = run_submission(
            _package(tmp_path, code), DEMO, runner=runner, store=False, quiet=True
        )
    assert record.runner == runner
    assert MARKER not in record.logs["stderr"] or code == HOSTILE
    return sink


@pytest.mark.slow  # up to 15 s in `make test-fast` on a busy 2-core machine (issue 28)
@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_reports_every_phase_in_order(
    runner: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    sink = _run(tmp_path, TINY, runner, request)
    got = [(e.phase, e.fit, e.state, e.setting) for e, _ in sink.events]
    assert got == DEMO_EVENTS
    assert sink.rejects == []
    elapsed = [at for _, at in sink.events]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0
    assert all(
        e.seconds is not None and e.seconds >= 0 for e, _ in sink.events if e.state == "done"
    )


@pytest.mark.slow  # up to 15 s in `make test-fast` on a busy 2-core machine (issue 28)
@pytest.mark.parametrize("runner", RUNNERS)
def test_garbage_on_the_channel_is_reported_and_the_run_goes_on(
    runner: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    sink = _run(tmp_path, HOSTILE, runner, request)
    assert [(e.phase, e.fit, e.state, e.setting) for e, _ in sink.events] == DEMO_EVENTS
    said = "the worker writes well-formed ones, so the model wrote it"
    assert sink.rejects == [
        "ignored a malformed progress line (Expecting property name enclosed in double quotes:"
        f" line 1 column 2 (char 1)): '{{not json'; {said}",
        'ignored a malformed progress line (seconds out of range): \'{"phase": "fit",'
        f' "fit": "main", "state": "done", "seconds...\'; {said}',
        "ignored a malformed progress line (phase, fit or state missing or unknown):"
        f' \'{{"phase": "train0"}}\'; {said}',
        "9 more malformed progress lines ignored",  # 6 per fit, 3 shown
    ]


@pytest.mark.slow  # up to 8 s in `make test-fast` on a busy 2-core machine (issue 28)
def test_zsl_run_prints_the_progress_lines(tmp_path: Path) -> None:
    package = str(_package(tmp_path, TINY))
    result = CliRunner().invoke(
        app, ["run", package, "--spec", str(DEMO), "--runner", "local", "--no-store"]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("[")]
    shown, elapsed = [], []
    for line in lines:
        match = re.fullmatch(r"\[ *(\d+\.\d) s\] (zsl: .*)", line)
        assert match is not None, line
        elapsed.append(float(match.group(1)))
        shown.append(re.sub(r"\(\d+\.\d s\)$", "(X s)", match.group(2)))
    assert shown == DEMO_LINES
    assert elapsed == sorted(elapsed)


def test_console_lines_have_the_elapsed_time_and_the_duration() -> None:
    out = io.StringIO()
    shown = ConsoleProgress(Console(file=out, width=40, highlight=False, markup=False))
    shown.event(ProgressEvent("fit", "main", "done", seconds=11.84), 12.34)
    shown.event(ProgressEvent("predict", "validation", "start", setting="gzsl_val"), 1234.5)
    shown.rejected("2 more malformed progress lines ignored", 3.0)
    assert out.getvalue().splitlines() == [
        "[  12.3 s] zsl: fit done (11.8 s)",
        "[1234.5 s] zsl: predict gzsl_val started",
        "[   3.0 s] zsl: warning: 2 more malformed progress lines ignored",
    ]


def test_reader_joins_lines_split_across_reads_and_after_model_output() -> None:
    sink = Collect()
    reader = ProgressReader(sink)
    line = event_line("predict", "main", "done", setting="zsl", seconds=0.25)
    reader.feed(b"model says hi " + line[:10])
    reader.feed(line[10:] + b"unended")
    reader.close()
    assert [e for e, _ in sink.events] == [ProgressEvent("predict", "main", "done", "zsl", 0.25)]
    assert sink.rejects == []


def test_reader_bounds_what_it_holds_and_passes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "EVENTS_LIMIT", 2)
    sink = Collect()
    reader = ProgressReader(sink)
    reader.feed(b"y" * 1_000_000)  # no newline: only the last LINE_LIMIT bytes are kept
    assert len(reader.partial) == progress.LINE_LIMIT
    reader.feed(b"\n" + event_line("fit", "main", "start") * 5)
    reader.close()
    assert len(sink.events) == 2
    assert sink.rejects == ["3 progress events beyond the first 2 ignored"]
    assert reader.summary() == {"progress_events": 2, "progress_rejected": 0}


def test_reader_survives_a_sink_that_fails() -> None:
    class Broken(Collect):
        def event(self, event: ProgressEvent, elapsed_s: float) -> None:
            raise OSError("terminal gone")

    reader = ProgressReader(Broken())
    reader.feed(event_line("fit", "main", "start") * 2)
    reader.close()
    assert reader.sink is None and len(reader.events) == 2


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"phase": "fit", "fit": "main", "state": "done", "seconds": float("nan")}, "range"),
        ({"phase": "fit", "fit": "main", "state": "done", "seconds": True}, "not a number"),
        ({"phase": "fit", "fit": "main", "state": "start", "seconds": 1}, "only to them"),
        ({"phase": "predict", "fit": "main", "state": "start"}, "only to them"),
        ({"phase": "predict", "fit": "main", "state": "start", "setting": "a b"}, "setting"),
        ({"phase": "fit", "fit": "main", "state": "start", "x": 1}, "unknown field 'x'"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_events_are_parsed_defensively(fields: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ProgressEvent.parse(fields)


def test_strip_events_keeps_the_model_output() -> None:
    event = event_line("fit", "main", "start").decode()
    text = f"a\n{event}partial {event}{MARKER}{{broken\n" + json.dumps({"b": 1}) + "\n"
    assert strip_events(text) == f'a\npartial \n{MARKER}{{broken\n{{"b": 1}}\n'

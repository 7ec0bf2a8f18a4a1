"""The store under SIGKILL and concurrency, on SQLite and PostgreSQL.

- A process saving a big record (many scores, both curve shapes) is SIGKILLed right before
  each statement of the save in turn, COMMIT included: the store then holds no trace of the run
  (first save) or its previous complete version (re-save), never part of its scores; saving
  again stores it complete. A real ``zsl run`` killed while its model runs leaves nothing, and
  running it again stores one complete run.
- Four processes open a fresh store at once and save overlapping records (shared benchmark,
  shared and own submissions, repeated saves, single and batch): exact row counts afterwards,
  every run's scores from one save.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from harness.records import RunRecord, ScoreEntry
from harness.spec import load_spec
from harness.store import count_runs, load_runs, make_engine, open_store, save_run
from harness.store.migrations import VERSION_TABLE, current_revision, head_revision
from tests.conftest import REPO, SPECS, SUBMISSIONS
from tests.store.test_store import row_counts
from tests.store_fixtures import store_url
from tests.store_records import big_record
from tests.store_workers import (
    BENCHMARKS,
    ROUNDS,
    concurrent_record,
    concurrent_writer,
    record_statements,
    save_and_stall,
    submissions_of,
)

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

__all__ = ["store_url"]

FORK = multiprocessing.get_context("fork")  # the children run code this process imported
SPAWN = multiprocessing.get_context("spawn")  # independent processes, as separate `zsl` runs


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    engine = open_store(store_url)
    yield engine
    engine.dispose()


def _versions(key: str) -> tuple[RunRecord, RunRecord]:
    """An old and a new record of one run, differing in every value, score count and curve."""
    old = big_record(
        benchmark=f"b-{key}", name=f"s-{key}", n_plain=30, n_ausuc=400, tag={"v": "old"}
    )
    new = big_record(
        benchmark=f"b-{key}", name=f"s-{key}", n_plain=24, n_ausuc=350, shift=3, tag={"v": "new"}
    )
    return old, new


def _kill_before_statement(url: str, record: RunRecord, stop_at: int, tmp: Path) -> None:
    marker = tmp / f"stalled-{stop_at}"
    child = FORK.Process(target=save_and_stall, args=(url, record, stop_at, str(marker)))
    child.start()
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert child.is_alive(), f"the save ended before statement {stop_at}"
        assert time.monotonic() < deadline, f"statement {stop_at} not reached in 30 s"
        time.sleep(0.002)
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join(30)
    assert child.exitcode == -signal.SIGKILL


@pytest.mark.parametrize("resave", [False, True], ids=["first-save", "re-save"])
def test_save_killed_before_any_statement_leaves_no_partial_run(
    engine: Engine, store_url: str, resave: bool, tmp_path: Path
) -> None:
    # The statements this kind of save runs, recorded on a run of its own.
    probe_old, probe_new = _versions("probe")
    if resave:
        save_run(engine, probe_old)
    recorder = make_engine(store_url)
    statements = record_statements(recorder)
    save_run(recorder, probe_new)
    recorder.dispose()
    writes = ["INSERT INTO zsl_score", "INSERT INTO zsl_curve_point", "COMMIT"]
    writes += (
        ["DELETE FROM zsl_curve_point", "DELETE FROM zsl_score"]
        if resave
        else ["INSERT INTO zsl_benchmark", "INSERT INTO zsl_submission", "INSERT INTO zsl_run"]
    )
    for write in writes:  # the kills below land before each of these
        assert any(s.startswith(write) for s in statements), (write, statements)
    assert statements[-1] == "COMMIT"

    complete: list[RunRecord] = [probe_new]
    for stop_at in range(1, len(statements) + 1):
        old, new = _versions(str(stop_at))
        if resave:
            save_run(engine, old)
        counts = row_counts(engine)
        engine.dispose()  # nothing pooled crosses the fork
        _kill_before_statement(store_url, new, stop_at, tmp_path)

        where = f"killed before statement {stop_at}: {statements[stop_at - 1][:60]}"
        assert row_counts(engine) == counts, where
        assert load_runs(engine, benchmark=f"b-{stop_at}") == ([old] if resave else []), where
        save_run(engine, new)  # the re-run succeeds and is complete
        assert load_runs(engine, benchmark=f"b-{stop_at}") == [new], where
        complete.append(new)
    assert load_runs(engine) == sorted(complete, key=lambda r: r.benchmark.id)


def curve_length(entry: ScoreEntry) -> int:
    """How many points the score's curve has (0 without one): list items, or the length of its
    columns (AUSUC's seen/unseen, the k/value of top-k and hp@k)."""
    curve = entry.details.get("curve")
    if curve is None:
        return 0
    if isinstance(curve, list):
        return len(curve)
    [length] = {len(column) for column in curve.values() if isinstance(column, list)}
    return length


def _children_of(pid: int) -> list[str]:
    try:  # needs CONFIG_PROC_CHILDREN; else scan every process's parent
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[1] == str(pid):  # fields after "(comm)": state, ppid, ...
                children.append(stat.parent.name)
        return children


def _worker_of(pid: int) -> int | None:
    """The pid of ``pid``'s child running the model (``python -m harness.worker.phases``), if any."""
    for child in _children_of(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness.worker.phases" in argv:
            return int(child)
    return None


def _zsl(*args: str) -> list[str]:
    script = Path(sys.executable).parent / "zsl"
    return (
        [str(script), *args]
        if script.exists()
        else [sys.executable, "-m", "harness.cli.main", *args]
    )


@pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="needs /proc to find the model process"
)
def test_zsl_run_killed_while_the_model_runs_then_rerun(store_url: str, tmp_path: Path) -> None:
    spec = SPECS / "demo.yaml"
    argv = _zsl("run", str(SUBMISSIONS / "eszsl"), "--spec", str(spec), "--runner", "local")
    env = {**os.environ, "ZSL_DATABASE_URL": store_url, "TMPDIR": str(tmp_path)}
    zsl = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 120
    worker = None
    while worker is None:
        assert zsl.poll() is None, f"zsl run ended before its model ran: {zsl.stdout.read()!r}"  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the model did not start in 120 s"
        worker = _worker_of(zsl.pid)
        time.sleep(0.005)
    zsl.kill()  # SIGKILL, while the model runs
    zsl.wait(30)
    zsl.stdout.close()  # type: ignore[union-attr]
    with contextlib.suppress(ProcessLookupError):  # the runner's own session: not killed with zsl
        os.kill(worker, signal.SIGKILL)
    assert zsl.returncode == -signal.SIGKILL

    engine = open_store(store_url)
    assert count_runs(engine) == 0

    rerun = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    [record] = load_runs(engine)
    loaded_spec = load_spec(spec)
    assert [(s.setting, s.metric) for s in record.scores] == [
        (setting, m.key)
        for setting in loaded_spec.settings
        for m in loaded_spec.metrics_for(setting)
    ]
    assert (record.submission.name, record.benchmark.id, record.runner) == (
        "eszsl",
        loaded_spec.benchmark,
        "local",
    )
    assert set(record.predictions_hashes) >= set(loaded_spec.settings)
    curves = [s for s in record.scores if "curve" in s.details]
    assert curves, "the demo spec scores DARTS and AUSUC curves"
    assert row_counts(engine)["curve_points"] == sum(curve_length(s) for s in curves)
    engine.dispose()


def test_four_processes_open_and_write_one_fresh_store(store_url: str, tmp_path: Path) -> None:
    workers = 4
    barrier = SPAWN.Barrier(workers)
    procs = [
        SPAWN.Process(target=concurrent_writer, args=(store_url, w, barrier, str(tmp_path)))
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(180)
    errors = {
        p.name: (tmp_path / f"{w}.err").read_text()
        for w, p in enumerate(procs)
        if (tmp_path / f"{w}.err").exists()
    }
    assert errors == {}
    assert [p.exitcode for p in procs] == [0] * workers

    engine = make_engine(store_url)
    with engine.connect() as conn:
        assert current_revision(conn) == head_revision()
        assert conn.execute(text(f"SELECT count(*) FROM {VERSION_TABLE}")).scalar() == 1
    records = load_runs(engine)
    keys = {(r.benchmark.id, r.submission.name) for r in records}
    names = {name for w in range(workers) for name in submissions_of(w)}
    assert keys == {(b, n) for b in BENCHMARKS for n in names}  # no run lost
    expected_scores = expected_points = 0
    for record in records:
        tags = {(s.details["writer"], s.details["round"]) for s in record.scores}
        assert len(tags) == 1, f"scores of {record.submission.name} mix saves {tags}"
        [(writer, round_)] = tags
        assert record == concurrent_record(
            record.benchmark.id, record.submission.name, writer, round_
        )
        if record.submission.name.startswith("own-"):  # one writer: its last save wins
            assert (f"own-{writer}", round_) == (record.submission.name, ROUNDS - 1)
        expected_scores += len(record.scores)
        expected_points += sum(curve_length(s) for s in record.scores)
    assert row_counts(engine) == {  # no duplicate row of any kind, no orphan
        "benchmarks": len(BENCHMARKS),
        "submissions": len(names),
        "runs": len(BENCHMARKS) * len(names),
        "scores": expected_scores,
        "curve_points": expected_points,
    }
    engine.dispose()

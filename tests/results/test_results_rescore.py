"""The prediction archive, `zsl results rescore`, and the `zsl results` commands on the demo."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.core.errors import HarnessError, IntegrityError
from harness.data.prepare import load_benchmark
from harness.executors import rescore as rescore_driver
from harness.executors import task as task_module
from harness.executors.rescore import rescore_store
from harness.metrics import metrics
from harness.metrics.base import Metric, MetricInput
from harness.pipeline import generate_prediction_files, read_all, run_submission
from harness.records import RunRecord
from harness.results.prediction_archive import (
    PREDICTIONS_DIR_ENV,
    ArchiveMissingError,
    archive_file,
    archived_path,
    predictions_dir,
)
from harness.spec import load_spec
from harness.store import StaleRunError, load_runs, open_store, save_run
from harness.submission.package import load_package
from tests.conftest import SPECS, SUBMISSIONS, made_once, set_audit_inputs

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

DEMO = SPECS / "demo.yaml"
BUMPED = "per_class_top_k_accuracy"
#: Its registered version, and the one ``_bump`` moves it to.
CURRENT = metrics.get(BUMPED).version
NEXT = str(int(CURRENT) + 1)
cli = CliRunner()

# -- the archive on its own -----------------------------------------------------------------------

CONTENT = "sha256:" + "c" * 64
BENCH_A = "sha256:" + "a" * 64
BENCH_B = "sha256:" + "b" * 64


def _file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_archive_names_files_by_their_bytes_and_keeps_one_copy(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    one = _file(tmp_path / "a" / "zsl.safetensors", b"prediction bytes")
    two = _file(tmp_path / "b" / "zsl.safetensors", b"prediction bytes")
    expected = "sha256:" + hashlib.sha256(b"prediction bytes").hexdigest()
    for source in (one, two, one):
        got = archive_file(
            source, content_hash=CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root
        )
        assert got == expected
    blobs = list((root / "sha256").iterdir())
    assert blobs == [root / "sha256" / f"{expected.removeprefix('sha256:')}.safetensors"]
    found = archived_path(CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root)
    assert found == blobs[0] and found.read_bytes() == b"prediction bytes"
    one.write_bytes(b"changed later")  # a copy, not a link
    assert found.read_bytes() == b"prediction bytes"


def test_archive_lookup_matches_benchmark_and_setting(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    for bench, data in ((BENCH_A, b"for a"), (BENCH_B, b"for b")):
        source = _file(tmp_path / bench[-1] / "x.npz", data)
        archive_file(source, content_hash=CONTENT, benchmark_hash=bench, setting="zsl", root=root)
    assert archived_path(
        CONTENT, benchmark_hash=BENCH_B, setting="zsl", root=root
    ).read_bytes() == (b"for b")
    assert archived_path(
        CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root
    ).read_bytes() == (b"for a")
    with pytest.raises(ArchiveMissingError, match="no archived 'gzsl' predictions"):
        archived_path(CONTENT, benchmark_hash=BENCH_A, setting="gzsl", root=root)


def test_a_damaged_archive_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    source = _file(tmp_path / "zsl.safetensors", b"good bytes")
    archive_file(source, content_hash=CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root)
    (blob,) = (root / "sha256").iterdir()
    blob.chmod(0o644)
    blob.write_bytes(b"bad bytes!")
    with pytest.raises(IntegrityError, match=f"{blob}: archived prediction file has sha256"):
        archived_path(CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root)
    # archiving the good file again repairs it
    archive_file(source, content_hash=CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root)
    assert archived_path(CONTENT, benchmark_hash=BENCH_A, setting="zsl", root=root) == blob
    assert blob.read_bytes() == b"good bytes"


@pytest.mark.parametrize("bad", ["sha256:../../etc/passwd", "md5:abc", "sha256:" + "A" * 64, ""])
def test_hashes_from_records_are_checked_before_naming_paths(tmp_path: Path, bad: str) -> None:
    with pytest.raises(HarnessError, match="is not of the form sha256:<64 lowercase hex"):
        archived_path(bad, benchmark_hash=BENCH_A, setting="zsl", root=tmp_path / "archive")
    assert not (tmp_path / "archive").exists()


def test_archive_location(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert predictions_dir() == isolated_home / "predictions"
    monkeypatch.setenv(PREDICTIONS_DIR_ENV, "/srv/zsl-predictions")
    assert predictions_dir() == Path("/srv/zsl-predictions")


# -- runs on the demo -----------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite3'}"


def _make_demo_runs(root: Path) -> None:
    """ESZSL (model code) and the prediction-file baseline run on the demo as a test would run
    them, stored in ``root/runs.sqlite3``, their prediction files archived in ``root/zsl-home``."""
    baseline = root / "nearest-seen-class-transfer"
    shutil.copytree(
        SUBMISSIONS / baseline.name,
        baseline,
        ignore=shutil.ignore_patterns("__pycache__", "predictions"),
    )
    url = f"sqlite:///{root / 'runs.sqlite3'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_HOME", str(root / "zsl-home"))
        patch.delenv("ZSL_DATABASE_URL", raising=False)
        set_audit_inputs(patch)  # as the autouse fixture sets them for a test
        generate_prediction_files(load_package(baseline), load_benchmark(load_spec(DEMO)))
        run_submission(SUBMISSIONS / "eszsl", DEMO, database_url=url, quiet=True)
        run_submission(baseline, DEMO, database_url=url, quiet=True)


@pytest.fixture(scope="session")
def demo_runs_made(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The two demo runs, made once for the session (:func:`made_once`): ten tests start from
    them, and running them took each of those tests about ten seconds."""
    return made_once(tmp_path_factory, worker_id, "rescore-demo-runs", _make_demo_runs)


@pytest.fixture
def demo_runs(demo_runs_made: Path, db: str, isolated_home: Path) -> dict[str, RunRecord]:
    """ESZSL and the baseline, stored in ``db`` with their archived prediction files in this
    test's ZSL_HOME: a copy of :func:`demo_runs_made`, as if this test had run them."""
    shutil.copytree(demo_runs_made / "zsl-home", isolated_home, dirs_exist_ok=True)
    # The backup API reads through the write-ahead log: a copy of the file alone may miss it.
    source = closing(sqlite3.connect(demo_runs_made / "runs.sqlite3"))
    with source as made, closing(sqlite3.connect(db.removeprefix("sqlite:///"))) as copy:
        made.backup(copy)
    engine = open_store(db)
    records = {record.submission.name: record for record in load_runs(engine)}
    engine.dispose()
    return {"eszsl": records["eszsl"], "baseline": records["nearest-seen-class-transfer"]}


def _bump(monkeypatch: pytest.MonkeyPatch) -> None:
    """A behaviour change of per-class top-k accuracy (it now counts top-(k+1)), version NEXT."""
    old: Metric = metrics.get(BUMPED)

    def compute(data: MetricInput, params: Any) -> Any:
        return old.compute(data, params.model_copy(update={"k": params.k + 1}))

    monkeypatch.setitem(
        metrics._items, BUMPED, dataclasses.replace(old, version=NEXT, compute=compute)
    )


def _by_key(record: RunRecord) -> dict[tuple[str, str], Any]:
    return {(e.setting, e.metric): e for e in record.scores}


def test_stored_runs_archive_the_files_they_were_scored_from(
    tmp_path: Path, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_benchmark(load_spec(DEMO))
    for record in demo_runs.values():
        paths = {
            setting: archived_path(
                content, benchmark_hash=bench.hash, setting=setting, root=predictions_dir()
            )
            for setting, content in record.predictions_hashes.items()
        }
        for path in paths.values():
            assert path.name == hashlib.sha256(path.read_bytes()).hexdigest() + ".safetensors"
        checked = read_all(bench, paths)
        assert {s: p.sha256 for s, p in checked.items()} == record.predictions_hashes
    unstored = tmp_path / "unstored"
    monkeypatch.setenv(PREDICTIONS_DIR_ENV, str(unstored))
    run_submission(SUBMISSIONS / "eszsl", DEMO, store=False, quiet=True)
    assert not unstored.exists()


def test_nothing_is_rescored_while_metrics_are_current(
    db: str, demo_runs: dict[str, RunRecord]
) -> None:
    engine = open_store(db)
    before = load_runs(engine)
    outcomes = rescore_store(engine, SPECS)
    assert [o.status for o in outcomes] == ["current", "current"]
    assert load_runs(engine) == before


def test_a_bumped_metric_rescores_exactly_its_entries_like_a_fresh_run(
    db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_store(db)
    before = {r.submission.name: r for r in load_runs(engine)}
    _bump(monkeypatch)

    # inline: the bumped metric is registered in this process only
    dry = rescore_store(engine, SPECS, dry_run=True, executor="inline")
    assert [o.status for o in dry] == ["would rescore", "would rescore"]
    assert {r.submission.name: r for r in load_runs(engine)} == before  # nothing saved

    outcomes = rescore_store(engine, SPECS, executor="inline")
    assert [o.status for o in outcomes] == ["rescored", "rescored"]
    after = {r.submission.name: r for r in load_runs(engine)}
    fresh = run_submission(SUBMISSIONS / "eszsl", DEMO, store=False, quiet=True)
    for name, record in after.items():
        old, new = _by_key(before[name]), _by_key(record)
        assert list(old) == list(new)
        for key, entry in new.items():
            if entry.function == BUMPED:
                assert (entry.version, old[key].version) == (NEXT, CURRENT), key
            else:
                assert entry == old[key], key  # untouched metrics keep version and value
        assert f"per_class_top_k_accuracy version {CURRENT} -> {NEXT}" in record.logs["rescore"]
        assert record.created_at == before[name].created_at
        assert record.timings == before[name].timings
    # the rescored values are what a fresh run with the new metric scores
    rescored = next(o.rescored for o in outcomes if o.record.submission.name == "eszsl")
    assert rescored is not None
    assert rescored.scores == fresh.scores
    top1_old = _by_key(before["eszsl"])[("zsl", "top1")].value
    assert _by_key(after["eszsl"])[("zsl", "top1")].value == _by_key(fresh)[("zsl", "top1")].value
    assert _by_key(after["eszsl"])[("zsl", "top1")].value > top1_old  # top-2 counts more
    # once rescored, the runs are current
    assert [o.status for o in rescore_store(engine, SPECS, executor="inline")] == [
        "current",
        "current",
    ]


def test_a_run_without_archived_predictions_is_skipped_and_the_others_proceed(
    db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    content = demo_runs["eszsl"].predictions_hashes["zsl"].removeprefix("sha256:")
    shutil.rmtree(predictions_dir() / "content" / "sha256" / content)
    _bump(monkeypatch)
    argv = ["results", "rescore", "--specs", str(SPECS), "--database-url", db]
    result = cli.invoke(_app(), [*argv, "--executor", "inline"])
    assert result.exit_code == 1, result.output
    assert "skipped: eszsl@1.0 on demo v1: no archived 'zsl' predictions" in _flat(result.stderr)
    assert "rescored: nearest-seen-class-transfer@1.0 on demo v1" in _flat(result.stdout)
    stored = {r.submission.name: r for r in load_runs(open_store(db))}
    assert _by_key(stored["eszsl"])[("zsl", "top1")].version == CURRENT
    assert _by_key(stored["nearest-seen-class-transfer"])[("zsl", "top1")].version == NEXT


def test_a_run_missing_a_metric_of_its_spec_is_rescored(
    db: str, demo_runs: dict[str, RunRecord]
) -> None:
    engine = open_store(db)
    full = demo_runs["eszsl"]
    partial = full.model_copy(update={"scores": [e for e in full.scores if e.metric != "top5"]})
    save_run(engine, partial)
    outcomes = {o.record.submission.name: o for o in rescore_store(engine, SPECS)}
    assert outcomes["nearest-seen-class-transfer"].status == "current"
    eszsl = outcomes["eszsl"]
    assert eszsl.status == "rescored"
    assert eszsl.reasons == ["metric list differs from the spec (not scored: zsl/top5)"]
    assert eszsl.rescored is not None and eszsl.rescored.scores == full.scores


def test_a_spec_changed_without_a_new_version_is_refused(
    tmp_path: Path, db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(SPECS / "demo", specs / "demo")
    text = DEMO.read_text()
    (specs / "demo.yaml").write_text(text.replace('title: "', 'title: "Edited ', 1))
    _bump(monkeypatch)
    outcomes = rescore_store(open_store(db), specs)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("hashes to" in o.message and "needs a new version" in o.message for o in outcomes)
    assert not [o for o in outcomes if o.rescored is not None]


def test_force_rescores_current_runs_and_no_spec_skips(
    tmp_path: Path, db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_store(db)
    before = load_runs(engine)
    forced = rescore_store(engine, SPECS, force=True)
    assert [(o.status, o.changes) for o in forced] == [("rescored", []), ("rescored", [])]
    after = load_runs(engine)
    assert [r.scores for r in after] == [r.scores for r in before]
    assert all(r.logs["rescore"].endswith(": forced") for r in after)
    empty = tmp_path / "no-specs"
    empty.mkdir()
    _bump(monkeypatch)
    outcomes = rescore_store(engine, empty)
    assert {o.status for o in outcomes} == {"skipped"}
    assert "no spec for demo v1" in outcomes[0].message


def test_a_run_stored_again_during_a_rescore_is_not_overwritten(
    db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_store(db)
    _bump(monkeypatch)
    real = rescore_driver.rescore_records

    def rescore_then_rerun(records: Any, *args: Any, **kwargs: Any) -> Any:
        outcomes = real(records, *args, **kwargs)
        # Meanwhile `zsl run` stores ESZSL again (a later run of the same versions).
        run_submission(SUBMISSIONS / "eszsl", DEMO, database_url=db, quiet=True)
        return outcomes

    monkeypatch.setattr(rescore_driver, "rescore_records", rescore_then_rerun)
    with pytest.raises(StaleRunError, match=r"run of eszsl@1.0 on demo v1 was stored again"):
        rescore_store(engine, SPECS, executor="inline")
    after = {r.submission.name: r for r in load_runs(engine)}
    # The fresh run (scored with the bumped metric) stays; the baseline's rescore was not saved.
    assert "rescore" not in after["eszsl"].logs
    assert "rescore" not in after["nearest-seen-class-transfer"].logs


# -- the CLI --------------------------------------------------------------------------------------


def _app():  # type: ignore[no-untyped-def]
    from harness.cli.main import app

    return app


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", [[], ["export"], ["import"], ["rescore"]])
def test_results_commands_have_help_and_examples(command: list[str]) -> None:
    result = cli.invoke(_app(), ["results", *command, "--help"])
    assert result.exit_code == 0, result.output
    if command:
        assert "Examples:" in result.output and f"zsl results {command[0]}" in result.output


def test_cli_export_import_round_trip_and_tamper(
    tmp_path: Path, db: str, demo_runs: dict[str, RunRecord]
) -> None:
    out = tmp_path / "results"
    first = cli.invoke(_app(), ["results", "export", "--results", str(out), "--database-url", db])
    assert first.exit_code == 0, first.output
    assert "2 records in" in first.stdout and "2 written, 0 unchanged" in _flat(first.stdout)
    files = sorted(out.rglob("*.json"))
    assert [p.relative_to(out).as_posix() for p in files] == [
        "demo/v1/eszsl@1.0.json",
        "demo/v1/nearest-seen-class-transfer@1.0.json",
    ]
    snapshot = [p.read_bytes() for p in files]
    again = cli.invoke(_app(), ["results", "export", "--results", str(out), "--database-url", db])
    assert "0 written, 2 unchanged" in _flat(again.stdout)
    assert [p.read_bytes() for p in files] == snapshot

    fresh = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    imported = cli.invoke(
        _app(), ["results", "import", "--results", str(out), "--database-url", fresh]
    )
    assert imported.exit_code == 0, imported.output
    assert "imported 2 records" in imported.stdout
    assert load_runs(open_store(fresh)) == load_runs(open_store(db))

    text = files[0].read_text()
    tampered = re.sub(r'"runner": "[a-z]+"', '"runner": "cloud"', text, count=1)
    assert tampered != text
    files[0].write_text(tampered)
    other = f"sqlite:///{tmp_path / 'other.sqlite3'}"
    refused = cli.invoke(
        _app(), ["results", "import", "--results", str(out), "--database-url", other]
    )
    assert refused.exit_code == 2
    assert refused.stderr.startswith(f"error: {files[0]}: id: ")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert load_runs(open_store(other)) == []


def test_cli_rescore_dry_run_reports_changes(
    db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    current = cli.invoke(
        _app(), ["results", "rescore", "--specs", str(SPECS), "--database-url", db]
    )
    assert current.exit_code == 0, current.output
    assert "2 runs: 2 current" in current.stdout
    _bump(monkeypatch)
    before = load_runs(open_store(db))
    argv = ["results", "rescore", "--dry-run", "--specs", str(SPECS), "--database-url", db]
    dry = cli.invoke(_app(), [*argv, "--executor", "inline"])
    assert dry.exit_code == 0, dry.output
    out = _flat(dry.stdout)
    assert "would rescore: eszsl@1.0 on demo v1" in out
    assert (
        f"zsl/top1: per_class_top_k_accuracy v{CURRENT} -> per_class_top_k_accuracy v{NEXT}" in out
    )
    assert "2 runs: 2 would rescore" in out
    assert load_runs(open_store(db)) == before


def test_a_rescore_that_changes_more_than_scores_is_refused(
    db: str, demo_runs: dict[str, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's re-scored record may differ from the stored one in its scores and rescore
    log only; anything else (here: the submission's declarations) is refused, nothing saved."""
    engine = open_store(db)
    before = load_runs(engine)
    real = task_module.rescore_record

    def tampering(record: RunRecord, *args: Any, **kwargs: Any) -> RunRecord:
        new = real(record, *args, **kwargs)
        submission = new.submission.model_copy(
            update={"declarations": {**new.submission.declarations, "transductive": True}}
        )
        return new.model_copy(update={"submission": submission})

    monkeypatch.setattr(task_module, "rescore_record", tampering)
    outcomes = rescore_store(engine, SPECS, force=True, executor="inline")
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("differs from the stored one in more than its scores" in o.message for o in outcomes)
    assert load_runs(engine) == before

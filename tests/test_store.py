"""The run store: round trips, one run per (benchmark version, submission version), atomic saves."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, text
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, func, select

from harness.errors import HarnessError, IntegrityError
from harness.records import BenchmarkInfo, RunRecord, ScoreEntry, SubmissionInfo
from harness.store import (
    count_runs,
    create_tables,
    database_url,
    load_runs,
    make_engine,
    open_store,
    save_run,
    service,
)
from harness.store.models import BenchmarkRow, ScoreRow, SubmissionRow

T0 = datetime(2024, 5, 17, 12, 30, 15, 123456, tzinfo=UTC)


def make_record(
    *,
    benchmark: str = "cub-demo",
    benchmark_version: int = 1,
    benchmark_hash: str = "sha256:" + "b" * 64,
    name: str = "ale",
    version: str = "1.0",
    package_hash: str = "sha256:" + "a" * 64,
    zsl_top1: float = 0.5,
    gzsl: tuple[float, float, float] | None = (0.6, 0.4, 0.48),
    created_at: datetime = T0,
    extra_scores: list[ScoreEntry] | None = None,
) -> RunRecord:
    """A run record with ZSL top-1/top-5 and (optionally) GZSL seen/unseen/H scores."""
    scores = [
        ScoreEntry(
            setting="zsl",
            metric="top1",
            function="top_k_accuracy_score",
            version="1",
            value=zsl_top1,
            details={"per_class": [zsl_top1, 1.0], "k": 1},
        ),
        ScoreEntry(
            setting="zsl",
            metric="top5",
            function="top_k_accuracy_score",
            version="1",
            value=min(1.0, zsl_top1 + 0.3),
        ),
    ]
    if gzsl is not None:
        for metric, value in zip(("seen", "unseen", "H"), gzsl, strict=True):
            scores.append(
                ScoreEntry(
                    setting="gzsl",
                    metric=metric,
                    function=f"gzsl_{metric}",
                    version="2",
                    value=value,
                )
            )
    scores.extend(extra_scores or [])
    return RunRecord(
        benchmark=BenchmarkInfo(
            id=benchmark,
            version=benchmark_version,
            title="CUB-200 demo",
            hash=benchmark_hash,
            spec_hash="sha256:" + "c" * 64,
            primary={"zsl": "top1", "gzsl": "H"},
            n_classes=200,
            n_seen=150,
            n_unseen=50,
        ),
        submission=SubmissionInfo(
            name=name,
            version=version,
            kind="model",
            package_hash=package_hash,
            authors=["A. Author", "B. Author"],
            paper="https://example.org/paper",
            url=None,
            description="attribute label embedding",
            declarations={"class_embedding": "attributes", "transductive": False},
        ),
        predictions_hashes={"zsl": "sha256:" + "d" * 64, "gzsl": "sha256:" + "e" * 64},
        harness_version="0.1.0",
        runner="local",
        environment={"python": "3.11.7", "numpy": "1.26.4"},
        timings={"fit": 1.5, "predict": 0.25},
        scores=scores,
        created_at=created_at,
    )


@pytest.fixture(params=["memory", "file"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    url = "sqlite://" if request.param == "memory" else f"sqlite:///{tmp_path / 'zsl.sqlite3'}"
    engine = make_engine(url)
    if request.param == "memory":
        assert isinstance(engine.pool, StaticPool)
    create_tables(engine)
    yield engine
    engine.dispose()


def _row_counts(engine: Engine) -> dict[str, int]:
    runs = count_runs(engine)  # its own session: an in-memory engine has one connection
    with Session(engine) as session:
        return {
            "benchmarks": session.exec(select(func.count()).select_from(BenchmarkRow)).one(),
            "submissions": session.exec(select(func.count()).select_from(SubmissionRow)).one(),
            "runs": runs,
            "scores": session.exec(select(func.count()).select_from(ScoreRow)).one(),
        }


# -- round trip and upsert --------------------------------------------------------------------


def test_save_load_round_trip(engine: Engine) -> None:
    record = make_record()
    run_id = save_run(engine, record)
    assert isinstance(run_id, int)
    loaded = load_runs(engine)
    assert loaded == [record]
    assert loaded[0].created_at.tzinfo is not None
    assert count_runs(engine) == 1


def test_round_trip_keeps_score_order_and_details(engine: Engine) -> None:
    extra = ScoreEntry(
        setting="zsl",
        metric="hp@2",
        function="hierarchical_precision_score",
        version="3",
        value=0.7,
        higher_is_better=True,
        details={"curve": [[0.0, 1.0], [0.5, 0.25]]},
    )
    record = make_record(extra_scores=[extra])
    record.scores.reverse()
    save_run(engine, record)
    assert load_runs(engine)[0].scores == record.scores


def test_saving_same_run_twice_updates_one_record(engine: Engine) -> None:
    first_id = save_run(engine, make_record(zsl_top1=0.5))
    newer = make_record(
        zsl_top1=0.55,
        gzsl=None,  # the new run has no GZSL scores: the old ones must go
        created_at=T0 + timedelta(days=1),
        extra_scores=[
            ScoreEntry(setting="zsl", metric="top2", function="top_k", version="1", value=0.6)
        ],
    )
    second_id = save_run(engine, newer)

    assert second_id == first_id
    assert count_runs(engine) == 1
    assert load_runs(engine) == [newer]
    assert _row_counts(engine) == {"benchmarks": 1, "submissions": 1, "runs": 1, "scores": 3}


def test_new_submission_version_is_a_new_run_and_order_is_deterministic(engine: Engine) -> None:
    records = [
        make_record(name="zeta", version="1.0"),
        make_record(name="ale", version="2.0"),
        make_record(benchmark="awa2", name="ale", version="1.0"),
        make_record(name="ale", version="1.0"),
    ]
    for record in records:
        save_run(engine, record)
    keys = [(r.benchmark.id, r.submission.name, r.submission.version) for r in load_runs(engine)]
    assert keys == [
        ("awa2", "ale", "1.0"),
        ("cub-demo", "ale", "1.0"),
        ("cub-demo", "ale", "2.0"),
        ("cub-demo", "zeta", "1.0"),
    ]
    assert count_runs(engine) == 4
    assert [r.submission.name for r in load_runs(engine, benchmark="awa2")] == ["ale"]
    assert load_runs(engine, benchmark="missing") == []


def test_each_run_keeps_the_package_hash_it_was_made_with(engine: Engine) -> None:
    save_run(engine, make_record(benchmark="awa2", package_hash="sha256:" + "1" * 64))
    save_run(engine, make_record(benchmark="cub-demo", package_hash="sha256:" + "2" * 64))
    by_benchmark = {r.benchmark.id: r.submission.package_hash for r in load_runs(engine)}
    assert by_benchmark == {"awa2": "sha256:" + "1" * 64, "cub-demo": "sha256:" + "2" * 64}


def test_changed_benchmark_hash_under_same_version_is_refused(engine: Engine) -> None:
    original = make_record()
    save_run(engine, original)
    with pytest.raises(IntegrityError, match=r"'cub-demo' v1 is stored with hash .* new version"):
        save_run(engine, make_record(name="other", benchmark_hash="sha256:" + "f" * 64))
    assert load_runs(engine) == [original]


# -- nothing half-written ---------------------------------------------------------------------


def test_failure_after_run_row_rolls_back_everything(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_record()
    save_run(engine, original)
    before = _row_counts(engine)
    real_replace = service._replace_scores

    def replace_then_fail(session: Session, run_id: int, scores: list[ScoreEntry]) -> None:
        real_replace(session, run_id, scores)  # old scores deleted, new ones flushed ...
        raise RuntimeError("disk on fire")  # ... and then the transaction dies

    monkeypatch.setattr(service, "_replace_scores", replace_then_fail)
    changed = make_record(zsl_top1=0.9, gzsl=None, created_at=T0 + timedelta(hours=1))
    changed.submission.authors = ["Someone Else"]
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_run(engine, changed)
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_run(engine, make_record(benchmark="awa2", name="new"))

    assert load_runs(engine) == [original]
    assert _row_counts(engine) == before


def test_first_save_failing_leaves_an_empty_store(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_args: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "_replace_scores", fail)
    with pytest.raises(RuntimeError, match="boom"):
        save_run(engine, make_record())
    assert _row_counts(engine) == {"benchmarks": 0, "submissions": 0, "runs": 0, "scores": 0}


def test_score_the_database_rejects_rolls_back(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_record()
    save_run(engine, original)
    # Skip the up-front check so the duplicate reaches the UNIQUE (run, setting, metric).
    monkeypatch.setattr(service, "_check_record", lambda record: None)
    duplicate = ScoreEntry(setting="zsl", metric="top1", function="f", version="1", value=0.1)
    with pytest.raises(sqlalchemy.exc.IntegrityError, match="UNIQUE"):
        save_run(engine, make_record(zsl_top1=0.8, extra_scores=[duplicate]))
    assert load_runs(engine) == [original]


@pytest.mark.parametrize(
    ("bad_score", "message"),
    [
        (
            ScoreEntry(setting="zsl", metric="top1", function="f", version="1", value=0.1),
            r"two scores for zsl/top1",
        ),
        (
            ScoreEntry(setting="gzsl", metric="auc", function="f", version="1", value=float("nan")),
            r"score gzsl/auc is nan; the store keeps finite values only",
        ),
        (
            ScoreEntry(
                setting="gzsl",
                metric="auc",
                function="f",
                version="1",
                value=0.3,
                details={"per_class": [0.1, float("inf")]},
            ),
            r"details of gzsl/auc is not portable JSON",
        ),
    ],
)
def test_invalid_scores_are_refused_before_writing(
    engine: Engine, bad_score: ScoreEntry, message: str
) -> None:
    original = make_record()
    save_run(engine, original)
    with pytest.raises(HarnessError, match=message):
        save_run(engine, make_record(zsl_top1=0.8, extra_scores=[bad_score]))
    assert load_runs(engine) == [original]


# -- engine and URL ---------------------------------------------------------------------------


def test_file_sqlite_uses_wal_and_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'zsl.sqlite3'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
    engine.dispose()


def test_concurrent_writers_on_file_sqlite(tmp_path: Path) -> None:
    engine = open_store(f"sqlite:///{tmp_path / 'zsl.sqlite3'}")
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(4):
                save_run(engine, make_record(name=f"sub{worker}", version=str(i)))
                save_run(engine, make_record(name=f"sub{worker}", version=str(i), zsl_top1=0.25))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert count_runs(engine) == 24
    assert {r.score("zsl", "top1").value for r in load_runs(engine)} == {0.25}  # type: ignore[union-attr]
    engine.dispose()


def test_database_url_prefers_zsl_database_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ZSL_DATABASE_URL", "postgresql://zsl@db.internal/leaderboard")
    monkeypatch.setenv("ZSL_HOME", str(tmp_path / "ignored"))
    assert database_url() == "postgresql://zsl@db.internal/leaderboard"
    assert database_url(tmp_path / "also-ignored") == "postgresql://zsl@db.internal/leaderboard"
    assert not (tmp_path / "ignored").exists()


def test_database_url_defaults_under_zsl_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ZSL_DATABASE_URL", raising=False)
    monkeypatch.setenv("ZSL_HOME", str(tmp_path / "home"))
    assert database_url() == f"sqlite:///{tmp_path}/home/zsl.sqlite3"
    assert (tmp_path / "home").is_dir()
    assert database_url(tmp_path / "explicit") == f"sqlite:///{tmp_path}/explicit/zsl.sqlite3"

    monkeypatch.delenv("ZSL_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    expected = tmp_path / "user" / ".cache" / "zsl-harness" / "zsl.sqlite3"
    assert database_url() == f"sqlite:///{expected}"


def test_database_url_unwritable_home_names_the_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ZSL_DATABASE_URL", raising=False)
    monkeypatch.setenv("ZSL_HOME", str(tmp_path / "locked"))

    def refuse(self: Path, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(HarnessError, match=r"permission denied.*set ZSL_HOME.*ZSL_DATABASE_URL"):
        database_url()


def test_open_store_uses_env_url_and_creates_tables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ZSL_DATABASE_URL", f"sqlite:///{tmp_path / 'env.sqlite3'}")
    engine = open_store()
    assert count_runs(engine) == 0
    save_run(engine, make_record())
    engine.dispose()
    assert (tmp_path / "env.sqlite3").exists()


def test_bad_database_url_is_a_harness_error() -> None:
    with pytest.raises(HarnessError, match="not a database URL"):
        make_engine("not a url at all")

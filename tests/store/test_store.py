"""The run store on SQLite and PostgreSQL: round trips (curves included), one run per
(benchmark version, submission version), atomic saves, migrations, URLs and their errors.

Every test taking ``store_url`` runs on both backends (``tests/store_fixtures.py``).
Kill-mid-save and multi-process tests: ``test_store_durability.py``.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import tomllib
from collections.abc import Iterator
from datetime import timedelta
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, MetaData, inspect, text
from sqlmodel import Session, SQLModel, func, select

from harness.audit import Relation
from harness.core.errors import HarnessError, IntegrityError
from harness.records import ScoreEntry
from harness.store import (
    StaleRunError,
    count_runs,
    create_tables,
    database_url,
    delete_run,
    load_runs,
    make_engine,
    open_store,
    save_run,
    save_runs,
    service,
)
from harness.store.curves import join_curve, split_curve
from harness.store.migrations import (
    MIGRATIONS_DIR,
    VERSION_TABLE,
    alembic_config,
    current_revision,
    head_revision,
    upgrade,
)
from harness.store.models import (
    BenchmarkRow,
    CurvePointRow,
    RunRow,
    ScoreRow,
    SubmissionRow,
)
from tests.conftest import REPO
from tests.store_fixtures import backend_of, postgres_admin_url, store_url
from tests.store_legacy import legacy_ddl
from tests.store_records import (
    T0,
    ausuc_curve,
    big_record,
    class_values,
    darts_points,
    make_record,
)

__all__ = ["make_record", "store_url"]  # make_record: the record factory other tests import


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    engine = open_store(store_url)
    yield engine
    engine.dispose()


def row_counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            name: session.exec(select(func.count()).select_from(model)).one()
            for name, model in (
                ("benchmarks", BenchmarkRow),
                ("submissions", SubmissionRow),
                ("runs", RunRow),
                ("scores", ScoreRow),
                ("curve_points", CurvePointRow),
            )
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


def test_in_memory_sqlite_store_round_trip() -> None:
    engine = open_store("sqlite://")
    record = big_record(n_plain=3, n_ausuc=5)
    save_run(engine, record)
    assert load_runs(engine) == [record]
    assert current_revision_of(engine) == head_revision()


def test_round_trip_keeps_score_order_and_details(engine: Engine) -> None:
    extra = ScoreEntry(
        setting="zsl",
        metric="hp@2",
        function="hierarchical_precision_score",
        version="3",
        value=0.7,
        higher_is_better=True,
        details={"curve": [[0.0, 1.0], [0.5, 0.25]], "k": 2},
    )
    record = make_record(extra_scores=[extra])
    record.scores.reverse()
    save_run(engine, record)
    assert load_runs(engine)[0].scores == record.scores


def test_curves_are_stored_as_points_and_come_back_in_their_shape(engine: Engine) -> None:
    record = big_record(n_plain=4, n_ausuc=7)
    save_run(engine, record)
    assert load_runs(engine) == [record]
    darts_area, darts_reward, ausuc = (
        record.score(*key) for key in (("zsl", "darts"), ("zsl", "darts@val90"), ("gzsl", "AUSUC"))
    )
    assert darts_area and darts_reward and ausuc
    # Key order survives too (details and a columns curve), not only dict equality.
    loaded = load_runs(engine)[0]
    for entry in (darts_area, darts_reward, ausuc):
        got = loaded.score(entry.setting, entry.metric)
        assert got is not None
        assert list(got.details) == list(entry.details)
    assert list(loaded.score("gzsl", "AUSUC").details["curve"]) == ["seen", "unseen", "n_points"]  # type: ignore[union-attr]

    with Session(engine) as session:
        scores = {s.metric: s for s in session.exec(select(ScoreRow))}
        points = session.exec(
            select(CurvePointRow).order_by(CurvePointRow.score_id, CurvePointRow.position)
        ).all()
    by_score: dict[int, list[CurvePointRow]] = {}
    for point in points:
        by_score.setdefault(point.score_id, []).append(point)
    # The details column holds everything but the curve.
    assert "curve" not in scores["darts"].details
    assert scores["darts"].details["temperature"] == 1.5
    assert scores["AUSUC"].details == {}
    assert scores["m01"].curve_layout is None and scores["m01"].id not in by_score

    darts = by_score[scores["darts"].id]  # type: ignore[index]
    expected = darts_points()
    assert [p.position for p in darts] == list(range(len(expected)))
    assert [p.point for p in darts] == expected
    assert [(p.x, p.y) for p in darts] == [(q["accuracy"], q["info_gain"]) for q in expected]
    assert (scores["darts"].curve_layout, scores["darts"].curve_x, scores["darts"].curve_y) == (
        "points",
        "accuracy",
        "info_gain",
    )

    curve = ausuc_curve(7)
    seen_unseen = by_score[scores["AUSUC"].id]  # type: ignore[index]
    assert [(p.x, p.y) for p in seen_unseen] == list(
        zip(curve["unseen"], curve["seen"], strict=True)
    )
    assert seen_unseen[2].point == {"seen": curve["seen"][2], "unseen": curve["unseen"][2]}
    assert (scores["AUSUC"].curve_layout, scores["AUSUC"].curve_x, scores["AUSUC"].curve_y) == (
        "columns",
        "unseen",
        "seen",
    )
    assert scores["AUSUC"].curve_meta == {
        "at": 0,
        "order": ["seen", "unseen", "n_points"],
        "extra": {"n_points": 73},
    }
    assert len(points) == 2 * len(expected) + 7


@pytest.mark.parametrize(
    "curve",
    [
        [],  # an empty list of points
        {"seen": [], "unseen": [], "n_points": 0},  # empty columns
        {"seen": [0.5, 0.25], "unseen": [0.1]},  # unequal lengths: not split, kept in details
        {"n_points": 3},  # no list at all
        0.5,  # not a curve shape
        [{"accuracy": 0.5, "info_gain": True}, {"accuracy": "x"}, None],  # odd points
    ],
)
def test_any_curve_value_round_trips(engine: Engine, curve: Any) -> None:
    entry = ScoreEntry(
        setting="gzsl",
        metric="odd",
        function="f",
        version="1",
        value=0.1,
        details={"before": 1, "curve": curve, "after": [2]},
    )
    record = make_record(extra_scores=[entry])
    save_run(engine, record)
    got = load_runs(engine)[0].score("gzsl", "odd")
    assert got == entry
    assert list(got.details) == ["before", "curve", "after"]  # type: ignore[union-attr]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def _details_with_curve(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 6))
    columns = draw(st.lists(st.sampled_from(["seen", "unseen", "a", "b"]), unique=True, max_size=3))
    curve = draw(
        st.one_of(
            st.lists(_json, max_size=6),  # points
            st.fixed_dictionaries(
                {k: st.lists(_json, min_size=n, max_size=n) for k in columns},
                optional={"n_points": st.integers(), "note": _json},
            ),  # columns and scalars
            _json,  # anything else
        )
    )
    before = draw(
        st.dictionaries(st.text(max_size=4).filter(lambda k: k != "curve"), _json, max_size=3)
    )
    after = draw(
        st.dictionaries(st.text(max_size=4).filter(lambda k: k != "curve"), _json, max_size=3)
    )
    return {**before, "curve": curve, **{k: v for k, v in after.items() if k not in before}}


@given(_details_with_curve())
def test_split_then_join_gives_the_details_back(details: dict[str, Any]) -> None:
    split = split_curve(details)
    assert "curve" not in split.details or split.layout is None
    joined = join_curve(split.details, split.layout, split.meta, split.points)
    assert joined == details
    assert list(joined) == list(details)
    if isinstance(joined["curve"], dict):
        assert list(joined["curve"]) == list(details["curve"])


def test_split_curve_reads_axes_only_from_numbers() -> None:
    split = split_curve(
        {"curve": [{"accuracy": 0.5, "info_gain": True}, {"accuracy": 1, "info_gain": 0.25}]}
    )
    assert (split.x_key, split.y_key) == ("accuracy", "info_gain")
    assert [split.xy(p) for p in split.points] == [(0.5, None), (1.0, 0.25)]
    mixed = split_curve({"curve": [{"accuracy": 0.5, "info_gain": 0.1}, {"accuracy": 0.7}]})
    assert (mixed.x_key, mixed.y_key) == (None, None)  # not every point has both
    assert join_curve(mixed.details, mixed.layout, mixed.meta, mixed.points) == {
        "curve": [{"accuracy": 0.5, "info_gain": 0.1}, {"accuracy": 0.7}]
    }


def test_a_curve_over_k_is_read_into_x_and_y() -> None:
    # per_class_top_k_accuracy and hierarchical_precision_at_k v2 keep {"k": [...], "value": [...]}
    details = {"k": 1, "curve": {"k": [1, 2, 5], "value": [0.5, 0.7, 0.9]}}
    split = split_curve(details)
    assert (split.layout, split.x_key, split.y_key) == ("columns", "k", "value")
    assert [split.xy(p) for p in split.points] == [(1.0, 0.5), (2.0, 0.7), (5.0, 0.9)]
    assert join_curve(split.details, split.layout, split.meta, split.points) == details


def test_class_values_and_structure_round_trip(engine: Engine) -> None:
    entry = ScoreEntry(
        setting="gzsl",
        metric="H",
        function="gzsl_harmonic_mean",
        version="2",
        value=0.48,
        class_values=class_values(5, 0.5),
    )
    structure = {"structural_ratio": 0.4, "hops": {"1": 7, "3": 2}, "per_class": [1, 2, None]}
    record = make_record(gzsl=None, extra_scores=[entry], structure=structure)
    save_run(engine, record)
    loaded = load_runs(engine)[0]
    assert loaded == record
    assert loaded.benchmark.structure == structure
    assert loaded.score("gzsl", "H").class_values == class_values(5, 0.5)  # type: ignore[union-attr]
    assert loaded.score("zsl", "top1").class_values is None  # type: ignore[union-attr]


def test_saving_same_run_twice_updates_one_record(engine: Engine) -> None:
    first_id = save_run(engine, big_record(n_plain=2, n_ausuc=9))
    newer = make_record(
        name="eszsl",
        benchmark="awa2",
        zsl_top1=0.55,
        gzsl=None,  # the new run has no GZSL scores and no curves: the old ones must go
        created_at=T0 + timedelta(days=1),
        extra_scores=[
            ScoreEntry(setting="zsl", metric="top2", function="top_k", version="1", value=0.6)
        ],
        structure={"structural_ratio": 0.5},
    )
    second_id = save_run(engine, newer)

    assert second_id == first_id
    assert load_runs(engine) == [newer]
    assert row_counts(engine) == {
        "benchmarks": 1,
        "submissions": 1,
        "runs": 1,
        "scores": 3,
        "curve_points": 0,
    }


def test_new_submission_version_is_a_new_run_and_order_is_deterministic(engine: Engine) -> None:
    records = [
        make_record(name="zeta", version="1.0"),
        make_record(name="ale", version="2.0"),
        make_record(benchmark="awa2", name="ale", version="1.0"),
        make_record(name="ale", version="1.0"),
        make_record(name="Yeti", version="1.0"),  # uppercase sorts first in Python, not in C.UTF8
    ]
    for record in records:
        save_run(engine, record)
    keys = [(r.benchmark.id, r.submission.name, r.submission.version) for r in load_runs(engine)]
    assert keys == [
        ("awa2", "ale", "1.0"),
        ("cub-demo", "Yeti", "1.0"),
        ("cub-demo", "ale", "1.0"),
        ("cub-demo", "ale", "2.0"),
        ("cub-demo", "zeta", "1.0"),
    ]
    assert count_runs(engine) == 5
    assert [r.submission.name for r in load_runs(engine, benchmark="awa2")] == ["ale"]
    assert load_runs(engine, benchmark="missing") == []


def test_load_runs_of_one_benchmark_carries_only_its_curves(engine: Engine) -> None:
    cub, awa = (
        big_record(benchmark="cub", n_plain=1, n_ausuc=3),
        big_record(benchmark="awa2", n_plain=2, n_ausuc=4, shift=1),
    )
    save_runs(engine, [cub, awa])
    assert load_runs(engine, benchmark="cub") == [cub]
    assert load_runs(engine, benchmark="awa2") == [awa]


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


# -- several records, deleting -------------------------------------------------------------------


def test_save_runs_is_one_transaction(engine: Engine) -> None:
    first = make_record(name="a")
    ids = save_runs(
        engine,
        [
            make_record(name="c"),
            first,
            big_record(name="b", benchmark="cub-demo", n_plain=1, n_ausuc=3),
        ],
    )
    assert len(set(ids)) == 3
    assert [r.submission.name for r in load_runs(engine)] == ["a", "b", "c"]
    before = row_counts(engine)
    stored = load_runs(engine)

    clash = make_record(name="d", benchmark_hash="sha256:" + "f" * 64)  # refused by the store
    with pytest.raises(IntegrityError, match="stored with hash"):
        save_runs(engine, [make_record(name="a", zsl_top1=0.9), make_record(name="e"), clash])
    assert row_counts(engine) == before
    assert load_runs(engine) == stored
    assert save_runs(engine, []) == []


def test_save_runs_refuses_the_same_run_twice(engine: Engine) -> None:
    with pytest.raises(
        HarnessError, match=r"records 0 and 2 are both the run of ale@1.0 on cub-demo v1"
    ):
        save_runs(engine, [make_record(), make_record(name="b"), make_record(zsl_top1=0.1)])
    assert count_runs(engine) == 0


def test_save_runs_returns_ids_in_input_order(engine: Engine) -> None:
    records = [make_record(name=n) for n in ("z", "a", "m")]
    ids = save_runs(engine, records)
    assert ids == [save_run(engine, r) for r in records]


def test_only_unchanged_saves_never_overwrite_a_newer_run(engine: Engine) -> None:
    loaded = make_record(name="a", zsl_top1=0.5)
    save_runs(engine, [loaded, make_record(name="b")])
    rescored = loaded.model_copy(update={"scores": make_record(name="a", zsl_top1=0.6).scores})
    # Unchanged since loading: the re-scored record replaces the run.
    save_runs(engine, [rescored], only_unchanged=True)
    assert load_runs(engine)[0] == rescored

    # `zsl run` stores the run again (new time) before the next re-score is saved: refused,
    # and the other run of the same batch is not written either.
    newer = make_record(name="a", zsl_top1=0.7, created_at=T0 + timedelta(hours=1))
    save_run(engine, newer)
    before = row_counts(engine)
    other = make_record(name="b", zsl_top1=0.9)
    with pytest.raises(StaleRunError, match=r"run of a@1.0 on cub-demo v1 was stored again"):
        save_runs(engine, [other, rescored], only_unchanged=True)
    assert row_counts(engine) == before
    assert [r.score("zsl", "top1").value for r in load_runs(engine)] == [0.7, 0.5]  # type: ignore[union-attr]

    # A run that is not stored at all cannot be "unchanged".
    with pytest.raises(StaleRunError, match="no longer stored"):
        save_runs(engine, [make_record(name="c")], only_unchanged=True)
    assert count_runs(engine) == 2


def test_delete_run_removes_scores_and_curve_points(engine: Engine) -> None:
    keep = big_record(name="keep", n_plain=2, n_ausuc=5)
    save_runs(engine, [keep, big_record(name="gone", n_plain=3, n_ausuc=6)])
    key = {"benchmark": "awa2", "benchmark_version": 1, "submission_version": "1.0"}
    assert delete_run(engine, submission="gone", **key) is True
    assert delete_run(engine, submission="gone", **key) is False
    assert load_runs(engine) == [keep]
    counts = row_counts(engine)
    assert counts["scores"] == len(keep.scores)
    assert counts["curve_points"] == 2 * 9 + 5


# -- nothing half-written ---------------------------------------------------------------------


def test_failure_after_scores_rolls_back_everything(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = big_record(n_plain=2, n_ausuc=4)
    save_run(engine, original)
    before = row_counts(engine)
    real_replace = service._replace_scores

    def replace_then_fail(session: Session, run_id: int, scores: list[ScoreEntry]) -> None:
        real_replace(session, run_id, scores)  # old scores deleted, new ones written ...
        raise RuntimeError("disk on fire")  # ... and then the transaction dies

    monkeypatch.setattr(service, "_replace_scores", replace_then_fail)
    changed = big_record(n_plain=5, n_ausuc=8, shift=2)
    changed.submission.authors = ["Someone Else"]
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_run(engine, changed)
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_run(engine, make_record(benchmark="other", name="new"))

    assert load_runs(engine) == [original]
    assert row_counts(engine) == before


def test_first_save_failing_leaves_an_empty_store(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_args: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "_replace_scores", fail)
    with pytest.raises(RuntimeError, match="boom"):
        save_run(engine, make_record())
    assert row_counts(engine) == dict.fromkeys(
        ("benchmarks", "submissions", "runs", "scores", "curve_points"), 0
    )


def test_score_the_database_rejects_rolls_back(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = make_record()
    save_run(engine, original)
    # Skip the up-front check so the duplicate reaches the UNIQUE (run, setting, metric).
    monkeypatch.setattr(service, "_check_record", lambda record: None)
    duplicate = ScoreEntry(setting="zsl", metric="top1", function="f", version="1", value=0.1)
    with pytest.raises(sqlalchemy.exc.IntegrityError, match=r"UNIQUE|uq_score_run_setting_metric"):
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
        (
            ScoreEntry(
                setting="gzsl",
                metric="auc",
                function="f",
                version="1",
                value=0.3,
                details={"curve": {"seen": [0.1, float("nan")], "unseen": [0.2, 0.3]}},
            ),
            r"details of gzsl/auc is not portable JSON",
        ),
    ],
)
def test_invalid_scores_are_refused_before_writing(
    store_url: str, bad_score: ScoreEntry, message: str
) -> None:
    engine = open_store(store_url)
    original = make_record()
    save_run(engine, original)
    with pytest.raises(HarnessError, match=message):
        save_run(engine, make_record(zsl_top1=0.8, extra_scores=[bad_score]))
    assert load_runs(engine) == [original]
    engine.dispose()


def test_concurrent_writer_threads(engine: Engine) -> None:
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(3):
                save_run(engine, make_record(name=f"sub{worker}", version=str(i)))
                save_run(engine, make_record(name=f"sub{worker}", version=str(i), zsl_top1=0.25))
                save_run(engine, make_record(name="shared", version=str(i), zsl_top1=0.25))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert row_counts(engine) == {
        "benchmarks": 1,
        "submissions": 18,
        "runs": 18,
        "scores": 18 * 5,
        "curve_points": 0,
    }
    assert {r.score("zsl", "top1").value for r in load_runs(engine)} == {0.25}  # type: ignore[union-attr]


# -- migrations -----------------------------------------------------------------------------------


def current_revision_of(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return current_revision(conn)


def schema_diff(engine: Engine, metadata: MetaData) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE, "compare_type": True}
        )
        return compare_metadata(context, metadata)


def test_models_and_migrations_agree(engine: Engine) -> None:
    """A model change without a migration (or the reverse) fails here, on both databases."""
    assert current_revision_of(engine) == head_revision()
    assert schema_diff(engine, SQLModel.metadata) == []


def test_migration_0001_is_the_schema_before_migrations(store_url: str) -> None:
    engine = make_engine(store_url)
    with engine.begin() as conn:
        for statement in legacy_ddl(backend_of(store_url)):
            conn.execute(text(statement))
    legacy = MetaData()
    legacy.reflect(engine)
    with engine.begin() as conn:
        for table in reversed(legacy.sorted_tables):
            conn.execute(text(f"DROP TABLE {table.name}"))
    upgrade(engine, "0001")
    assert current_revision_of(engine) == "0001"
    assert schema_diff(engine, legacy) == []
    assert sorted(inspect(engine).get_table_names()) == sorted([*legacy.tables, VERSION_TABLE])
    engine.dispose()


def _legacy_store_with_a_run(store_url: str, leakage: dict[str, Any] | None = None) -> None:
    """What the code before migrations left behind: its tables, one run, no version table."""
    engine = make_engine(store_url)
    with engine.begin() as conn:
        for statement in legacy_ddl(backend_of(store_url)):
            conn.execute(text(statement))
    legacy = MetaData()
    legacy.reflect(engine)
    record = make_record()
    with engine.begin() as conn:
        conn.execute(
            legacy.tables["zsl_benchmark"].insert(),
            {
                "id": 7,
                "benchmark": "cub-demo",
                "version": 1,
                "hash": record.benchmark.hash,
                "title": "CUB-200 demo",
                "spec_hash": record.benchmark.spec_hash,
                "primary": {"zsl": "top1", "gzsl": "H"},
                "n_classes": 200,
                "n_seen": 150,
                "n_unseen": 50,
            },
        )
        conn.execute(
            legacy.tables["zsl_submission"].insert(),
            {
                "id": 3,
                "name": "ale",
                "version": "1.0",
                "kind": "model",
                "package_hash": record.submission.package_hash,
                "authors": ["A. Author", "B. Author"],
                "paper": "https://example.org/paper",
                "url": None,
                "description": "attribute label embedding",
                "declarations": {"class_embedding": "attributes", "transductive": False},
            },
        )
        conn.execute(
            legacy.tables["zsl_run"].insert(),
            {
                "id": 5,
                "benchmark_id": 7,
                "submission_id": 3,
                "package_hash": record.submission.package_hash,
                "predictions_hashes": record.predictions_hashes,
                "harness_version": "0.1.0",
                "runner": "local",
                "environment": record.environment,
                "timings": record.timings,
                "leakage": leakage or {},
                "logs": {},
                "created_at": T0,
                "updated_at": T0,
            },
        )
        conn.execute(
            legacy.tables["zsl_score"].insert(),
            [
                {
                    "run_id": 5,
                    "position": 0,
                    "setting": "zsl",
                    "metric": "top1",
                    "function": "top_k_accuracy_score",
                    "version": "1",
                    "value": 0.5,
                    "higher_is_better": True,
                    "details": {"per_class": [0.5, 1.0], "k": 1},
                    "interval": None,
                },
                {
                    "run_id": 5,
                    "position": 1,
                    "setting": "gzsl",
                    "metric": "AUSUC",
                    "function": "ausuc",
                    "version": "1",
                    "value": 0.3,
                    "higher_is_better": True,
                    "details": {"curve": ausuc_curve(3)},
                    "interval": {
                        "lo": 0.2,
                        "hi": 0.4,
                        "level": 0.95,
                        "scheme": "classes",
                        "n_boot": 50,
                        "method": "percentile",
                    },
                },
            ],
        )
    engine.dispose()


OLD_AUDIT = {
    "overlap": [
        {"class": "n02129165", "name": "lion", "via": ["n02129165"], "by": "id"},
        {"class": "cub:014", "name": "Indigo Bunting", "via": ["n01537544"], "by": "name"},
    ],
    "n_overlap": 2,
    "n_test": 10,
    "n_not_wordnet": 1,
    "n_not_auditable": 0,
    "match": "exact",
    "source": "ilsvrc2012",
}


@pytest.mark.parametrize(
    ("old", "same", "error"),
    [
        (OLD_AUDIT, {"n02129165": ["n02129165"], "cub:014": ["n01537544"]}, None),
        ({**OLD_AUDIT, "match": "descendants"}, {}, "run the submission again"),
        ({"error": "no ImageNet lists", "source": "ilsvrc2012"}, {}, "no ImageNet lists"),
    ],
)
def test_migration_0003_rewrites_old_leakage_audits(
    store_url: str, old: dict[str, Any], same: dict[str, list[str]], error: str | None
) -> None:
    _legacy_store_with_a_run(store_url, leakage=old)
    engine = open_store(store_url)
    [loaded] = load_runs(engine)
    audit = loaded.leakage
    assert audit is not None and audit.source == "ilsvrc2012"
    got = {c.class_id: [r.wordnet_id for r in c.relatives_by(Relation.SAME)] for c in audit.classes}
    assert got == same and audit.n_overlap == len(same)
    assert (audit.error is None) if error is None else (error in str(audit.error))
    # and back: the downgrade gives the exact-match overlaps of the old shape
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0002")
        stored = conn.execute(text("SELECT leakage FROM zsl_run")).scalar_one()
    stored = json.loads(stored) if isinstance(stored, str) else stored
    if error is None:
        assert stored["overlap"] == old["overlap"] and stored["n_overlap"] == 2
    elif "error" in old:
        assert stored == {"error": old["error"], "source": old["source"]}
    engine.dispose()


def test_store_made_before_migrations_is_stamped_and_upgraded(store_url: str) -> None:
    _legacy_store_with_a_run(store_url)
    engine = open_store(store_url)
    assert current_revision_of(engine) == head_revision()
    assert schema_diff(engine, SQLModel.metadata) == []
    [loaded] = load_runs(engine)
    expected = make_record(gzsl=None)
    expected.scores.pop()  # top5 was not in the old store
    assert [s.metric for s in loaded.scores] == ["top1", "AUSUC"]
    assert loaded.scores[1].details == {"curve": ausuc_curve(3)}  # old curves stay in details
    assert loaded.scores[1].interval is not None and loaded.scores[1].interval.n_boot == 50
    assert loaded.benchmark.structure == {}
    assert all(s.class_values is None for s in loaded.scores)
    assert loaded.model_copy(update={"scores": loaded.scores[:1]}) == expected

    # The adopted store takes new runs; re-saving the old one moves its curve into points.
    newer = big_record(benchmark="cub-demo", name="ale", n_plain=1, n_ausuc=4)
    assert save_run(engine, newer) == 5
    assert load_runs(engine) == [newer]
    assert row_counts(engine)["curve_points"] == 2 * 9 + 4
    engine.dispose()
    assert current_revision_of(open_store(store_url)) == head_revision()


def test_partial_unversioned_store_is_refused(store_url: str) -> None:
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text(legacy_ddl(backend_of(store_url))[0]))  # zsl_benchmark only
    engine.dispose()
    with pytest.raises(
        HarnessError,
        match=r"has the store tables zsl_benchmark but not zsl_submission, zsl_run, zsl_score, and no zsl_alembic_version",
    ):
        open_store(store_url)


def test_open_store_twice_and_create_tables_are_no_ops(store_url: str) -> None:
    engine = open_store(store_url)
    save_run(engine, make_record())
    create_tables(engine)
    again = open_store(store_url)
    assert load_runs(again) == [make_record()]
    engine.dispose()
    again.dispose()


def test_downgrade_to_0001_and_back(store_url: str) -> None:
    engine = open_store(store_url)
    save_run(engine, make_record())
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0001")
    assert current_revision_of(engine) == "0001"
    assert "zsl_curve_point" not in inspect(engine).get_table_names()
    upgrade(engine)
    assert load_runs(engine) == [make_record()]
    assert schema_diff(engine, SQLModel.metadata) == []
    engine.dispose()


def test_migration_files_ship_with_the_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["harness"]
    shipped = [p for p in MIGRATIONS_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert {p.name for p in shipped} >= {"env.py", "script.py.mako", "README.md", "__init__.py"}
    for path in shipped:
        relative = path.relative_to(REPO / "harness").as_posix()
        in_a_package = path.suffix == ".py" and (path.parent / "__init__.py").exists()
        assert in_a_package or any(fnmatch(relative, p) for p in patterns), relative
    revisions = sorted(p.name for p in (MIGRATIONS_DIR / "versions").glob("v*.py"))
    assert revisions[:2] == ["v0001_initial.py", "v0002_curves_structure.py"]


# -- engine and URL ---------------------------------------------------------------------------


def test_file_sqlite_uses_wal_and_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'zsl.sqlite3'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
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


def test_open_store_uses_env_url(monkeypatch: pytest.MonkeyPatch, store_url: str) -> None:
    monkeypatch.setenv("ZSL_DATABASE_URL", store_url)
    engine = open_store()
    assert engine.dialect.name == backend_of(store_url)
    assert count_runs(engine) == 0
    save_run(engine, make_record())
    assert load_runs(open_store(store_url)) == [make_record()]
    engine.dispose()


@pytest.mark.parametrize(
    ("has_psycopg2", "has_psycopg", "driver"),
    [
        (True, True, "postgresql+psycopg2"),
        (False, True, "postgresql+psycopg"),
        (True, False, "postgresql+psycopg2"),
    ],
)
def test_postgresql_url_picks_the_installed_driver(
    monkeypatch: pytest.MonkeyPatch, has_psycopg2: bool, has_psycopg: bool, driver: str
) -> None:
    real_find_spec = importlib.util.find_spec
    present = {"psycopg2": has_psycopg2, "psycopg": has_psycopg}

    def find_spec(name: str, *args: Any) -> Any:
        if name in present:
            return object() if present[name] else None
        return real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr("harness.store.db._create_engine", lambda url, **kw: url)
    for scheme in ("postgresql", "postgres"):
        assert make_engine(f"{scheme}://zsl@db/x").drivername == driver  # type: ignore[attr-defined]
    assert make_engine("postgresql+psycopg://zsl@db/x").drivername == "postgresql+psycopg"  # type: ignore[attr-defined]


def test_postgresql_url_without_any_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("psycopg", "psycopg2") else real_find_spec(name, *a),
    )
    with pytest.raises(
        HarnessError,
        match=r"^no PostgreSQL driver for postgresql://zsl:\*\*\*@db/x: pip install 'zsl-harness\[postgres\]'",
    ):
        make_engine("postgresql://zsl:pw@db/x")


def _one_clean_line(err: pytest.ExceptionInfo[HarnessError], secret: str) -> str:
    message = str(err.value)
    assert "\n" not in message and secret not in message
    return message


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url at all", r"^not a database URL: 'not a url at all'; check ZSL_DATABASE_URL"),
        (
            "postgresql://zsl:hunter2@db:port/x",
            r"^not a database URL: 'postgresql://zsl:\*\*\*@db:port/x'",
        ),
        ("mysqlx://zsl:hunter2@db/x", r"^unknown database 'mysqlx' in mysqlx://zsl:\*\*\*@db/x"),
        (
            "postgresql+psycopg2://zsl:hunter2@db/x",
            r"^the driver for postgresql\+psycopg2://zsl:\*\*\*@db/x is not installed",
        ),
    ],
)
def test_bad_database_urls_are_one_line_without_password(url: str, message: str) -> None:
    if "psycopg2" in url and importlib.util.find_spec("psycopg2") is not None:
        pytest.skip("psycopg2 is installed here")  # pragma: no cover
    with pytest.raises(HarnessError, match=message) as err:
        open_store(url)
    _one_clean_line(err, "hunter2")


def test_server_down_is_one_line_naming_the_url_without_password() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://zsl:hunter2@127.0.0.1:{port}/leaderboard"
    with pytest.raises(
        HarnessError,
        match=rf"^cannot open the store at postgresql\+psycopg://zsl:\*\*\*@127.0.0.1:{port}/leaderboard: .*refused.*; check ZSL_DATABASE_URL",
    ) as err:
        open_store(url)
    _one_clean_line(err, "hunter2")


def test_wrong_password_is_one_line_without_password() -> None:
    """PostgreSQL only: SQLite has no login."""
    wrong = sqlalchemy.make_url(postgres_admin_url()).set(password="hunter2-wrong")
    with pytest.raises(
        HarnessError,
        match=r"^cannot open the store at postgresql\+psycopg://\w+:\*\*\*@.*password authentication failed",
    ) as err:
        open_store(wrong.render_as_string(hide_password=False))
    _one_clean_line(err, "hunter2")


def test_zsl_cli_reports_an_unreachable_store_on_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from harness.cli.main import app

    monkeypatch.setenv("ZSL_DATABASE_URL", "postgresql://zsl:hunter2@127.0.0.1:1/x")
    result = CliRunner().invoke(app, ["leaderboard", "build", "--out", str(tmp_path / "site")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot open the store at postgresql")
    assert "hunter2" not in result.output

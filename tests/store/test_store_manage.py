"""Managing stored runs: listing, deleting and hiding (one transaction each), what a save
replaces, and migration 0004 (the hidden flag), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import Engine, inspect, text

from harness.records import run_key
from harness.store import (
    ReplacedRun,
    UnknownRunError,
    count_runs,
    delete_runs,
    list_runs,
    load_runs,
    open_store,
    save_run,
    save_run_reporting,
    set_hidden,
)
from harness.store.migrations import alembic_config, upgrade
from tests.store_fixtures import store_url
from tests.store_records import T0, big_record, make_record

__all__ = ["store_url"]  # the fixture: every test taking it runs on both databases

ALE = ("cub-demo", 1, "ale", "1.0")
SAE = ("cub-demo", 1, "sae", "1.0")
ESZSL = ("awa2", 1, "eszsl", "1.0")


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    engine = open_store(store_url)
    yield engine
    engine.dispose()


def _three(engine: Engine) -> None:
    save_run(engine, make_record())
    save_run(engine, make_record(name="sae", zsl_top1=0.25))
    save_run(engine, big_record(n_plain=2, n_ausuc=3))


def test_list_runs_filters_and_carries_the_hidden_flag(engine: Engine) -> None:
    _three(engine)
    assert [s.key for s in list_runs(engine)] == [ESZSL, ALE, SAE]
    assert [s.key for s in list_runs(engine, benchmark="cub-demo")] == [ALE, SAE]
    assert [s.key for s in list_runs(engine, submission="sae")] == [SAE]
    assert list_runs(engine, benchmark="awa2", submission="sae") == []
    assert not any(s.hidden for s in list_runs(engine))


def test_hidden_runs_stay_stored_but_load_runs_leaves_them_out(engine: Engine) -> None:
    _three(engine)
    assert set_hidden(engine, [SAE, ESZSL], True) == [SAE, ESZSL]
    assert [run_key(r) for r in load_runs(engine)] == [ALE]
    assert [run_key(r) for r in load_runs(engine, include_hidden=True)] == [ESZSL, ALE, SAE]
    assert load_runs(engine, benchmark="awa2") == []
    assert [(s.key, s.hidden) for s in list_runs(engine)] == [
        (ESZSL, True),
        (ALE, False),
        (SAE, True),
    ]
    assert count_runs(engine) == 3 and count_runs(engine, hidden=True) == 2
    assert count_runs(engine, hidden=False) == 1
    # hiding again changes nothing; unhiding brings the run back whole (curves included)
    assert set_hidden(engine, [SAE], True) == []
    assert set_hidden(engine, [ESZSL], False) == [ESZSL]
    assert load_runs(engine, benchmark="awa2") == [big_record(n_plain=2, n_ausuc=3)]


def test_a_hidden_run_stays_hidden_when_saved_again(engine: Engine) -> None:
    save_run(engine, make_record())
    set_hidden(engine, [ALE], True)
    _, replaced = save_run_reporting(engine, make_record(zsl_top1=0.7))
    assert replaced is not None and replaced.hidden
    assert load_runs(engine) == []
    [stored] = list_runs(engine)
    assert stored.hidden and stored.record == make_record(zsl_top1=0.7)


def test_delete_runs_is_one_transaction_naming_an_unknown_run(engine: Engine) -> None:
    _three(engine)
    missing = ("cub-demo", 2, "ale", "1.0")
    with pytest.raises(
        UnknownRunError,
        match=r"^no stored run of ale@1\.0 on cub-demo v2 \(it was deleted meanwhile\?\); "
        r"nothing was changed$",
    ):
        delete_runs(engine, [ALE, missing])
    assert count_runs(engine) == 3  # ALE was not deleted either
    delete_runs(engine, [ALE, ESZSL])
    assert [s.key for s in list_runs(engine)] == [SAE]
    with engine.connect() as conn:  # scores and curve points went with their runs
        assert conn.execute(text("SELECT count(*) FROM zsl_curve_point")).scalar_one() == 0
        runs = conn.execute(text("SELECT count(DISTINCT run_id) FROM zsl_score")).scalar_one()
    assert runs == 1


def test_set_hidden_is_one_transaction(engine: Engine) -> None:
    _three(engine)
    with pytest.raises(UnknownRunError, match=r"no stored run of x@1 on cub-demo v1"):
        set_hidden(engine, [ALE, ("cub-demo", 1, "x", "1")], True)
    assert count_runs(engine, hidden=True) == 0


def test_save_run_reporting_says_what_it_replaced(engine: Engine) -> None:
    first = make_record(created_at=T0)
    run_id, replaced = save_run_reporting(engine, first)
    assert replaced is None
    second = make_record(zsl_top1=0.25, gzsl=(0.5, 0.1, 0.2), created_at=T0 + timedelta(days=1))
    second = second.model_copy(update={"runner": "sandbox"})
    again, replaced = save_run_reporting(engine, second)
    assert again == run_id
    assert replaced == ReplacedRun(
        key=ALE,
        runner="local",
        created_at=T0,
        primary={"zsl": 0.5, "gzsl": 0.48},
        hidden=False,
        package_hash=first.submission.package_hash,
    )
    assert load_runs(engine) == [second]


def test_migration_0004_adds_the_flag_and_keeps_runs_visible(store_url: str) -> None:
    engine = open_store(store_url)
    save_run(engine, make_record())
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0003")
    assert "hidden" not in {c["name"] for c in inspect(engine).get_columns("zsl_run")}
    upgrade(engine)
    assert "hidden" in {c["name"] for c in inspect(engine).get_columns("zsl_run")}
    assert [(s.key, s.hidden) for s in list_runs(engine)] == [(ALE, False)]
    assert load_runs(engine) == [make_record()]
    engine.dispose()

"""A stored run made from another package hash (issue 29, item 7): found before a run
(`changed_packages`) and refused again under the row lock at its save, on SQLite and
PostgreSQL; without the refusal a save replaces it and says which package it was."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from harness.store import (
    ChangedPackageError,
    changed_packages,
    load_runs,
    open_store,
    save_run,
    save_run_reporting,
)
from tests.store_fixtures import store_url
from tests.store_records import T0, make_record

__all__ = ["store_url"]  # the fixture: every test taking it runs on both databases

ALE = ("cub-demo", 1, "ale", "1.0")
OLD = "sha256:" + "a" * 64
NEW = "sha256:" + "e" * 64
REFUSAL = (
    "the stored run of ale@1.0 on cub-demo v1 was made from package aaaaaaaaaaaa; this package"
    " (same name and version) hashes to eeeeeeeeeeee: its files changed. Bump `version` in"
    " submission.yaml to keep both runs, or pass --replace to overwrite the stored run"
)


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    engine = open_store(store_url)
    yield engine
    engine.dispose()


def test_changed_packages_finds_only_runs_of_another_package(engine: Engine) -> None:
    save_run(engine, make_record(package_hash=OLD))
    save_run(engine, make_record(name="sae", package_hash=OLD))
    other_benchmark = ("awa2", 1, "ale", "1.0")
    found = changed_packages(
        engine, {ALE: NEW, ("cub-demo", 1, "sae", "1.0"): OLD, other_benchmark: NEW}
    )
    assert list(found) == [ALE]  # same hash: a re-run; not stored: a new run
    assert isinstance(found[ALE], ChangedPackageError) and str(found[ALE]) == REFUSAL
    assert changed_packages(engine, {}) == {}


def test_a_save_refuses_a_changed_package_and_writes_nothing(engine: Engine) -> None:
    stored = make_record(package_hash=OLD)
    save_run(engine, stored)
    changed = make_record(package_hash=NEW, zsl_top1=0.25, created_at=T0 + timedelta(days=1))
    with pytest.raises(ChangedPackageError) as info:
        save_run_reporting(engine, changed, refuse_changed_package=True)
    assert str(info.value) == REFUSAL
    assert load_runs(engine) == [stored]
    # the same package again (a re-run) replaces it, refusal or not
    rerun = make_record(package_hash=OLD, zsl_top1=0.75, created_at=T0 + timedelta(days=2))
    _, replaced = save_run_reporting(engine, rerun, refuse_changed_package=True)
    assert replaced is not None and replaced.package_hash == OLD
    assert load_runs(engine) == [rerun]
    # without the refusal (the demo, CI, `zsl run --replace`) the changed package replaces it
    _, replaced = save_run_reporting(engine, changed)
    assert replaced is not None and (replaced.package_hash, replaced.created_at) == (
        OLD,
        rerun.created_at,
    )
    assert load_runs(engine) == [changed]

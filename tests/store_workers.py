"""Code the store durability tests run in other processes (importable by spawned children)."""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from harness.records import RunRecord
from harness.store import make_engine, open_store, save_run, save_runs
from tests.store_records import big_record

# -- kill mid-save --------------------------------------------------------------------------------


def record_statements(engine: Engine) -> list[str]:
    """The statements ``engine`` executes from now on, ``"COMMIT"`` included, as they happen."""
    statements: list[str] = []

    def executed(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", executed)
    # The COMMIT is no cursor statement: the commit event fires right before it.
    event.listen(engine, "commit", lambda _conn: statements.append("COMMIT"))
    return statements


def save_and_stall(url: str, record: RunRecord, stop_at: int, marker: str) -> None:
    """Save ``record``; right before its ``stop_at``-th statement (or COMMIT), write ``marker``
    and sleep until the parent kills this process."""
    engine = make_engine(url)
    count = [0]

    def before(*_args: Any, **_kwargs: Any) -> None:
        count[0] += 1
        if count[0] == stop_at:
            Path(marker).write_text(str(stop_at))
            time.sleep(300)

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "commit", before)
    save_run(engine, record)


# -- concurrent writers -----------------------------------------------------------------------------

BENCHMARKS = ("shared-a", "shared-b")
ROUNDS = 3


def submissions_of(worker: int) -> tuple[str, ...]:
    return ("common", f"own-{worker}")


def concurrent_record(benchmark: str, name: str, writer: int, round_: int) -> RunRecord:
    """The record ``writer`` saves for (benchmark, name) in ``round_``: its size and values
    depend on (writer, round), and every score carries them as a tag."""
    return big_record(
        benchmark=benchmark,
        name=name,
        n_plain=4 + writer + round_,
        n_ausuc=10 + 5 * writer + round_,
        shift=writer + round_ / 10,
        tag={"writer": writer, "round": round_},
    )


def concurrent_writer(url: str, worker: int, barrier: Any, out_dir: str) -> None:
    """Open the store when all workers are ready, then save overlapping records: one by one
    in even rounds, in one ``save_runs`` transaction in odd rounds."""
    try:
        barrier.wait(60)
        engine = open_store(url)
        for round_ in range(ROUNDS):
            records = [
                concurrent_record(benchmark, name, worker, round_)
                for benchmark in BENCHMARKS
                for name in submissions_of(worker)
            ]
            if round_ % 2:
                save_runs(engine, records)
            else:
                for record in records:
                    save_run(engine, record)
        engine.dispose()
    except BaseException:
        (Path(out_dir) / f"{worker}.err").write_text(traceback.format_exc())
        raise
    (Path(out_dir) / f"{worker}.ok").write_text("")

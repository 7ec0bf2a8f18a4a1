"""Move run records between the store and a folder of record files.

:func:`export_store` writes every stored run to ``<root>/…/<submission>@<version>.json``;
:func:`import_folder` reads a whole folder (all files verified before anything is written) and
saves every record in one store transaction, so a bad file or a failing write leaves the store
as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.records import RunRecord
from harness.results.records_io import ExportResult, read_records, write_records

if TYPE_CHECKING:
    from sqlalchemy import Engine


def save_records(
    engine: Engine, records: Sequence[RunRecord], *, only_unchanged: bool = False
) -> None:
    """Save ``records`` into the store in one transaction (:func:`harness.store.save_runs`)."""
    from harness.store import save_runs

    save_runs(engine, list(records), only_unchanged=only_unchanged)


def export_store(engine: Engine, root: Path, *, prune: bool = False) -> ExportResult:
    """Write every stored run under ``root`` (see :func:`.records_io.write_records`)."""
    from harness.store import load_runs

    return write_records(load_runs(engine), root, prune=prune)


def import_folder(engine: Engine, root: Path) -> list[RunRecord]:
    """Verify every record under ``root``, then save them all in one transaction.

    Returns the records saved. Any bad file raises before the store is touched.
    """
    records = read_records(root)
    save_records(engine, records)
    return records


__all__ = ["export_store", "import_folder", "save_records"]

"""Move run records between the store and a folder of record files.

:func:`export_store` writes every stored run to ``<root>/…/<submission>@<version>.json``;
:func:`import_folder` reads a whole folder (all files verified before anything is written) and
saves every record in one store transaction, so a bad file or a failing write leaves the store
as it was. Hidden runs (``zsl results hide``) stay in the store and out of exports.

On the command line a stored run is named as every message names it,
:func:`~harness.results.records_io.describe_key`'s ``SUBMISSION@VERSION on BENCHMARK vN``
(``"eszsl@1.0 on demo v1"``, quoted as one argument); :func:`resolve_runs` is the one place
that reads such names.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness import store  # lazy: SQLAlchemy is imported when a store is first used
from harness.core.errors import HarnessError
from harness.records import RunKey, RunRecord
from harness.results.records_io import ExportResult, describe_key, read_records, write_records

if TYPE_CHECKING:
    from sqlalchemy import Engine


def save_records(
    engine: Engine, records: Sequence[RunRecord], *, only_unchanged: bool = False
) -> None:
    """Save ``records`` into the store in one transaction (:func:`harness.store.save_runs`)."""
    store.save_runs(engine, list(records), only_unchanged=only_unchanged)


def export_store(engine: Engine, root: Path, *, prune: bool = False) -> ExportResult:
    """Write every stored run but the hidden ones under ``root`` (see
    :func:`.records_io.write_records`); with ``prune``, the file of a hidden run goes too."""
    return write_records(store.load_runs(engine), root, prune=prune)


#: How a run is named on the command line (the form of :func:`describe_key`).
RUN_NAME_FORM = "SUBMISSION@VERSION on BENCHMARK vN"
_RUN_NAME = re.compile(r"^\S.*@\S+ on \S.* v\d+$")


class UnknownRunName(HarnessError):
    """A run named on the command line is not in the store (or not a run name at all)."""


def run_name(key: RunKey) -> str:
    """The name of the run ``key`` on the command line: ``eszsl@1.0 on demo v1``."""
    return describe_key(key)


def resolve_runs(names: Sequence[str], stored: Iterable[RunKey]) -> list[RunKey]:
    """The stored runs ``names`` name (each ``SUBMISSION@VERSION on BENCHMARK vN``), in order,
    each once.

    Names are compared in Unicode NFC, as the store keeps them, and exactly otherwise.

    Raises
    ------
    UnknownRunName
        A name is not in that form, or no stored run has it: the message names it and lists
        the closest stored run names (``zsl results list`` shows them all).
    """
    by_name = {run_name(key): key for key in stored}
    keys: list[RunKey] = []
    for raw in names:
        name = " ".join(unicodedata.normalize("NFC", raw).split())
        key = by_name.get(name)
        if key is None:
            raise UnknownRunName(_unknown(raw, name, by_name))
        if key not in keys:
            keys.append(key)
    return keys


def _close(name: str, known: dict[str, RunKey]) -> list[str]:
    """Up to 3 stored run names like ``name``: similar text, or the same submission named."""
    scored = []
    for text, (_, _, submission, version) in known.items():
        ratio = difflib.SequenceMatcher(None, name, text).ratio()
        if ratio >= 0.6 or f"{submission}@{version}" in name or submission == name:
            scored.append((-ratio, text))
    return [text for _, text in sorted(scored)[:3]]


def _unknown(raw: str, name: str, known: dict[str, RunKey]) -> str:
    if not _RUN_NAME.match(name):
        example = next(iter(known), "eszsl@1.0 on demo v1")
        problem = f"{raw!r} is not a run name: name a run as '{RUN_NAME_FORM}', e.g. {example!r}"
    else:
        problem = f"no stored run is {raw!r}"
    close = _close(name, known)
    if close:
        return problem + "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if not known:
        return problem + "; the store holds no run"
    return problem + f"; the store holds {len(known)} runs: `zsl results list` shows them"


def import_folder(engine: Engine, root: Path) -> list[RunRecord]:
    """Verify every record under ``root``, then save them all in one transaction.

    Returns the records saved. Any bad file raises before the store is touched.
    """
    records = read_records(root)
    save_records(engine, records)
    return records


__all__ = [
    "RUN_NAME_FORM",
    "export_store",
    "import_folder",
    "resolve_runs",
    "run_name",
    "save_records",
]

"""Every table of the site as a CSV file beside its page: plain numbers, safe for spreadsheets.

A table's CSV holds what the table shows, as data: numbers as numbers (scores as stored, e.g.
``0.5512``, not formatted percentages; intervals in their own ``_lo``/``_hi`` columns), an empty
cell where the table shows "—". Quoting is the :mod:`csv` module's (RFC 4180: a cell with a comma,
quote or line break is quoted, quotes doubled), lines end in CRLF and the text is UTF-8.

Names and other submitted text are untrusted. A spreadsheet runs a cell that starts with ``=``,
``+``, ``-`` or ``@`` (or a tab or carriage return, which some strip first) as a formula, so such a
*text* cell gets a leading apostrophe (:func:`csv_text`, the OWASP "CSV injection" advice); numbers
are written as numbers, so ``-0.5`` stays a number.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

__all__ = [
    "RANK_HEADER",
    "CsvCell",
    "CsvLines",
    "CsvTable",
    "csv_bytes",
    "csv_line",
    "csv_number",
    "csv_text",
    "header_for",
    "write_csv",
]

#: What a CSV cell may hold: text (neutralised), a number, or nothing (an empty cell).
CsvCell = str | int | float | None

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: The leading columns of every rank table's CSV (the index's ranks and the cross tables): who,
#: how many benchmarks the row covers out of how many, and its mean rank over those it covers.
RANK_HEADER = (
    "submission",
    "version",
    "transductive",
    "benchmarks_covered",
    "benchmarks",
    "mean_rank",
)


def csv_text(text: str) -> str:
    """``text`` made inert for spreadsheets: a leading apostrophe when it would start a formula.

    >>> csv_text("=1+2"), csv_text("-1+1"), csv_text("+A1"), csv_text("@SUM(A1)")
    ("'=1+2", "'-1+1", "'+A1", "'@SUM(A1)")
    >>> csv_text("ale"), csv_text("")
    ('ale', '')
    """
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def _cell(value: CsvCell) -> str | int | float:
    # Hot (a comparison page's CSV has hundreds of rows, the site thousands of such files):
    # exact type tests, commonest first; the writer formats numbers itself (str(float) is the
    # shortest repr that reads back the same float).
    kind = type(value)
    if kind is float:
        number = cast(float, value)
        return number if math.isfinite(number) else ""
    if kind is str:
        return csv_text(cast(str, value))
    if value is None:
        return ""
    if kind is bool:  # a bool is an int: say what it means
        return "true" if value else "false"
    if isinstance(value, int | float):  # int, and subclasses such as numpy's float64
        return value if math.isfinite(value) else ""
    return csv_text(str(value))


@dataclass(frozen=True)
class CsvTable:
    """One table's data: ``filename`` (beside its page), a header and rows of cells."""

    filename: str
    header: tuple[str, ...]
    rows: list[tuple[CsvCell, ...]] = field(default_factory=list)


def csv_bytes(table: CsvTable) -> bytes:
    r'''The CSV text of ``table`` (UTF-8, CRLF), every text cell neutralised.

    >>> print(csv_bytes(CsvTable("t.csv", ("name", "top1"), [("=cmd", 0.5), ('a,"b"', None)]))
    ...       .decode().replace("\r", ""), end="")
    name,top1
    '=cmd,0.5
    "a,""b""",
    '''
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([csv_text(h) for h in table.header])
    for row in table.rows:
        if len(row) != len(table.header):
            raise ValueError(
                f"Expected rows of {len(table.header)} cells in {table.filename}, "
                f"but got {len(row)}."
            )
        writer.writerow([_cell(v) for v in row])
    return buffer.getvalue().encode("utf-8")


def csv_line(cells: Sequence[CsvCell]) -> str:
    """One CSV row as text, without its line end (the same quoting and neutralising as
    :func:`csv_bytes`): the fixed part of many rows, rendered once."""
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator="").writerow([_cell(v) for v in cells])
    return buffer.getvalue()


def csv_number(value: float) -> str:
    """A finite number as CSV text (it never needs quoting); empty when not finite.

    >>> csv_number(-0.25), csv_number(float("nan"))
    ('-0.25', '')
    """
    return repr(float(value)) if math.isfinite(value) else ""


@dataclass(frozen=True)
class CsvLines:
    """A table whose rows are CSV text already (:func:`csv_line` plus :func:`csv_number`
    cells): for the many comparison pages, where the csv writer's per-cell work would show in
    the build time."""

    filename: str
    header: tuple[str, ...]
    lines: list[str] = field(default_factory=list)


def write_csv(folder: Path, table: CsvTable | CsvLines) -> None:
    """Write ``table`` into ``folder`` under its own file name."""
    if isinstance(table, CsvLines):
        text = "".join(f"{line}\r\n" for line in (csv_line(table.header), *table.lines))
        (folder / table.filename).write_bytes(text.encode("utf-8"))
        return
    (folder / table.filename).write_bytes(csv_bytes(table))


def header_for(names: Sequence[str]) -> tuple[str, ...]:
    """Each score column's three CSV columns: value, ``_lo`` and ``_hi``."""
    return tuple(part for name in names for part in (name, f"{name}_lo", f"{name}_hi"))

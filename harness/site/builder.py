"""Render run records into a static leaderboard site.

The builder reads records only (from the store or exported JSON) and writes plain HTML plus one
CSS file: relative links, no scripts, no external resources, so the site opens from ``file://``
and can be served from anywhere. Output is deterministic: the same records give byte-identical
files. Every submitted string is escaped by jinja2's autoescaping, and a submitted URL becomes a
link only when it is ``http``/``https``.

The site is rendered into a temporary directory next to ``out_dir`` and moved into place when
complete, so a failed build never leaves half a site behind.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from harness import __version__ as harness_version
from harness.errors import HarnessError, IntegrityError
from harness.records import RunRecord, ScoreEntry

#: A file in every built site; an existing ``out_dir`` without it is never replaced.
MARKER = ".zsl-leaderboard"
_MARKER_TEXT = "This directory is built by `zsl leaderboard build` and replaced on each build.\n"

_SETTING_ORDER = {"zsl": 0, "gzsl": 1, "transductive": 2}
_SETTING_LABELS = {"zsl": "ZSL", "gzsl": "GZSL", "transductive": "Transductive"}
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


# -- view model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """Text that is a link only when ``href`` is set (http/https URLs only)."""

    text: str
    href: str | None


@dataclass(frozen=True)
class Hash:
    short: str
    full: str


@dataclass(frozen=True)
class Column:
    metric: str
    percent: bool
    higher_is_better: bool
    primary: bool
    versions: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.metric} (%)" if self.percent else self.metric


@dataclass(frozen=True)
class Cell:
    text: str
    title: str = ""
    interval: str = ""


@dataclass(frozen=True)
class Row:
    rank: str
    anchor: str
    name: str
    version: str
    kind: str
    cells: tuple[Cell, ...]
    predictions_hash: Hash | None


@dataclass(frozen=True)
class Table:
    setting: str
    label: str
    primary: str | None
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Best:
    setting_label: str
    metric: str
    value: str
    submission: str
    anchor: str


@dataclass(frozen=True)
class SubmissionView:
    anchor: str
    name: str
    version: str
    kind: str
    authors: str
    paper: Link | None
    url: Link | None
    description: str
    package_hash: Hash
    runner: str
    harness_version: str
    created_at: str
    metric_versions: tuple[str, ...]
    declarations: tuple[tuple[str, str], ...]
    environment: tuple[tuple[str, str], ...]
    timings: tuple[tuple[str, str], ...]


@dataclass
class BenchmarkPage:
    id: str
    version: int
    title: str
    filename: str
    hash: Hash
    spec_hash: Hash
    n_classes: int
    n_seen: int
    n_unseen: int
    tables: list[Table] = field(default_factory=list)
    submissions: list[SubmissionView] = field(default_factory=list)
    best: list[Best] = field(default_factory=list)
    leakage: Leakage | None = None


@dataclass(frozen=True)
class Leakage:
    """The leakage badge: test classes the benchmark's feature backbone saw in pre-training."""

    badge: str
    source: str
    classes: tuple[str, ...]
    unavailable: bool = False


def _leakage(records: list[RunRecord]) -> Leakage | None:
    """From the newest run that audited the benchmark's own features (no submission override)."""
    audits = [r.leakage for r in sorted(records, key=lambda r: r.created_at) if r.leakage]
    if not audits:
        return None
    audit = audits[-1]
    if "error" in audit:
        return Leakage("leakage audit unavailable", str(audit.get("source", "")), (), True)
    n = int(audit.get("n_overlap", 0))
    if n == 0:
        return None
    classes = tuple(
        f"{o.get('name') or o['class']} ({o['class']})" for o in audit.get("overlap", [])
    )
    badge = f"leakage: {n} of {audit.get('n_test', '?')} test classes seen in pre-training"
    return Leakage(badge, str(audit.get("source", "")), classes)


# -- public API -----------------------------------------------------------------------------------


def build_site(records: Sequence[RunRecord], out_dir: Path) -> Path:
    """Render ``records`` into ``out_dir`` and return the path of its ``index.html``.

    Writes ``index.html``, ``benchmarks/<id>-v<version>.html`` per benchmark version and
    ``static/style.css``. ``out_dir`` is replaced as a whole, and only if it is missing, empty
    or an earlier build (it holds the :data:`MARKER` file).

    Raises
    ------
    IntegrityError
        Records of one benchmark version disagree on its hash or spec hash.
    HarnessError
        Two records share a benchmark version and submission version, or ``out_dir`` can't be
        replaced.
    """
    pages = plan_pages(records)  # every check runs before the filesystem is touched
    out_dir = Path(out_dir).expanduser().absolute()
    _check_replaceable(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    except OSError as err:
        raise HarnessError(f"cannot write the site next to {out_dir}: {err}") from err
    try:
        work.chmod(0o755)  # mkdtemp makes it private; a site is meant to be served
        _render(pages, work)
        _swap_into_place(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already after a successful swap
    return out_dir / "index.html"


def plan_pages(records: Sequence[RunRecord]) -> list[BenchmarkPage]:
    """Group, check, sort and format ``records`` into one page per benchmark version."""
    groups: dict[tuple[str, int], list[RunRecord]] = defaultdict(list)
    for record in records:
        groups[(record.benchmark.id, record.benchmark.version)].append(record)
    filenames: dict[str, tuple[str, int]] = {}
    pages = []
    for key in sorted(groups):
        page = _plan_page(groups[key])
        if page.filename in filenames:  # pragma: no cover - _page_filename makes names unique
            raise HarnessError(f"benchmarks {filenames[page.filename]} and {key} share a page")
        filenames[page.filename] = key
        pages.append(page)
    return pages


def safe_href(url: str | None) -> str | None:
    """``url`` if it is an absolute http(s) URL without spaces or control characters, else None.

    >>> safe_href("https://arxiv.org/abs/1503.08677")
    'https://arxiv.org/abs/1503.08677'
    >>> safe_href("javascript:alert(1)") is None
    True
    >>> safe_href("java\\nscript://x") is None
    True
    """
    if not url or _UNSAFE_URL_CHARS.search(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url


def short_hash(value: str, length: int = 12) -> str:
    """The first ``length`` characters of a hash's digest, without its ``alg:`` prefix.

    >>> short_hash("sha256:0123456789abcdef0123")
    '0123456789ab'
    """
    return value.partition(":")[2][:length] if ":" in value else value[:length]


def format_value(value: float | None, *, percent: bool) -> str:
    """A score as text: percent with one decimal, else two decimals; ``—`` when missing.

    >>> format_value(0.6234, percent=True), format_value(2.345, percent=False)
    ('62.3', '2.35')
    """
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value * 100:.1f}" if percent else f"{value:.2f}"


# -- planning -------------------------------------------------------------------------------------


def _plan_page(records: list[RunRecord]) -> BenchmarkPage:
    records = sorted(records, key=_submission_key)
    first = records[0].benchmark
    for record in records:
        for what, given, expected in (
            ("hash", record.benchmark.hash, first.hash),
            ("spec hash", record.benchmark.spec_hash, first.spec_hash),
        ):
            if given != expected:
                raise IntegrityError(
                    f"runs on benchmark {first.id!r} v{first.version} disagree on its {what} "
                    f"({expected} vs {given}); runs on different data can't share a table"
                )
    for before, after in pairwise(records):
        if _submission_key(before) == _submission_key(after):
            raise HarnessError(
                f"two runs of {after.submission.name}@{after.submission.version} on "
                f"{first.id} v{first.version}; keep one record per submission version"
            )
    # Descriptive fields (title, primary metrics) come from the newest run.
    info = max(records, key=lambda r: r.created_at).benchmark
    anchors = {id(record): f"sub-{i}" for i, record in enumerate(records, start=1)}
    page = BenchmarkPage(
        id=info.id,
        version=info.version,
        title=info.title,
        filename=_page_filename(info.id, info.version),
        hash=Hash(short_hash(info.hash), info.hash),
        spec_hash=Hash(short_hash(info.spec_hash), info.spec_hash),
        n_classes=info.n_classes,
        n_seen=info.n_seen,
        n_unseen=info.n_unseen,
        leakage=_leakage(records),
    )
    settings = sorted(
        {entry.setting for record in records for entry in record.scores}, key=_setting_key
    )
    for setting in settings:
        table = _plan_table(setting, info.primary.get(setting), records, anchors)
        page.tables.append(table)
        top = table.rows[0]
        if table.primary is not None and top.rank != "—":
            index = next(i for i, c in enumerate(table.columns) if c.primary)
            unit = "%" if table.columns[index].percent else ""
            page.best.append(
                Best(
                    setting_label=table.label,
                    metric=table.primary,
                    value=top.cells[index].text + unit,
                    submission=f"{top.name} {top.version}",
                    anchor=top.anchor,
                )
            )
    page.submissions = [_submission_view(record, anchors[id(record)]) for record in records]
    return page


def _plan_table(
    setting: str, primary: str | None, records: list[RunRecord], anchors: dict[int, str]
) -> Table:
    # Columns in the order the metrics first appear (the spec's order), over sorted records.
    entries: dict[str, list[ScoreEntry]] = {}
    for record in records:
        for entry in record.scores:
            if entry.setting == setting:
                entries.setdefault(entry.metric, []).append(entry)
    if primary not in entries:
        primary = None
    columns = tuple(
        Column(
            metric=metric,
            percent=all(
                0.0 <= v <= 1.0
                for e in found
                for v in (e.value, *((e.interval.lo, e.interval.hi) if e.interval else ()))
            ),
            higher_is_better=found[0].higher_is_better,
            primary=metric == primary,
            versions=tuple(sorted({e.version for e in found})),
        )
        for metric, found in entries.items()
    )
    ranked = [r for r in records if any(e.setting == setting for e in r.scores)]

    def primary_value(record: RunRecord) -> float | None:
        entry = record.score(setting, primary) if primary is not None else None
        return entry.value if entry is not None else None

    sign = -1.0 if primary is None or entries[primary][0].higher_is_better else 1.0
    ranked.sort(
        key=lambda r: (
            primary_value(r) is None,
            sign * (primary_value(r) or 0.0),
            r.submission.name,
            r.submission.version,
        )
    )
    rows = []
    rank = 0
    previous: float | None = None
    for position, record in enumerate(ranked, start=1):
        value = primary_value(record)
        if value is None:
            rank_text = "—"
        else:
            if value != previous:  # competition ranking: ties share a rank
                rank = position
            previous = value
            rank_text = str(rank)
        cells = []
        for column in columns:
            score = record.score(setting, column.metric)
            title = ""
            if score is not None and len(column.versions) > 1:
                title = f"{score.function} v{score.version}"
            interval = ""
            if score is not None and score.interval is not None:
                lo = format_value(score.interval.lo, percent=column.percent)
                hi = format_value(score.interval.hi, percent=column.percent)
                interval = f"{lo}–{hi}"
                title = title or (
                    f"{100 * score.interval.level:g}% bootstrap interval"
                    f" ({score.interval.scheme}, {score.interval.n_boot} samples)"
                )
            cells.append(
                Cell(
                    format_value(score.value if score else None, percent=column.percent),
                    title,
                    interval,
                )
            )
        predictions = record.predictions_hashes.get(setting)
        rows.append(
            Row(
                rank=rank_text,
                anchor=anchors[id(record)],
                name=record.submission.name,
                version=record.submission.version,
                kind=record.submission.kind,
                cells=tuple(cells),
                predictions_hash=Hash(short_hash(predictions), predictions)
                if predictions
                else None,
            )
        )
    return Table(
        setting=setting,
        label=_SETTING_LABELS.get(setting, setting.upper()),
        primary=primary,
        columns=columns,
        rows=tuple(rows),
    )


def _submission_view(record: RunRecord, anchor: str) -> SubmissionView:
    sub = record.submission
    return SubmissionView(
        anchor=anchor,
        name=sub.name,
        version=sub.version,
        kind=sub.kind,
        authors=", ".join(sub.authors),
        paper=Link(sub.paper, safe_href(sub.paper)) if sub.paper else None,
        url=Link(sub.url, safe_href(sub.url)) if sub.url else None,
        description=sub.description,
        package_hash=Hash(short_hash(sub.package_hash), sub.package_hash),
        runner=record.runner,
        harness_version=record.harness_version,
        created_at=record.created_at.isoformat(timespec="seconds"),
        metric_versions=tuple(
            f"{_SETTING_LABELS.get(e.setting, e.setting)} {e.metric}: {e.function} v{e.version}"
            for e in sorted(record.scores, key=lambda e: _setting_key(e.setting))  # stable
        ),
        declarations=_pairs(sub.declarations),
        environment=_pairs(record.environment),
        timings=tuple(
            (step, f"{seconds:.2f} s") for step, seconds in sorted(record.timings.items())
        ),
    )


def _pairs(mapping: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (key, value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        for key, value in sorted(mapping.items())
    )


def _submission_key(record: RunRecord) -> tuple[str, str]:
    return (record.submission.name, record.submission.version)


def _setting_key(setting: str) -> tuple[int, str]:
    return (_SETTING_ORDER.get(setting, len(_SETTING_ORDER)), setting)


def _page_filename(benchmark: str, version: int) -> str:
    """``<id>-v<version>.html``; an id unsafe in a file name gets a slug plus a digest."""
    if _SAFE_ID.fullmatch(benchmark):
        stem = benchmark
    else:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", benchmark).strip(".-")[:40] or "benchmark"
        stem = f"{slug}-{sha256(benchmark.encode()).hexdigest()[:8]}"
    return f"{stem}-v{version}.html"


# -- rendering ------------------------------------------------------------------------------------


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("harness.site", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _render(pages: list[BenchmarkPage], site: Path) -> None:
    env = _environment()
    common = {"harness_version": harness_version}
    (site / "benchmarks").mkdir()
    (site / "static").mkdir()
    index = env.get_template("index.html").render(
        pages=pages, root="", page_title="Leaderboard", **common
    )
    _write(site / "index.html", index)
    template = env.get_template("benchmark.html")
    for page in pages:
        html = template.render(
            page=page, root="../", page_title=f"{page.title} v{page.version}", **common
        )
        _write(site / "benchmarks" / page.filename, html)
    css = resources.files("harness.site").joinpath("static", "style.css").read_bytes()
    (site / "static" / "style.css").write_bytes(css)
    _write(site / MARKER, _MARKER_TEXT)


def _write(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)


# -- swapping into place --------------------------------------------------------------------------


def _check_replaceable(out_dir: Path) -> None:
    if out_dir.is_symlink():
        raise HarnessError(f"{out_dir} is a symlink; pass the directory it points to as --out")
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise HarnessError(f"{out_dir} exists and is not a directory; choose another --out")
    if (out_dir / MARKER).is_file() or not any(out_dir.iterdir()):
        return
    raise HarnessError(
        f"refusing to replace {out_dir}: it is not empty and was not built by "
        f"`zsl leaderboard build` (no {MARKER} file); choose another --out or empty it"
    )


def _swap_into_place(work: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.replace(work, out_dir)
        return
    # POSIX rename can't replace a non-empty directory: move the old site aside first.
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex}")
    os.replace(out_dir, old)
    try:
        os.replace(work, out_dir)
    except BaseException:
        os.replace(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)

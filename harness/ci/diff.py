"""The leaderboard diff: which runs a change adds, removes or alters, as a Markdown comment.

Contract: :func:`record_differences` compares two run records on every field but
:data:`~harness.records.RUN_METADATA_FIELDS` (what "the same result" means to CI; across
platforms, within a tolerance: :mod:`harness.results.reproduction`); :func:`leaderboard_diff`
renders the change between two sets of records per benchmark version and setting, ranked and
formatted exactly as the site ranks and formats them (:func:`harness.ranking.competition_ranks`,
:func:`harness.site.text.format_value`, :func:`harness.site.model.is_transductive`: transductive
runs ranked apart), every submitted string escaped (:func:`harness.ci.markdown.escape_markdown`).
Pure functions of the records: no git, no files.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from harness.ci.markdown import escape_markdown, short_list
from harness.ranking import competition_ranks
from harness.records import (
    RunKey,
    RunRecord,
    ScoreEntry,
    run_key,
)
from harness.results.reproduction import leaf_differences
from harness.site.model import SETTING_LABELS, SETTING_ORDER, is_transductive
from harness.site.text import format_value

__all__ = [
    "index_records",
    "leaderboard_diff",
    "record_differences",
    "same_result",
]


def record_differences(committed: RunRecord, fresh: RunRecord) -> list[str]:
    """The field paths (``scores[0].class_values.means[3]``) where two records differ.

    Compares the canonical JSON of both (what a record file holds), leaving out only
    :data:`~harness.records.RUN_METADATA_FIELDS` (when and where it ran). Leaves compare as JSON
    text, so ``1`` differs from ``1.0`` and ``true``; a list of another length is named as a
    whole. In document order (keys sorted); empty when the records are the same result.
    """
    return [leaf.path for leaf in leaf_differences(committed, fresh)]


def same_result(one: RunRecord | None, two: RunRecord | None) -> bool:
    """Both absent, or both present and equal on every field but
    :data:`~harness.records.RUN_METADATA_FIELDS` (when and where it ran)."""
    if one is None or two is None:
        return one is two
    return not record_differences(one, two)


def index_records(records: Iterable[RunRecord]) -> dict[RunKey, RunRecord]:
    """Records by run key; of two records of one key the newest wins, as re-running a
    submission replaces its run."""
    index: dict[RunKey, RunRecord] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        index[run_key(record)] = record
    return index


def _ranks(
    entries: dict[RunKey, ScoreEntry], transductive: Collection[RunKey] = ()
) -> dict[RunKey, int]:
    """Competition ranks (:func:`~harness.ranking.competition_ranks`), among entries of the same
    metric version only, and apart for transductive runs (they saw the unlabelled test images),
    as the site ranks them."""
    pools: dict[tuple[str, bool], dict[RunKey, ScoreEntry]] = {}
    for key, entry in entries.items():
        if math.isfinite(entry.value):
            pools.setdefault((entry.version, key in transductive), {})[key] = entry
    ranks: dict[RunKey, int] = {}
    for pool in pools.values():
        better = next(iter(pool.values())).higher_is_better
        values = {key: entry.value for key, entry in pool.items()}
        ranks.update(competition_ranks(values, higher_is_better=better))
    return ranks


def _value_text(entry: ScoreEntry | None, percent: bool) -> str:
    """The score and its interval (``62.3 [58.1, 66.0]``) in the site's number format."""
    if entry is None or not math.isfinite(entry.value):
        return format_value(None, percent=percent)
    text = format_value(entry.value, percent=percent)
    if entry.interval is not None:
        lo = format_value(entry.interval.lo, percent=percent)
        hi = format_value(entry.interval.hi, percent=percent)
        text += f" [{lo}, {hi}]"
    return text


def _change_reasons(old: RunRecord, new: RunRecord, old_e: ScoreEntry, new_e: ScoreEntry) -> str:
    reasons = []
    if (old.benchmark.hash, old.benchmark.spec_hash) != (
        new.benchmark.hash,
        new.benchmark.spec_hash,
    ):
        reasons.append("data")
    if old.submission.package_hash != new.submission.package_hash:
        reasons.append("package")
    elif old.predictions_hashes != new.predictions_hashes:
        reasons.append("predictions")
    if old_e.version != new_e.version:
        reasons.append(
            f"metric v{escape_markdown(old_e.version)} → v{escape_markdown(new_e.version)}"
        )
    if not reasons and old_e == new_e:
        # Same primary score, yet another result: name what changed (declarations, class
        # means, leakage...), since the site shows it.
        fields = record_differences(old, new)
        if fields:
            reasons.append(escape_markdown(short_list(fields, 3)))
    if not reasons:
        reasons.append("scores")
    return "updated (" + ", ".join(reasons) + ")"


@dataclass
class _Row:
    key: RunKey
    rank: str
    change: str
    before: str
    after: str
    delta: str
    order: tuple[float, float, str, str]


def _setting_table(
    setting: str,
    metric: str,
    old: dict[RunKey, RunRecord],
    new: dict[RunKey, RunRecord],
    reproduced: Collection[RunKey] | None,
) -> str:
    old_entries = {k: e for k, r in old.items() if (e := r.score(setting, metric)) is not None}
    new_entries = {k: e for k, r in new.items() if (e := r.score(setting, metric)) is not None}
    if not old_entries and not new_entries:
        return ""
    old_trans = {k for k, r in old.items() if is_transductive(r)}
    new_trans = {k for k, r in new.items() if is_transductive(r)}
    old_ranks, new_ranks = _ranks(old_entries, old_trans), _ranks(new_entries, new_trans)
    everything = [*old_entries.values(), *new_entries.values()]
    percent = all(
        0.0 <= v <= 1.0
        for e in everything
        for v in (e.value, *((e.interval.lo, e.interval.hi) if e.interval else ()))
    )
    rows = []
    for key in sorted(old_entries.keys() | new_entries.keys()):
        before, after = old_entries.get(key), new_entries.get(key)
        rank_before, rank_after = old_ranks.get(key), new_ranks.get(key)
        if before is None:
            change = "new"
        elif after is None:
            change = "removed"
        elif not same_result(old[key], new[key]):
            change = _change_reasons(old[key], new[key], before, after)
        elif rank_before != rank_after:
            change = "moved"
        else:
            continue
        if (
            reproduced is not None
            and after is not None
            and change != "moved"
            and key not in reproduced
        ):
            change += " ⚠ not reproduced by this CI run"
        delta = ""
        if (
            before is not None
            and after is not None
            and before.version == after.version
            and math.isfinite(before.value)
            and math.isfinite(after.value)
        ):
            scale = 100.0 if percent else 1.0
            delta = f"{scale * (after.value - before.value):+.{1 if percent else 2}f}"
        rank = {
            (True, True): f"{rank_before} → {rank_after}",
            (False, True): f"— → {rank_after}",
            (True, False): f"{rank_before} → —",
            (False, False): "—",
        }[(rank_before is not None, rank_after is not None)]
        if rank_before is not None and rank_before == rank_after:
            rank = str(rank_after)
        rows.append(
            _Row(
                key=key,
                rank=rank,
                change=change,
                before=_value_text(before, percent),
                after=_value_text(after, percent),
                delta=delta,
                order=(
                    rank_after if rank_after is not None else math.inf,
                    rank_before if rank_before is not None else math.inf,
                    key[2],
                    key[3],
                ),
            )
        )
    if not rows:
        return ""
    rows.sort(key=lambda row: row.order)
    label = SETTING_LABELS.get(setting, setting)
    unit = " (%)" if percent else ""
    lines = [
        f"**{escape_markdown(label)} · {escape_markdown(metric)}{unit}**",
        "",
        "| Rank | Submission | Change | Before | After | Δ |",
        "| ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        name = escape_markdown(f"{row.key[2]} {row.key[3]}")
        if row.key in new_trans or (row.key not in new and row.key in old_trans):
            name += " (transductive: ranked apart)"
        lines.append(
            f"| {row.rank} | {name} | {row.change} | {row.before} | {row.after} | {row.delta} |"
        )
    versions = sorted({e.version for e in new_entries.values()})
    if len(versions) > 1:
        listed = ", ".join(f"v{escape_markdown(v)}" for v in versions)
        lines += [
            "",
            f"Metric versions mixed in this table ({listed}): runs are ranked only against runs "
            "of the same version; re-score the older runs.",
        ]
    return "\n".join(lines)


def leaderboard_diff(
    before: Sequence[RunRecord],
    after: Sequence[RunRecord],
    *,
    reproduced: Collection[RunKey] | None = None,
) -> str:
    """The leaderboard change from ``before`` to ``after`` records, as Markdown.

    Runs are matched by :func:`run_key`. Per benchmark version and per setting, a table of the
    primary metric lists the runs that are new, removed or updated (with what changed: data,
    package, predictions, metric version, scores, or else the record fields that differ: any
    field but :data:`~harness.records.RUN_METADATA_FIELDS` (when and where it ran) counts), and
    runs whose rank moved, with values and
    95% intervals before and after, the difference and the rank change. Ranks are competition
    ranks among runs of the same metric version. Unchanged runs are left out.

    See docs/ci.md, `leaderboard_diff`.
    """
    old, new = index_records(before), index_records(after)
    status: dict[RunKey, str] = {}
    for key in old.keys() | new.keys():
        if key not in old:
            status[key] = "new"
        elif key not in new:
            status[key] = "removed"
        elif not same_result(old[key], new[key]):
            status[key] = "updated"
    sections = []
    for bench in sorted({key[:2] for key in status}):
        old_b = {k: r for k, r in old.items() if k[:2] == bench}
        new_b = {k: r for k, r in new.items() if k[:2] == bench}
        newest = max([*old_b.values(), *new_b.values()], key=lambda r: r.created_at)
        info = max(new_b.values(), key=lambda r: r.created_at) if new_b else newest
        tables = [
            table
            for setting, metric in sorted(
                info.benchmark.primary.items(),
                key=lambda item: (SETTING_ORDER.get(item[0], 99), item[0]),
            )
            if (table := _setting_table(setting, metric, old_b, new_b, reproduced))
        ]
        title = escape_markdown(info.benchmark.title)
        heading = f"#### {escape_markdown(bench[0])} v{bench[1]} — {title}"
        sections.append("\n\n".join([heading, *tables]))
    counts = {
        kind: sum(1 for s in status.values() if s == kind) for kind in ("new", "updated", "removed")
    }
    if not status:
        summary = "No change to the leaderboard."
    else:
        n_bench = len({key[:2] for key in status})
        summary = (
            f"{counts['new']} new, {counts['updated']} updated, {counts['removed']} removed "
            f"run{'s' if len(status) != 1 else ''} on {n_bench} "
            f"benchmark{'s' if n_bench != 1 else ''}."
        )
    return "\n\n".join(["### Leaderboard diff", summary, *sections]) + "\n"

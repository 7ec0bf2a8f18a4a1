"""Which charts a page gets, from the site model: the data picked out of records for each chart.

The drawing is :mod:`harness.site.charts`; this module chooses the series (the curves stored in
score details: DARTS accuracy–specificity points, the calibrated-stacking seen–unseen curve,
hp@k over k, the prediction relation shares, the benchmark's structure diagnostics), orders them
as the table ranks the submissions, and never puts two metric versions on one chart.

Transductive runs are drawn after the inductive ones, their labels marked ``[T]`` (a caption says
so): a chart orders submissions as the tables list them apart. Submitted text reaches an SVG
``<text>`` between FSI and PDI with its bidi controls balanced (:func:`harness.site.text.
isolate_text`), and a caption holds it in ``<bdi>`` elements, so no name reorders what follows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from harness.site import charts
from harness.site.model import (
    BenchmarkPage,
    Column,
    SettingTable,
    Submission,
    functions_drawn_as,
    version_key,
)
from harness.site.text import isolate, isolate_text

__all__ = ["Figure", "benchmark_figures", "rank_figure", "setting_figures", "structure_facts"]

#: Curves drawn per chart (the best-ranked first); the legend says how many more there are.
MAX_SERIES = 10
#: Points kept of a long curve (the seen–unseen curve has one per breakpoint).
MAX_POINTS = 160
#: Prefix of a transductive run's label in a chart (first, so a cut label keeps it).
TRANSDUCTIVE_MARK = "[T] "
_WHICH = {"-transductive": ", transductive submissions", "-combined": ", every submission"}
_MARK_NOTE = " [T]: transductive (used the unlabelled test images; ranked apart in the tables)."
#: The parts of the relation chart: a record's share (its details' key) and its legend name.
#: Since prediction_relation_share v2 "unrelated" is farther than a sibling; a v1 record has no
#: "sibling" and its "unrelated" is every other class, siblings included (_BEFORE_SIBLINGS).
RELATIONS = (
    ("correct", "correct"),
    ("ancestor", "ancestor"),
    ("descendant", "descendant"),
    ("sibling", "sibling"),
    ("unrelated", "unrelated (farther than a sibling)"),
)
_BEFORE_SIBLINGS = (*RELATIONS[:3], ("unrelated", "other class (sibling or farther)"))
_ARTICLE = {"ancestor": "an ancestor", "descendant": "a descendant", "sibling": "a sibling"}
#: The caption's last parts, for records with a sibling share (True) and without (v1).
_OTHER = {
    True: "a sibling (sharing a parent with it), or unrelated (farther away in the hierarchy)",
    False: "or another class (a sibling or one farther away in the hierarchy: this version of "
    "the metric does not tell them apart)",
}
#: The least span of the DARTS accuracy axis: curves that end within 0.4 % of 100 % (a
#: classifier that backs off to the root) are not spread over the whole width; a narrower
#: axis than 0-100 % says so in its label.
DARTS_MIN_SPAN = 0.2


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    svg: Markup
    caption: Markup | str


Href = Callable[[str], str]


def setting_figures(bench: BenchmarkPage, plan: SettingTable, href: Href) -> list[Figure]:
    """Charts of one setting's table: primary scores, then the curves the records hold."""
    figures: list[Figure] = []
    order = plan.shown  # inductive runs first, then the transductive ones
    if plan.primary is not None:
        figures.append(_primary_bars(plan, plan.primary, order, href))
    # Which metrics hold each curve is their registration's ``figure``
    # (:data:`harness.metrics.base.FIGURE_KINDS`): a metric registered with one is drawn here.
    darts_functions = functions_drawn_as("darts_curve", "darts_operating_point")
    darts = _first_column(plan, darts_functions, lambda d: "curve" in d)
    if darts is not None:
        figures.append(_darts(plan, darts, order, href))
    ausuc = _first_column(
        plan, functions_drawn_as("seen_unseen_curve"), lambda d: isinstance(d.get("curve"), dict)
    )
    if ausuc is not None:
        figures.append(_seen_unseen(plan, ausuc, order, href))
    top_k = _top_k(plan, order, href)
    if top_k is not None:
        figures.append(top_k)
    hp = _hp_at_k(plan, order, href)
    if hp is not None:
        figures.append(hp)
    shares = _first_column(plan, functions_drawn_as("relation_shares"), lambda d: "correct" in d)
    if shares is not None:
        figures.append(_relation_shares(plan, shares, order, href))
    return figures


def benchmark_figures(bench: BenchmarkPage) -> list[Figure]:
    """Structure diagnostics of the benchmark's split: one bar chart per histogram found."""
    structure = bench.latest.benchmark.structure
    figures = []
    for key, value in sorted(structure.items()):
        counts = _histogram(value)
        if counts is None:
            continue
        hops = "hop" in key
        labels = [
            f"{label} hop{'s' if label != '1' else ''}" if hops else label for label, _ in counts
        ]
        title = (
            "Test classes by hops to the nearest training class"
            if key == "hops_to_train"
            else isolate_text(_words(key))
        )
        figures.append(
            Figure(
                id=f"structure-{key.replace('_', '-')}",
                title=title,
                svg=charts.bar_chart(
                    labels,
                    [n for _, n in counts],
                    title=title,
                    value_label="test classes" if hops else "count",
                    value_format=".0f",
                ),
                caption="Hops are undirected hypernym/hyponym edges of the frozen hierarchy: a "
                "test class 2 hops from a training class is its sibling (or grandchild). Many "
                "test classes close to training classes make the benchmark easier than its "
                "accuracy suggests."
                if hops
                else Markup("The distribution {} of the benchmark's structure diagnostics.").format(
                    isolate(_words(key))
                ),
            )
        )
    return figures


def structure_facts(bench: BenchmarkPage) -> list[tuple[str, str]]:
    """The structure diagnostics that are not histograms, as (name, text) rows."""
    out = []
    for key, value in sorted(bench.latest.benchmark.structure.items()):
        if _histogram(value) is not None:
            continue
        if key == "structural_ratio" and isinstance(value, dict) and _is_number(value.get("value")):
            text = f"{value['value']:.3f}"
            if _is_number(value.get("n_included")):
                text += f" over {value['n_included']} test classes"
            if value.get("excluded"):
                text += f" ({value['excluded']} excluded: no defined ratio)"
            text += (
                "; below 1, test classes typically lie nearer to a training class than to "
                "another test class"
            )
            out.append(("structural ratio", text))
        elif key == "mutual_exclusivity_violations" and isinstance(value, dict):
            parts = []
            for split, found in sorted(value.items()):
                n = len(found) if isinstance(found, list) else found
                parts.append(f"{split}: {_short_json(n)}")
                if isinstance(found, list) and found:
                    parts[-1] += " (" + ", ".join(_pair_text(f) for f in found[:10])
                    parts[-1] += ", …)" if len(found) > 10 else ")"
            out.append(("ancestor–descendant pairs in a split", "; ".join(parts) or "none"))
        else:
            out.extend(_flat_facts(_words(key), value))
    return out


def _flat_facts(name: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, bool) or value is None:
        return [(name, str(value).lower())]
    if isinstance(value, float):
        return [(name, f"{value:.4g}")]
    if isinstance(value, int | str):
        return [(name, str(value))]
    if isinstance(value, dict) and len(value) <= 8:
        rows: list[tuple[str, str]] = []
        for key, inner in sorted(value.items()):
            rows.extend(_flat_facts(f"{name} · {_words(str(key))}", inner))
        return rows
    return [(name, _short_json(value))]


def _pair_text(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 2:
        return f"{value[0]} ⊃ {value[1]}"
    return _short_json(value)


def rank_figure(
    ranks: dict[str, Any], setting: str, href: Href, *, suffix: str = "", uncounted: bool = False
) -> Figure:
    """A rank matrix across benchmarks of ``setting`` (one of :class:`harness.site.model.
    SiteModel`'s) as a heatmap, rank 1 darkest; ``suffix`` tells the figure ids apart. With
    ``uncounted`` (the runs left out by default are in), a benchmark with such runs names why
    in its label."""
    subs: list[Submission] = ranks["submission_refs"]
    benches: list[BenchmarkPage] = ranks["benchmark_pages"]
    label = {"zsl": "ZSL", "gzsl": "GZSL"}.get(setting, setting)
    marked = any(s.transductive for s in subs)
    svg = charts.heatmap(
        [_sub_label(s) for s in subs],
        [_bench_label(b, uncounted) for b in benches],
        ranks["ranks"],
        title=f"{label}{_WHICH.get(suffix, '')}: rank on each benchmark (1 = best)",
        value_format=".3g",
        reverse=True,
        row_hrefs=[href(f"submissions/{s.filename}") for s in subs],
        col_hrefs=[href(f"benchmarks/{b.filename}") for b in benches],
        cell_width=max(40, min(72, 720 // max(1, len(benches)))),
    )
    return Figure(
        id=f"ranks-{setting}{suffix}",
        title=f"{label} rank matrix",
        svg=svg,
        caption="Each cell is a submission's rank by the benchmark's primary metric "
        "(ties share their average rank); rows are ordered by how many benchmarks scored them "
        "(more first), then by mean rank over those. Hatched cells: not scored there."
        + (_MARK_NOTE if marked else ""),
    )


# -- charts of one setting ----------------------------------------------------------------


def _primary_bars(plan: SettingTable, column: Column, order: list[str], href: Href) -> Figure:
    keys = [k for k in order if k in column.entries]
    entries = [column.entries[k] for k in keys]
    nan = float("nan")
    svg = charts.bar_chart(
        [_name(plan, k) for k in keys],
        [e.value for e in entries],
        lo=[e.interval.lo if e.interval else nan for e in entries],
        hi=[e.interval.hi if e.interval else nan for e in entries],
        percent=column.percent,
        title=f"{plan.label} {isolate_text(column.metric)} with 95% intervals",
        value_label=isolate_text(column.metric)
        + ("" if column.higher_is_better else " (lower is better)"),
        hrefs=[_row_href(plan, href, k) for k in keys],
    )
    return Figure(
        id=f"{plan.setting}-primary",
        title=f"{column.metric} by submission",
        svg=svg,
        caption="Whiskers: the bootstrap interval stored with each score (images resampled "
        "within classes). Overlapping whiskers don't make two submissions tied, nor do "
        "separate ones make them different: the group column holds the paired test."
        + _mark_note(plan, keys),
    )


def _darts(plan: SettingTable, column: Column, order: list[str], href: Href) -> Figure:
    rewarded = functions_drawn_as("darts_operating_point")
    rewards = [c for c in plan.columns if c.function in rewarded]
    series = []
    targets: set[float] = set()
    ringed: list[str] = []
    for key in order:
        entry = column.entries.get(key)
        if entry is None:
            continue
        points = [p for p in entry.details.get("curve", []) if isinstance(p, dict)]
        xs = [_number(p.get("accuracy")) for p in points]
        ys = [_number(p.get("info_gain")) for p in points]
        rings = []
        for reward in rewards:
            found = reward.entries.get(key)
            reached = _reached(found.details) if found is not None else None
            if found is None or reached is None:
                continue
            target, accuracy = reached
            targets.add(target)
            below = " (below the target)" if accuracy < target else ""
            rings.append(
                (
                    accuracy,
                    found.value,
                    f"{isolate_text(reward.metric)} read at the {_pct(target)} validation "
                    f"target: test accuracy {_pct(accuracy)}{below}, information gain "
                    f"{found.value:.3f}",
                )
            )
        if rings:
            ringed.append(key)
        series.append(_series(plan, href, key, xs, ys, highlight=rings))
    reading = Markup("")
    if ringed:
        reading = Markup(
            " Rings mark where each DARTS reward ({}) is read: λ was chosen so that the "
            "<em>validation</em> classes reach the target accuracy (dashed line); applied to the "
            "test classes it reaches the ring's accuracy, which the target does not guarantee "
            "(a ring left of the line fell short)."
        ).format(Markup(", ").join(isolate(c.metric) for c in rewards))
    return _curves(
        plan,
        "darts",
        "DARTS accuracy–specificity curves",
        series,
        Markup(
            "Each point is one target accuracy of DARTS (Deng et al., CVPR 2012), with λ chosen "
            "on the validation classes: predictions fall back to ancestors in the hierarchy "
            "until the target is met there; the axes are the accuracy and information gain "
            "then reached on the test images (means over images). Up and to the right is "
            "better.{} Metric {} v{};"
        ).format(reading, isolate(column.function), isolate(column.version)),
        [k for k in order if k in column.entries],
        title="DARTS: accuracy against specificity",
        x_label="test accuracy",
        y_label="information gain",
        x_percent=True,
        x_rules=[(t, f"val target {_pct(t)}") for t in sorted(targets)],
        x_limits=(0.0, 1.0),
        x_min_span=DARTS_MIN_SPAN,
    )


def _reached(details: dict[str, Any]) -> tuple[float, float] | None:
    """(target, test accuracy) of a DARTS reward's details; None where either is missing."""
    target, accuracy = _number(details.get("target")), _number(details.get("test_accuracy"))
    if not (math.isfinite(target) and math.isfinite(accuracy)):
        return None
    return target, accuracy


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%".replace(".0%", "%")


def _seen_unseen(plan: SettingTable, column: Column, order: list[str], href: Href) -> Figure:
    series = []
    for key in order:
        entry = column.entries.get(key)
        if entry is None:
            continue
        curve = entry.details["curve"]
        seen, unseen = _list(curve.get("seen")), _list(curve.get("unseen"))
        keep = _thin(min(len(seen), len(unseen)))
        xs, ys = [_number(unseen[i]) for i in keep], [_number(seen[i]) for i in keep]
        series.append(_series(plan, href, key, xs, ys))
    return _curves(
        plan,
        "seen-unseen",
        "Seen–unseen curves",
        series,
        Markup(
            "Calibrated stacking (Chao et al., ECCV 2016) subtracts a constant from the seen "
            "classes' scores; sweeping it traces the seen accuracy against the unseen accuracy. "
            "The area under the curve is {}. Metric {} v{};"
        ).format(isolate(column.metric), isolate(column.function), isolate(column.version)),
        [k for k in order if k in column.entries],
        title="Seen–unseen accuracy curves (calibrated stacking)",
        x_label="unseen accuracy",
        y_label="seen accuracy",
        x_range=(0.0, 1.0),
        y_range=(0.0, 1.0),
        x_percent=True,
        y_percent=True,
        markers=False,
    )


def _stored_curve(details: dict[str, Any]) -> list[tuple[int, float]] | None:
    """The (k, value) points a record stores (per_class_top_k_accuracy and
    hierarchical_precision_at_k v2 on), else None."""
    curve = details.get("curve")
    if not isinstance(curve, dict):
        return None
    ks, values = _list(curve.get("k")), _list(curve.get("value"))
    if len(ks) != len(values) or len(ks) < 2:
        return None
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in ks):
        return None
    return [(k, _number(v)) for k, v in zip(ks, values, strict=True)]


def _hp_at_k(plan: SettingTable, order: list[str], href: Href) -> Figure | None:
    # The curve a record stores (k in CURVE_KS where the candidates allow), from the newest
    # version that has it; else, for older records, one point per hp@k column of the spec.
    functions = functions_drawn_as("hp_at_k_curve")
    stored = _first_column(plan, functions, lambda d: _stored_curve(d) is not None)
    if stored is not None:
        series = _stored_series(plan, href, order, stored)
        return _hp_figure(plan, series, order, stored.function, stored.version)
    by_version: dict[tuple[str, str], list[tuple[int, Column]]] = {}
    for column in plan.columns:
        if column.function not in functions:
            continue
        ks = {e.details.get("k") for e in column.entries.values()}
        if len(ks) == 1 and isinstance(k := ks.pop(), int) and not isinstance(k, bool):
            by_version.setdefault((column.function, column.version), []).append((k, column))
    if not by_version:
        return None
    # One metric version per chart: of the first function that has one, the newest version
    # that has two or more k.
    usable = [fv for fv, cols in by_version.items() if len({k for k, _ in cols}) >= 2]
    if not usable:
        return None
    function = next(f for f in functions if any(fv[0] == f for fv in usable))
    version = max((v for f, v in usable if f == function), key=version_key)
    columns = sorted(by_version[function, version], key=lambda kc: kc[0])
    series = []
    for key in order:
        points = [(k, c.entries[key].value) for k, c in columns if key in c.entries]
        if points:
            xs, ys = [float(k) for k, _ in points], [v for _, v in points]
            series.append(_series(plan, href, key, xs, ys))
    return _hp_figure(plan, series, order, function, version)


def _stored_series(
    plan: SettingTable, href: Href, order: list[str], column: Column
) -> list[charts.Series]:
    """Each run's stored (k, value) curve of ``column``, in ``order``."""
    series = []
    for key in order:
        entry = column.entries.get(key)
        points = _stored_curve(entry.details) if entry is not None else None
        if points:
            series.append(
                _series(plan, href, key, [float(k) for k, _ in points], [v for _, v in points])
            )
    return series


def _top_k(plan: SettingTable, order: list[str], href: Href) -> Figure | None:
    # Records scored before per_class_top_k_accuracy v2 keep no curve: no chart for them (two
    # columns, top-1 and top-5, would draw the line this chart replaces).
    stored = _first_column(
        plan, functions_drawn_as("top_k_curve"), lambda d: _stored_curve(d) is not None
    )
    if stored is None:
        return None
    return _curves(
        plan,
        "top-k",
        "Top-k accuracy against k",
        _stored_series(plan, href, order, stored),
        Markup(
            "Per-class top-k accuracy: the mean over classes of the share of a class's test "
            "images whose true class is among the k best-scored candidates (ties count "
            "against), at k = 1, 2, 5, 10, 20 where there are more candidates. Metric "
            "{} v{};"
        ).format(stored.function, isolate(stored.version)),
        order,
        title="Top-k accuracy",
        x_label="k",
        y_label="per-class top-k accuracy",
        y_percent=True,
    )


def _hp_figure(
    plan: SettingTable, series: list[charts.Series], order: list[str], function: str, version: str
) -> Figure:
    return _curves(
        plan,
        "hp-at-k",
        "hp@k against k",
        series,
        Markup(
            "Hierarchical precision at k (Frome et al., NeurIPS 2013): the share of the top k "
            "predictions that fall in the true class's hierarchical neighbourhood. Metric "
            "{} v{};"
        ).format(function, isolate(version)),
        order,
        title="Hierarchical precision at k",
        x_label="k",
        y_label="hierarchical precision",
        y_percent=True,
    )


def _relation_shares(plan: SettingTable, column: Column, order: list[str], href: Href) -> Figure:
    keys = [k for k in order if k in column.entries]
    # A column holds one metric version: v2 records all have a sibling share, v1 ones none.
    siblings = all("sibling" in column.entries[k].details for k in keys)
    names = dict(RELATIONS if siblings else _BEFORE_SIBLINGS)
    shares = {
        relation: [_share(column.entries[k].details.get(relation)) for k in keys]
        for relation in names
    }
    # A part no run has (ancestors and descendants where every candidate is a leaf) is left
    # out of the chart and its legend; "correct" and the rest ("unrelated") stay, even at 0.
    parts = {
        names[relation]: values
        for relation, values in shares.items()
        if relation in ("correct", "unrelated") or any(v > 0 for v in values if math.isfinite(v))
    }
    absent = [relation for relation in shares if names[relation] not in parts]
    svg = charts.stacked_bar_chart(
        [_name(plan, k) for k in keys],
        parts,
        title="How top-1 predictions relate to the true class",
        value_label="share of test images",
        hrefs=[_row_href(plan, href, k) for k in keys],
    )
    return Figure(
        id=f"{plan.setting}-relations",
        title="Prediction relation shares",
        svg=svg,
        caption=Markup(
            "A structural-bias diagnostic: of each submission's top-1 predictions, the share "
            "that is correct, an ancestor of the true class, a descendant of it, {}. Many "
            "ancestor or descendant answers point at a split whose classes are not mutually "
            "exclusive.{} Metric {} v{}.{}"
        ).format(
            _OTHER[siblings],
            f" No run predicted {' or '.join(_ARTICLE.get(a, a) for a in absent)} of the "
            "true class: not drawn."
            if absent
            else "",
            isolate(column.function),
            isolate(column.version),
            _mark_note(plan, keys),
        ),
    )


def _curves(
    plan: SettingTable,
    suffix: str,
    heading: str,
    series: list[charts.Series],
    caption: Markup,
    drawn: list[str],
    **chart: Any,
) -> Figure:
    """A :func:`charts.line_chart` of the best-ranked ``series`` (``chart``: its options) as
    figure ``{setting}-{suffix}``; the caption ends with how many are drawn and the ``[T]``
    note when one of the first of ``drawn`` is transductive."""
    return Figure(
        id=f"{plan.setting}-{suffix}",
        title=heading,
        svg=charts.line_chart(series, max_series=MAX_SERIES, **chart),
        caption=caption
        + Markup(" the {} best-ranked submissions are drawn.{}").format(
            MAX_SERIES, _mark_note(plan, drawn[:MAX_SERIES])
        ),
    )


# -- helpers ------------------------------------------------------------------------------


def _first_column(
    plan: SettingTable, functions: tuple[str, ...], has: Callable[[dict[str, Any]], bool]
) -> Column | None:
    """The newest-version column of the first function in ``functions`` whose details fit."""
    for function in functions:
        for column in plan.columns:  # newest version first within a metric
            if column.function == function and all(has(e.details) for e in column.entries.values()):
                return column
    return None


def _name(plan: SettingTable, key: str) -> str:
    mark = TRANSDUCTIVE_MARK if key in plan.transductive else ""
    return mark + plan.isolated.get(key, key)


def _bench_label(bench: BenchmarkPage, uncounted: bool) -> str:
    """``id vN``, and with ``uncounted`` the badges that keep some of its runs out by default:
    ``xlsa17-apy-ps v1 [synthetic data]``."""
    text = f"{isolate_text(bench.id)} v{bench.version}"
    marks = [b.text for b in bench.uncounted_badges] if uncounted else []
    return f"{text} [{', '.join(marks)}]" if marks else text


def _sub_label(sub: Submission) -> str:
    mark = TRANSDUCTIVE_MARK if sub.transductive else ""
    return f"{mark}{isolate_text(sub.name)} {isolate_text(sub.version)}"


def _mark_note(plan: SettingTable, keys: list[str]) -> str:
    """The caption's note on ``[T]``, when a drawn run is transductive."""
    return _MARK_NOTE if any(k in plan.transductive for k in keys) else ""


def _row_anchor(plan: SettingTable, key: str) -> str:
    return plan.anchors.get(key, f"sub-{key}")


def _row_href(plan: SettingTable, href: Href, key: str) -> str:
    """The link to ``key``'s row of the setting's table."""
    return href(f"#{_row_anchor(plan, key)}")


def _series(
    plan: SettingTable,
    href: Href,
    key: str,
    xs: list[float],
    ys: list[float],
    highlight: Sequence[tuple[float, float, str]] = (),
) -> charts.Series:
    """The curve of submission ``key``, named and linked to its row as the table shows it."""
    return charts.Series(
        _name(plan, key), xs, ys, href=_row_href(plan, href, key), highlight=highlight
    )


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _share(value: Any) -> float:
    number = _number(value)
    return number if math.isfinite(number) and number >= 0 else math.nan


def _thin(n: int) -> list[int]:
    """At most :data:`MAX_POINTS` indices spread over ``range(n)``, both ends kept."""
    if n <= MAX_POINTS:
        return list(range(n))
    step = (n - 1) / (MAX_POINTS - 1)
    return sorted({round(i * step) for i in range(MAX_POINTS)})


def _histogram(value: Any) -> list[tuple[str, float]] | None:
    """(label, count) rows of a histogram: a dict of integer labels to counts, in label order."""
    if not isinstance(value, dict) or not value or len(value) > 60:
        return None
    if not all(str(k).lstrip("-").isdigit() and _is_number(v) for k, v in value.items()):
        return None
    return [(str(k), float(v)) for k, v in sorted(value.items(), key=lambda kv: int(kv[0]))]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _words(key: str) -> str:
    return key.replace("_", " ").strip()


def _short_json(value: Any) -> str:
    import json

    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"

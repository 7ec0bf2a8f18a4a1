"""The site's glossary: what every column header means, one entry per metric and per term.

A metric's entry is read from its registration (:func:`harness.metrics.base.register_metric`:
description, formula, averaging unit, parameters, bounds, reference), the same source ``zsl
metrics list`` prints, so the glossary never restates a definition. The other words a table
header uses (rank, group, coverage, badges, intervals, p) are :data:`TERMS`, here. Column headers
link ``glossary.html#<anchor>`` (:func:`metric_anchor`, :func:`term_anchor`); a metric function
a record names but this harness does not register still gets an entry saying so, so every link
resolves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.metrics import metrics
from harness.metrics.base import Metric

__all__ = [
    "TERMS",
    "glossary_entries",
    "metric_anchor",
    "metric_entry",
    "term_anchor",
]


@dataclass(frozen=True)
class Parameter:
    name: str
    default: str
    description: str


@dataclass(frozen=True)
class GlossaryEntry:
    """One definition on glossary.html (``anchor`` is its element id)."""

    anchor: str
    term: str
    summary: str
    formula: str = ""
    averaging: str = ""
    unit: str = ""
    direction: str = ""
    parameters: tuple[Parameter, ...] = ()
    reference: str = ""
    version: str = ""
    columns: tuple[str, ...] = ()  # the column names (spec keys) the records show it under


#: Terms of table headers that are not metrics: (anchor name, heading, definition).
TERMS: tuple[tuple[str, str, str], ...] = (
    (
        "setting",
        "Setting",
        "zsl: test images of unseen classes, ranked among the unseen classes only. gzsl: test "
        "images of seen and unseen classes, ranked among all of them (Xian et al., TPAMI 2019).",
    ),
    (
        "rank",
        "Rank (#)",
        "Position by the benchmark's primary metric among the runs of one kind (inductive or "
        "transductive, unless the combined ranking is chosen); ties share a rank (1, 1, 3).",
    ),
    (
        "group",
        "Group",
        "Tied group on the primary metric, 1 best. Walking down the ranking, a run joins the "
        "current group when the two-sided p-value of its paired bootstrap test over classes "
        "against the group's leader is at least 0.05; otherwise it leads a new group.",
    ),
    (
        "coverage",
        "Benchmarks (coverage)",
        "How many benchmarks of the table scored the submission on their primary metric. Rows "
        "are ordered by coverage first: a mean rank over fewer benchmarks is not comparable.",
    ),
    (
        "mean-rank",
        "Mean rank",
        "The mean of a submission's ranks by primary metric over the benchmarks it covers (ties "
        "share their average rank); read it together with coverage.",
    ),
    (
        "spread",
        "Spread",
        "On the robustness page: the range of a submission's scores over the validation variants "
        "of one dataset's split (a benchmark family), highest minus lowest, over the members it "
        "has a score on (two at least); percentage points for percentages (Xian et al., TPAMI "
        "2019, Fig. 3).",
    ),
    (
        "interval",
        "95% interval",
        "Bootstrap percentile interval of a score: test images resampled within their classes "
        "(1,000 draws unless the spec says otherwise). Overlap does not mean a tie; the paired "
        "test decides.",
    ),
    (
        "difference",
        "Difference",
        "On a comparison page: the score of the first submission minus that of the second on "
        "the same benchmark, setting and metric version; the interval beside it comes from the "
        "paired test. Beside a reported value: the run's score minus the reported one, in "
        "percentage points.",
    ),
    (
        "p-value",
        "p",
        "Two-sided p-value of the paired bootstrap test over classes of A against B (the same "
        "class draws for both runs); below 0.05 the better run is named, else the pair is tied.",
    ),
    (
        "metric-version",
        "Metric version",
        "The version of the metric's definition that scored the run (bumped whenever what a "
        "metric computes changes); two versions never share a column.",
    ),
    (
        "score",
        "Score",
        "The metric's value on the test images of the setting; percentages for metrics bounded "
        "by 0 and 1, plain numbers otherwise (the unit comes from the metric, not the runs).",
    ),
    (
        "predictions",
        "Predictions",
        "Whether the run's prediction files are archived (dense scores or top-K lists, bound to "
        "the benchmark hash), so it can be rescored when a metric changes.",
    ),
    (
        "badges",
        "Badges",
        "Marks of how a run was made: where its benchmark's data came from (see data), and from "
        "its declarations and the benchmark's leakage audit: transductive, leakage, extra data, "
        "own features, not audited.",
    ),
    (
        "data",
        "Data (verified release, synthetic data, …)",
        "Where a benchmark's raw inputs came from, recorded when it was frozen: verified "
        "release (a dataset's published files, matching a pinned checksum), unverified source "
        "(claimed to be a release, not checked), synthetic data (a stand-in the harness "
        "generated for a release: not the dataset), generated data (a benchmark the harness "
        "generates whole, the demo), own data (made or brought by the user), source not "
        "recorded (scored before the harness kept it); and experimental (the spec says so). "
        "Runs on synthetic, unverified, experimental or unrecorded data stay out of the tables "
        "across benchmarks (across, rank matrices, mean ranks, robustness) unless the reader "
        "opts in; their own benchmark pages show them.",
    ),
    (
        "reported",
        "Reported",
        "The number the paper a method comes from reports for it on the same benchmark, "
        "setting and metric (leaderboard/reported/), with the paper, the table and where it "
        "was transcribed from. Shown beside the harness's run, never ranked; the difference "
        "only where the run used the verified release.",
    ),
    (
        "transductive",
        "transductive",
        "The submission used the unlabelled test images during training; such runs are ranked "
        "apart from inductive ones unless the combined ranking is chosen.",
    ),
    (
        "leakage",
        "leakage n/N",
        "n of the N test classes were among the classes the feature backbone was pre-trained on "
        "(the audit is frozen with the benchmark); zero-shot is then not zero-shot for them.",
    ),
    (
        "lca-distance",
        "LCA distance",
        "How far a prediction lies from the true class through their lowest common ancestor "
        "(LCA), 0 for the class or one below it. lca_height (the default): the LCA's longest "
        "path down to one of its own leaves (Deng et al., ECCV 2010). "
        "max_leaf_depth_minus_lca_depth: the hierarchy's max leaf depth minus the LCA's depth, "
        "the 'height of the LCA' of Bertinetto et al. (Making Better Mistakes, CVPR 2020); on a "
        "DAG a depth is the longest path from a root. They differ where leaves lie at unequal "
        "depths; a score under the second says so in its details.",
    ),
    (
        "score-scale",
        "Score scale (calibration rule)",
        "A value chosen on the validation fit's scores (calibrated stacking's γ, DARTS's softmax "
        "temperature) reaches the main fit's scores as value × σ_main / σ_val, σ a fit's score "
        "scale: the mean over a fixed sample of training images both fits trained on of the "
        "standard deviation of an image's scores across the training classes. A fit's scores "
        "times a > 0 plus b change nothing scored. The harness's rule: Chao et al. (ECCV 2016) "
        "calibrate one model, whose γ has one unit.",
    ),
    (
        "classes",
        "Classes",
        "Number of classes of the benchmark version: seen (training) classes and unseen test "
        "classes.",
    ),
    (
        "leaders",
        "Leaders",
        "The best runs by the benchmark's primary metric, with the score's 95% interval.",
    ),
)


def metric_anchor(function: str) -> str:
    """The glossary element id of metric function ``function``."""
    return "metric-" + _slug(function)


def term_anchor(name: str) -> str:
    """The glossary element id of term ``name`` (one of :data:`TERMS`)."""
    if name not in _TERM_NAMES:
        raise KeyError(f"Expected a glossary term, one of {sorted(_TERM_NAMES)}, but got {name!r}")
    return "term-" + name


def metric_entry(metric: Metric, columns: Iterable[str] = ()) -> GlossaryEntry:
    """A registered metric's entry, from its registration alone."""
    lo, hi = metric.bounds
    unit = (
        "a fraction in [0, 1], shown as a percentage"
        if metric.percent
        else f"a number from {lo:g} to {'∞' if hi == float('inf') else f'{hi:g}'}"
        + (" (hierarchy levels)" if metric.needs_hierarchy and hi == float("inf") else "")
    )
    parameters = tuple(
        Parameter(name, repr(field.default), field.description or "")
        for name, field in metric.params.model_fields.items()
    )
    return GlossaryEntry(
        anchor=metric_anchor(metric.name),
        term=metric.name,
        summary=metric.description,
        formula=metric.formula,
        averaging=metric.averaging,
        unit=unit,
        direction="higher is better" if metric.higher_is_better else "lower is better",
        parameters=parameters,
        reference=metric.reference,
        version=metric.version,
        columns=tuple(sorted(set(columns))),
    )


def glossary_entries(
    functions: dict[str, set[str]] | None = None,
) -> tuple[list[GlossaryEntry], list[GlossaryEntry]]:
    """(metric entries, term entries): every registered metric, plus every function in
    ``functions`` (function -> the column names records show it under) the registry lacks."""
    functions = functions or {}
    entries = [metric_entry(metrics.get(name), functions.get(name, ())) for name in metrics]
    for function in sorted(set(functions) - set(metrics)):
        entries.append(
            GlossaryEntry(
                anchor=metric_anchor(function),
                term=function,
                summary="Not registered in this harness: the records name this metric function, "
                "but no definition of it ships with the zsl-harness that built the site.",
                columns=tuple(sorted(functions[function])),
            )
        )
    entries.sort(key=lambda e: e.term)
    terms = [GlossaryEntry(anchor=term_anchor(a), term=t, summary=s) for a, t, s in TERMS]
    return entries, terms


_TERM_NAMES = frozenset(a for a, _, _ in TERMS)


def _slug(text: str) -> str:
    """An id-safe form of ``text``: letters, digits, '-', '_', '.'; anything else as -xx-."""
    return re.sub(r"[^A-Za-z0-9_.]", lambda m: f"-{ord(m.group()):x}-", text)

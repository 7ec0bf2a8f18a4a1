"""What a run's data are, as badges, and whether its runs count across benchmarks by default.

A score of a synthetic stand-in for a release, of files nobody checked against a pinned
checksum, or of a benchmark its spec marks experimental must never pass for a score of the real
benchmark. Every page and line of output that shows a score shows :func:`data_badges` beside it,
and the cross-benchmark tables (across, rank matrix and mean ranks, robustness) count only runs
whose benchmark is :func:`counted_by_default`, unless the reader opts in. ``zsl ci pr`` refuses
the others for the leaderboard. See docs/data.md, "Where the raw inputs came from".
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records import BenchmarkInfo, RawInputs

__all__ = [
    "EXPERIMENTAL",
    "Badge",
    "badges_text",
    "counted_by_default",
    "data_badges",
    "excluded_why",
    "input_badges",
    "is_verified_release",
]


@dataclass(frozen=True)
class Badge:
    """One badge: ``key`` names its kind (a CSS class suffix), ``label`` is its text,
    ``title`` says how it was decided, ``counted`` whether it leaves a run in the
    cross-benchmark tables by default."""

    key: str
    label: str
    title: str
    counted: bool

    def text(self) -> str:
        """The badge in a line of terminal output."""
        return f"[{self.label}]"


EXPERIMENTAL = Badge(
    "experimental",
    "experimental",
    "the spec marks this benchmark experimental (a user's own or toy set)",
    counted=False,
)


def data_badges(info: BenchmarkInfo) -> tuple[Badge, ...]:
    """The badges of a benchmark's data: where its raw inputs came from, and experimental."""
    return input_badges(info.raw_inputs, experimental=info.experimental)


def input_badges(raw: RawInputs | None, *, experimental: bool) -> tuple[Badge, ...]:
    """:func:`data_badges` of raw inputs and the spec's ``experimental`` mark."""
    if raw is None:
        source = Badge(
            "unrecorded",
            "source not recorded",
            "scored before the harness recorded where a benchmark's raw inputs came from;"
            " score it again to record it",
            counted=False,
        )
    elif raw.origin == "synthetic":
        source = Badge("synthetic", "synthetic data", raw.how, counted=False)
    elif raw.origin == "release" and raw.verified:
        source = Badge("release", "verified release", raw.how, counted=True)
    elif raw.origin == "release":
        source = Badge("unverified", "unverified source", raw.how, counted=False)
    elif raw.origin == "generated":
        source = Badge("generated", "generated data", raw.how, counted=True)
    else:
        source = Badge("own", "own data", raw.how, counted=True)
    if not experimental:
        return (source,)
    return (source, EXPERIMENTAL)


def badges_text(info: BenchmarkInfo) -> str:
    """The data badges in a line of terminal output, e.g. ``[synthetic data]``."""
    return " ".join(badge.text() for badge in data_badges(info))


def counted_by_default(info: BenchmarkInfo) -> bool:
    """Whether the benchmark's runs count in the cross-benchmark tables without the reader
    opting in: its inputs are not synthetic, a release was verified, it is not experimental."""
    return all(badge.counted for badge in data_badges(info))


def excluded_why(info: BenchmarkInfo) -> str | None:
    """Why the benchmark's runs are left out of the cross-benchmark tables; None if counted."""
    left_out = [badge.label for badge in data_badges(info) if not badge.counted]
    if not left_out:
        return None
    return f"{info.id} v{info.version}: {', '.join(left_out)}"


def is_verified_release(info: BenchmarkInfo) -> bool:
    """Whether the benchmark was frozen from a verified copy of a dataset's release: only then
    is a score comparable with the number a paper reports on that dataset."""
    raw = info.raw_inputs
    return raw is not None and raw.origin == "release" and raw.verified

"""Draw the leaderboard's charts as inline SVG, in Python: no scripts, no assets, no network.

Each chart function returns a :class:`markupsafe.Markup` ``<svg role="img">`` that jinja2 embeds
as it is, with a ``<title>``, a ``<desc>``, an ``aria-label``, axes with round ticks, a legend,
and a ``<title>`` tooltip holding the exact values on every series, point, bar and cell. Every
text that reaches the markup (titles, labels, names from submissions) is escaped, and a label
becomes a link only for an http(s) URL or a relative reference. Coordinates are printed with two
decimals, so the same input gives byte-identical SVG. Colours come from CSS classes
(``series-0`` … ``series-9``: Paul Tol's colour-blind-safe "muted" palette plus a dark grey, ten
distinct colours; ``heat-0`` … ``heat-6``) at the end of ``static/style.css``; series also differ
by dash pattern and marker shape, so they stay apart in grayscale and in print. No name is cut:
a legend wraps a long one (:func:`wrap_label`), a long row label loses its middle while it stays
distinct (:func:`short_labels`); the full text is in the label's tooltip.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from markupsafe import Markup, escape

from harness.core.errors import HarnessError
from harness.site.text import safe_href

__all__ = [
    "LABEL_CHARS",
    "ChartError",
    "Series",
    "bar_chart",
    "chart_href",
    "heatmap",
    "line_chart",
    "nice_ticks",
    "short_labels",
    "stacked_bar_chart",
    "wrap_label",
]

N_COLORS = 10  # series-0 … series-9
N_DASHES = 4  # dash-0 … dash-3
N_MARKERS = 5  # circle, square, triangle, diamond, inverted triangle
N_HEAT = 7  # heat-0 (lightest) … heat-6 (darkest)
MARKER_LIMIT = 40  # with markers=None, series of at most this many points get markers
LABEL_CHARS = (
    40  # longer row labels lose their middle to "…" (short_labels); full text in a tooltip
)
LEGEND_CHARS = 48  # a longer legend name wraps onto more lines of at most this many characters
LINE = 13.0  # the height of a wrapped legend line
CHAR_WIDTH = 6.6  # estimated advance of one character of the charts' 11px font
ROW = 22.0  # height of one bar row or legend row
TOP = 30.0  # room for the visible title

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


class ChartError(HarnessError, ValueError):
    """A chart got input it cannot draw."""


@dataclass(frozen=True)
class Series:
    """One named curve of a :func:`line_chart`; ``href`` links its legend entry.

    ``highlight`` marks points of note on the curve (or off it) with a ring in the series'
    colour, each ``(x, y, tooltip)``: e.g. the operating point a score was read at.
    """

    name: str
    x: Sequence[float]
    y: Sequence[float]
    href: str | None = None
    highlight: Sequence[tuple[float, float, str]] = ()


def nice_ticks(lo: float, hi: float, *, target: int = 5) -> tuple[float, ...]:
    """Round tick values covering ``[lo, hi]``, spaced 1, 2 or 5 times a power of ten.

    The first tick is at most ``lo``, the last at least ``hi``, with about ``target`` intervals
    between them. A single value (``lo == hi``) is padded by 5% of it, or by 0.5 around zero.

    >>> nice_ticks(0.0, 1.0)
    (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    >>> nice_ticks(3.0, 97.0)
    (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ChartError(f"nice_ticks needs finite lo <= hi, got lo={lo!r}, hi={hi!r}")
    if target < 1:
        raise ChartError(f"nice_ticks: target must be at least 1, got {target!r}")
    scale = max(abs(lo), abs(hi))
    if hi - lo <= scale * 1e-9 or hi - lo < 1e-200:  # one value, or a spread lost in rounding
        pad = scale * 0.05 if scale * 0.05 > 1e-200 else 0.5
        lo, hi = lo - pad, hi + pad
    if not math.isfinite(hi - lo):
        raise ChartError(f"values from {lo!r} to {hi!r} span more than a float can hold")
    raw = (hi - lo) / target
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    digits = max(0, 1 - math.floor(math.log10(step)))  # rounds off float noise (0.6000000001)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    ticks = [round(k * step, digits) for k in range(first, last + 1)]
    while ticks[0] > lo:
        ticks.insert(0, round(ticks[0] - step, digits))
    while ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, digits))
    return tuple(ticks)


def chart_href(url: str | None) -> str | None:
    """``url`` if a chart may link it: http(s) as ``safe_href`` allows, or a relative reference.

    >>> chart_href("../submissions/ale.html#gzsl"), chart_href("javascript:alert(1)")
    ('../submissions/ale.html#gzsl', None)
    """
    if not url or safe_href(url) is not None:
        return url or None
    if _UNSAFE_URL_CHARS.search(url) or url.startswith("//"):
        return None
    # A ':' before the first '/', '?' or '#' makes it a scheme (javascript:, data:, vbscript:).
    return None if ":" in re.split(r"[/?#]", url, maxsplit=1)[0] else url


# -- charts ---------------------------------------------------------------------------------------


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
    step: bool = False,
    markers: bool | None = None,
    x_percent: bool = False,
    y_percent: bool = False,
    max_series: int = 10,
    width: int = 640,
    height: int = 360,
    description: str | None = None,
    x_rules: Sequence[tuple[float, str]] = (),
    x_limits: tuple[float, float] | None = None,
    x_min_span: float = 0.0,
) -> Markup:
    """A line chart with one curve per :class:`Series` and a legend below.

    See docs/site.md, `line_chart`.
    """
    _check_text(description, title=title, x_label=x_label, y_label=y_label)
    _check_size(width=width, height=height)
    if isinstance(max_series, bool) or not isinstance(max_series, int) or max_series < 1:
        raise ChartError(f"line_chart: max_series must be a positive integer, got {max_series!r}")
    if isinstance(series, Series) or not isinstance(series, Sequence):
        raise ChartError("line_chart: series must be a sequence of Series")
    curves = [_curve(s, i, step) for i, s in enumerate(series)][:max_series]
    marks = [_highlights(s, i) for i, s in enumerate(series)][: len(curves)]
    rules = _rules(x_rules)
    left, top, right, bottom = 64.0, TOP, width - 16.0, height - 46.0
    xs_all = [c[0] for c in curves] + [np.array([m[0] for m in ms]) for ms in marks]
    ys_all = [c[1] for c in curves] + [np.array([m[1] for m in ms]) for ms in marks]
    if rules and any(len(x) for x in xs_all):  # a rule alone does not make a data range
        xs_all.append(np.array([x for x, _ in rules]))
    sx = _scale("x_range", x_range, xs_all, left, right, limits=x_limits, min_span=x_min_span)
    sy = _scale("y_range", y_range, ys_all, bottom, top)
    x_axis_label = x_label + _zoom_note(sx, x_limits, x_percent)
    out = [_rect("plot-area", left, top, right - left, bottom - top)]
    out += _x_axis(sx, bottom, top, x_axis_label, x_percent) + _y_axis(
        sy, left, right, y_label, y_percent
    )
    for x, label in rules:
        px, shown = _num(sx(x)), f"{label} ({_tick_value(x, x_percent)})"
        out.append(f'<g class="rule"><title>{escape(_clean(shown))}</title>')
        out.append(
            f'<line class="rule-line" x1="{px}" x2="{px}" y1="{_num(top)}" y2="{_num(bottom)}"/>'
        )
        out.append(_text(sx(x) - 4, top + 12, label, "rule-label", "end") + "</g>")
    legend = []
    for i, ((xs, ys), s) in enumerate(zip(curves, series, strict=False)):
        # Dash shifts every N_COLORS series: no two of the first 32 share colour and dash.
        color, dash, shape = i % N_COLORS, (i + i // N_COLORS) % N_DASHES, i % N_MARKERS
        name = _clean(s.name)
        path: list[str] = []
        for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if step and j:
                path.append(f"L{_num(sx(x))} {_num(sy(ys[j - 1]))}")
            point = f"{_num(sx(x))} {_num(sy(y))}"
            if not path or path[-1][1:] != point:  # a point on the same pixel adds only bytes
                path.append(("L" if path else "M") + point)
        tip = f"{name}: {len(xs)} points" + (f"; x {_span(xs)}, y {_span(ys)}" if len(xs) else "")
        out.append(f'<g class="series series-{color}"><title>{escape(tip)}</title>')
        out.append(f'<path class="line dash-{dash}" fill="none" d="{"".join(path)}"/>')
        if markers or (markers is None and len(xs) <= MARKER_LIMIT) or len(xs) == 1:
            for x, y in zip(xs, ys, strict=True):
                where = f"{name}: {x_label} = {_exact(x)}, {y_label} = {_exact(y)}"
                out.append(_marker(shape, sx(x), sy(y), where))
        for x, y, note in marks[i]:
            tip = f"{name}: {note}" if note else f"{name}: {x_label} = {_exact(x)}"
            out.append(
                f'<circle class="highlight" cx="{_num(sx(x))}" cy="{_num(sy(y))}" r="7">'
                f"<title>{escape(_clean(tip))}</title></circle>"
            )
        out.append("</g>")
        sample = f'<path class="line dash-{dash}" fill="none" d="M0 0L24 0"/>'
        legend.append(
            (name, s.href, f'<g class="series-{color}">{sample}{_marker(shape, 12, 0)}</g>')
        )
    if not any(len(c[0]) for c in curves):
        out.append(_text((left + right) / 2, (top + bottom) / 2, "no data", "note", "middle"))
    hidden = len(series) - len(curves)
    note = f"+{hidden} more series not shown" if hidden else ""
    rows, legend_height = _legend(legend, height, width, note)
    names = "".join(f"{', ' if i else ': '}{item[0]}" for i, item in enumerate(legend))
    desc = description or (
        f"Line chart of {y_label} against {x_axis_label}; {len(series)} series{names}"
        + (f" (first {len(curves)} drawn)." if hidden else ".")
    )
    return _svg("line", width, height + legend_height, title, desc, out + rows)


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    value_label: str,
    lo: Sequence[float] | None = None,
    hi: Sequence[float] | None = None,
    percent: bool = False,
    value_format: str = ".2f",
    value_range: tuple[float, float] | None = None,
    hrefs: Sequence[str | None] | None = None,
    width: int = 640,
    description: str | None = None,
) -> Markup:
    """Horizontal bars from zero, one row per label, with optional interval whiskers.

    See docs/site.md, `bar_chart`.
    """
    names = _bar_labels(labels, description, title, value_label, width)
    n = len(names)
    vals = _floats("values", values, n)
    if (lo is None) != (hi is None):
        raise ChartError("bar_chart: give both lo and hi (interval bounds) or neither")
    los = _floats("lo", lo, n) if lo is not None else np.full(n, np.nan)
    his = _floats("hi", hi, n) if hi is not None else np.full(n, np.nan)
    if bad := [i for i in range(n) if los[i] > his[i]]:
        raise ChartError(f"bar_chart: lo[{bad[0]}] = {float(los[bad[0]])!r} exceeds hi[{bad[0]}]")
    fmt = _format("value_format", value_format)
    data = [vals, los, his, np.zeros(1)]
    out, bottom, sx = _rows(names, hrefs, value_range, data, width - 64.0, value_label, percent)
    for i, (name, value) in enumerate(zip(names, vals, strict=True)):
        y = TOP + ROW * i
        if not math.isfinite(value):
            out.append(_not_scored(name, sx.a, y))
            continue
        tip = f"{name}: {_exact(value)}"
        a, b = sorted((sx(0.0), sx(value)))
        out.append(f'<g class="bar"><title>{escape(tip)}</title>')
        out.append(_rect("bar-rect", a, y + 4, b - a, 14))
        if math.isfinite(los[i]) and math.isfinite(his[i]):
            u, v, c, c0, c1 = (_num(t) for t in (sx(los[i]), sx(his[i]), y + 11, y + 6, y + 16))
            tip += f"; interval {_exact(los[i])} to {_exact(his[i])}"
            out.append(f'<path class="whisker" fill="none" d="M{u} {c}L{v} {c}M{u} {c0}L{u} {c1}')
            out.append(f'M{v} {c0}L{v} {c1}"><title>{escape(tip)}</title></path>')
        shown = f"{value * 100:.1f}%" if percent else format(value, fmt)
        out.append("</g>" + _text(sx.b + 6, y + 15, shown, "value-label", "start"))
    desc = description or f"Bar chart of {value_label} for {n} rows: {', '.join(names)}."
    return _svg("bar", width, bottom + 42, title, desc, out)


def stacked_bar_chart(
    labels: Sequence[str],
    parts: Mapping[str, Sequence[float]],
    *,
    title: str,
    value_label: str = "share",
    hrefs: Sequence[str | None] | None = None,
    width: int = 640,
    description: str | None = None,
) -> Markup:
    """Horizontal 100% stacked bars: each row split into the shares of its parts.

    See docs/site.md, `stacked_bar_chart`.
    """
    names = _bar_labels(labels, description, title, value_label, width)
    if not isinstance(parts, Mapping) or not parts:
        raise ChartError("stacked_bar_chart: parts must be a non-empty mapping of name to values")
    keys = _labels("parts", list(parts))
    table = np.stack([_floats(f"parts[{k!r}]", v, len(names)) for k, v in parts.items()], axis=1)
    if (table < 0).any():
        row, col = (int(i) for i in np.argwhere(table < 0)[0])
        raise ChartError(f"stacked_bar_chart: parts[{keys[col]!r}][{row}] is negative")
    out, bottom, sx = _rows(names, hrefs, (0.0, 1.0), [], width - 16.0, value_label, True)
    for i, (name, row) in enumerate(zip(names, table, strict=True)):
        y, total, start = TOP + ROW * i, float(row.sum()), 0.0
        if not math.isfinite(total) or total <= 0:
            out.append(_not_scored(name, sx.a, y))
            continue
        for j, (key, amount) in enumerate(zip(keys, row, strict=True)):
            share = amount / total
            a, b = sx(start), sx(start + share)
            start += share
            if amount > 0:
                tip = f"{name} · {key}: {share * 100:.1f}% ({_exact(amount)} of {_exact(total)})"
                out.append(f'<g class="segment series-{j % N_COLORS}"><title>{escape(tip)}</title>')
                out.append(_rect("segment-rect", a, y + 4, b - a, 14))
                if b - a >= 30:  # room for the share inside the segment
                    out.append(_text((a + b) / 2, y + 15, f"{share:.0%}", "seg-text", "middle"))
                out.append("</g>")
    swatches = [
        (key, None, _rect(f"swatch series-{j % N_COLORS}", 0, -6, 24, 12))
        for j, key in enumerate(keys)
    ]
    rows, legend_height = _legend(swatches, bottom + 40, width, "")
    desc = description or (
        f"Stacked bars of the shares of {', '.join(keys)} for {len(names)} rows: "
        f"{', '.join(names)}."
    )
    return _svg("stacked", width, bottom + 40 + legend_height, title, desc, out + rows)


def heatmap(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    values: Any,
    *,
    title: str,
    value_format: str = ".2f",
    vmin: float | None = None,
    vmax: float | None = None,
    reverse: bool = False,
    row_hrefs: Sequence[str | None] | None = None,
    col_hrefs: Sequence[str | None] | None = None,
    cell_width: int = 56,
    description: str | None = None,
) -> Markup:
    """A grid of cells coloured and printed with their values; missing cells are hatched grey.

    See docs/site.md, `heatmap`.
    """
    _check_text(description, title=title)
    _check_size(cell_width=cell_width)
    rows, cols = _labels("row_labels", row_labels), _labels("col_labels", col_labels)
    shape = (len(rows), len(cols))
    try:
        grid = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise ChartError(f"heatmap: values must be numbers of shape {shape}: {err}") from err
    grid = grid.reshape(shape) if grid.size == 0 and 0 in shape else grid
    if grid.shape != shape:
        raise ChartError(
            f"heatmap: values must have shape {shape} (rows × columns), got {grid.shape}"
        )
    fmt = _format("value_format", value_format)
    row_links, col_links = (
        _hrefs("row_hrefs", row_hrefs, shape[0]),
        _hrefs("col_hrefs", col_hrefs, shape[1]),
    )
    finite = grid[np.isfinite(grid)]
    low = vmin if vmin is not None else float(finite.min()) if finite.size else 0.0
    high = vmax if vmax is not None else float(finite.max()) if finite.size else 1.0
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ChartError(f"heatmap: need finite vmin <= vmax, got vmin={low!r}, vmax={high!r}")
    shown_rows, shown_cols = short_labels(rows), short_labels(cols)
    left = _label_width(shown_rows)
    head = max(map(len, shown_cols), default=0) * CHAR_WIDTH * 0.71  # 45° labels
    top, out = TOP + head + 10, []
    for j, col in enumerate(cols):
        centre = left + cell_width * (j + 0.5)
        label = _label(col, centre, top - 6, "col-label", "start", col_links[j], shown_cols[j])
        out.append(f'<g transform="rotate(-45 {_num(centre)} {_num(top - 6)})">{label}</g>')
    for i, row in enumerate(rows):
        y = top + ROW * i
        out.append(_label(row, left - 6, y + 15, "row-label", "end", row_links[i], shown_rows[i]))
        for j, col in enumerate(cols):
            v, x = float(grid[i, j]), left + cell_width * j
            cell = _rect("", x, y, cell_width, ROW)
            if not math.isfinite(v):
                hatch = f"M{_num(x)} {_num(y + ROW)}L{_num(x + cell_width)} {_num(y)}"
                tip = escape(f"{row} · {col}: not scored")
                out.append(f'<g class="cell cell-missing"><title>{tip}</title>{cell}')
                out.append(f'<path class="hatch" d="{hatch}"/></g>')
                continue
            t = (v - low) / (high - low) if high > low else 0.5
            k = min(N_HEAT - 1, max(0, int((1 - t if reverse else t) * N_HEAT)))
            tip = escape(f"{row} · {col}: {_exact(v)}")
            out.append(f'<g class="cell heat-{k}"><title>{tip}</title>{cell}')
            out.append(
                _text(x + cell_width / 2, y + 15, format(v, fmt), "cell-text", "middle") + "</g>"
            )
    # The colour key: lightest value, the bins, darkest value, and the missing-cell swatch.
    y = top + ROW * len(rows) + 14
    ends = [format(v, fmt) for v in ((high, low) if reverse else (low, high))]
    out.append(_text(8, y + 11, ends[0], "tick-label", "start", "lightest colour"))
    x = 14 + CHAR_WIDTH * len(ends[0])
    out += [_rect(f"heat-swatch heat-{k}", x + 16 * k, y, 16, 14) for k in range(N_HEAT)]
    x += 16 * N_HEAT + 6
    out.append(_text(x, y + 11, ends[1], "tick-label", "start", "darkest colour"))
    x += CHAR_WIDTH * len(ends[1]) + 16
    if finite.size < grid.size:
        out.append(_rect("heat-swatch cell-missing", x, y, 16, 14))
        out.append(_text(x + 20, y + 11, "not scored", "tick-label", "start"))
        x += 20 + CHAR_WIDTH * 10
    width = max(left + cell_width * len(cols) + head + 16, x + 8)
    desc = description or (
        f"Heatmap of {len(rows)} rows by {len(cols)} columns; darker cells hold "
        f"{'lower' if reverse else 'higher'} values; {grid.size - finite.size} cells not scored."
    )
    return _svg("heatmap", width, y + 24, title, desc, out)


# -- validation -----------------------------------------------------------------------------------


def _check_text(description: str | None, **texts: str) -> None:
    for name, text in ({"description": description or ""} | texts).items():
        if not isinstance(text, str):
            raise ChartError(f"{name} must be a string, got {type(text).__name__}")


def _check_size(**sizes: float) -> None:
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int | float) or not 16 <= size <= 10000:
            raise ChartError(f"{name} must be a number of pixels from 16 to 10000, got {size!r}")


def _bar_labels(
    labels: Sequence[str], description: str | None, title: str, value_label: str, width: int
) -> list[str]:
    """The checked row labels of a bar chart, once its texts and width are checked."""
    _check_text(description, title=title, value_label=value_label)
    _check_size(width=width)
    return _labels("labels", labels)


def _labels(name: str, labels: Iterable[Any]) -> list[str]:
    if isinstance(labels, str | bytes) or not isinstance(labels, Iterable):
        raise ChartError(f"{name} must be a sequence of strings, got {type(labels).__name__}")
    found = list(labels)
    for i, label in enumerate(found):
        if not isinstance(label, str):
            raise ChartError(f"{name}[{i}] must be a string, got {type(label).__name__}")
    return [_clean(label) for label in found]


def _floats(name: str, values: Any, n: int | None = None) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise ChartError(f"{name} must be a sequence of numbers: {err}") from err
    if array.ndim != 1 or (n is not None and len(array) != n):
        want = f"{n} numbers (one per label)" if n is not None else "a 1-D sequence of numbers"
        raise ChartError(f"{name} must hold {want}, got shape {array.shape}")
    return array


def _hrefs(name: str, hrefs: Sequence[str | None] | None, n: int) -> list[str | None]:
    if isinstance(hrefs, str):
        raise ChartError(f"{name} must be a sequence of links (one per label), got a string")
    found: list[str | None] = [None] * n if hrefs is None else list(hrefs)
    if len(found) != n or not all(h is None or isinstance(h, str) for h in found):
        raise ChartError(f"{name} must hold {n} strings or None (one per label), got {found!r}")
    return found


def _format(name: str, spec: str) -> str:
    try:
        format(1.5, spec)
    except (TypeError, ValueError) as err:
        raise ChartError(f"{name} {spec!r} is not a format spec for floats: {err}") from err
    return spec


def _highlights(s: Series, i: int) -> list[tuple[float, float, str]]:
    """A series' finite highlight points, checked (after :func:`_curve` checked the series)."""
    found = s.highlight
    if isinstance(found, str | bytes) or not isinstance(found, Sequence):
        raise ChartError(f"series[{i}].highlight must be a sequence of (x, y, tooltip)")
    out = []
    for j, item in enumerate(found):
        if not (isinstance(item, tuple | list) and len(item) == 3 and isinstance(item[2], str)):
            raise ChartError(f"series[{i}].highlight[{j}] must be (x, y, tooltip), got {item!r}")
        x, y = _floats(f"series[{i}].highlight[{j}]", item[:2], 2)
        if math.isfinite(x) and math.isfinite(y):
            out.append((float(x), float(y), item[2]))
    return out


def _rules(rules: Any) -> list[tuple[float, str]]:
    if isinstance(rules, str | bytes) or not isinstance(rules, Sequence):
        raise ChartError("line_chart: x_rules must be a sequence of (x, label)")
    out = []
    for j, item in enumerate(rules):
        if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[1], str)):
            raise ChartError(f"line_chart: x_rules[{j}] must be (x, label), got {item!r}")
        x = float(_floats(f"x_rules[{j}]", [item[0]], 1)[0])
        if math.isfinite(x):
            out.append((x, item[1]))
    return out


def _tick_value(value: float, percent: bool) -> str:
    return f"{value * 100:g}%" if percent else _exact(value)


def _curve(s: Any, i: int, step: bool) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(s, Series):
        raise ChartError(f"series[{i}] must be a Series, got {type(s).__name__}")
    if not isinstance(s.name, str):
        raise ChartError(f"series[{i}].name must be a string, got {type(s.name).__name__}")
    if s.href is not None and not isinstance(s.href, str):
        raise ChartError(f"series[{i}].href must be a string or None, got {type(s.href).__name__}")
    x = _floats(f"series[{i}].x", s.x)
    y = _floats(f"series[{i}].y", s.y, len(x))
    keep = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[keep], kind="stable") if step else slice(None)
    return x[keep][order], y[keep][order]


# -- drawing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scale:
    lo: float
    hi: float
    a: float  # the pixel of lo
    b: float  # the pixel of hi
    ticks: tuple[float, ...]
    clamp: bool

    def __call__(self, value: float) -> float:
        t = (value - self.lo) / (self.hi - self.lo)
        return self.a + (min(1.0, max(0.0, t)) if self.clamp else t) * (self.b - self.a)


def _scale(
    name: str,
    fixed: tuple[float, float] | None,
    data: list[np.ndarray],
    a: float,
    b: float,
    *,
    limits: tuple[float, float] | None = None,
    min_span: float = 0.0,
) -> _Scale:
    if fixed is not None:
        try:
            lo, hi = (float(v) for v in fixed)
        except (TypeError, ValueError) as err:
            raise ChartError(
                f"{name} must be a pair (low, high) of numbers, got {fixed!r}"
            ) from err
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ChartError(f"{name} must be finite with low < high, got {fixed!r}")
        slack = 1e-9 * (hi - lo)
        ticks = tuple(t for t in nice_ticks(lo, hi) if lo - slack <= t <= hi + slack)
        return _Scale(lo, hi, a, b, ticks, clamp=True)
    values = np.concatenate([v[np.isfinite(v)] for v in data]) if data else np.zeros(0)
    if not values.size:
        return _Scale(0.0, 1.0, a, b, nice_ticks(0, 1), False)
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < min_span:  # widen towards where the limits leave room
        floor, ceiling = limits if limits is not None else (-math.inf, math.inf)
        lo = max(floor, min(lo, hi - min_span))
        hi = min(ceiling, max(hi, lo + min_span))
        lo = max(floor, min(lo, hi - min_span))
    ticks = nice_ticks(lo, hi)
    if limits is not None:  # round ticks never reach past what the values can be
        inside = tuple(t for t in ticks if limits[0] <= t <= limits[1])
        lo, hi = max(ticks[0], limits[0]), min(ticks[-1], limits[1])
        ticks = inside if len(inside) >= 2 else (lo, hi)
        return _Scale(lo, hi, a, b, ticks, False)
    return _Scale(ticks[0], ticks[-1], a, b, ticks, False)


def _zoom_note(scale: _Scale, limits: tuple[float, float] | None, percent: bool) -> str:
    """ " (axis from a to b)" when the axis shows only part of ``limits``, else nothing."""
    if limits is None or (scale.lo <= limits[0] and scale.hi >= limits[1]):
        return ""
    lo, hi = _tick_text(scale.lo, scale, percent), _tick_text(scale.hi, scale, percent)
    return f" (axis from {lo} to {hi}, zoomed)"


def _tick_text(value: float, scale: _Scale, percent: bool) -> str:
    step = scale.ticks[1] - scale.ticks[0] if len(scale.ticks) > 1 else scale.hi - scale.lo
    factor = 100.0 if percent else 1.0
    text = f"{value * factor:.{max(0, -math.floor(math.log10(step * factor) + 1e-9))}f}"
    text = text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0.0"
    return text + ("%" if percent else "")


def _x_axis(sx: _Scale, bottom: float, top: float, label: str, percent: bool) -> list[str]:
    out = ['<g class="axis x-axis">']
    for t in sx.ticks:
        x = _num(sx(t))
        out.append(f'<line class="grid" x1="{x}" x2="{x}" y1="{_num(top)}" y2="{_num(bottom)}"/>')
        out.append(_text(sx(t), bottom + 16, _tick_text(t, sx, percent), "tick-label", "middle"))
    y = _num(bottom)
    out.append(f'<line class="axis-line" x1="{_num(sx.a)}" x2="{_num(sx.b)}" y1="{y}" y2="{y}"/>')
    out.append(_text((sx.a + sx.b) / 2, bottom + 34, label, "axis-label", "middle") + "</g>")
    return out


def _y_axis(sy: _Scale, left: float, right: float, label: str, percent: bool) -> list[str]:
    out = ['<g class="axis y-axis">']
    for t in sy.ticks:
        y = _num(sy(t))
        out.append(f'<line class="grid" x1="{_num(left)}" x2="{_num(right)}" y1="{y}" y2="{y}"/>')
        out.append(_text(left - 6, sy(t) + 4, _tick_text(t, sy, percent), "tick-label", "end"))
    x = _num(left)
    out.append(f'<line class="axis-line" x1="{x}" x2="{x}" y1="{_num(sy.a)}" y2="{_num(sy.b)}"/>')
    rotate = f' transform="rotate(-90 14.00 {_num((sy.a + sy.b) / 2)})"'
    out.append(_text(14, (sy.a + sy.b) / 2, label, "axis-label", "middle", extra=rotate) + "</g>")
    return out


def _rows(
    names: list[str],
    hrefs: Sequence[str | None] | None,
    value_range: tuple[float, float] | None,
    data: list[np.ndarray],
    right: float,
    label: str,
    percent: bool,
) -> tuple[list[str], float, _Scale]:
    """The frame of a bar chart (plot area, value axis, row labels), its bottom edge, and its
    value scale (:func:`_scale` of ``value_range`` and ``data``) from the labels to ``right``."""
    shown = short_labels(names)
    sx = _scale("value_range", value_range, data, _label_width(shown), right)
    links = _hrefs("hrefs", hrefs, len(names))
    bottom = TOP + ROW * max(1, len(names))
    out = [_rect("plot-area", sx.a, TOP, sx.b - sx.a, bottom - TOP)]
    out += _x_axis(sx, bottom, TOP, label, percent)
    for i, name in enumerate(names):
        y = TOP + ROW * i + 15
        out.append(_label(name, sx.a - 6, y, "row-label", "end", links[i], shown[i]))
    if not names:
        out.append(_text((sx.a + sx.b) / 2, TOP + 15, "no data", "note", "middle"))
    return out, bottom, sx


def _not_scored(name: str, left: float, y: float) -> str:
    return _text(left + 4, y + 15, "not scored", "note", "start", f"{name}: not scored")


def _legend(
    items: Sequence[tuple[str, str | None, str]], top: float, width: float, note: str
) -> tuple[list[str], float]:
    """Legend entries (name, link, sample drawn around the origin) flowing into rows; a name
    too long for one line wraps onto more (:func:`wrap_label`), never cut."""
    if not items and not note:
        return [], 0.0
    out, x, y = ['<g class="legend">'], 8.0, top + 14
    row_height = ROW
    for name, href, sample in items:
        lines = wrap_label(name, LEGEND_CHARS)
        item_width = 44 + CHAR_WIDTH * max(map(len, lines))
        if x > 8 and x + item_width > width - 8:
            x, y, row_height = 8.0, y + row_height, ROW
        row_height = max(row_height, ROW + LINE * (len(lines) - 1))
        label = _label(name, 30, 4, "legend-label", "start", href, lines=lines)
        out.append(f'<g transform="translate({_num(x)} {_num(y)})">{sample}{label}</g>')
        x += item_width
    y += row_height - ROW
    if note:
        y += ROW if items else 0
        out.append(_text(8, y + 4, note, "note", "start"))
    return [*out, "</g>"], y - top + 14


def wrap_label(text: str, limit: int) -> list[str]:
    """``text`` in lines of at most ``limit`` characters, broken after a space, ``-``, ``_``,
    ``/``, ``.`` or ``@`` where one is near (else in a word): joined, they are ``text``.

    >>> wrap_label("nearest-seen-class-transfer 1.0", 20)
    ['nearest-seen-class-', 'transfer 1.0']
    """
    lines: list[str] = []
    line = ""
    for token in re.findall(r"[^-_ /.@]*[-_ /.@]?", text):
        while len(token) > limit:  # a word longer than a line: split it
            room = limit - len(line)
            lines.append(line + token[:room])
            line, token = "", token[room:]
        if len(line) + len(token) > limit:
            lines.append(line)
            line = ""
        line += token
    return [*lines, line] if line or not lines else lines


def short_labels(labels: Sequence[str], limit: int = LABEL_CHARS) -> list[str]:
    """Each label as a chart row shows it: whole up to ``limit`` characters, else its start and
    end around "…" (the end holds a version); one that would then read like another label of
    ``labels`` stays whole.

    >>> short_labels(["a-very-long-submission-name-number-one 1.0", "b 2"], 20)
    ['a-very-long…-one 1.0', 'b 2']
    """
    shown = [t if len(t) <= limit else _middle_cut(t, limit) for t in labels]
    owners: dict[str, set[str]] = defaultdict(set)
    for short, text in zip(shown, labels, strict=True):
        owners[short].add(text)
    return [
        text if len(owners[short]) > 1 else short for short, text in zip(shown, labels, strict=True)
    ]


def _middle_cut(text: str, limit: int) -> str:
    head = (limit - 1) * 3 // 5
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def _marker(shape: int, x: float, y: float, tip: str = "") -> str:
    title = f"<title>{escape(tip)}</title>" if tip else ""
    if shape == 0:
        return f'<circle class="marker" cx="{_num(x)}" cy="{_num(y)}" r="3.5">{title}</circle>'
    outline = {
        1: ((-3, -3), (3, -3), (3, 3), (-3, 3)),  # square
        2: ((0, -4.5), (4, 3), (-4, 3)),  # triangle
        3: ((0, -4.5), (4.5, 0), (0, 4.5), (-4.5, 0)),  # diamond
        4: ((0, 4.5), (4, -3), (-4, -3)),  # inverted triangle
    }[shape]
    d = "L".join(f"{_num(x + dx)} {_num(y + dy)}" for dx, dy in outline)
    return f'<path class="marker" d="M{d}Z">{title}</path>'


def _rect(cls: str, x: float, y: float, width: float, height: float) -> str:
    attrs = f' class="{cls}"' if cls else ""
    return (
        f'<rect{attrs} x="{_num(x)}" y="{_num(y)}" width="{_num(width)}" height="{_num(height)}"/>'
    )


def _label_width(labels: list[str]) -> float:
    """The width of a column of (already shortened) row labels."""
    return 12 + CHAR_WIDTH * max(6, max(map(len, labels), default=0))


def _label(
    text: str,
    x: float,
    y: float,
    cls: str,
    anchor: str,
    href: str | None = None,
    shown: str | None = None,
    *,
    lines: Sequence[str] = (),
) -> str:
    """A label showing ``shown`` (default: ``text``), or ``lines`` one under another, with
    ``text`` in a tooltip when it shows otherwise; linked if ``href`` is safe."""
    shown = text if shown is None else shown
    if len(lines) > 1:
        tip = f"<title>{escape(_clean(text))}</title>"
        spans = "".join(
            f'<tspan x="{_num(x)}" dy="{_num(LINE if i else 0)}">{escape(_clean(line))}</tspan>'
            for i, line in enumerate(lines)
        )
        node = (
            f'<text class="{cls}" x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}">'
            f"{tip}{spans}</text>"
        )
    else:
        node = _text(x, y, shown, cls, anchor, text if shown != text else "")
    target = chart_href(href)
    return node if target is None else f'<a href="{escape(target)}">{node}</a>'


def _text(
    x: float, y: float, text: str, cls: str, anchor: str, tip: str = "", extra: str = ""
) -> str:
    title = f"<title>{escape(_clean(tip))}</title>" if tip else ""
    return (
        f'<text class="{cls}" x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}"{extra}>'
        f"{title}{escape(_clean(text))}</text>"
    )


def _svg(kind: str, width: float, height: float, title: str, desc: str, body: list[str]) -> Markup:
    name, w, h = escape(_clean(title)), _num(width), _num(height)
    limit = int((width - 16) / 7.5)  # characters of the bold title that fit
    shown = title if len(title) <= limit else title[: limit - 1] + "…"
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart chart-{kind}" role="img" '
        f'aria-label="{name}" viewBox="0 0 {w} {h}" width="{w}" height="{h}">'
        f"<title>{name}</title><desc>{escape(_clean(desc))}</desc>"
        + _text(8, 18, shown, "chart-title", "start")
        + "".join(body)
        + "</svg>"
    )


def _clean(text: str) -> str:
    """``text`` without the characters XML can't hold (control characters, lone surrogates)."""
    return _XML_INVALID.sub("\ufffd", text)


def _num(value: float) -> str:
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _exact(value: float) -> str:
    """A value in its shortest exact form: 5 not 5.0, 0.1 not 0.1000000000000000055."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _span(values: np.ndarray) -> str:
    return f"{_exact(values.min())} to {_exact(values.max())}"

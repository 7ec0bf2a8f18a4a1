"""Offline SVG charts: coordinates, ticks, escaping, safe links, NaN handling, determinism."""

from __future__ import annotations

import colorsys
import itertools
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from harness.core.errors import HarnessError
from harness.site.charts import (
    LEGEND_CHARS,
    ChartError,
    Series,
    bar_chart,
    chart_href,
    heatmap,
    line_chart,
    nice_ticks,
    short_labels,
    stacked_bar_chart,
)
from tests.conftest import REPO

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "a' onload='alert(1)"]
UNSAFE_URLS = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "java\nscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "//evil.example/x",
    "\\\\evil.example\\x",
    "ftp://example.org/file",
    "",
]
SAFE_URLS = ["https://arxiv.org/abs/1503.08677", "http://x.org/a?b=1&c=2", "../subs/ale.html#gzsl"]


def parse(markup: str) -> ET.Element:
    assert isinstance(markup, Markup)
    return ET.fromstring(str(markup))


def with_class(root: ET.Element, cls: str, tag: str = "*") -> list[ET.Element]:
    return [
        e for e in root.iter(NS + tag if tag != "*" else tag) if cls in e.get("class", "").split()
    ]


def plot_area(root: ET.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the plot area."""
    (rect,) = with_class(root, "plot-area")
    x, y, w, h = (float(rect.get(k, "nan")) for k in ("x", "y", "width", "height"))
    return x, y, x + w, y + h


def visible(element: ET.Element) -> str:
    """The text an element shows, its lines (<tspan>) joined, without the tooltips of its
    <title> children."""
    return (element.text or "") + "".join(
        (child.text or "" if child.tag == NS + "tspan" else "") + (child.tail or "")
        for child in element
    )


def texts(root: ET.Element, cls: str) -> list[str]:
    return [visible(e) for e in with_class(root, cls, "text")]


def path_points(d: str) -> list[tuple[float, float]]:
    numbers = [float(n) for n in re.findall(r"-?\d+\.\d+", d)]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def markers(root: ET.Element) -> list[tuple[float, float]]:
    """Centres of the circle markers of the plotted series (not the legend's samples)."""
    return [
        (float(c.get("cx", "nan")), float(c.get("cy", "nan")))
        for group in with_class(root, "series", "g")
        for c in group.iter(NS + "circle")
    ]


def sample_charts() -> Iterator[tuple[str, Callable[[], Markup]]]:
    yield (
        "line",
        lambda: line_chart(
            [Series("a", [0, 0.5, 1], [0.2, 0.4, 0.9]), Series("b", [0, 1], [0.5, 0.3])],
            title="Seen–unseen curve",
            x_label="unseen accuracy",
            y_label="seen accuracy",
        ),
    )
    yield (
        "bar",
        lambda: bar_chart(
            ["a", "b"], [0.4, 0.7], lo=[0.3, 0.6], hi=[0.5, 0.8], title="H", value_label="H"
        ),
    )
    yield (
        "stacked",
        lambda: stacked_bar_chart(
            ["a", "b"], {"correct": [3, 1], "unrelated": [1, 1]}, title="Relations"
        ),
    )
    yield (
        "heatmap",
        lambda: heatmap(["a", "b"], ["cub", "awa2"], [[1, 2], [2, float("nan")]], title="Ranks"),
    )


CHARTS = dict(sample_charts())


# -- structure ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(CHARTS))
def test_every_chart_is_accessible_well_formed_svg(kind: str) -> None:
    root = parse(CHARTS[kind]())
    assert root.tag == NS + "svg"
    assert root.get("role") == "img"
    title = root.find(NS + "title")
    assert title is not None and title.text == root.get("aria-label") and title.text
    desc = root.find(NS + "desc")
    assert desc is not None and desc.text
    assert list(root)[:2] == [title, desc]  # the accessible name and description come first
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"


@pytest.mark.parametrize("kind", list(CHARTS))
def test_charts_are_deterministic(kind: str) -> None:
    assert str(CHARTS[kind]()) == str(CHARTS[kind]())


# -- line chart -----------------------------------------------------------------------------------


def test_line_chart_maps_points_linearly_into_the_plot_area() -> None:
    chart = line_chart(
        [Series("a", [0.0, 0.5, 1.0], [0.0, 0.5, 1.0])],
        title="t",
        x_label="x",
        y_label="y",
        x_range=(0, 1),
        y_range=(0, 1),
    )
    root = parse(chart)
    left, top, right, bottom = plot_area(root)
    # Default 640 × 360 with margins 64 left, 16 right, 30 top, 46 bottom.
    assert (left, top, right, bottom) == (64.0, 30.0, 624.0, 314.0)
    assert markers(root) == [(64.0, 314.0), (344.0, 172.0), (624.0, 30.0)]
    (line,) = with_class(root, "line", "path")[:1]
    assert path_points(line.get("d", "")) == [(64.0, 314.0), (344.0, 172.0), (624.0, 30.0)]


def test_line_chart_step_holds_each_y_until_the_next_x() -> None:
    # Given out of order: step=True sorts by x first.
    series = Series("a", [1.0, 0.0, 0.5], [0.0, 1.0, 0.5])
    root = parse(
        line_chart(
            [series], title="t", x_label="x", y_label="y", x_range=(0, 1), y_range=(0, 1), step=True
        )
    )
    d = with_class(root, "line", "path")[0].get("d", "")
    assert d == "M64.00 30.00L344.00 30.00L344.00 172.00L624.00 172.00L624.00 314.00"
    # Without step, points are joined in the order given.
    root = parse(
        line_chart([series], title="t", x_label="x", y_label="y", x_range=(0, 1), y_range=(0, 1))
    )
    d = with_class(root, "line", "path")[0].get("d", "")
    assert path_points(d) == [(624.0, 314.0), (64.0, 30.0), (344.0, 172.0)]


def test_line_chart_auto_axes_end_on_nice_ticks() -> None:
    root = parse(
        line_chart(
            [Series("a", [0.03, 0.97], [3.0, 97.0])],
            title="t",
            x_label="x",
            y_label="y",
            x_percent=True,
        )
    )
    assert texts(root, "tick-label") == [
        *("0%", "20%", "40%", "60%", "80%", "100%"),
        *("0", "20", "40", "60", "80", "100"),
    ]
    left, top, right, bottom = plot_area(root)
    ((x0, _y0), (_x1, y1)) = markers(root)
    assert x0 == pytest.approx(left + 0.03 * (right - left), abs=0.005)
    assert y1 == pytest.approx(bottom - 0.97 * (bottom - top), abs=0.005)


def test_line_chart_tooltips_hold_exact_values() -> None:
    root = parse(
        line_chart(
            [Series("ale", [0.1, 2], [0.7, 0.123456789])], title="t", x_label="k", y_label="hp@k"
        )
    )
    tips = [
        c.findtext(NS + "title") for c in with_class(root, "series", "g")[0].iter(NS + "circle")
    ]
    assert tips == ["ale: k = 0.1, hp@k = 0.7", "ale: k = 2, hp@k = 0.123456789"]
    (group,) = with_class(root, "series", "g")
    assert group.findtext(NS + "title") == "ale: 2 points; x 0.1 to 2, y 0.123456789 to 0.7"


def test_line_chart_drops_non_finite_points() -> None:
    nan, inf = float("nan"), float("inf")
    series = Series("a", [0.0, nan, 0.5, 1.0, 0.7], [0.0, 0.3, inf, 1.0, -inf])
    root = parse(
        line_chart([series], title="t", x_label="x", y_label="y", x_range=(0, 1), y_range=(0, 1))
    )
    assert markers(root) == [(64.0, 314.0), (624.0, 30.0)]
    assert "2 points" in (with_class(root, "series", "g")[0].findtext(NS + "title") or "")
    assert "nan" not in str(root.attrib) and "inf" not in ET.tostring(root, encoding="unicode")


def test_line_chart_without_finite_points_says_no_data() -> None:
    for series in ([], [Series("a", [float("nan")], [1.0])]):
        root = parse(line_chart(series, title="t", x_label="x", y_label="y"))
        assert texts(root, "note") == ["no data"]


def test_line_chart_markers_auto_only_on_short_series() -> None:
    long = Series("long", [i / 100 for i in range(100)], [i / 100 for i in range(100)])
    root = parse(
        line_chart([long, Series("short", [0.5], [0.5])], title="t", x_label="x", y_label="y")
    )
    plotted = [
        m for g in with_class(root, "series", "g") for m in g if "marker" in m.get("class", "")
    ]
    assert len(plotted) == 1  # the lone point of "short"
    root = parse(line_chart([long], title="t", x_label="x", y_label="y", markers=True))
    assert len(with_class(root, "marker")) == 100 + 1  # plus the legend sample


def test_line_chart_series_differ_in_colour_dash_and_marker() -> None:
    series = [Series(f"s{i}", [0, 1], [i, i + 1]) for i in range(12)]
    root = parse(line_chart(series, title="t", x_label="x", y_label="y", max_series=12))
    styles = []
    for group in with_class(root, "series", "g"):
        (line,) = with_class(group, "line")
        marker = next(m for m in group if "marker" in m.get("class", ""))
        styles.append((group.get("class"), line.get("class"), marker.tag, marker.get("d", "")[:8]))
    assert len({(s[0], s[1]) for s in styles}) == 12
    # the ten series a chart draws by default: ten colours, no two alike
    assert [s[0] for s in styles[:10]] == [f"series series-{i}" for i in range(10)]
    # beyond them colours repeat with another dash pattern or marker shape
    assert styles[10][0] == styles[0][0] and styles[10][1:] != styles[0][1:]


def test_the_series_palette_has_ten_distinct_hues() -> None:
    css = (REPO / "harness" / "site" / "static" / "style.css").read_text(encoding="utf-8")
    light = css[css.index("--chart-0:") : css.index("--chart-missing")]
    colours = dict(re.findall(r"--chart-(\d+): (#[0-9a-f]{6})", light))
    assert sorted(colours, key=int) == [str(i) for i in range(10)]

    def hue(colour: str) -> float:
        r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
        return colorsys.rgb_to_hsv(r, g, b)[0] * 360

    # The complaint was ten similar blues: at most two of the ten lie in the blue range
    # (180-260 degrees), and no two chromatic colours share a hue within 8 degrees.
    hues = sorted(hue(c) for c in colours.values() if len(set(c[1:])) > 1)
    assert sum(180 <= h <= 260 for h in hues) <= 2, hues
    assert min(b - a for a, b in itertools.pairwise(hues)) >= 8, hues
    assert len(set(colours.values())) == 10
    for i in range(10):  # each has its class
        assert f".chart .series-{i} {{ --series: var(--chart-{i}); }}" in css


def test_line_chart_caps_series_and_wraps_the_legend() -> None:
    series = [Series(f"submission number {i}", [0, 1], [0, i]) for i in range(50)]
    root = parse(line_chart(series, title="t", x_label="x", y_label="y"))
    assert len(with_class(root, "series", "g")) == 10
    assert texts(root, "note") == ["+40 more series not shown"]
    rows = {
        float(m.group(2))
        for g in with_class(root, "legend", "g")
        for item in g
        if (m := re.match(r"translate\(([\d.]+) ([\d.]+)\)", item.get("transform", "")))
    }
    assert len(rows) >= 2  # ten names don't fit one 640 px row
    assert float(root.get("height", "0")) > max(rows)
    assert len(with_class(root, "legend-label")) == 10
    # All 50 are drawn when asked.
    root = parse(line_chart(series, title="t", x_label="x", y_label="y", max_series=50))
    assert len(with_class(root, "series", "g")) == 50 and not texts(root, "note")


def test_legend_names_are_never_cut_a_long_one_wraps() -> None:
    name = "nearest-seen-class-transfer 1.0"  # cut to "nearest-seen-class-transfe…" before
    long = "a-submission-name-far-too-long-for-one-line-of-a-legend 1.0"
    root = parse(
        line_chart(
            [Series(name, [0], [0]), Series(long, [0], [1])], title="t", x_label="x", y_label="y"
        )
    )
    first, second = with_class(root, "legend-label")
    assert visible(first) == name and first.findtext(NS + "title") is None
    lines = [t.text for t in second.iter(NS + "tspan")]
    assert len(lines) == 2 and "".join(lines) == long  # wrapped, every character kept
    assert all(len(line or "") <= LEGEND_CHARS for line in lines)
    assert second.findtext(NS + "title") == long
    # the legend grows to hold the second line
    rows = [
        float(g.get("transform", "").split()[1][:-1]) for g in with_class(root, "legend", "g")[0]
    ]
    assert float(root.get("height", "0")) > max(rows) + 13


def test_row_labels_lose_their_middle_only_while_they_stay_distinct() -> None:
    a = "a-very-long-submission-name-from-one-lab-version-one 1.0"
    b = "a-very-long-submission-name-from-one-lab-version-two 1.0"
    c = "a-very-long-submission-name-from-another-lab-version-one 1.0"
    shown = short_labels([a, b, c, "sje 1.0"], 30)
    assert shown[3] == "sje 1.0"
    assert len(set(shown)) == 4  # distinguishable
    assert all(s.endswith(" 1.0") for s in shown)  # the version is never cut
    root = parse(
        bar_chart([a, "nearest-seen-class-transfer 1.0"], [0.5, 0.6], title="t", value_label="v")
    )
    labels = with_class(root, "row-label")
    assert visible(labels[1]) == "nearest-seen-class-transfer 1.0"  # 31 characters: whole
    assert visible(labels[0]).endswith("one 1.0") and "…" in visible(labels[0])
    assert labels[0].findtext(NS + "title") == a


# -- bar charts -----------------------------------------------------------------------------------


def bar_rects(root: ET.Element) -> list[tuple[float, float]]:
    return [
        (float(r.get("x", "nan")), float(r.get("width", "nan")))
        for r in with_class(root, "bar-rect")
    ]


def test_bar_length_is_proportional_to_value() -> None:
    root = parse(bar_chart(["a", "b", "c"], [0.25, 0.5, 1.0], title="t", value_label="top-1"))
    left, _, right, _ = plot_area(root)
    assert texts(root, "tick-label") == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    rects = bar_rects(root)
    assert [x for x, _ in rects] == [left] * 3
    assert [w for _, w in rects] == pytest.approx(
        [0.25 * (right - left), 0.5 * (right - left), right - left], abs=0.005
    )
    assert texts(root, "value-label") == ["0.25", "0.50", "1.00"]
    assert texts(root, "row-label") == ["a", "b", "c"]


def test_bar_chart_negative_values_grow_left_of_zero() -> None:
    root = parse(bar_chart(["a", "b"], [-0.5, 1.0], title="t", value_label="Δ"))
    left, _, right, _ = plot_area(root)
    zero = left + (right - left) / 3  # ticks -0.5, 0, 0.5, 1
    assert texts(root, "tick-label") == ["-0.5", "0.0", "0.5", "1.0"]
    (a, wa), (b, wb) = bar_rects(root)
    assert (a, a + wa) == pytest.approx((left, zero), abs=0.01)
    assert (b, b + wb) == pytest.approx((zero, right), abs=0.01)


def test_bar_chart_whiskers_percent_and_missing_values() -> None:
    root = parse(
        bar_chart(
            ["a", "b", "c"],
            [0.6234, float("nan"), 0.5],
            lo=[0.5, 0.1, float("nan")],
            hi=[0.7, 0.2, float("nan")],
            percent=True,
            title="t",
            value_label="H",
            value_range=(0, 1),
        )
    )
    left, top, right, _ = plot_area(root)
    (whisker,) = with_class(root, "whisker")  # row b has no value, row c no interval
    (x0, y0), (x1, _), *_ = path_points(whisker.get("d", ""))
    assert (x0, x1) == pytest.approx(
        (left + 0.5 * (right - left), left + 0.7 * (right - left)), abs=0.005
    )
    assert y0 == top + 11
    assert whisker.findtext(NS + "title") == "a: 0.6234; interval 0.5 to 0.7"
    assert texts(root, "value-label") == ["62.3%", "50.0%"]
    assert texts(root, "note") == ["not scored"]
    (note,) = with_class(root, "note")
    assert note.findtext(NS + "title") == "b: not scored"
    assert len(bar_rects(root)) == 2
    assert texts(root, "tick-label")[-1] == "100%"


def test_stacked_bars_split_each_row_into_shares() -> None:
    root = parse(
        stacked_bar_chart(
            ["a", "b", "c"],
            {"correct": [2, 0, 1], "ancestor": [1, 0, 0], "unrelated": [1, 0, float("nan")]},
            title="t",
        )
    )
    left, _, right, _ = plot_area(root)
    segments = with_class(root, "segment", "g")
    assert [s.get("class") for s in segments] == [
        "segment series-0",
        "segment series-1",
        "segment series-2",
    ]
    spans = [
        (float(r.get("x", "nan")), float(r.get("width", "nan")))
        for r in with_class(root, "segment-rect")
    ]
    plot = right - left
    expected = [(left, plot / 2), (left + plot / 2, plot / 4), (left + 3 * plot / 4, plot / 4)]
    assert [v for span in spans for v in span] == pytest.approx(
        [v for span in expected for v in span], abs=0.01
    )
    assert [s.findtext(NS + "title") for s in segments] == [
        "a · correct: 50.0% (2 of 4)",
        "a · ancestor: 25.0% (1 of 4)",
        "a · unrelated: 25.0% (1 of 4)",
    ]
    assert texts(root, "note") == ["not scored", "not scored"]  # zero total, NaN
    assert texts(root, "legend-label") == ["correct", "ancestor", "unrelated"]


# -- heatmap --------------------------------------------------------------------------------------


def test_heatmap_draws_one_cell_per_value_and_hatches_missing_ones() -> None:
    nan = float("nan")
    values = [[1, 2, 3, 4], [4, 3, nan, 1], [2, 2, 2, 2]]
    root = parse(
        heatmap(["a", "b", "c"], ["w", "x", "y", "z"], values, title="ranks", value_format=".0f")
    )
    cells = with_class(root, "cell", "g")
    assert len(cells) == 12
    missing = with_class(root, "cell-missing", "g")
    assert [c.findtext(NS + "title") for c in missing] == ["b · y: not scored"]
    assert len(with_class(missing[0], "hatch")) == 1
    classes = [c.get("class") for c in cells if c not in missing]
    assert classes[0] == "cell heat-0" and classes[3] == "cell heat-6"  # min and max
    assert classes[1] == "cell heat-2"  # (2 - 1) / 3 * 7 = 2.33
    assert texts(root, "cell-text")[:4] == ["1", "2", "3", "4"]
    # reverse: low values dark
    root = parse(heatmap(["a"], ["w", "x"], [[1, 4]], title="ranks", reverse=True))
    assert [c.get("class") for c in with_class(root, "cell", "g")] == ["cell heat-6", "cell heat-0"]
    # cells tile the grid: equal widths, adjacent
    xs = sorted({float(r.get("x", "nan")) for c in cells for r in c.iter(NS + "rect")})
    assert [b - a for a, b in itertools.pairwise(xs)] == pytest.approx([56.0, 56.0, 56.0], abs=0.01)


def test_heatmap_vmin_vmax_and_constant_grid() -> None:
    root = parse(
        heatmap(["a"], ["x", "y"], [[0.01, 0.5]], title="p", vmin=0, vmax=0.05, value_format=".3f")
    )
    assert [c.get("class") for c in with_class(root, "cell", "g")] == ["cell heat-1", "cell heat-6"]
    root = parse(heatmap(["a"], ["x"], [[3.0]], title="p"))
    assert [c.get("class") for c in with_class(root, "cell", "g")] == ["cell heat-3"]
    root = parse(heatmap(["a"], ["x"], [[float("nan")]], title="p"))
    assert len(with_class(root, "cell-missing", "g")) == 1


# -- untrusted text and links ---------------------------------------------------------------------


def hostile_charts(name: str, href: str | None) -> list[Markup]:
    return [
        line_chart(
            [Series(name, [0, 1], [0, 1], href=href)], title=name, x_label=name, y_label=name
        ),
        bar_chart([name], [0.5], title=name, value_label=name, hrefs=[href]),
        stacked_bar_chart([name], {name: [1.0]}, title=name, value_label=name, hrefs=[href]),
        heatmap([name], [name], [[1.0]], title=name, row_hrefs=[href], col_hrefs=[href]),
    ]


@pytest.mark.parametrize("name", HOSTILE)
def test_submitted_names_render_only_as_text(name: str) -> None:
    for chart in hostile_charts(name, "javascript:alert(1)"):
        root = parse(chart)
        tags = {e.tag.removeprefix(NS) for e in root.iter()}
        assert not tags & {"script", "img", "foreignObject", "a", "iframe", "use", "image"}
        for element in root.iter():
            assert not any(k.lower().startswith("on") for k in element.attrib), element.attrib
        assert name in [visible(e) for e in root.iter(NS + "text")]
        assert root.get("aria-label") == name
        assert "<script" not in str(chart) and "<img" not in str(chart)


@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_unsafe_links_are_never_emitted(url: str) -> None:
    assert chart_href(url) is None
    for chart in hostile_charts("ale", url):
        assert not list(parse(chart).iter(NS + "a"))
        assert "script:" not in str(chart).lower() and "data:" not in str(chart)


@pytest.mark.parametrize("url", SAFE_URLS)
def test_safe_links_are_emitted_escaped(url: str) -> None:
    assert chart_href(url) == url
    for chart in hostile_charts("ale", url):
        links = list(parse(chart).iter(NS + "a"))
        assert links and all(a.get("href") == url for a in links)
    assert "&amp;c=2" in str(hostile_charts("ale", SAFE_URLS[1])[0])


def test_entity_lookalike_stays_a_relative_path() -> None:
    # "&#58;" is not decoded in a URL: escaped as "&amp;#58;", the browser reads it as a path.
    url = "javascript&#58;alert(1)"
    chart = str(hostile_charts("ale", url)[1])
    assert 'href="javascript&amp;#58;alert(1)"' in chart


def test_control_characters_are_replaced_so_the_svg_stays_well_formed() -> None:
    root = parse(bar_chart(["a\x00b\x1b"], [1.0], title="t\x08", value_label="v"))
    assert texts(root, "row-label") == ["a\ufffdb\ufffd"]
    assert root.get("aria-label") == "t\ufffd"


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=40))
def test_any_name_round_trips_as_text(name: str) -> None:
    root = parse(line_chart([Series(name, [0], [0])], title=name, x_label="x", y_label="y"))
    clean = re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "\ufffd", name)
    # XML parsers normalise \r and \r\n to \n in text.
    expected = clean.replace("\r\n", "\n").replace("\r", "\n")
    assert (root.findtext(NS + "title") or "") == expected
    (label,) = with_class(root, "legend-label")
    assert visible(label) == expected  # whole, on one line or more


# -- nice ticks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0.0, 1.0, (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)),
        (3.0, 97.0, (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)),
        (1.0, 10.0, (0.0, 2.0, 4.0, 6.0, 8.0, 10.0)),
        (-3.0, 7.0, (-4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 8.0)),
        (0.0, 0.0, (-0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6)),  # one value: padded by 0.5
        (0.5, 0.5, (0.47, 0.48, 0.49, 0.5, 0.51, 0.52, 0.53)),  # padded by 5%
        (0.0012, 0.0048, (0.001, 0.002, 0.003, 0.004, 0.005)),
        (-1e6, 3e6, (-1e6, 0.0, 1e6, 2e6, 3e6)),
    ],
)
def test_nice_ticks(lo: float, hi: float, expected: tuple[float, ...]) -> None:
    assert nice_ticks(lo, hi) == expected


@settings(max_examples=300, deadline=None)
@given(a=st.floats(-1e9, 1e9), b=st.floats(-1e9, 1e9))
def test_nice_ticks_cover_the_range_evenly(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    ticks = nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi
    assert 2 <= len(ticks) <= 9
    steps = [t1 - t0 for t0, t1 in itertools.pairwise(ticks)]
    assert all(s > 0 for s in steps)
    assert max(steps) == pytest.approx(min(steps), rel=1e-6)
    mantissa = steps[0] / 10 ** math.floor(math.log10(steps[0]) + 1e-6)
    assert round(mantissa, 6) in (1.0, 2.0, 5.0)


@pytest.mark.parametrize(
    ("lo", "hi"), [(1.0, 0.0), (float("nan"), 1.0), (0.0, float("inf")), (-1e308, 1e308)]
)
def test_nice_ticks_rejects_bad_ranges(lo: float, hi: float) -> None:
    with pytest.raises(ChartError):
        nice_ticks(lo, hi)


# -- every plotted point stays inside the plot area -----------------------------------------------

finite = st.floats(-1e6, 1e6)


@settings(max_examples=80, deadline=None)
@given(
    data=st.lists(
        st.lists(st.tuples(finite, finite), min_size=1, max_size=8), min_size=1, max_size=4
    ),
    step=st.booleans(),
)
def test_line_points_lie_inside_the_plot_area(
    data: list[list[tuple[float, float]]], step: bool
) -> None:
    series = [
        Series(f"s{i}", [p[0] for p in pts], [p[1] for p in pts]) for i, pts in enumerate(data)
    ]
    root = parse(line_chart(series, title="t", x_label="x", y_label="y", step=step, markers=True))
    left, top, right, bottom = plot_area(root)
    points = [
        p
        for g in with_class(root, "series", "g")
        for p in path_points(with_class(g, "line")[0].get("d", ""))
    ]
    points += markers(root)[: sum(len(pts) for pts in data if pts)]
    # Consecutive points on the same pixel are drawn once (by design), so count series, not points.
    assert len(points) >= len(data)
    for x, y in points:
        assert left - 0.005 <= x <= right + 0.005 and top - 0.005 <= y <= bottom + 0.005


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(finite, finite, finite), min_size=1, max_size=6),
    fixed=st.none() | st.just((0.0, 1.0)),
)
def test_bars_lie_inside_the_plot_area(
    rows: list[tuple[float, float, float]], fixed: tuple[float, float] | None
) -> None:
    values = [r[0] for r in rows]
    lo = [min(r[1], r[2]) for r in rows]
    hi = [max(r[1], r[2]) for r in rows]
    root = parse(
        bar_chart(
            [str(i) for i in range(len(rows))],
            values,
            lo=lo,
            hi=hi,
            title="t",
            value_label="v",
            value_range=fixed,
        )
    )
    left, _, right, _ = plot_area(root)
    for x, w in bar_rects(root):
        assert left - 0.005 <= x and x + w <= right + 0.015 and w >= 0
    for whisker in with_class(root, "whisker"):
        assert all(left - 0.005 <= x <= right + 0.005 for x, _ in path_points(whisker.get("d", "")))


def test_line_chart_rings_highlighted_points_and_draws_reference_rules() -> None:
    chart = line_chart(
        [Series("a", [0.0, 1.0], [0.0, 1.0], highlight=[(0.5, 0.4, "read at the target")])],
        title="t",
        x_label="x",
        y_label="y",
        x_range=(0, 1),
        y_range=(0, 1),
        x_percent=True,
        x_rules=[(0.9, "val target 90%"), (float("nan"), "dropped")],
    )
    root = parse(chart)
    # Plot area 64..624 by 30..314: x = 64 + 560 t, y = 314 - 284 t.
    (ring,) = with_class(root, "highlight", "circle")
    assert (float(ring.get("cx", "")), float(ring.get("cy", ""))) == (344.0, 200.4)
    tip = ring.find(NS + "title")
    assert tip is not None and tip.text == "a: read at the target"
    (series,) = with_class(root, "series", "g")
    assert ring in list(series)  # drawn in its series' colour
    (rule,) = with_class(root, "rule", "g")
    (line,) = with_class(rule, "rule-line", "line")
    assert (line.get("x1"), line.get("x2"), line.get("y1"), line.get("y2")) == (
        "568.00",
        "568.00",
        "30.00",
        "314.00",
    )
    assert texts(rule, "rule-label") == ["val target 90%"]
    rule_tip = rule.find(NS + "title")
    assert rule_tip is not None and rule_tip.text == "val target 90% (90%)"


def test_line_chart_axes_reach_highlights_and_rules() -> None:
    # The data spans x 0.2..0.5, y 0.1..0.3; a ring at (0.7, 0.8) and a rule at 0.95 widen the
    # automatic axes to show them.
    root = parse(
        line_chart(
            [Series("a", [0.2, 0.5], [0.1, 0.3], highlight=[(0.7, 0.8, "")])],
            **LINE,
            x_rules=[(0.95, "target")],
        )
    )
    left, top, right, bottom = plot_area(root)
    (ring,) = with_class(root, "highlight", "circle")
    (line,) = with_class(root, "rule-line", "line")
    assert left <= float(ring.get("cx", "nan")) <= right
    assert top <= float(ring.get("cy", "nan")) <= bottom
    assert left <= float(line.get("x1", "nan")) <= right
    (x_axis,) = with_class(root, "x-axis", "g")
    x_ticks = [float(t) for t in texts(x_axis, "tick-label")]
    assert max(x_ticks) >= 0.95 and min(x_ticks) <= 0.2
    # A rule alone does not make a data range: no data says so.
    empty = parse(line_chart([], **LINE, x_rules=[(0.9, "target")]))
    assert texts(empty, "note") == ["no data"]


# -- validation -----------------------------------------------------------------------------------

LINE = {"title": "t", "x_label": "x", "y_label": "y"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: line_chart(Series("a", [0], [0]), **LINE), r"series must be a sequence of Series"),
        (lambda: line_chart(["a"], **LINE), r"series\[0\] must be a Series, got str"),
        (
            lambda: line_chart([Series("a", [0, 1], [0])], **LINE),
            r"series\[0\]\.y must hold 2 numbers",
        ),
        (
            lambda: line_chart([Series("a", ["x"], [0])], **LINE),
            r"series\[0\]\.x must be a sequence of numbers",
        ),
        (lambda: line_chart([Series(1, [0], [0])], **LINE), r"series\[0\]\.name must be a string"),
        (lambda: line_chart([], **LINE, x_range=(1, 0)), r"x_range must be finite with low < high"),
        (lambda: line_chart([], **LINE, y_range=(0, "a")), r"y_range must be a pair"),
        (lambda: line_chart([], **LINE, width=0), r"width must be a number of pixels"),
        (lambda: line_chart([], **LINE, max_series=0), r"max_series must be a positive integer"),
        (lambda: line_chart([], title=None, x_label="x", y_label="y"), r"title must be a string"),
        (
            lambda: bar_chart(["a", "b"], [1.0], title="t", value_label="v"),
            r"values must hold 2 numbers",
        ),
        (
            lambda: bar_chart(["a", 2], [1.0, 2.0], title="t", value_label="v"),
            r"labels\[1\] must be a string, got int",
        ),
        (
            lambda: bar_chart("ab", [1.0, 2.0], title="t", value_label="v"),
            r"labels must be a sequence of strings",
        ),
        (lambda: bar_chart(["a"], [1.0], lo=[0.0], title="t", value_label="v"), r"both lo and hi"),
        (
            lambda: bar_chart(["a", "b"], [1, 1], lo=[0, 2], hi=[1, 1], title="t", value_label="v"),
            r"lo\[1\] = 2.0 exceeds hi\[1\]",
        ),
        (
            lambda: bar_chart(["a"], [1.0], title="t", value_label="v", value_format="%d"),
            r"value_format '%d' is not a format spec",
        ),
        (
            lambda: bar_chart(["a"], [1.0], title="t", value_label="v", hrefs=[]),
            r"hrefs must hold 1 strings or None",
        ),
        (
            lambda: bar_chart(["a", "b"], [1, 2], title="t", value_label="v", hrefs="ab"),
            r"hrefs must be a sequence of links",
        ),
        (
            lambda: line_chart([Series("a", [0], [0], href=1)], **LINE),
            r"series\[0\]\.href must be a string or None, got int",
        ),
        (
            lambda: line_chart([Series("a", [0], [0], highlight=[(0, 0)])], **LINE),
            r"series\[0\]\.highlight\[0\] must be \(x, y, tooltip\)",
        ),
        (
            lambda: line_chart([Series("a", [0], [0], highlight="ab")], **LINE),
            r"series\[0\]\.highlight must be a sequence of \(x, y, tooltip\)",
        ),
        (
            lambda: line_chart([Series("a", [0], [0], highlight=[("x", 0, "")])], **LINE),
            r"series\[0\]\.highlight\[0\] must be a sequence of numbers",
        ),
        (
            lambda: line_chart([], **LINE, x_rules=[(0.5,)]),
            r"x_rules\[0\] must be \(x, label\)",
        ),
        (
            lambda: line_chart([], **LINE, x_rules="ab"),
            r"x_rules must be a sequence of \(x, label\)",
        ),
        (lambda: stacked_bar_chart(["a"], {}, title="t"), r"parts must be a non-empty mapping"),
        (
            lambda: stacked_bar_chart(["a"], {"x": [1.0], "y": [-1.0]}, title="t"),
            r"parts\['y'\]\[0\] is negative",
        ),
        (
            lambda: stacked_bar_chart(["a"], {"x": [1.0, 2.0]}, title="t"),
            r"parts\['x'\] must hold 1 numbers",
        ),
        (
            lambda: heatmap(["a", "b"], ["x", "y", "z"], [[1, 2, 3]], title="t"),
            r"values must have shape \(2, 3\).*got \(1, 3\)",
        ),
        (
            lambda: heatmap(["a"], ["x"], [["?"]], title="t"),
            r"values must be numbers of shape \(1, 1\)",
        ),
        (
            lambda: heatmap(["a"], ["x"], [[1]], title="t", vmin=2, vmax=1),
            r"vmin <= vmax, got vmin=2, vmax=1",
        ),
        (
            lambda: heatmap(["a"], ["x"], [[1]], title="t", cell_width=-1),
            r"cell_width must be a number of pixels",
        ),
    ],
)
def test_bad_input_gets_an_error_naming_the_argument(
    call: Callable[[], Markup], message: str
) -> None:
    with pytest.raises(ChartError, match=message) as caught:
        call()
    assert isinstance(caught.value, HarnessError) and isinstance(caught.value, ValueError)

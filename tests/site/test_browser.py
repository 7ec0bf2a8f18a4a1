"""The built site in real headless Chromium, opened from ``file://``: sorting, filtering, links,
charts, the comparison picker, a hostile submission name shown as text and never run, a name with
a right-to-left override that reorders nothing beside it, and the switch between rankings that
keep transductive submissions apart and one ranking of all.

Needs Debian's ``chromium`` (``.ci/run`` installs it) and the ``playwright`` Python package (the
dev extra), driven with ``executable_path``: nothing is downloaded. Skipped, saying why, when
either is missing -- unless ``ZSL_REQUIRE_BROWSER=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.results.reported import load_reported
from harness.site import build_site
from harness.site.slugs import submission_slug
from tests.site.provenance import OWN, RELEASE, SYNTHETIC, with_data
from tests.site_records import XSS_NAME, hostile_copy, synthetic_records

CHROMIUM = os.environ.get("ZSL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
HOSTILE_VERSION = '1"><svg onload=alert(3)>'
HOSTILE_KEY = submission_slug(XSS_NAME, HOSTILE_VERSION)


def _unavailable() -> str | None:
    if not Path(CHROMIUM).is_file():
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e .[dev])"
    return None


REASON = _unavailable()
if REASON is not None and os.environ.get("ZSL_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"ZSL_REQUIRE_BROWSER=1 but {REASON}")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

# Runs before any page script (through the DevTools protocol, so the page's CSP doesn't apply):
# records CSP violations and would notice the payloads if they ever ran.
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => {
  window.__csp.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


#: What a paper reports for method-00 (tests of item 9): on bench-00 (a verified release: the
#: difference is shown) and on bench-01 (synthetic data: not compared).
REPORTED = """format: zsl-reported/1
paper: "Doe, Roe. A Paper About Method Zero. Venue 2020"
short: Doe et al. 2020
url: https://example.org/paper
values:
  - {submission: method-00, method: M0, benchmark: bench-00, setting: zsl, metric: top1,
     percent: 40.0, table: Table 2, transcribed_from: the paper's PDF}
  - {submission: method-00, method: M0, benchmark: bench-01, setting: zsl, metric: top1,
     percent: 45.0, table: Table 2, transcribed_from: the paper's PDF}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench-00 from a verified release, bench-01 a synthetic stand-in, and toy-00 (three runs
    copied from bench-00) an experimental benchmark of the user's own data."""
    records = synthetic_records(5, 2)
    hostile = [hostile_copy(r) for r in records if r.submission.name == "method-01"]
    assert hostile[0].submission.version == HOSTILE_VERSION
    runs = [*records, *hostile]
    release = with_data([r for r in runs if r.benchmark.id == "bench-00"], RELEASE)
    toy = [
        r.model_copy(
            update={
                "benchmark": r.benchmark.model_copy(
                    update={"id": "toy-00", "hash": "sha256:" + "7" * 64, "title": "Toy set"}
                )
            }
        )
        for r in release
        if r.submission.name in ("method-00", "method-02", "method-04")
    ]
    runs = [
        *release,
        *with_data([r for r in runs if r.benchmark.id == "bench-01"], SYNTHETIC),
        *with_data(toy, OWN, experimental=True),
    ]
    folder = tmp_path_factory.mktemp("reported")
    (folder / "doe-2020.yaml").write_text(REPORTED, encoding="utf-8")
    out = tmp_path_factory.mktemp("browser") / "site"
    build_site(runs, out, reported=load_reported(folder))
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # CI runs as root, where Chromium's sandbox can't start; the pages are our own.
        instance = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        yield instance
        instance.close()


class Watched:
    """A page whose console errors, page errors, dialogs and CSP violations are collected."""

    def __init__(self, browser: Any, *, javascript: bool = True) -> None:
        self.context = browser.new_context(java_script_enabled=javascript)
        self.context.add_init_script(WATCH)
        self.page = self.context.new_page()
        self.page.set_default_timeout(10_000)
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def check_clean(self) -> None:
        violations = self.page.evaluate("window.__csp")
        assert violations == [], violations
        assert self.problems == [], self.problems
        assert self.dialogs == [], self.dialogs
        assert self.page.evaluate("typeof window.__pwned") == "undefined"


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    page = Watched(browser)
    yield page
    page.context.close()


def column_values(page: Any, table: str, column: int) -> list[str]:
    return page.eval_on_selector_all(
        f"#{table} tbody tr",
        f"rows => rows.filter(r => !r.hidden).map(r => r.cells[{column}].getAttribute('data-sort'))",
    )


def visible_names(page: Any, table: str) -> list[str]:
    return page.eval_on_selector_all(
        f"#{table} tbody tr",
        "rows => rows.filter(r => !r.hidden).map(r => r.querySelector('td.name a').textContent)",
    )


def check_charts(page: Any, minimum: int) -> None:
    """The charts on display (a ranking switched off, a view not opted in to, is not) have a
    size and marks."""
    boxes = page.eval_on_selector_all(
        "svg.chart",
        "nodes => nodes.filter(n => n.checkVisibility())"
        ".map(n => { const b = n.getBoundingClientRect(); "
        "return [b.width, b.height, n.querySelectorAll('path, rect, circle').length]; })",
    )
    assert len(boxes) >= minimum
    for width, height, marks in boxes:
        assert width > 100 and height > 50 and marks >= 3, boxes


def test_sort_filter_follow_links_compare(site: Path, watched: Watched) -> None:
    page = watched.page
    page.goto((site / "index.html").as_uri())
    title = page.title()
    assert title == "Leaderboard · ZSL leaderboard"
    check_charts(page, 2)  # rank matrices, ZSL and GZSL

    # index → benchmark page
    page.click("#table-benchmarks a[href='benchmarks/bench-00-v1.html']")
    page.wait_for_url("**/benchmarks/bench-00-v1.html")
    check_charts(page, 7)
    ranked = column_values(page, "table-zsl", 0)
    assert ranked == sorted(ranked, key=int)  # without a click: rank order

    # sort by top5 (higher is better: the first click sorts descending), then ascending
    header = page.locator("#table-zsl thead th", has_text="top5")
    index = header.evaluate("th => th.cellIndex")
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "descending"
    # the last header row holds the columns' headers (group headers sit above it)
    first = page.locator("#table-zsl thead tr:last-child th").first
    assert first.get_attribute("aria-sort") == "none"
    values = [float(v) for v in column_values(page, "table-zsl", index)]
    assert values == sorted(values, reverse=True) and values != [
        float(v) for v in column_values(page, "table-zsl", index)[::-1]
    ]
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert [float(v) for v in column_values(page, "table-zsl", index)] == sorted(values)
    # by name (text), ascending: the hostile "<script…" sorts before "method-…" (both are
    # transductive: their own table)
    page.locator("#table-zsl-transductive thead th.name button").click()
    assert visible_names(page, "table-zsl-transductive") == [XSS_NAME, "method-03"]
    page.locator("#table-zsl thead th.name button").click()
    names = visible_names(page, "table-zsl")
    assert (
        names
        == sorted(names, key=str.lower)
        == ["method-00", "method-01", "method-02", "method-04"]
    )

    # the hostile name is text on the page, visible, and did nothing
    cell = page.locator(f"tr[id='sub-{HOSTILE_KEY}'] td.name a")
    assert cell.text_content() == XSS_NAME and cell.is_visible()
    assert page.title().startswith("\u2068Synthetic benchmark 00")  # isolated: FSI … PDI

    # filter by name, then hide transductive runs (the hostile one declares it); one bar
    # filters the setting's tables: inductive, transductive and (hidden) all together
    filters = page.locator(".filters[data-filter-for~='table-zsl']")
    assert filters.get_attribute("data-filter-for") == (
        "table-zsl table-zsl-transductive table-zsl-combined"
    )
    filters.locator("input[type=search]").fill("SCRIPT")
    assert visible_names(page, "table-zsl") == []
    assert visible_names(page, "table-zsl-transductive") == [XSS_NAME]
    assert filters.locator("output").text_content() == "1 of 6 shown"
    filters.locator("input[value=transductive]").check()
    assert visible_names(page, "table-zsl-transductive") == []
    filters.locator("input[type=search]").fill("")
    # method-03 declares transductive too (every tenth synthetic submission from 3)
    assert sorted(visible_names(page, "table-zsl")) == [
        "method-00",
        "method-01",
        "method-02",
        "method-04",
    ]
    assert filters.locator("output").text_content() == "4 of 6 shown"
    filters.locator("input[value=transductive]").uncheck()
    assert len(visible_names(page, "table-zsl")) == 4
    assert len(visible_names(page, "table-zsl-transductive")) == 2

    # follow a row's link to its submission page, then to the comparison picker
    page.click("#table-zsl td.name a >> text=method-02")
    page.wait_for_url("**/submissions/method-02@1.0.html")
    assert page.locator("h1").text_content().startswith("method-02")
    page.click("header nav a >> text=Compare")
    page.wait_for_url("**/compare.html")
    page.select_option("#compare-a", "method-03@1.0")
    page.select_option("#compare-b", "method-00@1.0")  # reversed: the page of the pair opens
    page.click("#compare-form button")
    page.wait_for_url("**/compare/method-00@1.0--method-03@1.0.html")
    rows = page.locator("#pair-bench-00-v1 tbody tr")
    assert rows.count() > 10 and "top1" in rows.nth(1).text_content()

    # the hostile submission's own page and its comparison
    page.goto((site / "submissions" / f"{HOSTILE_KEY}.html").as_uri())
    assert page.locator("h1").text_content().startswith(XSS_NAME)
    assert "<img src=x" in page.locator("p.description").text_content()
    assert page.locator("a[href^='javascript']").count() == 0
    page.click(f"#compare a[href*='{HOSTILE_KEY}']")
    page.wait_for_url("**/compare/*.html")
    assert XSS_NAME in page.locator("h1").text_content()
    watched.check_clean()


def test_same_submission_twice_is_refused(site: Path, watched: Watched) -> None:
    page = watched.page
    page.goto((site / "compare.html").as_uri())
    page.select_option("#compare-a", "method-00@1.0")
    page.select_option("#compare-b", "method-00@1.0")
    page.click("#compare-form button")
    assert page.locator("#compare-message").text_content() == "Pick two different submissions."
    assert page.url.endswith("/compare.html")
    watched.check_clean()


def test_every_page_loads_without_errors(site: Path, watched: Watched) -> None:
    pages = [
        site / "index.html",
        site / "compare.html",
        *sorted((site / "benchmarks").glob("*.html")),
        *sorted((site / "submissions").glob("*.html")),
        *sorted((site / "compare").glob("*.html"))[:5],
    ]
    for path in pages:
        watched.page.goto(path.as_uri())
        assert watched.page.evaluate("document.documentElement.classList.contains('js')"), path
    watched.check_clean()


def test_without_javascript_tables_are_complete_and_ranked(site: Path, browser: Any) -> None:
    watched = Watched(browser, javascript=False)
    try:
        page = watched.page
        page.goto((site / "benchmarks" / "bench-01-v2.html").as_uri())
        ranked = column_values(page, "table-gzsl", 0)
        assert len(ranked) == 4 and ranked == sorted(ranked, key=lambda v: int(v or 99))
        # transductive runs: their own table, ranked among themselves; all together on request
        assert column_values(page, "table-gzsl-transductive", 0) == ["1", "2"]
        combined = page.locator("#combined-gzsl")
        assert not combined.is_visible() and page.locator("#table-gzsl-transductive").is_visible()
        page.click("#apart-gzsl a.no-js-only[href='#combined-gzsl']")
        assert combined.is_visible()
        together = column_values(page, "table-gzsl-combined", 0)
        assert len(together) == 6 and together == sorted(together, key=lambda v: int(v or 99))
        page.click("#combined-gzsl a.no-js-only[href='#setting-gzsl']")
        assert not combined.is_visible()
        # the opt-in to the runs left out by default needs no script: a checkbox and CSS
        page.goto((site / "across.html").as_uri())
        assert not page.locator("#table-cross-zsl-bench-with-uncounted").is_visible()
        page.locator("#include-uncounted").check()
        assert page.locator("#table-cross-zsl-bench-with-uncounted").is_visible()
        assert not page.locator("#table-cross-zsl-bench").is_visible()
        page.goto((site / "benchmarks" / "bench-01-v2.html").as_uri())
        assert not page.locator(".filters").first.is_visible()  # controls need the script
        check_charts(page, 5)
        page.goto((site / "compare.html").as_uri())
        assert not page.locator("#compare-form").is_visible()
        # without the picker, the list of pair pages (open when short) is the way in
        assert page.locator("details.all-pairs").get_attribute("open") == ""
        page.click("a[data-a='method-00@1.0'][data-b='method-01@1.0']")
        page.wait_for_url("**/compare/method-00@1.0--method-01@1.0.html")
        assert watched.problems == [] and watched.dialogs == []
    finally:
        watched.context.close()


def test_rankings_switch_between_apart_and_together(site: Path, watched: Watched) -> None:
    page = watched.page
    page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri())
    toggle = page.locator("input.combine-toggle[data-combined='combined-zsl']")
    filters = page.locator(".filters[data-filter-for~='table-zsl']")
    apart, together = page.locator("#apart-zsl"), page.locator("#combined-zsl")
    assert not toggle.is_checked() and apart.is_visible() and not together.is_visible()
    inductive = column_values(page, "table-zsl", 0)
    assert inductive == sorted(inductive, key=int) and inductive[0] == "1"
    assert column_values(page, "table-zsl-transductive", 0)[0] == "1"  # ranks of their own
    assert not page.locator("a.no-js-only").first.is_visible()  # the script has the checkbox

    toggle.check()  # one ranking of every run
    assert together.is_visible() and not apart.is_visible()
    ranks = column_values(page, "table-zsl-combined", 0)
    assert len(ranks) == 6 and ranks == sorted(ranks, key=int)
    names = visible_names(page, "table-zsl-combined")
    assert {XSS_NAME, "method-03"} <= set(names)
    assert filters.locator("output").text_content() == "6 of 6 shown"
    filters.locator("input[value=transductive]").check()  # the filters work on it too
    assert len(visible_names(page, "table-zsl-combined")) == 4
    assert filters.locator("output").text_content() == "4 of 6 shown"
    filters.locator("input[value=transductive]").uncheck()
    toggle.uncheck()
    assert apart.is_visible() and not together.is_visible()

    # a link to the combined ranking opens it; one to a row apart closes it again
    page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri() + "#combined-zsl")
    assert toggle.is_checked() and together.is_visible()
    page.goto((site / "index.html").as_uri())
    index_toggle = page.locator("input.combine-toggle[data-combined='ranks-zsl-combined']")
    assert page.locator("#ranks-zsl-apart").is_visible()
    assert not page.locator("#ranks-zsl-combined").is_visible()
    index_toggle.check()
    assert page.locator("#table-ranks-zsl-combined").is_visible()
    assert not page.locator("#table-ranks-zsl").is_visible()
    watched.check_clean()


RLO = "\u202e"


@pytest.fixture(scope="module")
def bidi_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A submission named with an unclosed RIGHT-TO-LEFT OVERRIDE (built by hand: the
    validators refuse it, tests/core/test_identity.py), and a stray POP DIRECTIONAL ISOLATE."""
    records = synthetic_records(3, 1)
    evil = []
    for record in records:
        if record.submission.name == "method-01":
            sub = record.submission.model_copy(
                update={"name": f"\u2069{RLO}evil", "version": "1.0", "authors": [f"{RLO}Mal"]}
            )
            evil.append(record.model_copy(update={"submission": sub}))
    out = tmp_path_factory.mktemp("bidi-browser") / "site"
    build_site([*[r for r in records if r.submission.name != "method-01"], *evil], out)
    return out


# x of each character that has a width, in the text order of the element's text (of its first
# text node only, with the argument true: a cell's score without the interval under it)
CHAR_LEFTS = """(el, firstOnly) => {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const xs = [];
  for (let node = walker.nextNode(); node; node = firstOnly ? null : walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      if (box.width > 0) xs.push(Math.round(box.left));
    }
  }
  return xs;
}"""


def test_an_override_in_a_name_reorders_nothing_beside_it(
    bidi_site: Path, watched: Watched
) -> None:
    page = watched.page
    key = submission_slug(f"\u2069{RLO}evil", "1.0")
    page.goto((bidi_site / "benchmarks" / "bench-00-v1.html").as_uri())
    row = page.locator(f"tr[id='sub-{key}']")
    name, version = row.locator("td.name a"), row.locator("td.name span.muted")
    kind = row.locator("td.name span.badge").first
    # nothing after the name is reordered: the version reads left to right, right of the
    # name, and the kind badge follows on the right
    version_x = version.evaluate(CHAR_LEFTS)
    assert len(version_x) == 3 and version_x == sorted(version_x), version_x
    name_box, version_box, kind_box = (e.bounding_box() for e in (name, version, kind))
    assert name_box["x"] + name_box["width"] <= version_box["x"] + 1, (name_box, version_box)
    assert version_box["x"] + version_box["width"] <= kind_box["x"] + 1, (version_box, kind_box)
    # inside its own isolate the override does what it says: "evil" reads "live" (the stray
    # PDI is dropped, a PDF closes the override at the name's end)
    name_x = name.evaluate(CHAR_LEFTS)
    assert name_x == sorted(name_x, reverse=True) and len(name_x) == 4
    assert name.inner_text() == f"{RLO}evil\u202c"
    # the next cells stay in place, each reading left to right
    cells = row.locator("td")
    # (columns the chooser hides by default have no box)
    boxes = [b for i in range(cells.count()) if (b := cells.nth(i).bounding_box()) is not None]
    assert len(boxes) >= 6
    assert [b["x"] for b in boxes] == sorted(b["x"] for b in boxes)
    for part in (cells.nth(3), cells.nth(3).locator("span.ci")):  # the score, its interval
        digits = part.evaluate(CHAR_LEFTS, True)
        assert len(digits) >= 4 and digits == sorted(digits), digits
    assert row.inner_text().split("\t")[2].startswith(f"{RLO}evil\u202c 1.0")

    # the page title, and the submission page's heading and authors
    page.goto((bidi_site / "submissions" / f"{key}.html").as_uri())
    assert page.title() == f"\u2068{RLO}evil\u202c\u2069 \u20681.0\u2069 · ZSL leaderboard"
    h1 = page.locator("h1")
    heading_version = h1.locator("span.version").evaluate(CHAR_LEFTS)
    assert heading_version == sorted(heading_version)
    assert (
        h1.locator("bdi").first.bounding_box()["x"] < h1.locator("span.version").bounding_box()["x"]
    )
    authors = page.locator("dl.facts dd").first
    assert authors.inner_text() == f"{RLO}Mal\u202c"
    watched.check_clean()


# -- where the data came from: badges everywhere, the opt-in, reported values (issue 29) ----------


def _shown(page: Any, selector: str) -> list[str]:
    """The text of every element of ``selector`` on display."""
    return page.eval_on_selector_all(
        selector, "nodes => nodes.filter(n => n.checkVisibility()).map(n => n.textContent.trim())"
    )


def test_data_badges_everywhere_and_the_opt_in(site: Path, watched: Watched) -> None:
    page = watched.page
    # index: each benchmark says where its data came from; synthetic in capitals, white on red
    page.goto((site / "index.html").as_uri())
    assert _shown(page, "#table-benchmarks .badge-data-synthetic") == ["synthetic data"]
    badge = page.locator("#table-benchmarks .badge-data-synthetic")
    assert badge.inner_text() == "SYNTHETIC DATA"
    assert badge.evaluate("b => getComputedStyle(b).color") == "rgb(255, 255, 255)"
    assert _shown(page, "#table-benchmarks .badge-data-release") == ["verified release"]
    assert _shown(page, "#table-benchmarks .badge-data-experimental") == ["experimental"]
    # the rank matrices leave bench-01 (synthetic) and toy-00 (experimental) out, say so and why
    notice = page.locator("#ranks .left-out")
    assert "9 runs on 2 benchmarks left out" in notice.inner_text()
    assert "bench-01 v2: synthetic data" in notice.inner_text()
    assert "toy-00 v1: experimental, 3 runs" in notice.inner_text()
    box = page.locator("#include-uncounted-ranks")
    assert not box.is_checked()
    headers = _shown(page, "table.ranks thead th")
    assert any("bench-00" in h for h in headers) and not any("bench-01" in h for h in headers)
    assert not any("toy-00" in h for h in headers)
    box.check()  # the reader opts in: every run, each benchmark with its badges
    headers = _shown(page, "table.ranks thead th")
    assert any("bench-01 v2" in h and "synthetic data" in h for h in headers), headers
    assert any("toy-00 v1" in h and "experimental" in h for h in headers), headers
    assert page.locator("#table-ranks-zsl-with-uncounted").is_visible()
    assert not page.locator("#table-ranks-zsl").is_visible()
    check_charts(page, 2)
    box.uncheck()
    assert page.locator("#table-ranks-zsl").is_visible()

    # across: bench-01 and toy-00 out by default; opted in, their cells are hatched, in italics
    page.goto((site / "across.html").as_uri())
    assert "bench-01" not in " ".join(_shown(page, "table.cross thead th"))
    page.locator("#include-uncounted").check()
    heads = " ".join(_shown(page, "table.cross thead th"))
    assert "bench-01 v2 synthetic data" in heads and "toy-00 v1 own data experimental" in heads
    cell = page.locator("#table-cross-zsl-bench-with-uncounted td.uncounted").first
    assert cell.is_visible() and "synthetic data: left out of this table by default" in (
        cell.get_attribute("title") or ""
    )
    assert cell.evaluate("c => getComputedStyle(c).fontStyle") == "italic"

    # its own benchmark page shows every run, under a banner that cannot be missed
    page.goto((site / "benchmarks" / "bench-01-v2.html").as_uri())
    assert page.locator("h1 .badge-data-synthetic").inner_text() == "SYNTHETIC DATA"
    banner = page.locator("p.data-notice.data-synthetic")
    assert banner.is_visible() and banner.inner_text().startswith("Synthetic data:")
    assert "All 6 runs on this page are left out" in banner.inner_text()
    assert len(column_values(page, "table-zsl", 0)) == 4  # the inductive runs, ranked
    # the submission page: the run's section says it; the pair page: the benchmark's heading
    page.goto((site / "submissions" / "method-02@1.0.html").as_uri())
    section = page.locator("#bench-bench-01-v2")
    assert section.locator("h2 .badge-data-synthetic").is_visible()
    assert "Left out of the tables across benchmarks by default" in section.inner_text()
    assert page.locator("#bench-toy-00-v1 h2 .badge-data-experimental").is_visible()
    page.goto((site / "compare" / "method-00@1.0--method-02@1.0.html").as_uri())
    assert page.locator("#bench-bench-01-v2 h2 .badge-data-synthetic").is_visible()
    assert page.locator("#bench-bench-00-v1 h2 .badge-data-release").is_visible()
    watched.check_clean()


def test_reported_values_stand_beside_the_runs(site: Path, watched: Watched) -> None:
    page = watched.page
    page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri())
    rows = page.eval_on_selector_all(
        "#table-reported-zsl tbody tr",
        "rows => rows.map(r => Array.from(r.cells, c => c.innerText.trim()))",
    )
    (row,) = rows
    top1 = float(page.locator("tr[id='sub-method-00@1.0'] td.primary").get_attribute("data-sort"))
    difference = f"{100 * top1 - 40.0:+.1f}".replace("-", "−") + " pp"
    assert row[:5] == ["method-00 1.0", "top1 ↑", "40.0%", f"{100 * top1:.1f}%", difference]
    assert row[5].startswith("Doe et al. 2020, Table 2 (M0)")
    assert "transcribed from the paper's PDF" in row[5]
    # never a row of the ranking: the score table lists the runs only
    assert "40.0" not in " ".join(column_values(page, "table-zsl", 3))
    # on synthetic data the reported number stands alone, saying why
    page.goto((site / "benchmarks" / "bench-01-v2.html").as_uri())
    (row,) = page.eval_on_selector_all(
        "#table-reported-zsl tbody tr",
        "rows => rows.map(r => Array.from(r.cells, c => c.innerText.trim()))",
    )
    assert row[2] == "45.0%" and row[4].startswith("not compared: the run did not use the verified")
    # the submission page carries the reported value beside the score
    page.goto((site / "submissions" / "method-00@1.0.html").as_uri())
    cell = page.locator("#bench-bench-00-v1 td.reported-cell").first
    assert cell.inner_text().splitlines() == [
        "40.0%",
        f"this run {difference}",
        "Doe et al. 2020, Table 2",
    ]
    assert page.locator("#bench-bench-01-v2 td.reported-cell").first.inner_text().splitlines()[
        :2
    ] == [
        "45.0%",
        "not compared",
    ]
    watched.check_clean()


def test_details_of_the_pages(site: Path, watched: Watched) -> None:
    page = watched.page
    page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri())
    # a chart's legend shows every name whole, in ten distinct colours
    legend = page.locator("figure#fig-zsl-darts .legend-label")
    names = legend.all_text_contents()
    assert len(names) == 6 and all(not n.endswith("…") for n in names)
    strokes = page.eval_on_selector_all(
        "figure#fig-zsl-darts g.series path.line", "ps => ps.map(p => getComputedStyle(p).stroke)"
    )
    assert len(set(strokes)) == len(strokes) == 6, strokes
    # beside each ranked table, what its intervals and its groups resample
    notes = _shown(page, "#setting-zsl p.interval-note")
    assert notes and notes[0].startswith(
        "Intervals: 95% bootstrap over the test images, resampled within each class; groups: a"
        " paired bootstrap over the classes"
    )
    # the submission page: a better-direction arrow on every metric, with its meaning
    page.goto((site / "submissions" / "method-00@1.0.html").as_uri())
    arrows = page.eval_on_selector_all(
        "#bench-bench-00-v1 tbody td:nth-child(2) span.dir",
        "spans => spans.map(s => [s.textContent, s.title])",
    )
    assert ["↑", "higher is better"] in arrows and ["↓", "lower is better"] in arrows
    assert len(arrows) == page.locator("#bench-bench-00-v1 table.scores tbody tr").count()
    # a pair page names the two submissions, never "A" and "B"
    page.goto((site / "compare" / "method-00@1.0--method-02@1.0.html").as_uri())
    heads = _shown(page, "#pair-bench-00-v1 thead th")
    assert heads[1:3] == ["method-00 1.0", "method-02 1.0"]
    verdicts = set(column_values_text(page, "#pair-bench-00-v1 tbody tr:not(.setting-row)", 6))
    assert verdicts <= {"method-00 1.0", "method-02 1.0", "tied"} and len(verdicts) > 1
    # across: a seen-only score of 100 is not "best"; only H (the primary) is marked in GZSL
    page.goto((site / "across.html").as_uri())
    bold = page.eval_on_selector_all(
        "#table-cross-gzsl-bench td.best", "cells => cells.map(c => c.cellIndex)"
    )
    heads = page.eval_on_selector_all(
        "#table-cross-gzsl-bench thead tr:last-child th", "hs => hs.map(h => h.innerText.trim())"
    )
    assert bold and {heads[i][0] for i in bold} == {"H"}, (bold, heads)
    watched.check_clean()


def column_values_text(page: Any, rows: str, column: int) -> list[str]:
    return page.eval_on_selector_all(
        rows, f"rows => rows.map(r => r.cells[{column}].textContent.trim())"
    )


# -- tables across benchmarks, CSV files, column groups ----------------------------------------


def test_cross_table_and_its_csv_download(site: Path, watched: Watched) -> None:
    page = watched.page
    page.goto((site / "index.html").as_uri())
    page.click("header nav a >> text=Across benchmarks")
    page.wait_for_url("**/across.html")
    table = page.locator("#table-cross-zsl-bench")
    assert table.is_visible()
    names = visible_names(page, "table-cross-zsl-bench")
    assert len(names) == 6 and set(names[-2:]) == {XSS_NAME, "method-03"}  # transductive last
    link = page.locator("#cross-zsl-bench a[download]")
    assert link.get_attribute("href") == "cross-zsl-bench.csv"
    with page.expect_download() as info:
        link.click()
    path = info.value.path()
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:7] == [
        "submission",
        "version",
        "transductive",
        "benchmarks_covered",
        "benchmarks",
        "mean_rank",
        "bench-00 v1 top1",
    ]
    assert [r[0] for r in rows[1:]] == names  # the table's rows, in its order
    assert [r[2] for r in rows[1:]] == ["false"] * 4 + ["true"] * 2
    first_score = table.locator("tbody tr").first.locator("td").nth(3)
    assert float(first_score.get_attribute("data-sort")) == float(rows[1][6])  # unformatted
    watched.check_clean()


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box


def test_headline_columns_fit_and_names_stay_put(site: Path, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri())
        assert page.evaluate("window.scrollX") == 0
        # the primary metric and both DARTS columns are on screen without scrolling
        for selector in ("#table-zsl thead th.primary", "#table-zsl thead th.cg-darts"):
            for header in page.locator(selector).all():
                box = header.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (
                    selector,
                    box,
                )
        wrap = page.locator("#apart-zsl .table-wrap").first
        assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth")  # nothing to scroll
        # the hierarchical group starts unchecked: its first metric (hp@2) shows, under a
        # group header that spans it alone; the others come back with the box
        hierarchical = page.locator("#table-zsl thead th.cg-hierarchical")
        shown = [h.inner_text().split()[0] for h in hierarchical.all() if h.is_visible()]
        assert shown == ["hierarchical", "hp@2"], shown
        head = page.locator("#table-zsl thead th.cg-head.cg-hierarchical")
        assert head.evaluate("th => th.colSpan") == 1
        assert not page.locator("#table-zsl thead th", has_text="hp@5").is_visible()
        chooser = page.locator(".column-chooser[data-columns-for~='table-zsl']")
        chooser.locator("input[value=hierarchical]").check()
        assert page.locator("#table-zsl thead th", has_text="hp@5").is_visible()
        assert head.evaluate("th => th.colSpan") == int(head.get_attribute("data-span") or 0) > 2
        assert wrap.evaluate("w => w.scrollWidth > w.clientWidth")  # now it scrolls

        # scrolled sideways, rank, group and name stay put while the scores move under them
        row = "#table-zsl tbody tr:first-child"
        page.locator(row).scroll_into_view_if_needed()  # (elementFromPoint needs it on screen)
        wrap.evaluate("w => { w.scrollLeft = 0; }")
        before = {
            part: _box(page, f"{row} td.{part}") for part in ("rank", "group", "name", "primary")
        }
        wrap.evaluate("w => { w.scrollLeft = 300; }")
        page.wait_for_function(
            "() => document.querySelector('#apart-zsl .table-wrap').scrollLeft > 0"
        )
        after = {
            part: _box(page, f"{row} td.{part}") for part in ("rank", "group", "name", "primary")
        }
        for part in ("rank", "group", "name"):
            assert after[part]["x"] == pytest.approx(before[part]["x"], abs=1), part
        assert after["primary"]["x"] < before["primary"]["x"] - 100
        # the three sticky cells don't overlap each other
        assert after["rank"]["x"] + after["rank"]["width"] <= after["group"]["x"] + 1
        assert after["group"]["x"] + after["group"]["width"] <= after["name"]["x"] + 1
        # and the name cell is on top of the score cells that pass under it
        on_top = page.evaluate(
            """() => {
              const name = document.querySelector('#table-zsl tbody tr:first-child td.name');
              const box = name.getBoundingClientRect();
              const hit = document.elementFromPoint(box.right - 3, box.top + box.height / 2);
              return name.contains(hit);
            }"""
        )
        assert on_top
    finally:
        context.close()


def test_without_javascript_every_column_shows(site: Path, browser: Any) -> None:
    watched = Watched(browser, javascript=False)
    try:
        page = watched.page
        page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri())
        assert page.locator("#table-zsl thead th", has_text="hp@2").is_visible()
        assert page.locator("#table-zsl thead th.cg-darts").first.is_visible()
        assert not page.locator(".column-chooser").first.is_visible()
        assert watched.problems == []
    finally:
        watched.context.close()


def test_submission_page_bars_bibtex_and_hyperparameters(
    tmp_path: Path, watched: Watched, browser: Any
) -> None:
    from tests.site.test_submission_pages import _page_record

    build_site([_page_record()], tmp_path / "site")
    (page_file,) = sorted((tmp_path / "site" / "submissions").glob("*.html"))
    page = watched.page
    page.goto(page_file.as_uri())
    # the script shows the copy button; the BibTeX's <script> is text, never run
    assert page.locator("button.copy-button").is_visible()
    assert "<script>window.__pwned = 1</script>" in page.locator("pre#bibtex").inner_text()
    page.locator("details.per-class summary").first.click()
    names = page.locator("table.class-bars th.class-name").all_inner_texts()
    assert names == ["aardvark", "zebra", "bat", "okapi"]
    assert page.locator("table.class-bars rect.bar-fg").first.is_visible()
    assert page.locator("table.hyperparameters tbody tr").count() == 3
    watched.check_clean()
    # without the script the button stays hidden (it would do nothing)
    plain = Watched(browser, javascript=False)
    try:
        plain.page.goto(page_file.as_uri())
        assert not plain.page.locator("button.copy-button").is_visible()
        assert plain.page.locator("pre#bibtex").is_visible()
    finally:
        plain.context.close()


def test_compare_page_tests_darts_area_ausuc_and_severity(tmp_path: Path, watched: Watched) -> None:
    # Records scored for real: their DARTS area, AUSUC and severity keep per-class summaries.
    from tests.metrics.test_paired_curves import scored_record

    records = [scored_record("sharp", 1.5), scored_record("blurred", 0.1)]
    build_site(records, tmp_path / "site")  # type: ignore[arg-type]
    page = watched.page
    page.goto((tmp_path / "site" / "compare.html").as_uri())
    page.select_option("#compare-a", "sharp@1.0")
    page.select_option("#compare-b", "blurred@1.0")
    page.click("#compare-form button")
    page.wait_for_url("**/compare/blurred@1.0--sharp@1.0.html")
    rows = {
        cells[0]: cells
        for cells in page.eval_on_selector_all(
            "table.pair tbody tr:not(.setting-row)",
            "rows => rows.map(r => Array.from(r.cells, c => c.textContent.trim()))",
        )
    }
    assert {"darts (%) ↑", "severity ↓", "AUSUC (%) ↑"} <= rows.keys(), rows
    darts = rows["darts (%) ↑"]
    # blurred first, sharp second: sharp's DARTS area is higher, the test says so by name
    assert darts[3].startswith("−") and darts[6] == "sharp 1.0", darts
    assert float(darts[5].lstrip("<")) < 0.05
    assert "Not tested" not in page.locator("section.pair-bench").inner_text()
    watched.check_clean()


def test_glossary_links_resolve_and_navigate(site: Path, watched: Watched) -> None:
    # Every header link of the benchmark, index, across, submission and pair pages names an
    # element of glossary.html; clicking one (inside a sortable header) goes there, not a sort.
    page = watched.page
    page.goto((site / "glossary.html").as_uri())
    anchors = set(page.eval_on_selector_all("[id]", "nodes => nodes.map(n => n.id)"))
    pages = [
        "index.html",
        "across.html",
        "benchmarks/bench-00-v1.html",
        *(
            p.relative_to(site).as_posix()
            for p in sorted((site / "submissions").glob("*.html"))[:2]
        ),
        *(p.relative_to(site).as_posix() for p in sorted((site / "compare").glob("*.html"))[:1]),
    ]
    for relative in pages:
        page.goto((site / relative).as_uri())
        hrefs = page.eval_on_selector_all(
            "th a.gloss",
            "links => links.map(a => [a.href, a.getBoundingClientRect().width,"
            " a.closest('th').checkVisibility()])",
        )
        assert hrefs, f"{relative}: no header links to the glossary"
        assert any(shown for _, _, shown in hrefs), relative
        for href, width, shown in hrefs:
            path, _, anchor = href.partition("#")
            assert path == (site / "glossary.html").as_uri(), (relative, href)
            assert anchor in anchors, (relative, href)
            assert width > 0 or not shown, (relative, href)  # the "?" is drawn (CSS ::after)
    page.goto((site / "benchmarks" / "bench-00-v1.html").as_uri())
    header = page.locator("#table-zsl thead th.primary")
    before = header.get_attribute("aria-sort")
    header.locator("a.gloss").click()
    page.wait_for_url("**/glossary.html#metric-*")
    target = page.evaluate("document.querySelector(':target').id")
    assert target == page.url.partition("#")[2] and target in anchors
    assert page.locator(":target").is_visible()
    page.go_back()
    assert page.locator("#table-zsl thead th.primary").get_attribute("aria-sort") == before
    page.click("header nav a >> text=Glossary")
    page.wait_for_url("**/glossary.html")
    watched.check_clean()

"""The built site in real headless Chromium, opened from ``file://``: sorting, filtering, links,
charts, the comparison picker, and a hostile submission name shown as text and never run.

Needs Debian's ``chromium`` (``.ci/run`` installs it) and the ``playwright`` Python package (the
dev extra), driven with ``executable_path``: nothing is downloaded. Skipped, saying why, when
either is missing -- unless ``ZSL_REQUIRE_BROWSER=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.site import build_site
from harness.site.slugs import submission_slug
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
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

# Runs before any page script (through the DevTools protocol, so the page's CSP doesn't apply):
# records CSP violations and would notice the payloads if they ever ran.
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => {
  window.__csp.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = synthetic_records(5, 2)
    hostile = [hostile_copy(r) for r in records if r.submission.name == "method-01"]
    assert hostile[0].submission.version == HOSTILE_VERSION
    out = tmp_path_factory.mktemp("browser") / "site"
    build_site([*records, *hostile], out)
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
    boxes = page.eval_on_selector_all(
        "svg.chart",
        "nodes => nodes.map(n => { const b = n.getBoundingClientRect(); "
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
    assert page.locator("#table-zsl thead th").first.get_attribute("aria-sort") == "none"
    values = [float(v) for v in column_values(page, "table-zsl", index)]
    assert values == sorted(values, reverse=True) and values != [
        float(v) for v in column_values(page, "table-zsl", index)[::-1]
    ]
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert [float(v) for v in column_values(page, "table-zsl", index)] == sorted(values)
    # by name (text), ascending: the hostile "<script…" sorts before "method-…"
    page.locator("#table-zsl thead th.name button").click()
    names = visible_names(page, "table-zsl")
    assert names == sorted(names, key=str.lower) and names[0] == XSS_NAME

    # the hostile name is text on the page, visible, and did nothing
    cell = page.locator(f"tr[id='sub-{HOSTILE_KEY}'] td.name a")
    assert cell.text_content() == XSS_NAME and cell.is_visible()
    assert page.title().startswith("Synthetic benchmark 00")

    # filter by name, then hide transductive runs (the hostile one declares it)
    filters = page.locator(".filters[data-filter-for='table-zsl']")
    filters.locator("input[type=search]").fill("SCRIPT")
    assert visible_names(page, "table-zsl") == [XSS_NAME]
    assert filters.locator("output").text_content() == "1 of 6 shown"
    filters.locator("input[value=transductive]").check()
    assert visible_names(page, "table-zsl") == []
    filters.locator("input[type=search]").fill("")
    # method-03 declares transductive too (every tenth synthetic submission from 3)
    assert sorted(visible_names(page, "table-zsl")) == [
        "method-00",
        "method-01",
        "method-02",
        "method-04",
    ]
    filters.locator("input[value=transductive]").uncheck()
    assert len(visible_names(page, "table-zsl")) == 6

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
        assert len(ranked) == 6 and ranked == sorted(ranked, key=lambda v: int(v or 99))
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

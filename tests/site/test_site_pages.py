"""The page registry: every page module registers itself, the site renders the registered pages
in their order, the nav lists their links, and a new page needs nothing but its own module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment

from harness.site import build_site
from harness.site.model import SiteModel
from harness.site.pages import registered_pages
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, pages
from tests.site_records import sample_records

#: The built-in pages, in rendering order (a new page may go anywhere between them).
BUILT_IN = [
    "index",
    "across",
    "robustness",
    "benchmark",
    "submission",
    "compare",
    "results.json",
    "glossary",
]
#: The built-in nav links, in the nav's order.
NAV = [
    ("Benchmarks", "index.html#benchmarks"),
    ("Submissions", "index.html#submissions"),
    ("Ranks", "index.html#ranks"),
    ("Across benchmarks", "across.html"),
    ("Robustness", "robustness.html"),
    ("Compare", "compare.html"),
    ("Glossary", "glossary.html"),
    ("results.json", "results.json"),
]


def test_every_page_module_registers_its_page_in_a_declared_order() -> None:
    names = [name for name, _ in registered_pages()]
    assert [name for name in names if name in BUILT_IN] == BUILT_IN
    orders = [page.order for _, page in registered_pages()]
    assert len(set(orders)) == len(orders)


def test_the_nav_links_come_from_the_registered_pages_in_their_order() -> None:
    links = sorted((link for _, p in registered_pages() for link in p.nav), key=lambda x: x.order)
    shown = [(link.title, link.href) for link in links]
    assert [link for link in shown if link in NAV] == NAV
    assert len({link.order for link in links}) == len(links)


def _extra_page(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    n = len(model.submissions)
    yield PageFile("extra/count.txt", f"{n} submissions, {len(common['nav'])} nav links\n")


def test_a_registered_page_is_rendered_and_linked_from_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = Page(order=85, render=_extra_page, nav=(NavLink("Extra", "extra/count.txt", order=75),))
    monkeypatch.setitem(pages._items, "extra", page)
    site = tmp_path / "site"
    build_site(sample_records(), site)
    assert (site / "extra" / "count.txt").read_text(encoding="utf-8").endswith(" 8 nav links\n")
    index = (site / "index.html").read_text(encoding="utf-8")
    assert index.index('href="glossary.html"') < index.index('href="extra/count.txt"')
    assert index.index('href="extra/count.txt"') < index.index('href="results.json"')
    pair = next((site / "compare").glob("*.html")).read_text(encoding="utf-8")
    assert 'href="../extra/count.txt">Extra</a>' in pair


def test_a_page_that_does_not_exist_for_the_model_writes_nothing_and_has_no_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = Page(
        order=85,
        render=_extra_page,
        nav=(NavLink("Extra", "extra/count.txt", order=75),),
        exists=lambda model: False,
        folders=("extra",),
        context=lambda model: {"never": True},
    )
    monkeypatch.setitem(pages._items, "extra", page)
    site = tmp_path / "site"
    build_site(sample_records(), site)
    assert not (site / "extra").exists()
    assert "Extra" not in (site / "index.html").read_text(encoding="utf-8")

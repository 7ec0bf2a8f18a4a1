"""across.html: scores across benchmarks, a table per setting and benchmark family (GBU Table
III); the tables come from :mod:`harness.site.cross`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jinja2 import Environment

from harness.site import cross
from harness.site.model import SiteModel
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, TableFile, pages


def across_page(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    """across.html and the CSV file of each of its tables."""
    tables = cross.cross_tables(model)
    html = env.get_template("across.html").render(
        tables=tables, root="", page_title="Across benchmarks", **common
    )
    yield PageFile("across.html", html)
    for table in tables:
        yield TableFile("", table.csv)


pages.add(
    "across",
    Page(
        order=20,
        render=across_page,
        nav=(NavLink("Across benchmarks", "across.html", order=40),),
    ),
)

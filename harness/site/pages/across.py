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
from harness.site.pages.shared import interval_note, left_out_note


def across_page(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    """across.html and the CSV file of each of its tables: of the runs whose data count by
    default, and, when some are left out, of every run (shown when the reader opts in)."""
    tables = cross.cross_tables(model)
    left_out = left_out_note(model.left_out)
    uncounted = cross.cross_tables(model, uncounted=True) if left_out else []
    html = env.get_template("across.html").render(
        tables=tables,
        uncounted_tables=uncounted,
        left_out=left_out,
        notes={
            t.id: interval_note([c.column for c in t.columns], groups=False)
            for t in [*tables, *uncounted]
        },
        root="",
        page_title="Across benchmarks",
        **common,
    )
    yield PageFile("across.html", html)
    for table in [*tables, *uncounted]:
        yield TableFile("", table.csv)


pages.add(
    "across",
    Page(
        order=20,
        render=across_page,
        nav=(NavLink("Across benchmarks", "across.html", order=40),),
    ),
)

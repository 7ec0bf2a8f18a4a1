"""glossary.html: every registered metric, every metric function the records name, and the
table terms (the entries themselves come from :mod:`harness.site.glossary`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jinja2 import Environment

from harness.site import glossary
from harness.site.model import SiteModel
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, pages


def glossary_page(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    """glossary.html: every registered metric, every metric function the records name, and
    the table terms (:mod:`harness.site.glossary`)."""
    functions: dict[str, set[str]] = {}
    for bench in model.benchmarks:
        for plan in bench.settings:
            for column in plan.columns:
                functions.setdefault(column.function, set()).add(column.metric)
    metric_entries, terms = glossary.glossary_entries(functions)
    html = env.get_template("glossary.html").render(
        metric_entries=metric_entries, terms=terms, root="", page_title="Glossary", **common
    )
    yield PageFile("glossary.html", html)


pages.add(
    "glossary",
    Page(order=90, render=glossary_page, nav=(NavLink("Glossary", "glossary.html", order=70),)),
)

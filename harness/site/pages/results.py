"""results.json: the site for machines, every record plus the ranks and groups computed (its
text comes from :mod:`harness.site.results_json`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jinja2 import Environment

from harness.site.model import SiteModel
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, pages
from harness.site.results_json import results_json


def results_file(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    """results.json."""
    yield PageFile("results.json", results_json(model))


pages.add(
    "results.json",
    Page(
        order=80,
        render=results_file,
        nav=(NavLink("results.json", "results.json", order=80, type="application/json"),),
    ),
)

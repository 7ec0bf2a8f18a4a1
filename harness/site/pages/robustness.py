"""robustness.html: each benchmark family's scores across its validation splits and how often
each submission ranks j-th (GBU Fig. 3 and 4); the tables come from
:mod:`harness.site.robustness`.

The page, its nav link and the links to it (``robustness_links`` in every template: a member
benchmark's filename to its family) exist only when some family has two members scored;
otherwise every page is as without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jinja2 import Environment

from harness.site import robustness
from harness.site.model import SiteModel
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, TableFile, pages


def robustness_page(
    env: Environment, model: SiteModel, common: dict[str, Any]
) -> Iterator[SiteFile]:
    """robustness.html and the CSV files of its tables and rank-count matrices."""
    families = robustness.families(model)
    tables = robustness.robustness_tables(model, families)
    rank_counts = robustness.rank_counts(model, families)
    html = env.get_template("robustness.html").render(
        families=families,
        tables=tables,
        matrices=rank_counts,
        root="",
        page_title="Robustness across validation splits",
        **common,
    )
    yield PageFile(robustness.PAGE, html)
    for csv in [t.csv for t in tables] + [r.csv for r in rank_counts]:
        yield TableFile("", csv)


def _has_family(model: SiteModel) -> bool:
    return bool(robustness.families(model))


def _links(model: SiteModel) -> dict[str, Any]:
    links = {
        member.bench.filename: family
        for family in robustness.families(model)
        for member in family.members
    }
    return {"robustness_links": links}


pages.add(
    "robustness",
    Page(
        order=30,
        render=robustness_page,
        nav=(NavLink("Robustness", robustness.PAGE, order=50),),
        exists=_has_family,
        context=_links,
    ),
)

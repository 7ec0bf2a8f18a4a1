"""robustness.html: each benchmark family's scores across its validation splits and how often
each submission ranks j-th (GBU Fig. 3 and 4); the tables come from
:mod:`harness.site.robustness`.

The page, its nav link and the links to it (``robustness_links`` in every template: a member
benchmark's filename to its family) exist only when some family has two members scored;
otherwise every page is as without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment

from harness.site import robustness
from harness.site.model import UNCOUNTED_SUFFIX, SiteModel
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, TableFile, pages
from harness.site.pages.shared import interval_note, left_out_note


@dataclass(frozen=True)
class RobustnessView:
    """The page's tables and matrices of the runs counted by default (``suffix`` ""), or of
    every run (``suffix`` :data:`UNCOUNTED_SUFFIX`), with each table's interval note."""

    suffix: str
    tables: list[robustness.RobustnessTable]
    notes: dict[str, str]
    matrices: list[robustness.RankCounts]


def robustness_page(
    env: Environment, model: SiteModel, common: dict[str, Any]
) -> Iterator[SiteFile]:
    """robustness.html and the CSV files of its tables and rank-count matrices: of the runs
    whose data count by default, and, when some are left out, of every run."""
    families = robustness.families(model)
    views = []
    left_out = left_out_note(
        model.left_out_of(m.bench for family in families for m in family.members)
    )
    for uncounted in (False, True) if left_out else (False,):
        tables = robustness.robustness_tables(model, families, uncounted=uncounted)
        views.append(
            RobustnessView(
                suffix=UNCOUNTED_SUFFIX if uncounted else "",
                tables=tables,
                notes={
                    t.id: interval_note([c for g in t.groups for c in g.columns], groups=False)
                    for t in tables
                },
                matrices=robustness.rank_counts(model, families, uncounted=uncounted),
            )
        )
    html = env.get_template("robustness.html").render(
        families=families,
        views=views,
        left_out=left_out,
        root="",
        page_title="Robustness across validation splits",
        **common,
    )
    yield PageFile(robustness.PAGE, html)
    for view in views:
        for csv in [t.csv for t in view.tables] + [r.csv for r in view.matrices]:
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

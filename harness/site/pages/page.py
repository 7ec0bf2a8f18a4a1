"""What a site page is: what it writes, its links in the site's nav, when it exists.

Each module of :mod:`harness.site.pages` that renders files ends with ``pages.add(name,
Page(...))``; :func:`harness.site.pages.render_site` imports every module of the package and
renders the registered pages in their ``order``, so a new page is its module, its template and
its tests. See docs/howto/site-page.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment

from harness.core.registry import Registry
from harness.site.csv_tables import CsvLines, CsvTable
from harness.site.model import SiteModel

__all__ = ["NavLink", "Page", "PageFile", "SiteFile", "TableFile", "pages"]


@dataclass(frozen=True)
class PageFile:
    """A text file of the site (a page, a log, ``results.json``), written as UTF-8 with ``\\n``."""

    path: str  # relative to the site root, "/"-separated
    text: str


@dataclass(frozen=True)
class TableFile:
    """A CSV table written into ``folder`` (relative to the site root; "" is the root)."""

    folder: str
    table: CsvTable | CsvLines


#: What a page's ``render`` yields.
SiteFile = PageFile | TableFile


@dataclass(frozen=True)
class NavLink:
    """A link of the site's nav (``base.html``): ``href`` is relative to the site root, ``type``
    the linked file's media type when it is no page; the nav lists the links by ``order``."""

    title: str
    href: str
    order: int
    type: str = ""


def _always(model: SiteModel) -> bool:
    return True


@dataclass(frozen=True)
class Page:
    """One kind of page: ``render(env, model, common)`` yields its files (``common``: what every
    template receives, the nav included); pages render by ``order``. ``exists(model)`` says
    whether the model has the page (its nav links too); ``folders`` are made even when empty;
    ``context(model)`` adds names to ``common`` for every page when this one exists."""

    order: int
    render: Callable[[Environment, SiteModel, dict[str, Any]], Iterable[SiteFile]]
    nav: tuple[NavLink, ...] = ()
    exists: Callable[[SiteModel], bool] = _always
    folders: tuple[str, ...] = ()
    context: Callable[[SiteModel], dict[str, Any]] | None = None


pages: Registry[Page] = Registry("site page")

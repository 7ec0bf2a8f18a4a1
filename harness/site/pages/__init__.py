"""The site's pages: :func:`render_site` writes every page of a site model into a folder.

One module per page kind prepares the rows its template prints (formatted numbers, sort keys,
badges, links), renders it with jinja2's autoescaping and registers itself in
:data:`harness.site.pages.page.pages` (what it writes, its nav links, when it exists). Every
submitted string reaches the page escaped and isolated (the ``bdi`` and ``fsi`` filters,
:func:`harness.site.text.isolate`), and a submitted URL becomes a link only through
:func:`harness.site.text.safe_href`. Pages link each other with relative URLs only, so the folder
works from ``file://`` and from any static host.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib import resources
from pathlib import Path
from typing import Any

from harness import __version__ as harness_version
from harness.site.csv_tables import write_csv
from harness.site.model import SiteModel
from harness.site.pages.page import Page, PageFile, pages
from harness.site.pages.shared import environment, write_page

__all__ = ["CSP", "STATIC_FILES", "registered_pages", "render_site"]

#: The Content-Security-Policy of every page: the site's own script and stylesheet, inline SVG,
#: nothing else (no inline script or style, no plugins, no forms posting anywhere).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'"
)
#: Files copied from the package's ``static/`` folder.
STATIC_FILES = ("style.css", "site.js")

# Every module of this package is imported here, so each page registers itself before any
# registry is frozen: a new page needs no line anywhere else.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def registered_pages() -> list[tuple[str, Page]]:
    """Every registered page with its name, in rendering ``order``."""
    return sorted(pages.items(), key=lambda item: item[1].order)


def render_site(model: SiteModel, site: Path) -> None:
    """Write every page of ``model`` into the empty folder ``site``."""
    env = environment()
    present = [page for _, page in registered_pages() if page.exists(model)]
    n_records = sum(len(b.records) for b in model.benchmarks)
    common: dict[str, Any] = {
        "harness_version": harness_version,
        "csp": CSP,
        "n_records": n_records,
        "nav": sorted((link for page in present for link in page.nav), key=lambda link: link.order),
    }
    for page in present:
        if page.context is not None:
            common.update(page.context(model))
    (site / "static").mkdir()
    for name in STATIC_FILES:
        data = resources.files("harness.site").joinpath("static", name).read_bytes()
        (site / "static" / name).write_bytes(data)
    folders = {site}
    for page in present:
        for folder in page.folders:
            (site / folder).mkdir(parents=True, exist_ok=True)
            folders.add(site / folder)
    for page in present:
        for output in page.render(env, model, common):
            if isinstance(output, PageFile):
                path = site / output.path
                if path.parent not in folders:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    folders.add(path.parent)
                write_page(path, output.text)
            else:
                write_csv(site / output.folder, output.table)

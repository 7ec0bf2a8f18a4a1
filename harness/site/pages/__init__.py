"""The site's pages: :func:`render_site` writes every page of a site model into a folder.

One module per page kind prepares the rows its template prints (formatted numbers, sort keys,
badges, links) and renders it with jinja2's autoescaping: every submitted string reaches the page
escaped and isolated (the ``bdi`` and ``fsi`` filters, :func:`harness.site.text.isolate`), and a
submitted URL becomes a link only through :func:`harness.site.text.safe_href`. Pages link each
other with relative URLs only, so the folder works from ``file://`` and from any static host.
The across and robustness pages are rendered here: their tables are built by
:mod:`harness.site.cross` and :mod:`harness.site.robustness`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from harness import __version__ as harness_version
from harness.site import cross, robustness
from harness.site.csv_tables import write_csv
from harness.site.model import SiteModel
from harness.site.pages.benchmark import benchmark_page
from harness.site.pages.glossary import glossary_page
from harness.site.pages.index import index_page
from harness.site.pages.pair import comparable_pairs, compare_page, pair_columns, pair_page
from harness.site.pages.shared import environment, write_page
from harness.site.pages.submission import submission_page, write_logs
from harness.site.results_json import write_results_json
from harness.site.slugs import pair_slug

__all__ = ["CSP", "STATIC_FILES", "render_site"]

#: The Content-Security-Policy of every page: the site's own script and stylesheet, inline SVG,
#: nothing else (no inline script or style, no plugins, no forms posting anywhere).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'"
)
#: Files copied from the package's ``static/`` folder.
STATIC_FILES = ("style.css", "site.js")


def render_site(model: SiteModel, site: Path) -> None:
    """Write every page of ``model`` into the empty folder ``site``."""
    env = environment()
    n_records = sum(len(b.records) for b in model.benchmarks)
    common = {"harness_version": harness_version, "csp": CSP, "n_records": n_records}
    # Benchmark families (validation variants, GBU Fig. 3): the robustness page and the links to
    # it exist only when some family has two members scored; otherwise every page is as before.
    families = robustness.families(model)
    common["robustness_links"] = {
        member.bench.filename: family for family in families for member in family.members
    }
    for folder in ("benchmarks", "submissions", "compare", "logs", "static"):
        (site / folder).mkdir()
    for name in STATIC_FILES:
        data = resources.files("harness.site").joinpath("static", name).read_bytes()
        (site / "static" / name).write_bytes(data)

    html, tables = index_page(env, model, common)
    write_page(site / "index.html", html)
    for table in tables:
        write_csv(site, table)
    across = cross.cross_tables(model)
    write_page(
        site / "across.html",
        env.get_template("across.html").render(
            tables=across, root="", page_title="Across benchmarks", **common
        ),
    )
    for cross_table in across:
        write_csv(site, cross_table.csv)
    if families:
        robustness_tables = robustness.robustness_tables(model, families)
        rank_counts = robustness.rank_counts(model, families)
        write_page(
            site / robustness.PAGE,
            env.get_template("robustness.html").render(
                families=families,
                tables=robustness_tables,
                matrices=rank_counts,
                root="",
                page_title="Robustness across validation splits",
                **common,
            ),
        )
        for robustness_csv in [t.csv for t in robustness_tables] + [r.csv for r in rank_counts]:
            write_csv(site, robustness_csv)
    template = env.get_template("benchmark.html")
    for bench in model.benchmarks:
        html, tables = benchmark_page(template, bench, common)
        write_page(site / "benchmarks" / bench.filename, html)
        for table in tables:
            write_csv(site / "benchmarks", table)
    pairs = comparable_pairs(model)
    template = env.get_template("submission.html")
    for sub in model.submissions.values():
        logs = write_logs(site, model, sub)
        html, csv = submission_page(template, model, sub, logs, pairs, common)
        write_page(site / "submissions" / sub.filename, html)
        write_csv(site / "submissions", csv)
    write_page(site / "compare.html", compare_page(env, model, pairs, common))
    template = env.get_template("pair.html")
    columns = pair_columns(model)
    for a, b in pairs:
        html, pair_csv = pair_page(template, model, columns, a, b, common)
        write_page(site / "compare" / f"{pair_slug(a.key, b.key)}.html", html)
        write_csv(site / "compare", pair_csv)
    write_results_json(model, site / "results.json")
    write_page(site / "glossary.html", glossary_page(env, model, common))

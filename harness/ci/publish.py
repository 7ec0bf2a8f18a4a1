"""The merge-to-main job (``zsl ci publish``): the site built from the committed records alone.

Contract: reads the run records under the results folder (no store, no runs, no git) and builds
the site (:func:`harness.site.build_site`) into the output folder, replacing it as a whole.
"""

from __future__ import annotations

from pathlib import Path

import harness.site
from harness.results.records_io import read_records
from harness.results.reported import reported_in

__all__ = ["publish_site"]


def publish_site(results_dir: Path, out_dir: Path) -> Path:
    """Build the site from the records committed in ``results_dir`` (no store, no runs).

    A missing ``results_dir`` (git keeps no empty folder) gives a site without benchmarks.
    Returns the path of the site's ``index.html``.
    """
    records = read_records(results_dir) if results_dir.is_dir() else []
    return harness.site.build_site(
        records, out_dir, reported=reported_in(results_dir.parent / "reported")
    )

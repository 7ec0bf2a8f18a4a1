"""Render run records into a static leaderboard site, atomically.

See docs/site.md.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import HarnessError
from harness.records import RunRecord
from harness.results.reported import ReportedValue
from harness.site.model import SiteModel, plan_site
from harness.site.pages import render_site

__all__ = ["MARKER", "build_site"]

#: A file in every built site; an existing ``out_dir`` without it is never replaced.
MARKER = ".zsl-leaderboard"
_MARKER_TEXT = "This directory is built by `zsl leaderboard build` and replaced on each build.\n"


def build_site(
    records: Sequence[RunRecord], out_dir: Path, *, reported: Sequence[ReportedValue] = ()
) -> Path:
    """Render ``records`` into ``out_dir`` and return the path of its ``index.html``.

    ``out_dir`` is replaced as a whole, and only if it is missing, empty or an earlier build
    (it holds the :data:`MARKER` file). ``reported``: what papers report
    (:func:`harness.results.reported.load_reported`), shown beside the runs.

    Raises
    ------
    IntegrityError
        Records of one benchmark version disagree on its hash or spec hash.
    HarnessError
        Two records share a benchmark version and submission version, two submission names
        (benchmark ids, versions of a name) read alike, or ``out_dir`` can't be replaced.
    """
    model = plan_site(records, reported)  # every check runs before the filesystem is touched
    out_dir = Path(out_dir).expanduser().absolute()
    _check_replaceable(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    except OSError as err:
        raise HarnessError(f"cannot write the site next to {out_dir}: {err}") from err
    try:
        work.chmod(0o755)  # mkdtemp makes it private; a site is meant to be served
        _render(model, work)
        _swap_into_place(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already after a successful swap
    return out_dir / "index.html"


def _render(model: SiteModel, site: Path) -> None:
    render_site(model, site)
    (site / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")


# -- swapping into place --------------------------------------------------------------------------


def _check_replaceable(out_dir: Path) -> None:
    if out_dir.is_symlink():
        raise HarnessError(f"{out_dir} is a symlink; pass the directory it points to as --out")
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise HarnessError(f"{out_dir} exists and is not a directory; choose another --out")
    if (out_dir / MARKER).is_file() or not any(out_dir.iterdir()):
        return
    raise HarnessError(
        f"refusing to replace {out_dir}: it is not empty and was not built by "
        f"`zsl leaderboard build` (no {MARKER} file); choose another --out or empty it"
    )


def _swap_into_place(work: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.replace(work, out_dir)
        return
    # POSIX rename can't replace a non-empty directory: move the old site aside first.
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex}")
    os.replace(out_dir, old)
    try:
        os.replace(work, out_dir)
    except BaseException:
        os.replace(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)

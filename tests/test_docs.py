"""The README stays short and its links hold; the generated reference pages are current.

Issue 28 item 5: the README is what it is, the two commands, a first submission, the flow and
links (at most 200 lines); everything else lives in ``docs/``, whose reference pages
``docs/generate.py`` writes from the metric registry and the ``zsl`` command tree.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: A Markdown inline link's target: [text](target) or [text](target "title").
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _generator() -> ModuleType:
    """``docs/generate.py``, imported from its file (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_at_most_200_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"


def test_every_readme_link_points_to_a_file_in_the_repository() -> None:
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    local = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, "the README links no page of docs/"
    missing = [t for t in local if not (REPO / t.split("#")[0]).is_file()]
    assert missing == [], f"README.md links files that do not exist: {missing}"


def test_the_generated_reference_pages_are_current() -> None:
    generate = _generator()
    stale = generate.stale_pages()
    assert stale == [], (
        f"docs/{', docs/'.join(stale)} differ from a fresh generation:"
        f" run `{generate.REGENERATE}` and commit the result"
    )


def test_the_metrics_reference_names_every_registered_metric() -> None:
    from harness.metrics import metrics

    page = _generator().metrics_page()
    assert [name for name in metrics if f"\n### {name}\n" not in page] == []


def test_the_cli_reference_names_every_command() -> None:
    page = _generator().cli_page()
    for command in ("zsl run", "zsl results export", "zsl ci pr", "zsl metrics describe"):
        assert f"\n## {command}\n" in page, command
    assert "--install-completion" not in page  # typer's own options are not ours to document


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    """``make docs``' build: a link to a missing page or anchor fails it (mkdocs.yml)."""
    pytest.importorskip("material", reason="mkdocs-material (the dev extra)")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (site / "reference" / "metrics" / "index.html").is_file()

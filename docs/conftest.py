"""Run the ``>>>`` examples of the docs pages: each fenced code block is one doctest.

The examples moved here from docstrings (Issue 28), and they are tests still. A block runs with
globals of its own, so it imports what it uses and reads on a page as it would in a shell; a
block without ``>>>`` (shell commands, YAML, formulas) is not collected. A failure names the
page and the line of the block.
"""

from __future__ import annotations

import doctest
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: A fenced code block: its body up to the closing fence.
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
#: pytest's default for doctests (`doctest_optionflags`): `...` matches anything.
OPTIONFLAGS = doctest.ELLIPSIS


class ExampleFailed(Exception):
    """A block's doctest report, shown as the failure."""


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".md":
        page: pytest.Collector = MarkdownPage.from_parent(parent, path=file_path)
        return page
    return None


class MarkdownPage(pytest.File):
    """A page of docs/: one item per code block holding ``>>>``."""

    def collect(self) -> Iterator[pytest.Item]:
        text = self.path.read_text(encoding="utf-8")
        parser = doctest.DocTestParser()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start(1))
            name = f"line {line + 1}"
            test = parser.get_doctest(match.group(1), {}, name, str(self.path), line)
            if test.examples:
                yield MarkdownExample.from_parent(self, name=name, test=test)


class MarkdownExample(pytest.Item):
    """One code block of a page, run as a doctest with fresh globals."""

    def __init__(self, *, test: doctest.DocTest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.test = test

    def runtest(self) -> None:
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
        runner.run(self.test, out=report.append, clear_globs=True)
        if runner.failures:
            raise ExampleFailed("".join(report))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ExampleFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.test.lineno or 0, f"[doctest] {self.path.name} {self.name}"

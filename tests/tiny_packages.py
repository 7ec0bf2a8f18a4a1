"""Tiny model packages written by tests, and the runners they are run through.

One manifest for them all: the messages about ``submission.yaml`` name its line 6, the
entrypoint. ``RUNNERS`` parametrizes a test over the three runners; :func:`use_runner` puts the
fake engine on PATH for runner ``container`` (``tests/fake_container_cli.py`` runs the worker
on this machine), so every runner runs for real here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import needs_bwrap

RUNNERS = [
    pytest.param("local"),
    pytest.param("sandbox", marks=needs_bwrap),
    pytest.param("container"),
]

# Line 6 is the entrypoint: the messages about submission.yaml name it.
MANIFEST = """name: tiny
version: "0.1"
authors: [Test]
kind: model
model:
  entrypoint: {entrypoint}
  image: zsl:1
resources:
  time_s: 120
"""


# Appended to a tiny model class that has no save() (after its other methods, so the line
# numbers the messages name stay): a state of one JSON file, the model rebuilt empty.
SAVE_LOAD = """

    def save(self, directory):
        (directory / "state.json").write_text("{}")

    @classmethod
    def load(cls, directory):
        return cls()
"""


def write_tiny_package(
    folder: Path,
    code: str,
    *,
    entrypoint: str = "model:Tiny",
    files: dict[str, str] | None = None,
    save_load: bool = True,
) -> Path:
    """Package ``folder/tiny``: the manifest, ``model.py`` holding ``code`` (with
    :data:`SAVE_LOAD` appended unless it defines ``save`` or ``save_load`` is False), and
    ``files`` (relative path -> text) beside it."""
    root = folder / "tiny"
    root.mkdir(parents=True)
    (root / "submission.yaml").write_text(MANIFEST.format(entrypoint=entrypoint))
    if save_load and "def save" not in code and "class " in code:  # the class comes last
        code = code.rstrip("\n") + "\n" + SAVE_LOAD
    (root / "model.py").write_text(code)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def use_runner(runner: str, request: pytest.FixtureRequest) -> None:
    """Make ``runner`` runnable here: the fake engine of ``fake_docker`` for ``container``."""
    if runner == "container":
        request.getfixturevalue("fake_docker")

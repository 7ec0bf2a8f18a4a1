"""``harness.runners.BACKENDS`` names every registered runner, and ``--runner``'s help is made
from it: a new backend is its module, its entry there, its tests and its threat-model row."""

from __future__ import annotations

from harness import runners
from harness.cli.run import RUNNER_HELP


def test_the_backends_are_exactly_the_registered_runners() -> None:
    assert sorted(runners.BACKENDS) == list(runners.runners)
    for name in runners.BACKENDS:
        assert runners.runners.get(name).name == name


def test_the_runner_help_names_each_backend_with_its_description() -> None:
    for name, text in runners.BACKENDS.items():
        assert f"'{name}' ({text})" in RUNNER_HELP
    assert RUNNER_HELP.endswith(f"; default: {runners.DEFAULT_CHOICE}")

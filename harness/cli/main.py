"""The ``zsl`` command: composes one sub-app per module (spec, data, hierarchy, …).

:data:`COMMANDS` is the registry: each command name, the module that implements it and its
one-line help. A module is imported only when its command runs, so ``zsl --version`` and
``zsl --help`` do not pay for NumPy, SciPy, NLTK, SQLAlchemy and the site builder (seconds on
a cold disk); the one-line helps listed by ``zsl --help`` come from the registry, and a test
keeps them equal to each module's own. ``app`` (the whole command, every module imported) is
what tests drive; :func:`main` (the ``zsl`` script, ``python -m harness.cli.main``) imports
only the module of the command it runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

import harness

__all__ = ["COMMANDS", "app", "build_app", "main"]


@dataclass(frozen=True)
class Command:
    """A ``zsl`` command: ``attribute`` of ``module`` is a sub-app (``group``) or a function."""

    module: str
    attribute: str
    help: str
    group: bool = True


COMMANDS: dict[str, Command] = {
    "spec": Command(
        "harness.cli.spec", "app", "Validate benchmark specs and print their JSON Schema."
    ),
    "data": Command("harness.cli.data", "app", "Freeze benchmarks under ZSL_HOME and verify them."),
    "hierarchy": Command(
        "harness.cli.hierarchy", "app", "Build and inspect frozen class hierarchies."
    ),
    "submission": Command(
        "harness.cli.submission",
        "app",
        "Start and validate submission packages; write their prediction files.",
    ),
    "metrics": Command(
        "harness.cli.metrics", "app", "List the registered metrics and their parameters."
    ),
    "classmap": Command(
        "harness.cli.classmap", "app", "Draft, check and freeze class → WordNet maps."
    ),
    "leaderboard": Command(
        "harness.cli.board", "app", "Build the static leaderboard site from the store."
    ),
    "ci": Command(
        "harness.cli.ci",
        "app",
        "The leaderboard CI's steps: changed packages, score a pull request, publish the site.",
    ),
    "results": Command(
        "harness.cli.results",
        "app",
        "Run records in git (export, import), re-scoring, and managing stored runs (list, "
        "delete, hide, unhide).",
    ),
    "image": Command("harness.cli.image", "app", "Build worker images for runner 'container'."),
    "features": Command(
        "harness.cli.features",
        "app",
        "Extract image features with torchvision backbones into frozen, hashed feature sets.",
    ),
    "embeddings": Command(
        "harness.cli.embeddings",
        "app",
        "Build frozen class embeddings from class names and glosses with offline text models.",
    ),
    "run": Command(
        "harness.cli.run",
        "run",
        "Prepare, validate, run, score and store submissions on benchmarks.",
        group=False,
    ),
    "demo": Command(
        "harness.cli.run",
        "demo",
        "Run every shipped submission on the demo benchmark and build the leaderboard site.",
        group=False,
    ),
}

HELP = "Declarative zero-shot learning benchmarks, honest scoring, a static leaderboard."


def _version(value: bool) -> None:
    if value:
        typer.echo(f"zsl-harness {harness.__version__}")
        raise typer.Exit()


def _root(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks of known errors")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Declarative zero-shot learning benchmarks, honest scoring, a static leaderboard."""
    from harness.cli._common import state

    state.debug = debug


def _listed_only(name: str) -> Any:
    """A stand-in that lists command ``name`` in ``zsl --help``; it never runs, since a command
    that runs is always imported (:func:`build_app`)."""

    def command() -> None:
        raise typer.Exit(code=2)  # pragma: no cover - see above

    command.__name__ = name
    return command


def build_app(load: Sequence[str] | None = None) -> typer.Typer:
    """The ``zsl`` app with the modules of the commands in ``load`` imported (None: all).

    The other commands are listed, with the registry's help, but not imported.
    """
    root = typer.Typer(
        name="zsl", help=HELP, no_args_is_help=True, pretty_exceptions_show_locals=False
    )
    root.callback()(_root)
    for name, entry in COMMANDS.items():
        loaded = load is None or name in load
        if entry.group:
            sub = (
                getattr(importlib.import_module(entry.module), entry.attribute)
                if loaded
                else typer.Typer(help=entry.help)
            )
            root.add_typer(sub, name=name, help=entry.help)
        elif loaded:
            root.command(name)(getattr(importlib.import_module(entry.module), entry.attribute))
        else:
            root.command(name, help=entry.help)(_listed_only(name))
    return root


def invoked_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` (without the program name) runs: the first word that is not an
    option of ``zsl`` itself; None for ``zsl --help`` / ``--version`` / nothing."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


#: The whole command, every module imported: built on first use (by ``__getattr__`` below).
app: typer.Typer


def __getattr__(name: str) -> Any:
    if name == "app":
        whole = build_app()
        globals()["app"] = whole
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    command = invoked_command(sys.argv[1:])
    build_app([command] if command is not None else [])()


if __name__ == "__main__":
    main()

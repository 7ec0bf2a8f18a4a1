"""What every CLI command shares: one-line errors on stderr, exit codes, --debug, progress."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from harness.core.errors import HarnessError, error_text

if TYPE_CHECKING:
    from harness.data.download import Download

F = TypeVar("F", bound=Callable[..., Any])

# Output carries user data (class names, paths): no markup, no emoji codes like ":sun:".
# Soft wrap: a line longer than the terminal is left to the terminal to fold, never broken by
# rich, so a hash, a path or a command stays whole when it is copied (and when piped).
stdout = Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)


#: The ``--database-url`` option of every command that opens the store.
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="ZSL_DATABASE_URL",
        help="SQLAlchemy URL of the store (default: zsl.sqlite3 under ZSL_HOME).",
        show_default=False,
    ),
]

#: Where the exported run records live in a repository (``zsl results export`` writes there).
RESULTS_DIR = Path("leaderboard/results")

#: The ``--results`` option: the folder of exported run records, read or written. One name for
#: one concept across commands (export, import, leaderboard build, ci pr, ci publish).
ResultsFolder = Annotated[
    Path,
    typer.Option(
        "--results",
        help="folder of run record files, one per run (as written by `zsl results export`)",
        file_okay=False,
    ),
]

#: Where ``zsl leaderboard build`` and ``zsl ci publish`` write the site by default.
SITE_DIR = Path("leaderboard/site")

#: The ``--out`` option of the commands that build the site.
SiteFolder = Annotated[
    Path,
    typer.Option(
        "--out",
        help="folder to write the site to; replaced as a whole (only if built by zsl, or empty)",
        file_okay=False,
    ),
]

#: Where the literature's reported values live (harness.results.reported), beside the records.
REPORTED_DIR = Path("leaderboard/reported")

#: The ``--reported`` option of the commands that build the site.
ReportedFolder = Annotated[
    Path,
    typer.Option(
        "--reported",
        help="folder of the literature's reported values (*.yaml), shown beside the runs and"
        " never ranked; skipped when the default folder is missing",
        file_okay=False,
    ),
]

#: The options of every command that spreads work over an executor (harness.executors).
Executor = Annotated[
    str | None,
    typer.Option(
        "--executor",
        help="where the work executes: 'local' (a process pool on this machine, the default),"
        " 'inline' (this process, one task at a time) or 'ray' (a Ray cluster: --ray-address,"
        " else a Ray instance started here; needs the ray extra: pip install"
        " zsl-harness\\[ray])",
        show_default=False,
    ),
]
Jobs = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        help="local executor: worker processes (default: one per CPU); ray without"
        " --ray-address: CPUs of the instance started here",
        min=1,
        show_default=False,
    ),
]
RayAddress = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to run on (HOST:PORT of its head, or 'auto'); implies --executor ray",
        show_default=False,
    ),
]
MaxRetries = Annotated[
    int,
    typer.Option("--max-retries", help="tries again of a task whose worker or node died", min=0),
]


def chosen_executor(executor: str | None, ray_address: str | None) -> str:
    """The executor named, else ``ray`` when a cluster address is given, else ``local``."""
    return executor or ("ray" if ray_address else "local")


class _State:
    debug = False


state = _State()


def reports_errors(command: F) -> F:
    """Turn a :class:`HarnessError` into one line on stderr and its exit code (1 user, 2 integrity).

    An ``OSError`` (a full disk, a folder that cannot be written or removed) is the machine's
    failure, not the code's: one line too, with its type (:func:`harness.core.errors.error_text`),
    exit code 1. Anything else is a bug and keeps its traceback; with ``zsl --debug`` every
    traceback is kept.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (HarnessError, OSError) as err:
            if state.debug:
                raise
            code = err.exit_code if isinstance(err, HarnessError) else 1
            stderr.print(Text.assemble(("error: ", "bold red"), error_text(err)), soft_wrap=True)
            raise typer.Exit(code=code) from None

    return wrapper  # type: ignore[return-value]


def interactive() -> bool:
    """Whether a question can be asked: standard input and error are a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def ask_before_download(assume_yes: bool) -> Callable[[Download], str | None]:
    """A :func:`harness.data.download.download_policy` that asks on the terminal before each
    download (``--yes``: without asking); with no terminal to ask on it refuses, saying so."""

    def decide(planned: Download) -> str | None:
        if assume_yes:
            return None
        size = f" ({planned.size})" if planned.size else ""
        if not interactive():
            return (
                "downloading it needs a yes, and there is no terminal to ask on: pass --yes to"
                " download it"
            )
        question = (
            f"Download {planned.what}{size} from {planned.source} into {planned.target.parent}?"
        )
        if typer.confirm(question, default=False, err=True):
            return None
        return "you answered no"

    return decide

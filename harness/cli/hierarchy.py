"""``zsl hierarchy``: build frozen class hierarchies from WordNet 3.0 and inspect them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness.hierarchy import dag, wordnet
else:
    # The implementation, imported when a command runs: its --help must not import it (NumPy,
    # and NLTK when WordNet opens).
    dag = lazy_module("harness.hierarchy.dag")
    wordnet = lazy_module("harness.hierarchy.wordnet")

#: The environment variables of --wordnet-dir and --lexnames, as
#: :func:`harness.hierarchy.wordnet.open_wordnet` reads them (``wordnet.ENV_DIR`` and
#: ``wordnet.ENV_LEXNAMES``; tests/cli/test_cli_startup.py holds them equal): spelled here so
#: that defining the options imports no WordNet module.
WORDNET_DIR_ENV = "ZSL_WORDNET_DIR"
WORDNET_LEXNAMES_ENV = "ZSL_WORDNET_LEXNAMES"

#: The ``--wordnet-dir`` option of every command that opens WordNet.
WordNetDir = Annotated[
    Path | None,
    typer.Option(
        "--wordnet-dir",
        envvar=WORDNET_DIR_ENV,
        help="WordNet 3.0 dict directory (default: NLTK's wordnet data).",
        exists=True,
        file_okay=False,
    ),
]
#: The ``--lexnames`` option that goes with :data:`WordNetDir`.
Lexnames = Annotated[
    Path | None,
    typer.Option(
        "--lexnames",
        envvar=WORDNET_LEXNAMES_ENV,
        help="WordNet 3.0 lexnames file, for a dict directory without one (Debian's).",
        exists=True,
        dir_okay=False,
        readable=True,
    ),
]

app = typer.Typer(
    no_args_is_help=True,
    epilog=(
        "Example: zsl hierarchy build --root n01861778 --leaves specs/demo/classes.txt "
        "--out specs/demo/hierarchy.json"
    ),
)


def one_line(h: dag.Hierarchy) -> str:
    """A saved hierarchy's summary on one line: counts, maximum depth and content hash."""
    s = h.summary()
    return (
        f"{s['nodes']} nodes, {s['edges']} edges, {s['roots']} root(s), {s['leaves']} leaves, "
        f"{s['multi_parent_nodes']} with several parents, max depth {s['max_depth']} "
        f"({s['content_hash']})"
    )


@app.command()
@reports_errors
def build(
    out: Annotated[
        Path,
        typer.Option("--out", help="JSON file to write.", dir_okay=False, writable=True),
    ],
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            metavar="WNID",
            help="Keep only this synset and what lies below it (alone: its whole hyponym tree).",
        ),
    ] = None,
    leaves: Annotated[
        Path | None,
        typer.Option(
            "--leaves",
            help="Class list: one WordNet id per line, '#' starts a comment.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ] = None,
    wordnet_dir: WordNetDir = None,
    lexnames: Lexnames = None,
) -> None:
    """Build a hierarchy from WordNet 3.0 (every hypernym path of the classes) and save it."""
    classes = wordnet.read_wnid_list(leaves) if leaves is not None else None
    reader = wordnet.open_wordnet(wordnet_dir, lexnames)
    hierarchy = wordnet.build_wordnet_hierarchy(reader, root=root, leaves=classes)
    hierarchy.save_json(out)
    stdout.print(f"wrote {out}: {one_line(hierarchy)}", soft_wrap=True)


@app.command()
@reports_errors
def show(
    file: Annotated[
        Path,
        typer.Argument(help="Hierarchy JSON file.", exists=True, dir_okay=False, readable=True),
    ],
) -> None:
    """Print the summary of a saved hierarchy (counts, depth, content hash)."""
    hierarchy = dag.Hierarchy.load_json(file)
    summary = hierarchy.summary()
    width = max(len(key) for key in summary)
    for key, value in summary.items():
        stdout.print(f"{key:<{width}}  {value}", soft_wrap=True)


if __name__ == "__main__":
    app()

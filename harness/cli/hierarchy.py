"""``zsl hierarchy``: build frozen class hierarchies from WordNet 3.0 and inspect them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.hierarchy import Hierarchy
from harness.hierarchy.wordnet import (
    ENV_DIR,
    ENV_LEXNAMES,
    build_wordnet_hierarchy,
    open_wordnet,
    read_wnid_list,
)

#: The ``--wordnet-dir`` option of every command that opens WordNet.
WordNetDir = Annotated[
    Path | None,
    typer.Option(
        "--wordnet-dir",
        envvar=ENV_DIR,
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
        envvar=ENV_LEXNAMES,
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


def one_line(h: Hierarchy) -> str:
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
    classes = read_wnid_list(leaves) if leaves is not None else None
    reader = open_wordnet(wordnet_dir, lexnames)
    hierarchy = build_wordnet_hierarchy(reader, root=root, leaves=classes)
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
    hierarchy = Hierarchy.load_json(file)
    summary = hierarchy.summary()
    width = max(len(key) for key in summary)
    for key, value in summary.items():
        stdout.print(f"{key:<{width}}  {value}", soft_wrap=True)


if __name__ == "__main__":
    app()

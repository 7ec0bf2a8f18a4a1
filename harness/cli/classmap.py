"""``zsl classmap``: draft, check and freeze class → WordNet maps (``specs/xlsa17/*.tsv``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.cli.hierarchy import Lexnames, WordNetDir, one_line
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness.data import xlsa17
    from harness.hierarchy import class_maps, wordnet
else:
    # The implementation, imported when a command runs: its --help must not import it.
    class_maps = lazy_module("harness.hierarchy.class_maps")
    wordnet = lazy_module("harness.hierarchy.wordnet")
    xlsa17 = lazy_module("harness.data.xlsa17")

app = typer.Typer(
    no_args_is_help=True,
    epilog=(
        "Example: zsl classmap suggest ../shared/data/xlsa17/AWA2/allclasses.txt "
        "--hint-root n00015388 --out draft.tsv; then edit, 'zsl classmap check', and "
        "'zsl classmap freeze specs/xlsa17/awa-wordnet.tsv --out specs/xlsa17/awa-hierarchy.json'"
    ),
)

MapFile = Annotated[
    Path,
    typer.Argument(
        help="Class map TSV: name<TAB>wnid<TAB>first lemma.",
        exists=True,
        dir_okay=False,
        readable=True,
    ),
]
ClassesOption = Annotated[
    Path | None,
    typer.Option(
        "--classes",
        help="The dataset's class list (one name per line, or an xlsa17 att_splits.mat); the"
        " map must cover exactly it.",
        exists=True,
        dir_okay=False,
        readable=True,
    ),
]


def _class_names(classes: Path | None) -> list[str] | None:
    if classes is None:
        return None
    if classes.suffix == ".mat":
        return xlsa17.release_class_names(classes)
    return class_maps.read_class_list(classes)


@app.command()
@reports_errors
def suggest(
    classes: Annotated[
        Path,
        typer.Argument(
            help="Class list, one name per line (xlsa17's allclasses.txt), or att_splits.mat.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Draft TSV to write.", dir_okay=False, writable=True)
    ],
    hint_root: Annotated[
        list[str] | None,
        typer.Option(
            "--hint-root",
            metavar="WNID",
            help="Prefer synsets at or below this one (repeatable), e.g. n00015388 (animal).",
        ),
    ] = None,
    wordnet_dir: WordNetDir = None,
    lexnames: Lexnames = None,
) -> None:
    """Write a draft map: the top-ranked synset per class, 'CHECK:' comments where weak."""
    names = _class_names(classes) or []
    reader = wordnet.open_wordnet(wordnet_dir, lexnames)
    roots = list(hint_root or [])
    rows: list[class_maps.ClassMapRow] = []
    missing: list[str] = []
    for s in class_maps.suggest_wordnet_ids(reader, names, hint_roots=roots):
        best = s.best
        if best is None:
            missing.append(s.name)
            stdout.print(f"{s.name:<16} NOT FOUND in WordNet: add a row by hand", soft_wrap=True)
            continue
        notes = []
        if s.how != "lemma":
            notes.append(f"CHECK: found through {s.how} {s.query!r}, not the name itself")
        if roots and not best.under_hint:
            notes.append("CHECK: no candidate lies under a hint root")
        others = [a for a in s.alternatives if a.under_hint == best.under_hint][:3]
        if others:
            notes.append(
                "CHECK: alternatives "
                + "; ".join(f"{a.wnid} {a.synset} ({a.gloss})" for a in others)
            )
        rows.append(class_maps.ClassMapRow(s.name, best.wnid, best.lemma, "\n".join(notes)))
        stdout.print(f"{s.name:<16} {best.wnid} {best.synset}: {best.gloss}", soft_wrap=True)
    header = [
        f"Draft class map for {classes.name} by `zsl classmap suggest` "
        f"(hint roots: {', '.join(roots) or 'none'}).",
        "Check every row by hand (`zsl classmap check`), replace each CHECK comment by the",
        "decision and its reason (or delete it), then `zsl classmap freeze`.",
    ]
    if missing:
        header.append(f"TODO: no WordNet noun found for: {', '.join(missing)}")
    class_maps.write_class_map(out, rows, header="\n".join(header))
    stdout.print(f"wrote {out}: {len(rows)} rows, {len(missing)} class(es) to add by hand")


@app.command()
@reports_errors
def check(
    file: MapFile,
    classes: ClassesOption = None,
    overlapping: Annotated[
        bool,
        typer.Option(
            "--overlapping",
            help="Allow a class whose synset lies above another's (a map that serves only the"
            " leakage audit, like CUB's and SUN's; no hierarchy is built from it).",
        ),
    ] = False,
    wordnet_dir: WordNetDir = None,
    lexnames: Lexnames = None,
) -> None:
    """Check a map against WordNet 3.0 and print each row's gloss and hypernym paths."""
    reader = wordnet.open_wordnet(wordnet_dir, lexnames)
    names = _class_names(classes)
    rows = class_maps.check_class_map(reader, file, classes=names, exclusive=not overlapping)
    for row in rows:
        stdout.print(
            f"{row.name}: {class_maps.describe_wordnet_id(reader, row.wnid).format()}",
            soft_wrap=True,
        )
        if row.comment:
            stdout.print("    # " + row.comment.replace("\n", "\n    # "), soft_wrap=True)
        if row.broader:
            stdout.print("    broader: WordNet lacks the class; this synset contains it")
    n_broader = sum(row.broader for row in rows)
    stdout.print(
        f"{file}: {len(rows)} rows ({n_broader} broader), all WordNet 3.0 nouns"
        + ("" if overlapping else ", mutually exclusive"),
        soft_wrap=True,
    )


@app.command()
@reports_errors
def freeze(
    file: MapFile,
    out: Annotated[
        Path, typer.Option("--out", help="Hierarchy JSON to write.", dir_okay=False, writable=True)
    ],
    classes: ClassesOption = None,
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            metavar="WNID",
            help="Cut the graph at this synset (default: no cut, rooted at entity).",
        ),
    ] = None,
    wordnet_dir: WordNetDir = None,
    lexnames: Lexnames = None,
) -> None:
    """Check a map, then save the WordNet hierarchy of its classes (every hypernym path)."""
    reader = wordnet.open_wordnet(wordnet_dir, lexnames)
    names = _class_names(classes)
    hierarchy = class_maps.build_class_map_hierarchy(reader, file, classes=names, root=root)
    hierarchy.save_json(out)
    stdout.print(f"wrote {out}: {one_line(hierarchy)}", soft_wrap=True)


if __name__ == "__main__":
    app()

"""``zsl data``: freeze benchmarks into hashed artifacts and re-verify them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.core.errors import HarnessError
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness import audit as leakage
    from harness import bundles
    from harness import spec as spec_module
    from harness.cli import doctor as prerequisites
    from harness.data import artifacts, facts, sources, xlsa17, xlsa17_synthetic
    from harness.data import prepare as preparation
    from harness.results import standing
else:
    # The implementation, imported when a command runs: its --help must not import it (pydantic,
    # NumPy).
    leakage = lazy_module("harness.audit")
    bundles = lazy_module("harness.bundles")
    spec_module = lazy_module("harness.spec")
    prerequisites = lazy_module("harness.cli.doctor")
    artifacts = lazy_module("harness.data.artifacts")
    facts = lazy_module("harness.data.facts")
    preparation = lazy_module("harness.data.prepare")
    xlsa17 = lazy_module("harness.data.xlsa17")
    xlsa17_synthetic = lazy_module("harness.data.xlsa17_synthetic")
    sources = lazy_module("harness.data.sources")
    standing = lazy_module("harness.results.standing")

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True)

SpecPath = Annotated[Path, typer.Argument(help="spec file", exists=True, dir_okay=False)]


PREPARE_EPILOG = """
The leakage audit (the test classes the features' backbone saw in pre-training) is frozen with
the benchmark and covered by its hash, so every run of it carries the same audit. A backbone
pre-trained on ImageNet classes needs the class lists (ZSL_IMAGENET_DIR) and WordNet 3.0
(ZSL_WORDNET_DIR, ZSL_WORDNET_LEXNAMES); without them the freeze is refused, unless you freeze
without an audit on purpose:

  zsl data prepare specs/xlsa17/awa2-ps.yaml --no-audit "no ImageNet class lists here"

which every run of that benchmark then shows as 'not audited: REASON' (its hash differs from an
audited freeze). Features not pre-trained on a class set record 'not applicable'.
"""


def _print_raw_inputs(frozen: artifacts.FrozenBenchmark, spec: spec_module.Spec) -> None:
    raw = sources.raw_inputs(frozen.raw_inputs, frozen.hash, spec.data.checksum)
    badges = standing.input_badges(raw, experimental=spec.experimental)
    shown = " ".join(badge.text() for badge in badges)
    stdout.print(f"  raw inputs: {shown} {raw.how}", soft_wrap=True)
    if not all(badge.counted for badge in badges):
        stdout.print(
            "    its runs stay out of the cross-benchmark tables (across, ranks, robustness)"
            " unless the reader opts in",
            soft_wrap=True,
        )


def _print_audit(frozen: artifacts.FrozenBenchmark, spec: spec_module.Spec) -> None:
    audit = frozen.audit
    stdout.print(f"  leakage audit: {audit.summary()}", soft_wrap=True)
    if audit.inputs_text():
        stdout.print(f"    from {audit.inputs_text()}", soft_wrap=True)
    if audit.status == leakage.AuditStatus.NOT_AUDITED:
        stdout.print(
            f"    to freeze it with its audit: rm -r {frozen.root} && zsl data prepare"
            f" {spec.path}, with the audit's inputs available (the benchmark hash changes)",
            soft_wrap=True,
        )


@app.command("prepare", epilog=PREPARE_EPILOG)
@reports_errors
def prepare_benchmark(
    spec: SpecPath,
    no_audit: Annotated[
        str | None,
        typer.Option(
            "--no-audit",
            metavar="REASON",
            help="freeze without the leakage audit (when its inputs are not available here),"
            " recording REASON in the benchmark; ignored when a frozen copy exists",
        ),
    ] = None,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="freeze again from the current raw files, replacing the frozen copy once the"
            " new one is whole (after its sources changed, or it was frozen by an older harness)",
        ),
    ] = False,
) -> None:
    """Freeze a benchmark's artifacts and leakage audit under ZSL_HOME (or verify the frozen
    copy and that its source files are unchanged)."""
    loaded = spec_module.load_spec(spec)
    root = artifacts.benchmark_dir(loaded.benchmark, loaded.version)
    if refresh or artifacts.cache_action(root, loaded.data_hash()) == "create":
        # Every input the freeze needs is looked for first: one error names all that are missing.
        prerequisites.require_prerequisites(loaded, audit_inputs=no_audit is None)
    frozen = preparation.prepare(loaded, no_audit=no_audit, refresh=refresh)
    stdout.print(f"{loaded.benchmark} v{loaded.version}: {frozen.hash}")
    stdout.print(f"  {frozen.root} ({len(frozen.entries)} artifacts)")
    _print_raw_inputs(frozen, loaded)
    _print_audit(frozen, loaded)


@app.command()
@reports_errors
def verify(spec: SpecPath) -> None:
    """Re-hash every frozen artifact of a benchmark, compare with its manifest, and check that
    its source files are unchanged."""
    loaded = spec_module.load_spec(spec)
    frozen = artifacts.FrozenBenchmark(artifacts.benchmark_dir(loaded.benchmark, loaded.version))
    names = frozen.verify()
    stdout.print(f"ok {frozen.root}: {len(names)} artifacts match {frozen.hash}")
    preparation.check_frozen_sources(loaded, frozen)
    files = frozen.raw_inputs["files"]
    stdout.print(f"ok sources: {len(files)} file(s) it was frozen from unchanged or gone")
    _print_raw_inputs(frozen, loaded)
    # The facts every record copies sit beside the manifest, outside its hash: checked here.
    if facts.verify_facts(preparation.PreparedBenchmark(loaded, frozen)):
        stdout.print(f"ok {facts.FACTS}: the split's facts match the frozen data")
    else:
        stdout.print(
            f"replaced {facts.FACTS}: it did not hold the facts of the frozen data (computed"
            " again; runs stored since it changed copied the wrong structure and test classes:"
            " re-run them)"
        )
    _print_audit(frozen, loaded)


SYNTHETIC_EPILOG = """
Example (the split files come with the xlsa17 release, a few MB without res101.mat):

  zsl data synthetic-xlsa17 --source ~/xlsa17/data --out ~/xlsa17-synthetic --dataset AWA2

  ZSL_XLSA17_DIR=~/xlsa17-synthetic zsl run submissions/eszsl --spec specs/xlsa17/awa2-ps.yaml

The run freezes the benchmark with its leakage audit, which needs ZSL_IMAGENET_DIR and WordNet
(see `zsl data prepare --help`); without them, freeze it first with
`zsl data prepare specs/xlsa17/awa2-ps.yaml --no-audit "trying synthetic features"`.

SYNTHETIC features: the scores they give say that the pipeline runs, nothing about a method.
The frozen benchmark has another hash than the real one's, so the store keeps the two apart.
"""


@app.command("synthetic-xlsa17", epilog=SYNTHETIC_EPILOG)
@reports_errors
def synthetic_xlsa17(
    source: Annotated[
        Path,
        typer.Option(
            help="folder holding the release's split files: <DATASET>/att_splits.mat and the"
            " class lists",
            exists=True,
            file_okay=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option(help="folder to write <DATASET>/ into (then ZSL_XLSA17_DIR=OUT)")
    ],
    dataset: Annotated[
        list[str] | None,
        typer.Option(
            help="AWA1, AWA2, CUB, SUN or APY, in any case (repeatable; default: every one)"
        ),
    ] = None,
    dim: Annotated[
        int,
        typer.Option(
            help="feature dimension (the shipped specs declare the release's 2048)", min=1
        ),
    ] = 2048,
    seed: Annotated[int, typer.Option(help="seeds the labels and the features")] = 0,
) -> None:
    """Write SYNTHETIC res101.mat features for the real xlsa17 split files, to try the GBU
    benchmarks end to end without the release's features."""
    # Named as GBU writes them (aPY, AwA2) or any other way: the release's folders are upper case.
    datasets = [d.upper() for d in dataset] if dataset else xlsa17.DATASETS
    unknown = [d for d in dataset or [] if d.upper() not in xlsa17.DATASETS]
    if unknown:
        raise HarnessError(
            f"--dataset {unknown[0]!r}: not an xlsa17 dataset; choose from"
            f" {', '.join(xlsa17.DATASETS)} (in any case)"
        )
    made = xlsa17_synthetic.synthetic_release(source, out, datasets, dim=dim, seed=seed)
    for folder in made:
        stdout.print(f"{folder / 'res101.mat'}: synthetic {dim}-d features", soft_wrap=True)
    stdout.print(f"then: export ZSL_XLSA17_DIR={out}", soft_wrap=True)


BUNDLE_EPILOG = """
The bundle is what a predictions package's generator gets (`zsl submission generate`): the
training and validation images with their labels, the class ids, names and embeddings, the
hierarchy, and the test images without labels (shuffled), with each setting's rows and
candidate classes; task.json says which. Make the prediction files from it anywhere (a GPU
cluster, your method's own environment), one per setting; the format is in
docs/guides/prediction-files.md, with an example script that needs only NumPy and safetensors:

  zsl data bundle specs/demo.yaml --out demo-bundle

  python docs/examples/make_prediction_files.py demo-bundle my-method/predictions

then score them as a predictions package (kind: predictions in its submission.yaml):

  zsl run my-method --spec specs/demo.yaml
"""


@app.command("bundle", epilog=BUNDLE_EPILOG)
@reports_errors
def bundle(
    spec: SpecPath,
    out: Annotated[
        Path,
        typer.Option(help="folder to write the bundle to: new, or empty", show_default=False),
    ],
) -> None:
    """Write a benchmark's task bundle (no test labels), to make prediction files outside the
    harness."""
    loaded = spec_module.load_spec(spec)
    bench = preparation.load_benchmark(loaded)
    written = bundles.export_bundle(bench, out)
    files = [path for path in written.root.rglob("*") if path.is_file()]
    size = sum(path.stat().st_size for path in files)
    stdout.print(
        f"wrote the task bundle of {loaded.benchmark} v{loaded.version} to {out}"
        f" ({len(files)} files, {size / 2**20:.1f} MiB; no test labels)",
        soft_wrap=True,
    )
    stdout.print(
        f"  benchmark_hash: {bench.hash} (every prediction file carries it)", soft_wrap=True
    )
    for fit in written.fits[::-1]:  # main first, as task.json lists them
        folder = out if fit == "main" else out / "validation"
        stdout.print(
            f"  {fit} fit ({folder}): settings {', '.join(written.settings_of(fit))}",
            soft_wrap=True,
        )
    stdout.print(f"  class_order_hash of each setting: {out / 'task.json'}", soft_wrap=True)
    settings = loaded.prediction_settings()
    stdout.print(
        f"then: one prediction file per setting ({len(settings)}), e.g. in a predictions"
        f" package predictions/{loaded.benchmark}.<setting>.safetensors; see"
        " docs/guides/prediction-files.md",
        soft_wrap=True,
    )

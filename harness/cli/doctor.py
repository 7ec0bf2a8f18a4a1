"""``zsl doctor``: the state of every input and optional component of the harness, at once.

Each line names one thing the harness reads or runs with, whether it is here, where it was
looked for and how to provide it. Everything is found by the functions the commands themselves
use (``zsl_home``, ``open_wordnet``, ``imagenet_lists_dir``, ``sandbox.available``,
``engine_path``, the xlsa17 adapter's ``local_root``, the audit's ``plan_audit``), so doctor and
the commands never disagree about where something is.

Required: a writable ``ZSL_HOME``, the store ``ZSL_DATABASE_URL`` names (when set) and, with
``--spec``, everything that spec needs to be frozen; the rest is optional (a command that needs
it says so). :func:`require_prerequisites` is the same check for one spec, raised as one error
listing every missing input (``zsl spec describe``, ``zsl data prepare``).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from harness.cli._common import reports_errors, stdout
from harness.core.errors import HarnessError
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness import audit
    from harness import spec as spec_module
    from harness.core import gpus, home
    from harness.data import artifacts, download, xlsa17
    from harness.data.imagenet import features as imagenet_features
    from harness.hierarchy import class_sets, cub_taxonomy, wordnet
    from harness.images import engine
    from harness.runners import sandbox
    from harness.store import db
    from harness.submission import package
else:
    # Imported when the command runs: `zsl doctor --help` imports none of it.
    audit = lazy_module("harness.audit")
    spec_module = lazy_module("harness.spec")
    home = lazy_module("harness.core.home")
    gpus = lazy_module("harness.core.gpus")
    artifacts = lazy_module("harness.data.artifacts")
    download = lazy_module("harness.data.download")
    xlsa17 = lazy_module("harness.data.xlsa17")
    imagenet_features = lazy_module("harness.data.imagenet.features")
    class_sets = lazy_module("harness.hierarchy.class_sets")
    cub_taxonomy = lazy_module("harness.hierarchy.cub_taxonomy")
    wordnet = lazy_module("harness.hierarchy.wordnet")
    engine = lazy_module("harness.images.engine")
    sandbox = lazy_module("harness.runners.sandbox")
    db = lazy_module("harness.store.db")
    package = lazy_module("harness.submission.package")

__all__ = ["Finding", "doctor", "findings", "require_prerequisites", "spec_findings"]

State = Literal["ok", "missing", "download"]

#: The project's optional extras (pyproject.toml) and what each one serves.
EXTRAS = {
    "methods": "the torch reference methods (ALE, DeViSE, SJE)",
    "features": "zsl features extract and zsl embeddings build (torch, torchvision, ...)",
    "postgres": "a PostgreSQL store (ZSL_DATABASE_URL=postgresql://...)",
    "ray": "zsl run --executor ray",
}
#: Where the browser test finds chromium (tests/site/test_browser.py).
CHROMIUM_ENV = "ZSL_CHROMIUM"


@dataclass(frozen=True)
class Finding:
    """One input or component: its state (``download``: not here, fetched on first use),
    where it was looked for, and how to provide it when it is missing."""

    name: str
    state: State
    where: str
    fix: str = ""
    required: bool = False

    def line(self) -> str:
        """``state  name  where`` and, when missing, ``; fix: ...``: one line."""
        fix = f"; fix: {self.fix}" if self.fix and self.state != "ok" else ""
        return f"{self.state:<8} {self.name}: {self.where}{fix}"


def _ok(name: str, where: str, *, required: bool = False) -> Finding:
    return Finding(name, "ok", where, required=required)


def _missing(name: str, where: str, fix: str, *, required: bool = False) -> Finding:
    return Finding(name, "missing", where, fix, required=required)


# -- what every command may need ----------------------------------------------------------------


def _home() -> Finding:
    path = home.zsl_home().expanduser()
    raw = os.environ.get("ZSL_HOME", "").strip()
    where = f"$ZSL_HOME={raw}" if raw else f"{path} (the default: ZSL_HOME is not set)"
    existing = next(p for p in (path, *path.parents) if p.exists())
    if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
        made = "" if existing == path else f" (created on first use, inside {existing})"
        return _ok("ZSL_HOME", f"{where}, writable{made}", required=True)
    return _missing(
        "ZSL_HOME",
        f"{where}: {existing} is not a writable folder",
        "set ZSL_HOME to a writable folder (benchmarks, downloads and logs go there)",
        required=True,
    )


def _store() -> Finding:
    url = os.environ.get(db.DATABASE_URL_ENV, "").strip()
    if not url:
        path = home.zsl_home().expanduser() / db.DATABASE_FILENAME
        where = f"SQLite file {path} (${db.DATABASE_URL_ENV} is not set): needs ZSL_HOME"
        return _ok("store", where, required=True)
    shown = db.describe_url(url)
    try:
        with db.make_engine(url).connect():
            pass
    except HarnessError as err:
        return _missing("store", f"${db.DATABASE_URL_ENV}={shown}", str(err), required=True)
    except Exception as err:  # the driver's connection error (SQLAlchemy wraps its type)
        return _missing(
            "store",
            f"${db.DATABASE_URL_ENV}={shown}: cannot connect ({db.one_line(err)[:300]})",
            f"start the database server, or fix {db.DATABASE_URL_ENV} (server, user, password,"
            " database)",
            required=True,
        )
    return _ok("store", f"${db.DATABASE_URL_ENV}={shown}, connected", required=True)


def _xlsa17_release() -> Finding:
    name, variable = "xlsa17 release", xlsa17.ENV_DIR
    raw = os.environ.get(variable, "").strip()
    cached = download.downloads_dir() / xlsa17.ARCHIVE
    if not raw:
        if cached.is_file():
            return _ok(name, f"${variable} is not set; {cached} is in the download cache")
        return _missing(
            name,
            f"${variable} is not set, and {cached} is not in the download cache (specs can name"
            " data.params.path or data.params.mirror themselves)",
            f"{xlsa17.offline_hint('<DATASET>')} Without any of these, zsl data prepare downloads"
            f" the archive ({xlsa17.ARCHIVE_SIZE}); zsl spec describe asks first",
        )
    root = Path(raw).expanduser()
    found = {
        d: [f for f in ("att_splits.mat", "res101.mat") if (root / d / f).is_file()]
        for d in xlsa17.DATASETS
    }
    listed = ", ".join(f"{d} ({' + '.join(files)})" for d, files in found.items() if files)
    if not listed:
        return _missing(
            name,
            f"${variable}={raw}: no <DATASET>/att_splits.mat in it (datasets:"
            f" {', '.join(xlsa17.DATASETS)})",
            xlsa17.offline_hint("<DATASET>"),
        )
    return _ok(name, f"${variable}={raw}: {listed}")


def _cub_taxonomy() -> Finding:
    name, variable = "CUB taxonomy", xlsa17.ENV_CUB_TAXONOMY
    raw = os.environ.get(variable, "").strip()
    fix = f"set {variable} to the Wikispecies CUB taxonomy folder (specs/xlsa17/README.md)"
    if not raw:
        return _missing(name, f"${variable} is not set (used by the CUB specs' hierarchy)", fix)
    try:
        hierarchy, _ = cub_taxonomy.load_cub_taxonomy(Path(raw).expanduser())
    except HarnessError as err:
        return _missing(name, f"${variable}={raw}: {err}", fix)
    return _ok(name, f"${variable}={raw}: {hierarchy.summary()['nodes']} taxa")


def _imagenet_lists() -> Finding:
    name, variable = "ImageNet lists", class_sets.ENV_IMAGENET_DIR
    raw = os.environ.get(variable, "").strip()
    try:
        directory = class_sets.imagenet_lists_dir()
    except HarnessError as err:
        where = f"${variable}={raw}" if raw else f"${variable} is not set"
        where += " (used by the leakage audit and the ImageNet specs)"
        return _missing(name, where, str(err))
    files = [f for f in class_sets.CLASS_SET_FILES.values() if f]
    absent = [f for f in files if not (directory / f).is_file()]
    if absent:
        return _missing(
            name,
            f"{directory} (${class_sets.ENV_IMAGENET_DIR}) lacks {', '.join(absent)}",
            f"put {', '.join(absent)} into {directory}",
        )
    return _ok(name, f"{directory} (${class_sets.ENV_IMAGENET_DIR}): {', '.join(files)}")


def _imagenet_features() -> Finding:
    name, variable = "ImageNet features", imagenet_features.ENV_FEATURES_DIR
    raw = os.environ.get(variable, "").strip()
    needed = (imagenet_features.FEATURES_FILE, imagenet_features.LABELS_FILE)
    fix = (
        f"set {variable} to your feature folder ({', '.join(needed)}, ...; see"
        " specs/imagenet/README.md), or data.params.features_dir in the spec"
    )
    if not raw:
        return _missing(name, f"${variable} is not set (used by the ImageNet specs)", fix)
    absent = [f for f in needed if not (Path(raw).expanduser() / f).is_file()]
    if absent:
        return _missing(name, f"${variable}={raw} lacks {', '.join(absent)}", fix)
    return _ok(name, f"${variable}={raw}")


def _wordnet() -> list[Finding]:
    """WordNet 3.0 and its lexnames file, found as the harness opens them (``open_wordnet``)."""
    variable, lex_variable = wordnet.ENV_DIR, wordnet.ENV_LEXNAMES
    raw, lex = os.environ.get(variable, "").strip(), os.environ.get(lex_variable, "").strip()
    where = f"${variable}={raw}" if raw else f"NLTK's wordnet corpus (${variable} is not set)"
    try:
        wordnet.open_wordnet()
    except HarnessError as err:
        message = str(err)
        # The folder is a WordNet dict directory; its lexnames file is what is missing or broken.
        is_dict = bool(raw) and (Path(raw).expanduser() / "data.noun").is_file()
        if is_dict and "lexnames" in message:
            given = f"${lex_variable}={lex}" if lex else f"${lex_variable} is not set"
            return [
                _ok("WordNet 3.0", where),
                _missing("WordNet lexnames", f"none in {raw}, {given}", message),
            ]
        return [
            _missing("WordNet 3.0", where, message),
            Finding("WordNet lexnames", "missing", "not looked for: no WordNet found"),
        ]
    if not raw or (Path(raw).expanduser() / "lexnames").is_file():
        lex_where = f"in {raw or 'the NLTK corpus'}"
    else:
        lex_where = f"${lex_variable}={lex}"
    return [_ok("WordNet 3.0", where), _ok("WordNet lexnames", lex_where)]


def _bubblewrap() -> Finding:
    path = shutil.which("bwrap")
    if sandbox.available():
        return _ok("bubblewrap (runner 'sandbox')", f"{path}, creates sandboxes here")
    return _missing(
        "bubblewrap (runner 'sandbox')",
        f"{path}: cannot create a sandbox here" if path else "bwrap is not on PATH",
        "install bubblewrap (`apt-get install bubblewrap`) and allow user namespaces; without"
        " it runs use runner 'container', or 'local' (no isolation: trusted code only)",
    )


def _container() -> list[Finding]:
    try:
        path = engine.engine_path()
    except HarnessError as err:
        return [
            _missing("container engine", "docker or podman ($ZSL_CONTAINER_ENGINE)", str(err)),
            Finding("worker image", "missing", "not looked for: no container engine"),
        ]
    image = package.default_worker_image()
    try:
        info = engine.inspect_image(path, image)
    except HarnessError as err:
        unasked = Finding("worker image", "missing", "not looked for: the engine does not answer")
        return [_missing("container engine", path, str(err)), unasked]
    found = _ok("container engine", f"{path}, answers")
    if info is None:
        return [found, _missing("worker image", f"{image}: not in {path}", "zsl image build")]
    return [found, _ok("worker image", f"{image} ({info.id[:19]})")]


def _gpus() -> Finding:
    try:
        found = gpus.list_gpus()
    except HarnessError as err:
        return _missing("GPUs", f"${gpus.GPUS_ENV}", str(err))
    if not found:
        return _missing(
            "GPUs",
            f"none (nvidia-smi {'answers' if shutil.which('nvidia-smi') else 'is not on PATH'},"
            f" no nvidia device nodes in {gpus.dev_dir()})",
            "a package with resources.gpus > 0 needs an NVIDIA GPU and its driver",
        )
    return _ok("GPUs", ", ".join(f"GPU {g.index}" for g in found))


def _extra(name: str, purpose: str) -> Finding:
    """The packages of the project's extra ``name``, as its installed metadata lists them."""
    from packaging.requirements import Requirement

    wanted = [
        Requirement(r)
        for r in importlib.metadata.requires("zsl-harness") or []
        if Requirement(r).marker is not None and f'extra == "{name}"' in str(Requirement(r).marker)
    ]
    have, lacking = [], []
    for requirement in wanted:
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            lacking.append(str(requirement.name))
            continue
        if requirement.specifier.contains(version, prereleases=True):
            have.append(f"{requirement.name} {version}")
        else:
            lacking.append(f"{requirement.name} {version} (wants {requirement.specifier})")
    label = f"extra '{name}'"
    if lacking:
        return _missing(
            label,
            f"for {purpose}: missing {', '.join(lacking)}",
            f"pip install 'zsl-harness[{name}]'",
        )
    return _ok(label, f"for {purpose}: {', '.join(have)}")


def _chromium() -> Finding:
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium")
    if path and Path(path).is_file():
        return _ok("chromium (browser test)", path)
    return _missing(
        "chromium (browser test)",
        f"${CHROMIUM_ENV} is not set and chromium is not on PATH",
        "apt-get install chromium (only the browser test of the site needs it)",
    )


def findings() -> list[Finding]:
    """Every input and component this machine may use (see the module's docstring)."""
    return [
        _home(),
        _store(),
        _xlsa17_release(),
        _cub_taxonomy(),
        _imagenet_lists(),
        _imagenet_features(),
        *_wordnet(),
        _bubblewrap(),
        *_container(),
        _gpus(),
        *(_extra(name, purpose) for name, purpose in EXTRAS.items()),
        _chromium(),
    ]


# -- what one spec needs --------------------------------------------------------------------------


def _xlsa17_data(spec: spec_module.Spec, *, release_only: bool) -> list[Finding]:
    params = xlsa17.Xlsa17Params.model_validate(spec.data.params)
    name = f"xlsa17 {params.dataset} release"
    out: list[Finding] = []
    named = xlsa17.local_root(params, spec)
    if named is not None:
        root, how = named
        folder = root / params.dataset
        needed = ["att_splits.mat"] + ([] if release_only else ["res101.mat"])
        absent = [f for f in needed if not (folder / f).is_file()]
        if absent:
            out.append(
                _missing(
                    name,
                    f"{how} is {root}; {folder} lacks {', '.join(absent)}",
                    xlsa17.offline_hint(params.dataset),
                    required=True,
                )
            )
        else:
            out.append(_ok(name, f"{how}: {folder}", required=True))
    else:
        cached = download.downloads_dir() / xlsa17.ARCHIVE
        via = f"data.params.mirror {params.mirror}" if params.mirror else params.url
        looked = f"data.params.path and ${xlsa17.ENV_DIR} are not set; {cached} is"
        copy = _mirror_copy(spec, params.mirror)
        if cached.is_file():
            out.append(_ok(name, f"{looked} in the download cache", required=True))
        elif copy is not None and copy.is_file():  # a folder mirror is copied, not downloaded
            out.append(_ok(name, f"data.params.mirror: {copy}", required=True))
        elif release_only:
            out.append(
                _missing(
                    name,
                    f"{looked} not there, and --release-only never downloads",
                    f"{xlsa17.offline_hint(params.dataset)} For --release-only,"
                    f" {params.dataset}/att_splits.mat and the class lists suffice (a few MB).",
                    required=True,
                )
            )
        else:
            out.append(
                Finding(
                    name,
                    "download",
                    f"{looked} not there: downloaded on first use from {via}"
                    f" ({xlsa17.ARCHIVE_SIZE})",
                    xlsa17.offline_hint(params.dataset),
                    required=True,
                )
            )
    if params.split == "standard" and params.dataset in xlsa17.SS_TEST_CLASS_SOURCES:
        listed = params.test_classes
        if not listed or listed[0].startswith(xlsa17.PLACEHOLDER):
            placeholder = listed[0] if listed else None
            out.append(
                _missing(
                    "standard split classes",
                    "data.params.test_classes",
                    xlsa17.ss_test_classes_missing(spec.path, params.dataset, placeholder),
                    required=True,
                )
            )
    if params.hierarchy == "cub_taxonomy" and not release_only:
        taxonomy = params.taxonomy_path or os.environ.get(xlsa17.ENV_CUB_TAXONOMY, "")
        named_by = f"${xlsa17.ENV_CUB_TAXONOMY}"
        if params.taxonomy_path:
            named_by = "data.params.taxonomy_path"
        out.append(_taxonomy(spec, taxonomy, named_by))
    return out


def _mirror_copy(spec: spec_module.Spec, mirror: str | None) -> Path | None:
    """The archive a folder ``data.params.mirror`` names (relative to the spec), else None."""
    if mirror is None or "://" in mirror:
        return None
    folder = Path(mirror).expanduser()
    return (folder if folder.is_absolute() else spec.path.parent / folder) / xlsa17.ARCHIVE


def _taxonomy(spec: spec_module.Spec, folder: str, source: str) -> Finding:
    name = "CUB taxonomy"
    fix = (
        f"set {xlsa17.ENV_CUB_TAXONOMY} (or data.params.taxonomy_path) to the Wikispecies CUB"
        " taxonomy folder"
    )
    if not folder:
        return _missing(name, f"{source} is not set", fix, required=True)
    directory = Path(folder).expanduser()
    if not directory.is_absolute():
        directory = spec.path.parent / directory
    try:
        cub_taxonomy.load_cub_taxonomy(directory)
    except HarnessError as err:
        return _missing(name, f"{source}: {err}", fix, required=True)
    return _ok(name, f"{source}: {directory}", required=True)


def spec_findings(
    spec: spec_module.Spec, *, release_only: bool = False, audit_inputs: bool = True
) -> list[Finding]:
    """What ``spec`` needs to be frozen (``release_only``: to describe its release's split files
    alone), every item looked for: its raw data, class lists and taxonomy, and, with
    ``audit_inputs``, the leakage audit's class set and WordNet."""
    out: list[Finding] = []
    if spec.data.adapter == "xlsa17":
        out += _xlsa17_data(spec, release_only=release_only)
    elif spec.data.adapter == "imagenet":
        out.append(replace(_imagenet_lists(), required=True))
        if not release_only:
            out.append(replace(_imagenet_features(), required=True))
    pretrained = spec.features.pretrained_on
    audited = pretrained.class_set not in (None, "none") or bool(pretrained.wnids)
    if audit_inputs and audited and not release_only:
        try:
            plan = audit.plan_audit(spec)
        except audit.AuditInputsMissing as err:
            where = f"{pretrained.class_set or 'wnids'} and WordNet"
            out.append(_missing("leakage audit inputs", where, str(err), required=True))
        else:
            inputs = plan.inputs
            shown = f"{inputs.n_pretrained} classes" if inputs is not None else plan.source
            where = f"{plan.source}: {shown}, WordNet 3.0"
            out.append(_ok("leakage audit inputs", where, required=True))
    return out


def require_prerequisites(
    spec: spec_module.Spec, *, release_only: bool = False, audit_inputs: bool = True
) -> None:
    """Raise one error naming every input ``spec`` needs and this machine lacks (none missing:
    nothing); called before a benchmark is frozen or its release described."""
    missing = [
        f
        for f in spec_findings(spec, release_only=release_only, audit_inputs=audit_inputs)
        if f.state == "missing"
    ]
    if not missing:
        return
    count = "1 input" if len(missing) == 1 else f"{len(missing)} inputs"
    raise HarnessError(
        f"{spec.path}: {spec.benchmark} v{spec.version} needs {count} this machine lacks:\n"
        + "\n".join(f"  - {f.name} ({f.where}): {f.fix}" for f in missing)
    )


def _print(title: str, shown: list[Finding]) -> None:
    if shown:
        stdout.print(title)
        for finding in shown:
            stdout.print(f"  {finding.line()}", soft_wrap=True)


@reports_errors
def doctor(
    spec: Annotated[
        list[Path] | None,
        typer.Option(
            "--spec",
            help="also check what this spec needs to be frozen (required; repeatable)",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Show where every input and optional component is found, and how to provide the rest.

    Exit code 0 when every required one is here (ZSL_HOME, the store, what --spec needs),
    1 otherwise; optional ones (data sets, WordNet, bubblewrap, container engine, extras) only
    say what they would enable.
    """
    found = findings()
    checked = [(path, spec_findings(spec_module.load_spec(path))) for path in spec or []]
    stdout.print(f"zsl doctor: Python {sys.version.split()[0]} ({sys.executable})", soft_wrap=True)
    _print("required", [f for f in found if f.required])
    _print("optional", [f for f in found if not f.required])
    for path, needs in checked:
        _print(f"required by {path}", needs)
    everything = found + [f for _, needs in checked for f in needs]
    lacking = [f.name for f in everything if f.required and f.state == "missing"]
    optional = sum(1 for f in everything if not f.required and f.state == "missing")
    if lacking:
        stdout.print(f"missing required: {', '.join(lacking)}", soft_wrap=True)
        raise typer.Exit(code=1)
    stdout.print(f"every required input is here ({optional} optional missing)", soft_wrap=True)

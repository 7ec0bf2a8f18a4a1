"""Submission packages: ``submission.yaml`` schema, validation and the package hash.

A package is a folder holding ``submission.yaml`` and either model code (``kind: model``, run
through the model protocol by a runner) or prediction files (``kind: predictions``), optionally
with a generator script that writes them from a task bundle (run in the same runner as model
code: it is untrusted too).

See docs/submission.md.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from harness import __version__
from harness.class_embedding import ClassEmbeddingUse
from harness.core import yamlio
from harness.core.errors import PredictionError, SubmissionError
from harness.submission.content import content_problem
from harness.submission.resources import Resources

__all__ = [
    "BIBTEX_MAX_CHARS",
    "DATA_SUFFIXES",
    "MANIFEST",
    "README_MAX_CHARS",
    "SOURCE_SUFFIXES",
    "Declarations",
    "Name",
    "Package",
    "Resources",
    "check_image_reference",
    "check_requirement",
    "default_worker_image",
    "load_package",
]

MANIFEST = "submission.yaml"
#: The repository of the worker images ``zsl image build`` makes (see :func:`default_worker_image`).
WORKER_REPOSITORY = "zsl-worker"
BYTECODE_SUFFIXES = (".pyc", ".pyo")
#: Native code Python imports in preference to source (the running interpreter's suffixes) or
#: loads as a library (any platform's).
NATIVE_SUFFIXES = tuple(
    sorted({*importlib.machinery.EXTENSION_SUFFIXES, ".so", ".pyd", ".dylib", ".dll"})
)
_VERSIONED_SHARED_LIBRARY = re.compile(r".\.so(\.[0-9]+)+$")  # libfoo.so.1.2
#: What ``zsl submission validate`` counts as plain data (anything else is listed for review).
PLAIN_SUFFIXES = frozenset(
    {".md", ".txt", ".rst", ".yaml", ".yml", ".json", ".csv", ".tsv", ".toml", ".cfg", ".ini"}
    | {".bib", ".npy", ".npz", ".safetensors", ".png", ".jpg", ".jpeg", ".svg", ".pdf"}
)
PLAIN_NAMES = frozenset({"LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS", "CITATION"})
#: Source a reviewer reads in a pull request's diff: what ``zsl ci pr`` accepts as source
#: (:meth:`Package.undeclared_files`). No ``.sh``: nothing in the harness runs a shell script
#: (entry points and generators are Python), so a leaderboard that wants them allows the suffix.
SOURCE_SUFFIXES = frozenset(
    {".py", ".md", ".rst", ".txt", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".bib"}
)
#: Source files without a suffix (licence, authors, a bare README).
SOURCE_NAMES = PLAIN_NAMES | {"README"}
#: The data formats the harness declares: arrays without pickles (``.npy``/``.npz`` headers are
#: checked for object dtypes by validation), safetensors, and tables. A package's prediction
#: files are accepted in their declared format too.
DATA_SUFFIXES = frozenset({".npy", ".npz", ".safetensors", ".csv", ".tsv"})
#: The largest prediction file a package may hold. Prediction files travel with the package in
#: the leaderboard's git repository (that is how they reach CI), and git hosts refuse files
#: over 100 MB; a benchmark whose dense scores are larger declares the top-K format.
MAX_PREDICTION_FILE_BYTES = 50 * 1024 * 1024
#: ``bibtex:`` holds at most this many characters (a long entry is a few hundred).
BIBTEX_MAX_CHARS = 4000
#: The run record keeps at most this many characters of the package's README (its head).
README_MAX_CHARS = 20_000
#: The files read as the package's README, first found wins.
README_NAMES = ("README.md", "README.rst", "README.txt", "README")
# Spaces, control characters and backslashes (which browsers read as "/") never appear in a
# link the site makes (the same rule as harness.site.text.safe_href, which renders records).
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=64)]

# The OCI distribution reference grammar (github.com/distribution/reference, regexp.go):
#   reference := name [ ":" tag ] [ "@" digest ];  name := [domain "/"] path-component ["/" …]
# A reference that passes can only be an image name to docker/podman: it starts with a letter
# or digit (never "-"), and holds no space, "=", newline or other character a shell or an
# option parser would read.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_ALGORITHM = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<algorithm>{_ALGORITHM}):(?P<hex>[0-9a-fA-F]+))?",
    re.ASCII,
)
# Digest lengths the registries use; any other algorithm needs at least 128 bits (32 hex).
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}


def check_image_reference(value: str) -> str:
    """``value`` if it is an OCI image reference (``[host[:port]/]path[:tag][@algo:hex]``)."""
    match = IMAGE_REFERENCE.fullmatch(value)
    problem = None
    if match is None:
        problem = (
            "not an image reference ([registry[:port]/]lowercase/path[:tag][@sha256:64 hex],"
            " starting with a letter or digit)"
        )
    elif len(match["name"]) > 255:
        problem = "image name longer than 255 characters"
    elif match["algorithm"] is not None:
        algorithm, digest = match["algorithm"], match["hex"]
        wanted = DIGEST_HEX.get(algorithm)
        if (wanted is not None and len(digest) != wanted) or len(digest) < 32:
            problem = f"a {algorithm} digest has {wanted or 'at least 32'} hex digits"
    if problem is not None:
        # repr: a newline or control character in the value stays on the error's one line.
        raise ValueError(f"{value[:80]!r}: {problem}")
    return value


def check_http_url(value: str) -> str:
    """``value`` if it is an absolute ``http``/``https`` URL with a host and no spaces, control
    characters or backslashes; a ValueError naming the value otherwise (``javascript:``,
    ``file:``, a bare DOI or a relative path are refused: write ``https://doi.org/...``)."""
    problem = None
    if len(value) > 2000:
        problem = "longer than 2000 characters"
    elif _URL_UNSAFE.search(value):
        problem = "holds a space, a control character or a backslash"
    else:
        try:
            parts = urlsplit(value)
        except ValueError:
            parts = None
        if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            problem = "not an http(s) URL (https://host/path; a DOI as https://doi.org/10....)"
    if problem is not None:
        raise ValueError(f"{value[:80]!r}: {problem}")
    return value


def check_requirement(value: str) -> str:
    """``value`` if it is a PEP 508 requirement naming a package from an index (``torch==2.13.0``,
    ``scikit-image>=0.22``), normalised (``str(Requirement(value))``).

    Refused: anything pip would read as an option (``-r file``, ``--index-url``), a direct
    reference (``name @ file:///etc/passwd``, ``name @ https://...``: the image build would read a
    file of the building host or fetch unpinned code), and text longer than 200 characters.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    problem = None
    if len(value) > 200:
        problem = "longer than 200 characters"
    else:
        try:
            requirement = Requirement(value)
        except InvalidRequirement:
            problem = "not a PEP 508 requirement (name[extras] [version specifier] [; marker])"
        else:
            if requirement.url is not None:
                problem = "a direct reference (name @ URL) is not allowed: name a released version"
    if problem is not None:
        raise ValueError(f"{value[:80]!r}: {problem}")
    return str(requirement)


def default_worker_image(gpus: int = 0) -> str:
    """The image the container runner uses for a package that names none: the harness's own
    worker image at this harness version, ``zsl-worker:<version>`` (``-gpu`` when the package
    asks for GPUs); ``zsl image build`` (``--gpu``) makes it."""
    return f"{WORKER_REPOSITORY}:{__version__}{'-gpu' if gpus > 0 else ''}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelCode(_Strict):
    entrypoint: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")] = (
        Field(description="'module:Class' relative to the package folder")
    )
    requirements: list[str] = Field(default_factory=list, description="pip requirements")
    image: str | None = Field(
        None,
        description="container image for the container runner: an OCI reference such as"
        " 'ghcr.io/org/zsl-worker:0.1' or 'name@sha256:<64 hex>'",
    )

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str | None) -> str | None:
        return None if value is None else check_image_reference(value)

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        return [check_requirement(item) for item in value]


class PredictionFiles(_Strict):
    files: str = Field(
        "predictions/{benchmark}.{setting}.safetensors",
        description="path pattern inside the package; {benchmark} and {setting} are filled in",
    )
    generator: str | None = Field(
        None,
        description="script that writes the files, run isolated like model code:"
        " `python GEN BUNDLE_DIR OUT_DIR`",
    )


class Declarations(_Strict):
    class_embedding: ClassEmbeddingUse = Field(
        "default",
        description="which class embedding the method uses: 'default' (the benchmark's"
        " default), 'none', or a kind (attributes, word-vectors, sentence, clip-text): it then"
        " gets the benchmark's embeddings of that kind only, and runs only where there is one",
    )
    features: str = Field(
        "benchmark", description="'benchmark' (the frozen features) or what else it used"
    )
    backbone_pretrained_on: str | None = Field(
        None, description="classes its own backbone saw, if it does not use the given features"
    )
    extra_data: bool = False
    transductive: bool = False
    seen_only: list[Literal["gzsl"]] = Field(
        default_factory=list,
        description="settings where the method predicts seen classes only, by design (a"
        " seen-class baseline): its unseen accuracy and H there are 0 by design, so no"
        " below-chance warning is printed for them",
    )


class SubmissionManifest(_Strict):
    name: Name
    version: Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z][0-9A-Za-z.+_-]*$")]
    authors: list[str] = Field(min_length=1)
    paper: str | None = Field(None, description="the paper, an http(s) URL")
    url: str | None = Field(None, description="the method's home page, an http(s) URL")
    code: str | None = Field(None, description="the method's code (repository), an http(s) URL")
    bibtex: str | None = Field(
        None,
        max_length=BIBTEX_MAX_CHARS,
        description="a BibTeX entry to cite the method (shown as text, with a copy button)",
    )
    description: str = ""
    kind: Literal["predictions", "model"]
    model: ModelCode | None = None
    predictions: PredictionFiles | None = None
    resources: Resources = Resources()
    declarations: Declarations = Declarations()
    seed: int = Field(0, ge=0)

    @field_validator("paper", "url", "code")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    @field_validator("bibtex")
    @classmethod
    def _bibtex(cls, value: str | None) -> str | None:
        if value is not None and not value.lstrip().startswith("@"):
            raise ValueError("a BibTeX entry starts with '@' (e.g. @inproceedings{key, ...})")
        return value

    @model_validator(mode="after")
    def _kind_matches(self) -> SubmissionManifest:
        # Each message starts with the key it is about, which places it at that key's line.
        if self.kind == "model" and self.model is None:
            raise ValueError("kind: 'model' needs a 'model' section with an 'entrypoint'")
        if self.kind == "model" and self.predictions is not None:
            raise ValueError("kind: 'model' must not have a 'predictions' section")
        if self.kind == "predictions" and self.model is not None:
            raise ValueError("kind: 'predictions' must not have a 'model' section")
        return self

    @property
    def prediction_files(self) -> PredictionFiles:
        return self.predictions or PredictionFiles()


class Package:
    """A validated submission folder."""

    def __init__(self, root: Path, manifest: SubmissionManifest) -> None:
        self.root = root
        self.manifest = manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def worker_image(self) -> str:
        """The container image its code runs in: ``model.image``, else the harness's default
        for its kind (:func:`default_worker_image`)."""
        model = self.manifest.model
        if model is not None and model.image:
            return model.image
        return default_worker_image(self.manifest.resources.gpus)

    def files(self) -> list[Path]:
        """Every file of the package, sorted by path; each one is covered by :meth:`hash`.

        Refuses symbolic links, special files (FIFOs, sockets, devices), every file Python
        could import or run instead of the ``.py`` source (by name), and every file whose
        content is code, a pickle or an archive whatever its name
        (:func:`harness.submission.content.content_problem`), naming the first offender in path
        order and saying what to do.
        """
        found: list[tuple[tuple[str, ...], Path]] = []
        problems: list[tuple[tuple[str, ...], str]] = []
        pending = [self.root]
        while pending:
            folder = pending.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError as err:
                raise SubmissionError(f"{folder}: cannot list it ({err.strerror})") from None
            for entry in entries:
                path = Path(entry.path)
                rel = path.relative_to(self.root)
                if entry.is_symlink():
                    problems.append((rel.parts, "is a symbolic link; packages hold files"))
                elif entry.is_dir(follow_symlinks=False):
                    problem = _runs_instead_of_source(entry.name, folder=True)
                    if problem is None:
                        pending.append(path)
                    else:
                        problems.append((rel.parts, problem))
                elif entry.is_file(follow_symlinks=False):
                    problem = _runs_instead_of_source(entry.name, folder=False)
                    if problem is None:
                        problem = content_problem(path)
                    if problem is None:
                        found.append((rel.parts, path))
                    else:
                        problems.append((rel.parts, problem))
                else:
                    problems.append(
                        (rel.parts, "is not a regular file (a FIFO, socket or device); refused")
                    )
        if problems:
            problems.sort()
            parts, message = problems[0]
            more = f" ({len(problems) - 1} more such file(s))" if len(problems) > 1 else ""
            raise SubmissionError(f"{self.root}: {'/'.join(parts)} {message}{more}")
        # Sorted by path components (as pathlib sorts), the order the hash has always used.
        return [path for _, path in sorted(found)]

    def readme(self) -> str:
        """The package's README (the first of :data:`README_NAMES` found), at most
        :data:`README_MAX_CHARS` characters of it (a longer one ends with a note); ``""`` when
        it has none. Text only: the site shows it escaped, never rendered as markup."""
        for name in README_NAMES:
            path = self.root / name
            if path.is_file() and not path.is_symlink():
                with path.open("rb") as handle:
                    data = handle.read(4 * README_MAX_CHARS)
                text = data.decode("utf-8", errors="replace")
                if len(text) <= README_MAX_CHARS:
                    return text
                note = f"\n\n[{name} continues; the first {README_MAX_CHARS} characters are kept]"
                return text[: README_MAX_CHARS - len(note)] + note
        return ""

    def hash(self) -> str:
        """sha256 over the sorted (relative path, file sha256) pairs of every file."""
        digest = hashlib.sha256()
        for path in self.files():
            rel = path.relative_to(self.root).as_posix()
            with path.open("rb") as handle:
                content = hashlib.file_digest(handle, "sha256").hexdigest()
            digest.update(f"{rel}\0{content}\n".encode())
        return "sha256:" + digest.hexdigest()

    def files_to_review(self) -> list[str]:
        """Hashed files that are neither ``.py`` source nor plain data (docs, configs, arrays):
        ``zsl submission validate`` lists them so a reviewer looks at them."""
        return [
            path.relative_to(self.root).as_posix()
            for path in self.files()
            if path.suffix != ".py"
            and path.suffix.lower() not in PLAIN_SUFFIXES
            and path.name not in PLAIN_NAMES
        ]

    def undeclared_files(self, allowed_suffixes: Collection[str] = ()) -> list[str]:
        """Hashed files (relative POSIX paths, sorted) that are neither source
        (:data:`SOURCE_SUFFIXES`, :data:`SOURCE_NAMES`, :data:`README_NAMES`) nor a declared data
        format (:data:`DATA_SUFFIXES`, or the suffix of ``predictions.files`` for a predictions
        package), and whose suffix is not in ``allowed_suffixes`` (lowercase, with the dot).

        ``zsl ci pr`` fails a package that holds any: a leaderboard accepts what its reviewers
        can read in the diff and formats the harness declares, and lists the rest in its
        configuration (``allowed_data_suffixes``). Suffixes compare case-insensitively.
        """
        accepted = SOURCE_SUFFIXES | DATA_SUFFIXES | {s.lower() for s in allowed_suffixes}
        if self.manifest.kind == "predictions":
            accepted |= {PurePosixPath(self.manifest.prediction_files.files).suffix.lower()}
        names = SOURCE_NAMES | set(README_NAMES)
        return [
            path.relative_to(self.root).as_posix()
            for path in self.files()
            if path.name not in names and path.suffix.lower() not in accepted
        ]

    def prediction_path(self, benchmark: str, setting: str) -> Path:
        rel = self.manifest.prediction_files.files.format(benchmark=benchmark, setting=setting)
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise SubmissionError(f"{self.root / MANIFEST}: predictions.files leaves the package")
        return path

    def display_name(self, path: Path) -> str:
        """``path`` as messages name a file of the package: relative to its folder (a folder
        unpacked from an archive is a temporary one), ``path`` itself outside it."""
        try:
            return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def display_names(self, paths: Mapping[str, Path]) -> dict[str, str]:
        """Setting -> :meth:`display_name` of its file: how reading errors name the files."""
        return {setting: self.display_name(path) for setting, path in paths.items()}

    def prediction_files(
        self, benchmark: str, settings: Sequence[str], *, spec: str | Path | None = None
    ) -> dict[str, Path]:
        """The prediction file of every setting in ``settings``; raises
        :class:`~harness.core.errors.PredictionError` naming the missing ones (by their path in the
        package) and the command that writes them: ``zsl submission generate PACKAGE --spec
        SPEC`` where the package has a generator (``spec``: the benchmark's spec file)."""
        paths = {setting: self.prediction_path(benchmark, setting) for setting in settings}
        missing = [self.display_name(p) for p in paths.values() if not p.is_file()]
        if not missing:
            for path in paths.values():
                size = path.stat().st_size
                if size > MAX_PREDICTION_FILE_BYTES:
                    raise PredictionError(
                        f"{self.display_name(path)}: {size / 2**20:.1f} MiB; a prediction file"
                        f" may hold at most {MAX_PREDICTION_FILE_BYTES // 2**20} MiB, as it is"
                        " committed with the package to the leaderboard's repository (git hosts"
                        " refuse files over 100 MB): store scores as float32, or ask for the"
                        " benchmark's top-K format (predictions.format: topk in its spec)"
                    )
            return paths
        listed = ", ".join(missing)
        files = self.manifest.prediction_files
        if files.generator is not None:
            hint = (
                f"write them with its generator ({files.generator}): `zsl submission generate"
                f" {self.root} --spec {spec if spec is not None else 'SPEC'}`"
            )
        else:
            hint = (
                "the package has no predictions.generator, so add the files themselves"
                f" (predictions.files: {files.files})"
            )
        raise PredictionError(
            f"{self.root}: {len(missing)} prediction file(s) for benchmark '{benchmark}' not"
            f" found: {listed}; {hint}"
        )


def _runs_instead_of_source(name: str, *, folder: bool) -> str | None:
    """Why Python could import or run the file (or folder) ``name`` in place of the package's
    source, with what to do; None for an ordinary file."""
    lower = name.lower()
    if folder:
        if lower == "__pycache__":
            return (
                "is a byte-code cache folder: Python runs the .pyc files in it instead of the"
                " source the package hash covers. Delete it and ship only the .py source"
            )
        return None
    if lower.endswith(BYTECODE_SUFFIXES):
        return (
            "is compiled Python byte-code, which Python runs instead of (or without) the .py"
            " source. Delete it and ship the .py source"
        )
    if lower.endswith(NATIVE_SUFFIXES) or _VERSIONED_SHARED_LIBRARY.search(lower):
        return (
            "is a compiled extension module or shared library, which Python imports in"
            " preference to .py source. Delete it and ship source; compiled dependencies"
            " belong in model.requirements or model.image"
        )
    if lower.endswith(".pth"):
        return "is a .pth file, whose import lines Python runs at start-up. Delete it"
    return None


def load_package(path: str | Path) -> Package:
    """Read and validate ``PATH/submission.yaml``.

    Its problems are reported at once, each as ``submission.yaml:LINE: key.path: message``
    (:func:`harness.core.yamlio.load_model_file`): an unknown key lists the allowed ones, a value
    outside a field's choices lists them.
    """
    root = Path(path)
    manifest_path = root / MANIFEST
    if not root.is_dir():
        raise SubmissionError(f"{root}: a submission package is a folder with {MANIFEST}")
    if manifest_path.is_symlink():  # refused before it is read: it could point anywhere
        raise SubmissionError(f"{root}: {MANIFEST} is a symbolic link; packages hold files")
    if not manifest_path.exists():
        raise SubmissionError(f"{root}: no {MANIFEST}; run `zsl submission init`")
    manifest, _ = yamlio.load_model_file(  # bounded: no bombs, no repeated key
        manifest_path, SubmissionManifest, error=SubmissionError, what=MANIFEST
    )
    package = Package(root.resolve(), manifest)
    # Links, special files, byte-code, extension modules, .pth files: refused before anything
    # else looks for a file (a sourceless model.pyc is named as such, not as a missing module).
    package.files()
    if manifest.model is not None:
        module = manifest.model.entrypoint.split(":")[0]
        candidates = [
            root / (module.replace(".", "/") + ".py"),
            root / module.replace(".", "/") / "__init__.py",
        ]
        if not any(c.is_file() for c in candidates):
            raise SubmissionError(
                f"{manifest_path}: model.entrypoint module '{module}' not found in the package"
                f" (looked for {candidates[0].name})"
            )
    if manifest.predictions is not None and manifest.predictions.generator is not None:
        generator = root / manifest.predictions.generator
        if not generator.is_file() or not re.fullmatch(
            r"[\w./-]+\.py", manifest.predictions.generator
        ):
            raise SubmissionError(f"{manifest_path}: predictions.generator {generator} not found")
    return package

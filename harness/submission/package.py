"""Submission packages: ``submission.yaml`` schema, validation and the package hash.

A package is a folder holding ``submission.yaml`` and either model code (``kind: model``, run
through the model protocol by a runner) or prediction files (``kind: predictions``), optionally
with a trusted generator script that writes them from a task bundle. The package hash covers
every file except byte-code caches.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from harness.errors import SubmissionError

MANIFEST = "submission.yaml"
IGNORED_PARTS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=64)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelCode(_Strict):
    entrypoint: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")] = (
        Field(description="'module:Class' relative to the package folder")
    )
    requirements: list[str] = Field(default_factory=list, description="pip requirements")
    image: str | None = Field(None, description="container image for the container runner")


class PredictionFiles(_Strict):
    files: str = Field(
        "predictions/{benchmark}.{setting}.safetensors",
        description="path pattern inside the package; {benchmark} and {setting} are filled in",
    )
    generator: str | None = Field(
        None, description="trusted script that writes the files: `python GEN BUNDLE_DIR OUT_DIR`"
    )


class Resources(_Strict):
    gpus: int = Field(0, ge=0)
    memory_gb: float = Field(4.0, gt=0)
    time_s: int = Field(1800, gt=0)
    cpus: int = Field(1, gt=0)


class Declarations(_Strict):
    class_embedding: str = Field("default", description="which class embedding the method uses")
    features: str = Field(
        "benchmark", description="'benchmark' (the frozen features) or what else it used"
    )
    backbone_pretrained_on: str | None = Field(
        None, description="classes its own backbone saw, if it does not use the given features"
    )
    extra_data: bool = False
    transductive: bool = False


class SubmissionManifest(_Strict):
    name: Name
    version: Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z][0-9A-Za-z.+_-]*$")]
    authors: list[str] = Field(min_length=1)
    paper: str | None = None
    url: str | None = None
    description: str = ""
    kind: Literal["predictions", "model"]
    model: ModelCode | None = None
    predictions: PredictionFiles | None = None
    resources: Resources = Resources()
    declarations: Declarations = Declarations()
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _kind_matches(self) -> SubmissionManifest:
        if self.kind == "model" and self.model is None:
            raise ValueError("kind 'model' needs a 'model' section with an 'entrypoint'")
        if self.kind == "model" and self.predictions is not None:
            raise ValueError("kind 'model' must not have a 'predictions' section")
        if self.kind == "predictions" and self.model is not None:
            raise ValueError("kind 'predictions' must not have a 'model' section")
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

    def files(self) -> list[Path]:
        out = []
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root)
            if IGNORED_PARTS & set(rel.parts) or path.suffix == ".pyc":
                continue
            if path.is_symlink():
                raise SubmissionError(f"{self.root}: {rel} is a symbolic link; packages hold files")
            if path.is_file():
                out.append(path)
        return out

    def hash(self) -> str:
        """sha256 over the sorted (relative path, file sha256) pairs."""
        digest = hashlib.sha256()
        for path in self.files():
            rel = path.relative_to(self.root).as_posix()
            digest.update(f"{rel}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
        return "sha256:" + digest.hexdigest()

    def prediction_path(self, benchmark: str, setting: str) -> Path:
        rel = self.manifest.prediction_files.files.format(benchmark=benchmark, setting=setting)
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise SubmissionError(f"{self.root / MANIFEST}: predictions.files leaves the package")
        return path


def _clean_loc(loc: tuple[object, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def load_package(path: str | Path) -> Package:
    """Read and validate ``PATH/submission.yaml``; every problem is named with its key."""
    root = Path(path)
    manifest_path = root / MANIFEST
    if not root.is_dir():
        raise SubmissionError(f"{root}: a submission package is a folder with {MANIFEST}")
    try:
        data = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SubmissionError(f"{root}: no {MANIFEST}; run `zsl submission init`") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise SubmissionError(f"{manifest_path}{line}: not valid YAML") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SubmissionError(f"{manifest_path}: cannot read ({err})") from None
    if not isinstance(data, dict):
        raise SubmissionError(f"{manifest_path}: must be a mapping of keys")
    try:
        manifest = SubmissionManifest.model_validate(data)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            msg = str(e["msg"]).removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = "unknown key"
            lines.append(f"{_clean_loc(e['loc'])}: {msg}")
        raise SubmissionError(f"{manifest_path}: " + "; ".join(lines)) from None
    package = Package(root.resolve(), manifest)
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
    package.files()  # refuses links
    return package

"""Task bundles: what model code may see, written as plain ``.npy`` files, never test labels.

See docs/worker.md.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from harness.class_embedding import EmbeddingChoice, every_embedding
from harness.core.atomic import directory_atomic
from harness.core.errors import HarnessError, RunnerError

if TYPE_CHECKING:
    from harness.data.prepare import PreparedBenchmark
    from harness.hierarchy import Hierarchy

__all__ = [
    "FITS",
    "SAVE_LOAD_LINES",
    "Bundle",
    "Model",
    "RowMap",
    "TrainTask",
    "export_bundle",
    "write_bundle",
    "write_model_bundles",
]

BUNDLE_FORMAT = "zsl-bundle/4"
#: The model fits of a bundle: ``main`` (training + validation classes; predicts the test
#: settings) and ``validation`` (training classes only; predicts the ``<setting>_val`` settings).
FITS = ("main", "validation")


@dataclass(frozen=True)
class TrainTask:
    """What ``Model.fit`` receives.

    Tune hyperparameters by training on ``train_*`` and scoring on ``val_*`` (disjoint classes,
    so validation mimics zero-shot transfer), then refit on both. Class indices refer to rows of
    ``class_embeddings[...]`` and ``class_ids``. No test image is in it: test features reach the
    model only through :meth:`Model.predict`.
    """

    train_features: np.ndarray
    train_labels: np.ndarray
    val_features: np.ndarray
    val_labels: np.ndarray
    train_classes: np.ndarray
    val_classes: np.ndarray
    class_ids: np.ndarray
    class_names: np.ndarray
    class_embeddings: dict[str, np.ndarray]
    default_embedding: str
    hierarchy: Hierarchy | None
    seed: int

    @property
    def embedding(self) -> np.ndarray:
        """The default class embedding table ``[n_classes, dim]``.

        Raises ``LookupError`` for a package declaring ``class_embedding: none``: it is given
        no class embedding (:mod:`harness.class_embedding`).
        """
        if not self.class_embeddings:
            raise LookupError(
                "this task holds no class embedding: the package declares"
                " `class_embedding: none` in submission.yaml; declare `default` (or a kind) to"
                " be given the benchmark's"
            )
        return self.class_embeddings[self.default_embedding]

    @property
    def seen_classes(self) -> np.ndarray:
        return np.union1d(self.train_classes, self.val_classes)


@runtime_checkable
class Model(Protocol):
    """The model protocol of docs/design.md: fit on a TrainTask, score test features per candidate.

    ``predict(features [n, d], candidates [C]) -> scores [n, C]`` (higher is better; floats).
    The worker calls it on row chunks of one shuffled set of test images, the same set for every
    setting of a fit: which images are seen-class or unseen-class ones is never said, so a
    setting's candidates are the only thing that differs between its calls.

    ``fit`` runs in a sandbox of its own with no test image, then ``save(directory)`` writes the
    fitted state into an empty folder: arrays (``.npy``, ``.npz``, ``.safetensors``) and JSON only,
    nothing executable, bounded in size (:mod:`harness.runners.state`). Each prediction pass runs
    in a fresh sandbox that rebuilds the model with ``Class.load(directory)`` from a read-only copy
    of that state, so nothing of one pass reaches the next but the state itself.

    See docs/worker.md, `Model`.
    """

    def fit(self, task: TrainTask) -> None: ...

    def save(self, directory: Path) -> None: ...

    @classmethod
    def load(cls, directory: Path) -> Model: ...

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray: ...


#: What a model class without ``save``/``load`` is shown: the lines that make its fitted
#: attributes (names ending in ``_``) a state of arrays and numbers, nothing executable.
SAVE_LOAD_LINES = """\
    def save(self, directory):
        fitted = {k: v for k, v in vars(self).items() if k.endswith("_")}
        np.savez(directory / "state.npz", **fitted)

    @classmethod
    def load(cls, directory):
        model = cls()
        model.__dict__.update(np.load(directory / "state.npz"))
        return model
"""


def _save(root: Path, name: str, array: np.ndarray) -> None:
    path = root / f"{name}.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)


def _write_fit(
    bench: PreparedBenchmark,
    root: Path,
    *,
    images: dict[str, np.ndarray],
    classes: dict[str, np.ndarray],
    settings: Sequence[str],
    row_files: bool,
    test_features: Path | None = None,
) -> tuple[int, dict[str, np.ndarray]]:
    """One fit's part of a bundle: train/val images and labels, class sets, shuffled test images.

    Returns (number of test rows, per setting the row of ``test/features.npy`` of each of its
    prediction-file rows); ``row_files`` also writes those maps into the bundle.
    ``test_features`` (a ``.npy`` path outside ``root``) takes the test images instead of
    ``root/test/features.npy``.
    """
    features, labels = bench.array("features"), bench.array("labels")
    for part, idx in images.items():
        _save(root, f"{part}/features", features[idx])
        _save(root, f"{part}/labels", labels[idx])
    for part, idx in classes.items():
        _save(root, f"classes/{part}", idx)
    predict_images = np.unique(np.concatenate([bench.rows(s) for s in settings]))
    # A fresh secret seed per bundle: the order says nothing about class, setting or image id,
    # and nothing in the bundle lets model code undo it.
    order = np.random.default_rng(secrets.randbits(128)).permutation(len(predict_images))
    test = np.ascontiguousarray(features[predict_images[order]])
    if test_features is None:
        _save(root, "test/features", test)
    else:
        test_features.parent.mkdir(parents=True, exist_ok=True)
        np.save(test_features, test, allow_pickle=False)
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    rows: dict[str, np.ndarray] = {}
    for setting in settings:
        rows[setting] = position[np.searchsorted(predict_images, bench.rows(setting))]
        _save(root, f"test/{setting}/candidates", bench.columns(setting))
        if row_files:
            _save(root, f"test/{setting}/rows", rows[setting])
    return len(order), rows


@dataclass(frozen=True)
class RowMap:
    """Where each setting's prediction-file rows sit among its fit's shuffled test rows.

    The harness keeps it outside the bundle (model code never sees it) and uses it to turn the
    worker's all-row outputs into prediction files in the frozen test order of each setting.
    """

    fits: dict[str, str]  # setting -> "main" | "validation"
    n_rows: dict[str, int]  # fit -> rows of its shuffled test images
    rows: dict[str, np.ndarray]  # setting -> shuffled test row of each prediction-file row
    # fit -> the .npy file of its shuffled test images (model bundles: outside every bundle)
    test_features: dict[str, Path] = field(default_factory=dict)


def write_bundle(
    bench: PreparedBenchmark,
    out: Path,
    *,
    validation: bool | None = None,
    embeddings: EmbeddingChoice | None = None,
) -> Path:
    """Write the *generator* bundle of ``bench`` into the empty directory ``out``.

    It carries ``test/<setting>/rows.npy`` so that :meth:`Bundle.test` can serve prediction
    generators (trusted code) in the contract's row order. Model code gets a model bundle
    (:func:`write_model_bundle`), which does not say which images belong to which setting.
    ``validation`` (default: whether a spec metric needs validation predictions) adds the
    validation fit and its ``<setting>_val`` prediction settings; ``embeddings``: the class
    embeddings it holds (default: every one; :mod:`harness.class_embedding`).
    """
    _write(bench, out, validation=validation, row_files=True, embeddings=embeddings)
    return out


def export_bundle(bench: PreparedBenchmark, out: Path) -> Bundle:
    """The generator bundle of ``bench`` (:func:`write_bundle`) at ``out``, for prediction files
    made outside the harness (``zsl data bundle``; docs/guides/prediction-files.md).

    ``out`` must be missing or an empty folder. The bundle is written into a temporary sibling
    folder and renamed to ``out`` in one step: ``out`` holds the whole bundle or nothing.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HarnessError(
            f"{out}: not an empty folder; a task bundle is written into a new or empty folder"
            " (choose another --out)"
        )
    try:
        # Shared, not private: a bundle is meant to be copied and handed to other machines.
        with directory_atomic(out, mode=0o755) as tmp:
            write_bundle(bench, tmp)
    except OSError as err:
        raise HarnessError(f"cannot write {out}: {err}") from None
    return Bundle(out)


def write_model_bundles(
    bench: PreparedBenchmark,
    root: Path,
    secret: Path,
    *,
    validation: bool | None = None,
    embeddings: EmbeddingChoice | None = None,
) -> RowMap:
    """Write one bundle per fit for model code into ``root/<fit>`` (``root`` empty or new).

    Each holds its fit's training and validation data, classes, embeddings and hierarchy, and no
    test image: every fit's test images, shuffled, go to ``secret/<fit>.npy`` (a folder outside
    ``root`` that no runner shows to model code), named in the returned :class:`RowMap`, which
    also says which of those rows each setting scores. The validation fit's bundle holds the
    training classes only, so nothing of the validation classes reaches its fit.
    ``embeddings``: the class embeddings the bundles hold (default: every one).
    """
    if secret.resolve().is_relative_to(root.resolve()):
        raise RunnerError(f"{secret}: the test features must live outside the bundles")
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise RunnerError(f"{root}: model bundles are written into an empty directory")
    secret.mkdir(parents=True, exist_ok=True)
    plan = _fit_plans(bench, validation)
    held = embeddings or every_embedding(bench.spec)
    rowmap = RowMap(fits={}, n_rows={}, rows={})
    for fit, (settings, images, classes) in plan.items():
        out = root / fit
        path = secret / f"{fit}.npy"
        n, rows = _write_fit(
            bench,
            out,
            images=images,
            classes=classes,
            settings=settings,
            row_files=False,
            test_features=path,
        )
        _write_common(bench, out, held)
        _write_task(
            bench, out, settings, [], held, n_rows={fit: n}, row_files=False, fit=fit, model=True
        )
        rowmap.fits.update({s: fit for s in settings})
        rowmap.n_rows[fit] = n
        rowmap.rows.update(rows)
        rowmap.test_features[fit] = path
    return rowmap


def _fit_plans(
    bench: PreparedBenchmark, validation: bool | None
) -> dict[str, tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Per fit: its prediction settings, its image sets (train, val) and class sets."""
    a = bench.array
    settings: list[str] = list(bench.spec.settings)
    scale = bench.spec.scale_settings()
    plans: dict[str, tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]] = {
        "main": (
            bench.spec.fit_settings("main"),
            {"train": a("splits/train_images"), "val": a("splits/val_images")},
            {"train": a("splits/train_classes"), "val": a("splits/val_classes")},
        )
    }
    if validation is None:
        validation = bool(bench.spec.validation_settings())
    if validation:
        labels, fit = a("labels"), a("splits/cal_fit_images")
        cal_train, cal_val = a("splits/cal_train_classes"), a("splits/cal_val_classes")
        # The frozen split arrays of this fit keep their ``cal_`` prefix: array names are part
        # of the benchmark hash, so renaming them would orphan every stored run.
        plans["validation"] = (
            [*(f"{s}_val" for s in settings), *scale[1:]],
            {
                "train": fit[np.isin(labels[fit], cal_train)],
                "val": fit[np.isin(labels[fit], cal_val)],
            },
            {"train": cal_train, "val": cal_val},
        )
    return plans


def _write(
    bench: PreparedBenchmark,
    out: Path,
    *,
    validation: bool | None,
    row_files: bool,
    embeddings: EmbeddingChoice | None = None,
) -> RowMap:
    """The generator bundle: the main fit at the top, the validation fit under ``validation/``,
    test images (and, with ``row_files``, each setting's rows) inside."""
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise RunnerError(f"{out}: a task bundle is written into an empty directory")
    plans = _fit_plans(bench, validation)
    rowmap = RowMap(fits={}, n_rows={}, rows={})
    for fit, (settings, images, classes) in plans.items():
        n, rows = _write_fit(
            bench,
            out if fit == "main" else out / "validation",
            images=images,
            classes=classes,
            settings=settings,
            row_files=row_files,
        )
        rowmap.fits.update({s: fit for s in settings})
        rowmap.n_rows[fit] = n
        rowmap.rows.update(rows)
    held = embeddings or every_embedding(bench.spec)
    _write_common(bench, out, held)
    main = plans["main"][0]
    val = plans["validation"][0] if "validation" in plans else []
    _write_task(bench, out, main, val, held, n_rows=rowmap.n_rows, row_files=row_files)
    return rowmap


def _write_common(bench: PreparedBenchmark, out: Path, embeddings: EmbeddingChoice) -> None:
    """What every fit shares: class ids and names, the class ``embeddings`` (no other: a
    package declaring a kind sees nothing of the others), the hierarchy."""
    a = bench.array
    _save(out, "classes/ids", a("class_ids"))
    _save(out, "classes/names", a("class_names"))
    for name in embeddings.names:
        _save(out, f"embeddings/{name}", a(f"embeddings/{name}"))
    if bench.hierarchy is not None:
        for key, value in bench.hierarchy.to_arrays().items():
            _save(out, f"hierarchy/{key}", value)


def _write_task(
    bench: PreparedBenchmark,
    out: Path,
    settings: list[str],
    val_settings: list[str],
    embeddings: EmbeddingChoice,
    *,
    n_rows: dict[str, int],
    row_files: bool,
    fit: str | None = None,
    model: bool = False,
) -> None:
    """``task.json``; ``fit``: the one fit of a model bundle, whose data lie at its top."""
    task = {
        "format": BUNDLE_FORMAT,
        "benchmark": bench.spec.benchmark,
        "version": bench.spec.version,
        "benchmark_hash": bench.hash,
        "settings": settings,
        "validation_settings": val_settings,
        "predictions": bench.spec.predictions.model_dump(mode="json"),
        "class_order_hashes": {s: bench.class_order_hash(s) for s in settings + val_settings},
        "embeddings": list(embeddings.names),
        "default_embedding": embeddings.default,
        "has_hierarchy": bench.hierarchy is not None,
        "test_rows": n_rows,
        "row_files": row_files,
        "test_features": "harness" if model else "bundle",
    }
    if fit is not None:
        task["fit"] = fit
    (out / "task.json").write_text(json.dumps(task, indent=1, sort_keys=True) + "\n")


class Bundle:
    """Read side of a task bundle (used by the worker and by prediction generators)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        try:
            self.info: dict[str, Any] = json.loads((self.root / "task.json").read_text())
        except (OSError, ValueError) as err:
            raise RunnerError(f"{self.root}: not a task bundle ({err})") from None
        if self.info.get("format") != BUNDLE_FORMAT:
            raise RunnerError(f"{self.root}/task.json: not a '{BUNDLE_FORMAT}' bundle")

    def load(self, name: str) -> np.ndarray:
        return np.load(self.root / f"{name}.npy", allow_pickle=False)

    def map_features(self, name: str) -> np.ndarray:
        """Feature array ``name`` memory-mapped copy-on-write: its pages are read from the
        bundle file on first touch and shared, through the page cache, by every process that
        maps it (the worker's fit processes, a run's two fits), instead of each holding a
        private copy; a model may still write into it, and a page it writes becomes its own
        private copy, never written back to the file (the bundle is the same for the next fit
        and for a re-run). A plain ndarray view of the map, so model code sees no
        ``np.memmap`` subclass."""
        mapped = np.load(self.root / f"{name}.npy", allow_pickle=False, mmap_mode="c")
        return np.asarray(mapped)

    @property
    def settings(self) -> list[str]:
        return list(self.info["settings"])

    @property
    def validation_settings(self) -> list[str]:
        return list(self.info.get("validation_settings", []))

    @property
    def single_fit(self) -> str | None:
        """The one fit of a model bundle (:func:`write_model_bundles`), whose data lie at the
        top; None for a generator bundle, which holds every fit."""
        fit = self.info.get("fit")
        return fit if isinstance(fit, str) else None

    def fit_of(self, setting: str) -> str:
        """The fit (``main`` or ``validation``) whose model predicts ``setting``."""
        if setting in self.validation_settings:
            return "validation"
        if setting in self.settings:
            return self.single_fit or "main"
        raise RunnerError(f"{self.root}/task.json: no setting '{setting}' in this bundle")

    def _fit_root(self, fit: str) -> str:
        if fit not in FITS:
            raise RunnerError(f"{self.root}: no fit '{fit}'; fits are {', '.join(FITS)}")
        if self.single_fit is not None:
            if fit != self.single_fit:
                raise RunnerError(f"{self.root}: this bundle holds the {self.single_fit} fit only")
            return ""
        return "validation/" if fit == "validation" else ""

    def settings_of(self, fit: str) -> list[str]:
        """The prediction settings of one fit, in bundle order."""
        self._fit_root(fit)
        if self.single_fit is not None:
            return self.settings
        return self.validation_settings if fit == "validation" else self.settings

    @property
    def fits(self) -> list[str]:
        """The fits this bundle holds, in the order a model should run them: ``validation``
        (when a metric needs validation predictions), then ``main``."""
        if self.single_fit is not None:
            return [self.single_fit]
        return ["validation", "main"] if self.validation_settings else ["main"]

    def train_task(self, seed: int = 0, fit: str = "main") -> TrainTask:
        """The TrainTask of the ``main`` fit or the ``validation`` fit (training classes only).

        Its feature arrays are memory-mapped copy-on-write (:meth:`map_features`): writable,
        and what a model writes into them stays in its own process."""
        # Imported here: a prediction pass imports this module and needs no graph (scipy).
        from harness.hierarchy import Hierarchy

        r = self._fit_root(fit)
        hierarchy = None
        if self.info["has_hierarchy"]:
            hierarchy = Hierarchy.from_arrays(
                {k: self.load(f"hierarchy/{k}") for k in ("node_ids", "names", "edges")}
            )
        return TrainTask(
            train_features=self.map_features(f"{r}train/features"),
            train_labels=self.load(f"{r}train/labels"),
            val_features=self.map_features(f"{r}val/features"),
            val_labels=self.load(f"{r}val/labels"),
            train_classes=self.load(f"{r}classes/train"),
            val_classes=self.load(f"{r}classes/val"),
            class_ids=self.load("classes/ids"),
            class_names=self.load("classes/names"),
            class_embeddings={n: self.load(f"embeddings/{n}") for n in self.info["embeddings"]},
            default_embedding=self.info["default_embedding"],
            hierarchy=hierarchy,
            seed=seed,
        )

    def test_features(self, fit: str = "main") -> np.ndarray:
        """Every test image of ``fit`` (memory-mapped, read-only), in the bundle's random order:
        generator bundles only (a model bundle holds no test image)."""
        if self.info.get("test_features") == "harness":
            raise RunnerError(
                f"{self.root}: a model bundle holds no test image; predict() gets them from the"
                " harness, one chunk at a time"
            )
        path = self.root / f"{self._fit_root(fit)}test" / "features.npy"
        return np.load(path, allow_pickle=False, mmap_mode="r")

    def candidates(self, setting: str) -> np.ndarray:
        """The candidate class indices of ``setting``, in prediction-column order."""
        return self.load(f"{self._fit_root(self.fit_of(setting))}test/{setting}/candidates")

    @property
    def has_row_files(self) -> bool:
        """Whether this is a generator bundle, which says which test rows each setting scores."""
        return bool(self.info.get("row_files"))

    def test(self, setting: str) -> tuple[np.ndarray, np.ndarray]:
        """(features in prediction-row order, candidate class indices in column order).

        For prediction generators, on a generator bundle (:func:`write_bundle`). A model bundle
        does not say which images a setting scores: predict every row of
        :meth:`test_features` instead, as the worker does.
        """
        if not self.has_row_files:
            raise RunnerError(
                f"{self.root}: a model bundle does not say which test images belong to setting"
                f" '{setting}'; predict every row of test_features() (generators get a bundle"
                " from harness.bundles.write_bundle)"
            )
        fit = self.fit_of(setting)
        rows = self.load(f"{self._fit_root(fit)}test/{setting}/rows")
        return np.asarray(self.test_features(fit)[rows]), self.candidates(setting)

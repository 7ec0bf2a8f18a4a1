"""Validation choices at the edge of their grid, and SAE and ESZSL as their original code (issue 27).

Every reference package that tunes on the validation classes searches its grid with the copied
block ``grid-search``: a choice on an end of a grid grows that grid past it, one step of its own
spacing at a time, up to 3 values per end, and a choice still at an end after that is recorded
(``"<name>_at_grid_edge": true`` in ``hyperparameters_``). The tasks below put the best SAE
lambda and the best ESZSL gamma and lambda beyond the default grids, within reach of the growth
and out of it. Scaling the class embeddings by ``c`` maps SAE's ``W_n(lambda)`` to
``W_n(lambda / c^2)`` exactly (and ESZSL's scores at ``lambda`` to those at ``lambda / c^2``), so a
task's whole validation curve moves along the lambda axis.

SAE predicts with W's rows L2-normalised, in the direction chosen on validation, as Kodirov et
al.'s code does; ESZSL's ``raw-01`` preprocessing is the public re-implementations'. Both are
held here to NumPy re-implementations written from the equations, and ESZSL's default to a copy
of the code before this issue, to the bit.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.linalg import solve_sylvester

from harness.bundles import TrainTask
from harness.hierarchy import Hierarchy
from harness.hyperparameters import check_hyperparameters
from tests.reference_benchmarks import package_module

SAE = package_module("sae")
ESZSL = package_module("eszsl")
SAE_GRID = tuple(10.0**p for p in range(-2, 5))
ESZSL_GRID = tuple(10.0**p for p in range(-3, 4))


def _task(
    seed: int,
    *,
    noise: float = 3.0,
    n_train: int = 20,
    n_val: int = 10,
    per_class: int = 30,
    dim: int = 32,
    k: int = 12,
    hierarchy: Hierarchy | None = None,
) -> TrainTask:
    """Classes with a latent ``z``: class embedding ``z A + 0.3 e``, image features
    ``z B + noise * e'`` (30 images per training or validation class, 5 unseen classes)."""
    rng = np.random.default_rng(seed)
    n_classes = n_train + n_val + 5
    z = rng.standard_normal((n_classes, 8))
    emb = z @ rng.standard_normal((8, k)) + 0.3 * rng.standard_normal((n_classes, k))
    centres = z @ rng.standard_normal((8, dim))
    labels = np.repeat(np.arange(n_train + n_val), per_class)
    features = centres[labels] + noise * rng.standard_normal((len(labels), dim))
    train = labels < n_train
    ids = np.array([f"c{i:02d}" for i in range(n_classes)])
    return TrainTask(
        train_features=features[train].astype(np.float32),
        train_labels=labels[train],
        val_features=features[~train].astype(np.float32),
        val_labels=labels[~train],
        train_classes=np.arange(n_train),
        val_classes=np.arange(n_train, n_train + n_val),
        class_ids=ids,
        class_names=ids,
        class_embeddings={"attributes": emb},
        default_embedding="attributes",
        hierarchy=hierarchy,
        seed=0,
    )


def _with_embedding(task: TrainTask, emb: np.ndarray) -> TrainTask:
    return replace(task, class_embeddings={"attributes": emb})


def _whitening_embedding(task: TrainTask, scale: float) -> TrainTask:
    """The class embedding's columns at scales 1e-1 .. 1e-5 (times ``scale``) beside 6 columns of
    noise at scale 1: ``(S^T S + lambda I)^-1`` helps most when lambda is below the informative
    columns' eigenvalues, so the best lambda lies many decades below 1 (``scale`` moves it)."""
    rng = np.random.default_rng(102)
    emb = task.embedding
    informative = emb * 10.0 ** -np.linspace(1, 5, emb.shape[1])
    noise = rng.standard_normal((len(emb), 6))
    return _with_embedding(task, np.hstack([informative, noise]) * scale)


def _whitening_features(task: TrainTask, seed: int) -> TrainTask:
    """The same for the features and gamma: informative columns at scales 1e-1 .. 1e-5 beside
    8 columns of noise at scale 1 (per-image L2 normalisation keeps their ratio)."""
    rng = np.random.default_rng(200 + seed)
    scales = 10.0 ** -np.linspace(1, 5, task.train_features.shape[1])

    def widen(x: np.ndarray) -> np.ndarray:
        return np.hstack([x * scales, rng.standard_normal((len(x), 8))]).astype(np.float32)

    return replace(
        task, train_features=widen(task.train_features), val_features=widen(task.val_features)
    )


# --- the copied block "grid-search" ------------------------------------------------------------
def Axis(*args: Any, **kwargs: Any) -> Any:
    """The block's ``Axis`` (every copy is the same: tests/test_reference_packages.py)."""
    return SAE.Axis(*args, **kwargs)


def grid_search(*args: Any) -> Any:
    return SAE.grid_search(*args)


def _peaked(best: dict[str, float]) -> Any:
    """``evaluate`` whose merit peaks at ``best`` (log-distance, one axis per key), recording
    every point it is asked for."""
    asked: list[tuple[Any, ...]] = []

    def evaluate(points: list[tuple[Any, ...]]) -> list[Any]:
        asked.extend(points)
        return [
            (-sum(abs(np.log10(v) - np.log10(b)) for v, b in zip(p, best.values(), strict=True)),)
            for p in points
        ]

    evaluate.asked = asked  # type: ignore[attr-defined]
    return evaluate


def test_a_choice_inside_the_grid_costs_one_evaluation_of_it() -> None:
    evaluate = _peaked({"lambda": 1.0})
    search = grid_search((Axis("lambda", SAE_GRID),), evaluate)
    assert search.point == (1.0,) and search.at_edge == () and search.edge_flags() == {}
    assert search.grids == {"lambda": SAE_GRID}
    assert evaluate.asked == [(v,) for v in SAE_GRID]


def test_a_choice_at_an_end_grows_the_grid_until_the_best_is_inside() -> None:
    evaluate = _peaked({"lambda": 2e5})
    search = grid_search((Axis("lambda", SAE_GRID),), evaluate)
    assert search.point == (1e5,) and search.at_edge == ()
    assert search.grids["lambda"] == (*SAE_GRID, 1e5, 1e6)
    assert len(evaluate.asked) == len(set(evaluate.asked)) == len(SAE_GRID) + 2


def test_three_values_past_an_end_at_most_then_the_choice_is_at_the_edge() -> None:
    for best, chosen, grid in ((1e9, 1e7, (*SAE_GRID, 1e5, 1e6, 1e7)), (1e-9, 1e-5, None)):
        search = grid_search((Axis("lambda", SAE_GRID),), _peaked({"lambda": best}))
        assert search.point == (chosen,)
        assert search.at_edge == ("lambda",)
        assert search.edge_flags() == {"lambda_at_grid_edge": True}
        if grid is not None:
            assert search.grids["lambda"] == grid
    assert search.grids["lambda"] == (1e-5, 1e-4, 1e-3, *SAE_GRID)  # 0.01 / 10 = 0.001 exactly


def test_integer_axes_round_and_stop_at_the_ends_of_their_range() -> None:
    """Epochs (10, 30), step 3: below 3 then 1, where the range ends (not an edge of the
    grid); above one value at most here (90). T (1, 3, 5, 10) up to the number of classes."""
    epochs = Axis("epochs", (10, 30), lowest=1, integer=True, extensions=(3, 1))
    low = grid_search((epochs,), _peaked({"epochs": 0.1}))
    assert low.point == (1,) and low.grids["epochs"] == (1, 3, 10, 30) and low.at_edge == ()
    assert all(type(v) is int for v in low.grids["epochs"])
    high = grid_search((epochs,), _peaked({"epochs": 1000}))
    assert high.point == (90,) and high.at_edge == ("epochs",)
    t = Axis("T", (1, 3, 5, 10), lowest=1, highest=12, integer=True)
    top = grid_search((t,), _peaked({"T": 100}))
    assert top.point == (12,) and top.grids["T"] == (1, 3, 5, 10, 12) and top.at_edge == ()


def test_fixed_values_and_variants_never_grow() -> None:
    axes = (Axis("direction", ("F->S", "S->F")), Axis("lambda", (0.5,)))
    search = grid_search(axes, lambda points: [(p[0] == "S->F",) for p in points])
    assert search.point == ("S->F", 0.5) and search.at_edge == ()
    assert search.grids == {"direction": ("F->S", "S->F"), "lambda": (0.5,)}


def test_two_axes_grow_together_and_no_point_is_evaluated_twice() -> None:
    evaluate = _peaked({"gamma": 1e-5, "lambda": 1e4})
    axes = (Axis("gamma", ESZSL_GRID), Axis("lambda", ESZSL_GRID))
    search = grid_search(axes, evaluate)
    assert search.point == (1e-5, 1e4) and search.at_edge == ()
    assert search.grids == {
        "gamma": (1e-6, 1e-5, 1e-4, *ESZSL_GRID),
        "lambda": (*ESZSL_GRID, 1e4, 1e5),
    }
    assert len(evaluate.asked) == len(set(evaluate.asked)) == 10 * 9


# --- SAE's lambda beyond its grid --------------------------------------------------------------
def test_sae_base_task_has_its_best_lambda_inside_the_default_grid() -> None:
    model = SAE.SAE()
    model.fit(_task(0))
    assert model.hyperparameters_ == {"lambda": 10.0, "direction": "S->F"}
    assert model.grids_["lambda"] == SAE_GRID


def test_sae_grows_its_grid_to_a_best_lambda_beyond_the_top() -> None:
    """Embeddings x 100: the best lambda moves from 10 to 1e5, past the grid's top (1e4)."""
    task = _task(0)
    base = SAE.SAE()
    base.fit(task)
    model = SAE.SAE()
    model.fit(_with_embedding(task, task.embedding * 100.0))
    assert model.hyperparameters_ == {"lambda": 1e5, "direction": "S->F"}
    assert model.grids_["lambda"] == (*SAE_GRID, 1e5, 1e6)
    assert model.val_accuracy_ == pytest.approx(base.val_accuracy_, abs=1e-12)


def test_sae_best_lambda_out_of_reach_is_recorded_at_the_grid_edge() -> None:
    """Embeddings x 1e4: the best lambda moves to 1e9, past the grid's top and 3 values more
    (1e7): the choice is the last value, and the record says it is at the edge."""
    task = _task(0)
    model = SAE.SAE()
    model.fit(_with_embedding(task, task.embedding * 1e4))
    assert model.hyperparameters_ == {
        "lambda": 1e7,
        "direction": "S->F",
        "lambda_at_grid_edge": True,
    }
    further = SAE.SAE(grid=(1e9,), directions=("S->F",))
    further.fit(_with_embedding(task, task.embedding * 1e4))
    assert further.val_accuracy_ > model.val_accuracy_  # the optimum is beyond the edge


# --- ESZSL's gamma and lambda beyond their grids -----------------------------------------------
def test_eszsl_grows_its_lambda_grid_to_a_best_value_below_the_bottom() -> None:
    model = ESZSL.ESZSL()
    model.fit(_whitening_embedding(_task(2, noise=1.0), 10.0))
    assert model.hyperparameters_ == {"gamma": 100.0, "lambda": 1e-5, "preprocessing": "centre-l2"}
    assert model.grids_["lambda"] == (1e-6, 1e-5, 1e-4, *ESZSL_GRID)


def test_eszsl_lambda_out_of_reach_is_recorded_at_the_grid_edge() -> None:
    task = _whitening_embedding(_task(2, noise=1.0), 1.0)
    model = ESZSL.ESZSL()
    model.fit(task)
    assert model.hyperparameters_ == {
        "gamma": 10.0,
        "lambda": 1e-6,
        "preprocessing": "centre-l2",
        "lambda_at_grid_edge": True,
    }
    assert _eszsl_val_accuracy(task, 10.0, 1e-10) > model.val_accuracy_  # the optimum is beyond


def test_eszsl_grows_its_gamma_grid_to_a_best_value_below_the_bottom() -> None:
    model = ESZSL.ESZSL()
    model.fit(_whitening_features(_task(0, noise=1.0), 0))
    assert model.hyperparameters_ == {"gamma": 1e-4, "lambda": 10.0, "preprocessing": "centre-l2"}
    assert model.grids_["gamma"] == (1e-5, 1e-4, *ESZSL_GRID)


def test_eszsl_gamma_out_of_reach_is_recorded_at_the_grid_edge() -> None:
    task = _whitening_features(_task(1, noise=1.0), 1)
    model = ESZSL.ESZSL()
    model.fit(task)
    assert model.hyperparameters_ == {
        "gamma": 1e-6,
        "lambda": 10.0,
        "preprocessing": "centre-l2",
        "gamma_at_grid_edge": True,
    }
    assert _eszsl_val_accuracy(task, 1e-8, 10.0) > model.val_accuracy_  # the optimum is beyond


def test_eszsl_raw_features_put_the_best_gamma_above_the_grid() -> None:
    """Unnormalised features (``raw-01``): X^T X is ~1e4 times larger, and so is the best
    gamma; the grid grows from 1e3 to 1e5 and the choice, 1e4, is inside it."""
    model = ESZSL.ESZSL(preprocessing="raw-01")
    model.fit(_task(2))
    assert model.hyperparameters_ == {"gamma": 1e4, "lambda": 0.01, "preprocessing": "raw-01"}
    assert model.grids_["gamma"] == (*ESZSL_GRID, 1e4, 1e5)


def _eszsl_val_accuracy(task: TrainTask, gamma: float, lam: float) -> float:
    """Validation per-class top-1 of ESZSL (centre-l2) at one (gamma, lambda), the textbook way."""
    mean = task.train_features.mean(axis=0)
    x = _centre_l2(task.train_features, mean)
    s = task.embedding[task.train_classes]
    y = -np.ones((len(x), len(s)))
    y[np.arange(len(x)), np.searchsorted(task.train_classes, task.train_labels)] = 1.0
    v = _eszsl_v(x, y, s, gamma, lam)
    scores = _centre_l2(task.val_features, mean) @ v @ task.embedding[task.val_classes].T
    return float(ESZSL.per_class_top1(scores, task.val_labels, classes=task.val_classes))


# --- every package: what it records, and its state -------------------------------------------
ENTRYPOINTS = {
    "ale": "ALE",
    "conse": "ConSE",
    "dap": "DAP",
    "devise": "DeViSE",
    "eszsl": "ESZSL",
    "flat-seen-classifier": "FlatSeenClassifier",
    "sae": "SAE",
    "sje": "SJE",
    "trivial-hierarchy": "TrivialHierarchy",
}
TORCH = {"ale", "devise", "sje"}


def _small_task_with_hierarchy() -> TrainTask:
    """8 training, 4 validation and 5 unseen classes, 12 images each, under a 3-group tree."""
    ids = [f"c{i:02d}" for i in range(17)]
    groups = ["g0", "g1", "g2"]
    edges = [("root", g) for g in groups] + [(groups[i % 3], c) for i, c in enumerate(ids)]
    hierarchy = Hierarchy(["root", *groups, *ids], edges, source="test")
    return _task(5, noise=1.0, n_train=8, n_val=4, per_class=12, dim=16, k=6, hierarchy=hierarchy)


@pytest.mark.parametrize("name", sorted(ENTRYPOINTS))
def test_hyperparameters_are_a_flat_dict_of_json_scalars_and_the_state_predicts_the_same(
    name: str, tmp_path: Path
) -> None:
    if name in TORCH:
        pytest.importorskip("torch", reason="the bilinear packages need the `methods` extra")
    module = package_module(name)
    cls = getattr(module, ENTRYPOINTS[name])
    model = cls(epochs=(2, 5)) if name in TORCH else cls()
    task = _small_task_with_hierarchy()
    model.fit(task)
    chosen = model.hyperparameters_
    assert isinstance(chosen, dict) and chosen
    assert all(type(value) in (str, int, float, bool) for value in chosen.values()), chosen
    assert json.loads(json.dumps(chosen)) == chosen
    assert check_hyperparameters(chosen, name) == dict(sorted(chosen.items()))
    assert all(key.endswith("_at_grid_edge") or key in model.grids_ or key == "preprocessing"
               for key in chosen)  # fmt: skip
    features, candidates = task.val_features, np.arange(len(task.class_ids))
    model.save(tmp_path)
    loaded = cls.load(tmp_path)
    np.testing.assert_array_equal(
        loaded.predict(features, candidates), model.predict(features, candidates)
    )


def test_a_bilinear_run_continued_gives_the_weights_of_a_run_from_scratch() -> None:
    """The epoch grid grows by continuing each learning rate's run: W after e epochs is the
    same to the bit as a run stopped at e; fewer epochs than a run has passed start anew."""
    pytest.importorskip("torch", reason="the bilinear packages need the `methods` extra")
    module = package_module("ale")
    task = _small_task_with_hierarchy()
    model = module.ALE()
    x = task.train_features.astype(np.float32)
    y = np.searchsorted(task.train_classes, task.train_labels)
    emb = module._normalise(task.embedding)[task.train_classes]

    def runs() -> Any:
        return module._Runs(lambda lr: model._train(x, y, emb, lr, task.seed))

    continued = runs()
    got = {**continued.weights(0.01, [2, 5]), **continued.weights(0.01, [9])}
    got_early = continued.weights(0.01, [1, 3])
    for epochs, w in {**got, **got_early}.items():
        np.testing.assert_array_equal(w, runs().weights(0.01, [epochs])[epochs])
    assert not np.array_equal(got[2], got[5])


# --- SAE: the original code, both directions ---------------------------------------------------
def _centre_l2(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    x = features.astype(np.float64) - mean
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _rows(a: np.ndarray) -> np.ndarray:
    """NormalizeFea: every row to unit L2 norm."""
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _original_sae_scores(
    task: TrainTask, lam: float, direction: str, features: np.ndarray, candidates: np.ndarray
) -> np.ndarray:
    """Kodirov et al.'s SAE on the package's preprocessing, written from the paper: X [d, N] and
    S [k, N] hold the fitting images and their class embeddings column by column,
    W = sylvester(S S^T, lambda X X^T, (1 + lambda) S X^T) [k, d]; the demo's scores are
    cosines with NormalizeFea(W): F -> S ``cos(x W_n^T, s_c)``, S -> F ``cos(x, s_c W_n)``."""
    fitting = np.concatenate([task.train_features, task.val_features])
    labels = np.concatenate([task.train_labels, task.val_labels])
    mean = fitting.mean(axis=0, dtype=np.float32)
    x = _centre_l2(fitting, mean).T
    s = task.embedding[labels].T.astype(np.float64)
    w = solve_sylvester(s @ s.T, lam * (x @ x.T), (1.0 + lam) * (s @ x.T))
    w_n = _rows(w)
    test = _centre_l2(features, mean)
    prototypes = task.embedding[candidates].astype(np.float64)
    if direction == "F->S":
        return _rows(test @ w_n.T) @ _rows(prototypes).T
    return _rows(test) @ _rows(prototypes @ w_n).T


@pytest.mark.parametrize("direction", ["F->S", "S->F"])
@pytest.mark.parametrize("lam", [0.1, 10.0, 1e3])
def test_sae_scores_are_the_original_codes_in_both_directions(direction: str, lam: float) -> None:
    task = _task(3, n_train=8, n_val=4, per_class=10, dim=16, k=6)
    model = SAE.SAE(grid=(lam,), directions=(direction,))
    model.fit(task)
    assert model.hyperparameters_ == {"lambda": lam, "direction": direction}
    features = np.random.default_rng(9).standard_normal((25, 16)).astype(np.float32)
    candidates = np.array([14, 2, 9, 0, 16, 12])
    expected = _original_sae_scores(task, lam, direction, features, candidates)
    np.testing.assert_allclose(model.predict(features, candidates), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(("seed", "lam", "better"), [(0, 10.0, "S->F"), (4, 1000.0, "F->S")])
def test_sae_chooses_the_direction_with_the_better_validation_top1(
    seed: int, lam: float, better: str
) -> None:
    task = _task(seed)
    model = SAE.SAE(grid=(lam,))
    model.fit(task)
    accuracy = {}
    for direction in ("F->S", "S->F"):
        mean = task.train_features.mean(axis=0)
        x = _centre_l2(task.train_features, mean).T
        s = task.embedding[task.train_labels].T
        w_n = _rows(solve_sylvester(s @ s.T, lam * (x @ x.T), (1.0 + lam) * (s @ x.T)))
        val = _centre_l2(task.val_features, mean)
        proto = task.embedding[task.val_classes]
        if direction == "F->S":
            scores = _rows(val @ w_n.T) @ _rows(proto).T
        else:
            scores = _rows(val) @ _rows(proto @ w_n).T
        accuracy[direction] = SAE.per_class_top1(scores, task.val_labels, classes=task.val_classes)
    assert accuracy[better] > accuracy[({"F->S", "S->F"} - {better}).pop()]
    assert model.hyperparameters_["direction"] == better
    assert model.val_accuracy_ == pytest.approx(accuracy[better], abs=1e-12)


def test_sae_refuses_an_unknown_direction() -> None:
    with pytest.raises(ValueError, match=r"directions: expected some of \['F->S', 'S->F'\]"):
        SAE.SAE(directions=("F->X",))


# --- ESZSL: the preprocessings -----------------------------------------------------------------
def _eszsl_v(x: np.ndarray, y: np.ndarray, s: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """V = (X^T X + gamma I)^-1 X^T Y S (S^T S + lambda I)^-1 with Y as given (n x C)."""
    left = np.linalg.inv(x.T @ x + gamma * np.eye(x.shape[1])) @ x.T @ y @ s
    return left @ np.linalg.inv(s.T @ s + lam * np.eye(s.shape[1]))


@pytest.mark.parametrize("value", [0.01, 1.0, 100.0])
def test_eszsl_raw_01_is_the_public_reimplementations_formula(value: float) -> None:
    """Raw features, Y in {0, 1}: V from the closed form with explicit inverses, scores x V s."""
    task = _task(4, noise=1.0, n_train=8, n_val=4, per_class=10, dim=16, k=6)
    model = ESZSL.ESZSL(grid=(value,), preprocessing="raw-01")
    model.fit(task)
    assert model.hyperparameters_ == {"gamma": value, "lambda": value, "preprocessing": "raw-01"}
    seen = np.union1d(task.train_classes, task.val_classes)
    x = np.concatenate([task.train_features, task.val_features]).astype(np.float64)
    labels = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
    y = np.zeros((len(x), len(seen)))
    y[np.arange(len(x)), labels] = 1.0
    v = _eszsl_v(x, y, task.embedding[seen], value, value)
    features = np.random.default_rng(9).normal(size=(25, 16)).astype(np.float32)
    candidates = np.array([14, 2, 9, 0, 16, 12])
    expected = features.astype(np.float64) @ v @ task.embedding[candidates].T
    np.testing.assert_allclose(model.predict(features, candidates), expected, rtol=0, atol=1e-6)


def test_eszsl_refuses_an_unknown_preprocessing() -> None:
    with pytest.raises(ValueError, match=r"preprocessing: expected one of \['centre-l2', 'raw-01'"):
        ESZSL.ESZSL(preprocessing="raw")


class CurrentESZSL:
    """ESZSL as it was before issue 27 (d6c7632), copied: the default must stay bit-identical."""

    def __init__(self, grid: tuple[float, ...]) -> None:
        self.grid = grid

    @staticmethod
    def centre_and_normalise(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
        x -= mean
        x /= np.sqrt(np.einsum("ij,ij->i", x, x))[:, None] + 1e-12
        return x

    @staticmethod
    def psd_eigh(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, vectors = np.linalg.eigh(gram)
        floor = len(values) * np.finfo(np.float64).eps * max(float(values[-1]), 0.0)
        return np.where(values > floor, values, 0.0), vectors

    @staticmethod
    def normal_terms(
        x: np.ndarray, labels: np.ndarray, s: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = s.astype(np.float64)
        ys = 2.0 * s[labels] - s.sum(axis=0)
        return x.T @ x, x.T @ ys, s.T @ s

    def fit(self, task: TrainTask) -> None:
        emb = task.embedding
        train_cls, val_cls = task.train_classes, task.val_classes
        tr_pos = np.searchsorted(train_cls, task.train_labels)
        n_train = len(task.train_features)
        rows = np.concatenate([task.train_features, task.val_features], dtype=np.float64)
        mean = task.train_features.mean(axis=0)
        x_train = self.centre_and_normalise(rows[:n_train], mean)
        x_val = self.centre_and_normalise(rows[n_train:], mean)
        xtx, xtys, sts = self.normal_terms(x_train, tr_pos, emb[train_cls])
        a, u = self.psd_eigh(xtx)
        b, q = self.psd_eigh(sts)
        core = u.T @ xtys @ q
        pairs = list(itertools.product(self.grid, self.grid))
        val_emb_q = emb[val_cls].astype(np.float64) @ q
        v_val = u @ np.hstack(
            [(core / np.outer(a + gamma, b + lam)) @ val_emb_q.T for gamma, lam in pairs]
        )
        scores = (x_val @ v_val).reshape(len(x_val), len(pairs), len(val_cls))
        results = []
        for (gamma, lam), pair_scores in zip(pairs, scores.transpose(1, 0, 2), strict=True):
            acc = ESZSL.per_class_top1(pair_scores, task.val_labels, classes=val_cls)
            results.append((acc, -gamma, -lam))
        best = max(results)
        self.gamma_, self.lambda_ = -best[1], -best[2]
        seen = np.union1d(train_cls, val_cls)
        y = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
        rows[:n_train], rows[n_train:] = task.train_features, task.val_features
        self.mean_ = rows.mean(axis=0, dtype=np.float32)
        x = self.centre_and_normalise(rows, self.mean_)
        xtx, xtys, sts = self.normal_terms(x, y, emb[seen])
        xtx[np.diag_indices_from(xtx)] += self.gamma_
        left = np.linalg.solve(xtx, xtys)
        self.v_ = np.linalg.solve((sts + self.lambda_ * np.eye(len(sts))).T, left.T).T
        self.embedding_ = emb

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        x = self.centre_and_normalise(features.astype(np.float64), self.mean_)
        return (x @ self.v_ @ self.embedding_[candidates].T).astype(np.float32)


def test_eszsl_default_is_bit_identical_to_the_code_before_issue_27() -> None:
    task = _task(2)
    model = ESZSL.ESZSL()
    model.fit(task)
    current = CurrentESZSL(ESZSL_GRID)
    current.fit(task)
    assert model.hyperparameters_ == {"gamma": 10.0, "lambda": 0.01, "preprocessing": "centre-l2"}
    assert (model.gamma_, model.lambda_) == (current.gamma_, current.lambda_)  # inside the grid
    np.testing.assert_array_equal(model.mean_, current.mean_)
    np.testing.assert_array_equal(model.v_, current.v_)
    features = np.random.default_rng(9).normal(size=(40, 32)).astype(np.float32)
    candidates = np.arange(len(task.class_ids))[::-1]
    np.testing.assert_array_equal(
        model.predict(features, candidates), current.predict(features, candidates)
    )

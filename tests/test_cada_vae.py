"""CADA-VAE (``submissions/cada-vae``): its loss terms, warm-ups and classifier step by hand or
against torch, a hand-made task whose unseen classes only their embeddings can name,
bit-identical refits, the saved state, and prediction passes that never import torch.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.bundles import TrainTask
from tests.conftest import SUBMISSIONS
from tests.reference_benchmarks import package_module

torch = pytest.importorskip(
    "torch", reason="torch is not installed: install the optional extra `.[methods]`"
)

cada = package_module("cada-vae")

N_CLASSES, TRAIN, VAL = 20, np.arange(10), np.arange(10, 14)
UNSEEN = np.arange(14, 20)  # no image of these in the task: only their embeddings

#: A task and the test images (and labels) of its unseen classes.
Toy = tuple[TrainTask, np.ndarray, np.ndarray]


def _toy_task(*, seed: int = 0, images_per_class: int = 30) -> Toy:
    """Features a noisy linear image of the class embedding (24-d from 12-d): a task, and 20
    test images of each class that is neither training nor validation class."""
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(N_CLASSES, 12))
    mixing = rng.normal(size=(12, 24))

    def images(classes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = np.repeat(classes, n)
        noise = 0.5 * rng.normal(size=(len(labels), 24))
        return (emb[labels] @ mixing + noise).astype(np.float32), labels

    (x_train, y_train), (x_val, y_val) = (
        images(TRAIN, images_per_class),
        images(VAL, images_per_class),
    )
    x_test, y_test = images(UNSEEN, 20)
    task = TrainTask(
        train_features=x_train,
        train_labels=y_train,
        val_features=x_val,
        val_labels=y_val,
        train_classes=TRAIN,
        val_classes=VAL,
        class_ids=np.array([f"c{i}" for i in range(N_CLASSES)]),
        class_names=np.array([f"class {i}" for i in range(N_CLASSES)]),
        class_embeddings={"attr": emb},
        default_embedding="attr",
        hierarchy=None,
        seed=seed,
    )
    return task, x_test, y_test


@pytest.fixture(scope="module")
def toy() -> Toy:
    return _toy_task()


@pytest.fixture(scope="module")
def trained(toy: Toy) -> Any:
    # 30 epochs: the toy task's 420 images make 9 steps an epoch, too few at the default 8.
    model = cada.CADAVAE(vae_epochs=30)
    model.fit(toy[0])
    return model


def test_unseen_classes_are_recognised_through_their_embeddings(trained: Any, toy: Toy) -> None:
    _, x_test, y_test = toy
    # ZSL: the 6 unseen classes as candidates (chance 1/6); measured 1.00.
    zsl = UNSEEN[trained.predict(x_test, UNSEEN).argmax(axis=1)]
    assert (zsl == y_test).mean() > 0.8
    # GZSL: every class a candidate (chance 1/20); measured 0.97.
    gzsl = trained.predict(x_test, np.arange(N_CLASSES)).argmax(axis=1)
    assert (gzsl == y_test).mean() > 0.6
    # the classifier scores every class of the task, unseen ones included
    assert trained.w_.shape == (cada.LATENT, N_CLASSES) and trained.b_.shape == (N_CLASSES,)
    assert trained.hyperparameters_["classifier_epochs"] in trained.grids_["classifier_epochs"]
    assert trained.hyperparameters_["vae_epochs"] == 30


def test_predict_columns_follow_the_candidates(trained: Any, toy: Toy) -> None:
    x = toy[1][:7]
    full = trained.predict(x, np.arange(N_CLASSES))
    candidates = np.array([17, 3, 11, 0])
    scores = trained.predict(x, candidates)
    assert scores.dtype == np.float32 and scores.shape == (7, 4)
    np.testing.assert_array_equal(scores, full[:, candidates])


def test_save_load_round_trip(trained: Any, toy: Toy, tmp_path: Path) -> None:
    trained.save(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["state.npz"]
    loaded = cada.CADAVAE.load(tmp_path)
    candidates = np.array([5, 19, 12])
    np.testing.assert_array_equal(
        loaded.predict(toy[1], candidates), trained.predict(toy[1], candidates)
    )


def _state(model: Any, directory: Path) -> dict[str, np.ndarray]:
    directory.mkdir()
    model.save(directory)
    return cada.read_state(directory)


def test_a_refit_is_bit_identical(tmp_path: Path) -> None:
    task = _toy_task(images_per_class=10)[0]
    states = []
    for run in range(2):
        model = cada.CADAVAE(vae_epochs=2, classifier_epochs=(1, 2, 4))
        model.fit(task)
        states.append(_state(model, tmp_path / str(run)))
    assert states[0].keys() == states[1].keys()
    for name in states[0]:
        assert states[0][name].tobytes() == states[1][name].tobytes(), name
    other = cada.CADAVAE(vae_epochs=2, classifier_epochs=(1, 2, 4))
    other.fit(_toy_task(seed=1, images_per_class=10)[0])  # another seed: another state
    assert not np.array_equal(other.w_, states[0]["w"])


def test_a_prediction_pass_does_not_import_torch(trained: Any, toy: Toy, tmp_path: Path) -> None:
    # Each prediction pass is a fresh process that loads the saved state: importing torch
    # there would cost about 2 s of CPU for a few numpy products. Only training imports it.
    trained.save(tmp_path)
    np.save(tmp_path / "x.npy", toy[1][:3])
    script = f"""
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("model", {str(SUBMISSIONS / "cada-vae" / "model.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model = module.CADAVAE.load(__import__("pathlib").Path({str(tmp_path)!r}))
scores = model.predict(np.load({str(tmp_path / "x.npy")!r}), np.array([0, 15]))
assert scores.shape == (3, 2), scores.shape
print("torch" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_task_without_validation_images_is_refused_by_name(toy: Toy) -> None:
    task = toy[0]
    empty = TrainTask(
        **{**vars(task), "val_features": task.val_features[:0], "val_labels": task.val_labels[:0]}
    )
    with pytest.raises(ValueError, match=r"needs training and validation images; it has 300 and 0"):
        cada.CADAVAE().fit(empty)


@pytest.mark.parametrize(
    ("warmup", "progress", "expected"),
    [
        (cada.KL_WARMUP, 0.0, 0.0),
        (cada.KL_WARMUP, 0.465, 0.25 * 46.5 / 93),
        (cada.KL_WARMUP, 0.99, 0.25),
        (cada.CROSS_WARMUP, 0.20, 0.0),
        (cada.CROSS_WARMUP, 0.48, 2.37 * 27 / 54),
        (cada.CROSS_WARMUP, 0.80, 2.37),
        (cada.ALIGNMENT_WARMUP, 0.05, 0.0),
        (cada.ALIGNMENT_WARMUP, 0.14, 8.13 * 8 / 16),
        (cada.ALIGNMENT_WARMUP, 0.5, 8.13),
    ],
)  # fmt: skip
def test_warmups_are_the_authors_schedule(warmup: Any, progress: float, expected: float) -> None:
    # The authors: weight * (epoch - start) / (end - start), clipped to [0, weight], at epoch
    # 100 * progress of their 100-epoch run.
    assert warmup.at(progress) == pytest.approx(expected, abs=1e-12)


def test_loss_terms_by_hand() -> None:
    t = torch.tensor
    x, s = t([[1.0, 2.0]]), t([[0.0, 1.0]])
    mu_x, logvar_x = t([[0.0, 0.0]]), t([[0.0, 0.0]])  # N(0, I)
    mu_s, logvar_s = t([[3.0, 4.0]]), t([[math.log(4.0)] * 2])  # N((3, 4), 4 I)
    x_hat = t([[1.5, 2.0], [0.0, 0.0]])  # from the image sample, from the embedding sample
    s_hat = t([[0.0, 3.0], [1.0, 1.0]])
    rec, cross, kl, alignment = cada.loss_terms(
        x, s, (mu_x, logvar_x, mu_s, logvar_s), (x_hat, s_hat)
    )
    assert float(rec) == pytest.approx(0.5 + 1.0)  # |1.5 - 1| + |1 - 0|
    assert float(cross) == pytest.approx(3.0 + 2.0)  # |0 - 1| + |0 - 2|, then |0 - 0| + |3 - 1|
    # KL(N(m, v) || N(0, 1)) = (v + m^2 - 1 - ln v) / 2 per dimension: 0 for the image;
    # (4 + 9 - 1 - ln 4) / 2 + (4 + 16 - 1 - ln 4) / 2 for the embedding.
    assert float(kl) == pytest.approx(15.5 - math.log(4.0), rel=1e-6)
    # W2 = sqrt(|mu_x - mu_s|^2 + |sigma_x - sigma_s|^2) = sqrt(9 + 16 + 1 + 1)
    assert float(alignment) == pytest.approx(math.sqrt(27.0), rel=1e-6)


def test_the_classifier_steps_as_torch_adam() -> None:
    # An independent implementation: torch's Linear, cross-entropy and Adam on the same start
    # and the same minibatches.
    rng = np.random.default_rng(3)
    z, y = rng.normal(size=(70, cada.LATENT)).astype(np.float32), rng.integers(0, 5, 70)
    w, b = next(cada.train_classifier(z, y, 5, seed=7))
    replay = np.random.default_rng([7, 2])  # the classifier's stream: start, then the order
    bound = 0.5 * math.sqrt(6.0 / (cada.LATENT + 5))
    layer = torch.nn.Linear(cada.LATENT, 5)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(replay.uniform(-bound, bound, (cada.LATENT, 5)).T))
        layer.bias.zero_()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-3, betas=(0.5, 0.999))
    order = replay.permutation(70)
    for start in range(0, 70, cada.CLASSIFIER_BATCH):
        idx = order[start : start + cada.CLASSIFIER_BATCH]
        loss = torch.nn.functional.cross_entropy(
            layer(torch.from_numpy(z[idx])), torch.from_numpy(y[idx])
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(w, layer.weight.detach().numpy().T, atol=1e-6)
    np.testing.assert_allclose(b, layer.bias.detach().numpy(), atol=1e-6)

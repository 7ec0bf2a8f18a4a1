"""A vision–language benchmark end to end (issue 30): images → `zsl features extract` with an
open_clip image tower → `zsl embeddings build --model clip-text` with the same model's text
tower → a spec of adapter ``feature-set`` declaring web pre-training → `zsl run` of the
``clip-zero-shot`` reference package → the record and the site's benchmark page.

The model is the tiny random open_clip of tests/tiny_clip.py, so its accuracy means nothing; the
run's ZSL top-1 is checked against a hand computation of CLIP's rule on the same arrays instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.hashing import file_sha256
from harness.features.sets import ArtifactSet
from harness.store import load_runs, open_store
from tests.conftest import SUBMISSIONS
from tests.tiny_clip import ARCH, register, save_random_weights
from tests.toy_images import CLASS_NAMES, make_images

pytest.importorskip("open_clip", reason="the features extra (make install-features)")

UNSEEN = ("amber", "navy", "olive")


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


SPEC = """\
benchmark: toy-clip
version: 1
title: "Toy images scored with a vision-language model"
experimental: true
data:
  adapter: feature-set
  params:
    features: feats
    features_hash: {features}
    embeddings:
      photo: {{path: emb, hash: {embeddings}}}
    unseen_classes: unseen.txt
    n_val: 1
    test_seen_fraction: 0.25
features:
  name: tiny-clip-random
  dim: 16
  backbone: open_clip:{arch}
  pretrained_on: {{web: LAION-2B}}
class_embeddings:
  - name: photo
    dim: 16
    default: true
    kind: clip-text
settings: [zsl, gzsl]
metrics:
  - name: per_class_top_k_accuracy
    key: top1
    k: 1
  - name: gzsl_harmonic_mean
    key: H
primary:
  zsl: top1
  gzsl: H
uncertainty:
  n_boot: 0
"""


def test_clip_features_and_prompt_embeddings_run_end_to_end(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch)
    monkeypatch.chdir(tmp_path)
    make_images(tmp_path / "images", per_class=6, corrupt=False)
    weights = save_random_weights(tmp_path / "tiny.safetensors", 0)
    (tmp_path / "classes.txt").write_text("".join(f"{c}\t{c}\n" for c in CLASS_NAMES))
    (tmp_path / "unseen.txt").write_text("\n".join(UNSEEN) + "\n")
    _invoke(
        "features", "extract", "--images", "images", "--backbone", f"open_clip:{ARCH}",
        "--weights", weights.name, "--pretrained-on-web", "LAION-2B", "--out", "feats", "--quiet",
    )  # fmt: skip
    _invoke(
        "embeddings", "build", "--classes", "classes.txt", "--model", "clip-text", "--arch",
        ARCH, "--weights", weights.name, "--templates", "photo", "--out", "emb", "--quiet",
    )  # fmt: skip
    features, embeddings = ArtifactSet("feats"), ArtifactSet("emb")
    (tmp_path / "toy.yaml").write_text(
        SPEC.format(features=features.hash, embeddings=embeddings.hash, arch=ARCH)
    )
    _invoke(
        "run", str(SUBMISSIONS / "clip-zero-shot"), "--spec", "toy.yaml", "--runner", "local",
        "--database-url", db,
    )  # fmt: skip

    (record,) = load_runs(open_store(db))
    provenance = record.benchmark.provenance
    assert provenance is not None
    assert provenance.features.backbone == f"open_clip:{ARCH}"
    assert provenance.features.weights["sha256"] == file_sha256(weights)
    assert provenance.features.pretrained_on == {"web": "LAION-2B"}
    photo = provenance.class_embeddings["photo"]
    assert (photo.model, photo.arch, photo.set_hash) == ("clip-text", ARCH, embeddings.hash)
    assert photo.model_files == {weights.name: file_sha256(weights)}
    assert photo.templates is not None
    assert (photo.templates.name, photo.templates.count) == ("photo", 1)
    assert record.leakage is not None
    assert record.leakage.status.value == "not auditable against a class list"

    # the ZSL top-1 is CLIP's rule on these arrays: per unseen class, the share of its images
    # whose nearest prompt embedding (cosine) among the unseen classes' is its own
    x = features.array("features")
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    labels = np.array(features.strings("class_ids"))[features.array("labels")]
    ids = list(embeddings.strings("class_ids"))
    table = embeddings.array("embeddings")[[ids.index(c) for c in UNSEEN]]
    per_class = []
    for position, name in enumerate(UNSEEN):
        predicted = (x[labels == name] @ table.T).argmax(axis=1)
        per_class.append(float((predicted == position).mean()))
    scores = {(s.setting, s.metric): s.value for s in record.scores}
    assert scores[("zsl", "top1")] == pytest.approx(np.mean(per_class), abs=1e-12)
    assert record.hyperparameters["main"]["logit_scale"] == 100.0

    # the benchmark page shows the image model, the text model, the templates and their hashes
    _invoke("leaderboard", "build", "--out", "site", "--database-url", db)
    (page,) = [p for p in Path("site").rglob("*.html") if "toy-clip" in p.name]
    html = page.read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert f"the image tower of open_clip {ARCH} (encode_image, not L2-normalised)" in text
    assert f"text model: the text tower of open_clip {ARCH}, weights {weights.name}" in text
    assert "templates photo (1 template)" in text
    for digest in (file_sha256(weights), photo.templates.sha256, embeddings.hash, features.hash):
        assert digest in html, digest
    assert "not auditable against a class list" in text

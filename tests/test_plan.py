"""A run's plan (harness.plan): made once, with what the run, the dry run and the records read.

The spec's metric parameters are parsed once, at load, and scoring uses them; the benchmark's
facts (structure, test classes) are computed once per prepared benchmark and kept next to it,
outside its hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.data import facts
from harness.data.artifacts import MANIFEST, FrozenBenchmark
from harness.data.facts import FACTS, benchmark_facts, structure_summary, verify_facts
from harness.data.prepare import load_benchmark
from harness.metrics import metrics
from harness.plan import plan_submission
from harness.spec import load_spec
from harness.submission.package import load_package
from tests.conftest import SPECS, SUBMISSIONS

DEMO = SPECS / "demo.yaml"


def test_a_models_plan_holds_its_snapshot_hashed_once(tmp_path: Path) -> None:
    plan = plan_submission(SUBMISSIONS / "eszsl", DEMO, tmp_path, runner="local")
    package = plan.package.package
    assert plan.runner == "local" and plan.resources is not None
    assert package.root != SUBMISSIONS / "eszsl" and package.root.is_relative_to(tmp_path)
    assert (package.root / "model.py").stat().st_mode & 0o222 == 0  # the read-only snapshot
    assert plan.package.hash == load_package(SUBMISSIONS / "eszsl").hash()
    assert plan.benchmark.prepared.hash == load_benchmark(load_spec(DEMO)).hash
    assert set(plan.timings) == {"prepare", "validate"}
    assert plan.prediction_paths == {}


def test_an_unknown_runner_fails_the_plan(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="nosuch"):
        plan_submission(SUBMISSIONS / "eszsl", DEMO, tmp_path, runner="nosuch")


def test_a_dry_runs_plan_writes_nothing(tmp_path: Path, isolated_home: Path) -> None:
    plan = plan_submission(SUBMISSIONS / "eszsl", DEMO, tmp_path, runner="local", dry_run=True)
    assert plan.benchmark.bench is None
    assert not plan.benchmark.root.exists()
    with pytest.raises(HarnessError, match=r"not prepared \(a dry run's plan\)"):
        plan.benchmark.prepared  # noqa: B018
    assert plan.package.package.root == SUBMISSIONS / "eszsl"  # no snapshot


def test_metric_parameters_are_parsed_once_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(DEMO)
    parsed = [entry.metric_params for entry in spec.metrics]
    for entry, params in zip(spec.metrics, parsed, strict=True):
        assert isinstance(params, metrics.get(entry.name).params)
        assert params.model_dump() == {**params.model_dump(), **entry.params}
        assert entry.metric_params is params  # kept, not parsed again

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("metric parameters parsed again after the spec's load")

    for entry in spec.metrics:
        monkeypatch.setattr(metrics.get(entry.name).params, "model_validate", refuse)
    assert [entry.metric_params for entry in spec.metrics] == parsed


def test_facts_are_kept_with_the_benchmark_outside_its_hash() -> None:
    bench = load_benchmark(load_spec(DEMO))
    path = bench.frozen.root / FACTS
    assert path.is_file()  # written when the benchmark was frozen
    assert FACTS not in json.loads((bench.frozen.root / MANIFEST).read_text())["artifacts"]
    assert FrozenBenchmark(bench.frozen.root).hash == bench.hash
    assert bench.facts.structure == structure_summary(bench)
    assert bench.facts.test_classes == facts.test_classes(bench)


def test_facts_made_from_anything_else_are_computed_again() -> None:
    bench = load_benchmark(load_spec(DEMO))
    path = bench.frozen.root / FACTS
    stored = json.loads(path.read_text())
    forged = {**stored, "structure": {"forged": True}}
    path.write_text(json.dumps({**forged, "key": {**stored["key"], "spec_hash": "sha256:0"}}))
    assert benchmark_facts(bench).structure == structure_summary(bench)
    assert json.loads(path.read_text()) == stored  # replaced by the right ones
    path.write_text(json.dumps(forged))  # the right key: the file is what is read
    assert benchmark_facts(bench).structure == {"forged": True}
    path.write_text("not json")
    assert benchmark_facts(bench).structure == structure_summary(bench)


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda s: {**s, "structure": {"forged": True}}, id="structure"),
        pytest.param(lambda s: {**s, "test_classes": s["test_classes"][:1]}, id="test-classes"),
        pytest.param(lambda s: {**s, "extra": 1}, id="extra-key"),
        pytest.param(lambda s: None, id="removed"),
    ],
)
def test_verify_facts_finds_a_file_that_is_not_the_frozen_datas(
    tamper: Callable[[dict[str, object]], dict[str, object] | None],
) -> None:
    bench = load_benchmark(load_spec(DEMO))
    path = bench.frozen.root / FACTS
    original = path.read_bytes()
    assert verify_facts(bench) and path.read_bytes() == original  # untouched when right
    changed = tamper(json.loads(original))
    if changed is None:
        path.unlink()
    else:
        path.write_text(json.dumps(changed, sort_keys=True))
    assert not verify_facts(bench)
    assert path.read_bytes() == original  # replaced by the facts of the frozen data
    assert verify_facts(bench)

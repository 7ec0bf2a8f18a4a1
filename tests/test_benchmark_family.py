"""Benchmark families: the validation variants of one dataset and split, run as one job.

The spec declares a family (``family: {id, member, members}``, :class:`harness.spec.FamilySpec`),
:func:`harness.spec.load_family` finds and checks every member from any one of them, ``zsl run
--family`` expands to all members, the matrix driver hands the executor one ``family`` job per
(package, family) and stores each member's record on its own, records carry ``family`` and
``family_member`` through the store (migration 0006) and record files.

Small inputs: families of three demo-generator benchmarks (validation variants: 16, 10 and 8
validation classes, few bootstraps) written into the test's folder, and the shipped xlsa17
specs (loaded, not run: their data is not needed to find a family).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import inspect
from typer.testing import CliRunner

from harness.cli.main import app
from harness.cli.run import family_specs
from harness.core.errors import SpecError
from harness.executors import Job, Outcome
from harness.executors.inline import InlineBackend
from harness.executors.matrix import RunRequest, run_matrix
from harness.records import RunRecord
from harness.results.records_io import dump_record, load_record
from harness.spec import load_family, load_spec, spec_files
from harness.store import load_runs, open_store, save_run
from harness.store.migrations import alembic_config, upgrade
from tests import store_records
from tests.conftest import REPO, SPECS, SUBMISSIONS
from tests.site.test_site import scan
from tests.store_fixtures import store_url

__all__ = ["store_url"]  # the fixture: the migration test runs on both databases

XLSA17 = SPECS / "xlsa17"
DATASETS = ("apy", "awa1", "awa2", "cub", "sun")
#: The demo family's members: file stem, label, validation classes (its validation variant).
MEMBERS = (("fam", "val1", 16), ("fam-val2", "val2", 10), ("fam-val3", "val3", 8))
FILES = [f"{stem}.yaml" for stem, _, _ in MEMBERS]


# -- the shipped xlsa17 families --------------------------------------------------------------


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_xlsa17_ps_spec_finds_its_whole_family(dataset: str) -> None:
    paths = [XLSA17 / f"{dataset}-ps{v}.yaml" for v in ("", "-val2", "-val3")]
    for path in paths:
        family = load_family(load_spec(path))
        assert family is not None
        assert family.id == f"xlsa17-{dataset}-ps" == family.main.spec.benchmark
        assert [m.label for m in family.members] == ["val1", "val2", "val3"]
        assert [m.path for m in family.members] == [p.resolve() for p in paths]
        assert [m.spec.benchmark for m in family.members] == [
            f"xlsa17-{dataset}-ps",
            f"xlsa17-{dataset}-ps-val2",
            f"xlsa17-{dataset}-ps-val3",
        ]
    # the standard split is no family's member
    assert load_family(load_spec(XLSA17 / f"{dataset}-ss.yaml")) is None


def test_families_are_the_15_ps_specs_and_nothing_else() -> None:
    members = sorted(p.name for p in spec_files(SPECS) if load_spec(p).family is not None)
    assert members == sorted(f"{d}-ps{v}.yaml" for d in DATASETS for v in ("", "-val2", "-val3"))


def test_family_expands_from_any_member_each_member_once() -> None:
    awa2 = [XLSA17 / f"awa2-ps{v}.yaml" for v in ("", "-val2", "-val3")]
    cub = [XLSA17 / f"cub-ps{v}.yaml" for v in ("", "-val2", "-val3")]
    resolved = [p.resolve() for p in awa2 + cub]
    assert family_specs([awa2[2]]) == resolved[:3]
    assert family_specs([awa2[1], cub[0], awa2[0]]) == resolved


def test_the_demo_keeps_its_spec_hash_and_records_their_bytes() -> None:
    """No family: the demo spec hashes as its committed records say, and a record without a
    family writes no family keys (its file, and so its id, are unchanged)."""
    files = sorted((REPO / "leaderboard" / "results" / "demo").rglob("*.json"))
    assert files
    hashes = {json.loads(f.read_text())["record"]["benchmark"]["spec_hash"] for f in files}
    assert hashes == {load_spec(SPECS / "demo.yaml").spec_hash()}
    text = files[0].read_text(encoding="utf-8")
    assert '"family' not in text
    assert dump_record(load_record(text, str(files[0]))) == text


# -- a family of demo benchmarks ----------------------------------------------------------------


def _demo_text(benchmark: str, n_val: int, family: str | None) -> str:
    """The demo spec as ``benchmark`` with ``n_val`` validation classes and 20 bootstraps."""
    text = (SPECS / "demo.yaml").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("checksum:")]
    text = "\n".join(lines) + "\n"
    text = text.replace("benchmark: demo\n", f"benchmark: {benchmark}\n", 1)
    text = text.replace("n_val: 16", f"n_val: {n_val}", 1)
    text = text.replace("val_classes: 16", f"val_classes: {n_val}", 1)
    text = text.replace("n_boot: 1000", "n_boot: 20")
    if family is not None:
        text = text.replace("version: 1\n", f"version: 1\n{family}", 1)
    return text


def _family_block(member: str, *, family_id: str = "demo-fam", files: list[str] = FILES) -> str:
    return f"family:\n  id: {family_id}\n  member: {member}\n  members: [{', '.join(files)}]\n"


def write_family(folder: Path) -> list[Path]:
    """Three demo members of family ``demo-fam`` (and the demo's hierarchy) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SPECS / "demo", folder / "demo", dirs_exist_ok=True)
    paths = []
    for stem, label, n_val in MEMBERS:
        path = folder / f"{stem}.yaml"
        path.write_text(_demo_text(f"demo-{stem}", n_val, _family_block(label)), encoding="utf-8")
        paths.append(path)
    return paths


def _family_error(path: Path) -> str:
    with pytest.raises(SpecError) as err:
        load_family(load_spec(path))
    return str(err.value)


def test_demo_family_loads_from_each_member(tmp_path: Path) -> None:
    paths = write_family(tmp_path)
    for path in paths:
        family = load_family(load_spec(path))
        assert family is not None and family.id == "demo-fam"
        assert [(m.label, m.spec.benchmark) for m in family.members] == [
            ("val1", "demo-fam"),
            ("val2", "demo-fam-val2"),
            ("val3", "demo-fam-val3"),
        ]


def test_a_missing_member_is_named_with_file_line_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_family(tmp_path)
    monkeypatch.chdir(tmp_path)
    files = [*FILES[:2], "fam-val9.yaml"]
    for path, (_, label, _) in zip(paths, MEMBERS, strict=True):
        text = path.read_text().replace(_family_block(label), _family_block(label, files=files))
        path.write_text(text)
    assert _family_error(paths[0]) == (
        f"fam.yaml:9: family.members[2]: member spec 'fam-val9.yaml' not found in {tmp_path}"
    )


def test_a_member_of_another_family_is_refused(tmp_path: Path) -> None:
    paths = write_family(tmp_path)
    text = paths[2].read_text()
    paths[2].write_text(text.replace("id: demo-fam\n", "id: demo-other\n"))
    message = _family_error(paths[0])
    assert message.endswith(
        "fam.yaml:9: family.members[2]: fam-val3.yaml declares family.id 'demo-other', not"
        " 'demo-fam'; a family's members all name the same main member"
    ), message
    # and a member declaring no family at all
    paths[2].write_text(_demo_text("demo-fam-val3", 8, None))
    assert _family_error(paths[1]).endswith(
        "fam-val2.yaml:9: family.members[2]: fam-val3.yaml declares no 'family'; each member"
        " declares family.id 'demo-fam'"
    )


def test_duplicated_labels_are_refused(tmp_path: Path) -> None:
    paths = write_family(tmp_path)
    paths[2].write_text(paths[2].read_text().replace("member: val3", "member: val2"))
    assert _family_error(paths[0]).endswith(
        "fam.yaml:9: family.members[2]: fam-val3.yaml has family.member 'val2', as"
        " fam-val2.yaml has; each member needs a label of its own"
    )


def test_members_must_agree_list_themselves_and_name_a_main_member(tmp_path: Path) -> None:
    paths = write_family(tmp_path)
    other = [FILES[0], FILES[2], FILES[1]]
    paths[1].write_text(
        paths[1].read_text().replace(_family_block("val2"), _family_block("val2", files=other))
    )
    assert _family_error(paths[0]).endswith(
        "fam.yaml:9: family.members[1]: fam-val2.yaml lists family.members ['fam.yaml',"
        " 'fam-val3.yaml', 'fam-val2.yaml'], this spec ['fam.yaml', 'fam-val2.yaml',"
        " 'fam-val3.yaml']; every member lists the same files in the same order"
    )
    paths = write_family(tmp_path / "b")
    lone = _demo_text("demo-lone", 16, _family_block("val4"))
    (tmp_path / "b" / "lone.yaml").write_text(lone)
    assert _family_error(tmp_path / "b" / "lone.yaml").endswith(
        "lone.yaml:9: family.members: does not list this spec's own file 'lone.yaml'; every"
        " member lists all of them, itself included"
    )
    for path in paths:
        path.write_text(path.read_text().replace("id: demo-fam\n", "id: demo-main\n"))
    assert _family_error(paths[1]).endswith(
        "fam-val2.yaml:7: family.id: 'demo-main' is the benchmark id of none of the members"
        " (demo-fam, demo-fam-val2, demo-fam-val3); a family is named after its main member"
    )


def test_one_spec_alone_is_checked_when_it_is_parsed(tmp_path: Path) -> None:
    paths = write_family(tmp_path)
    twice = [FILES[0], FILES[1], FILES[1]]
    paths[0].write_text(
        paths[0].read_text().replace(_family_block("val1"), _family_block("val1", files=twice))
    )
    with pytest.raises(SpecError) as err:
        load_spec(paths[0])
    assert "fam.yaml:9: family.members: lists fam-val2.yaml more than once" in str(err.value)
    paths[1].write_text(paths[1].read_text().replace("member: val2", "member: Val 2"))
    with pytest.raises(SpecError) as err:
        load_spec(paths[1])
    assert "fam-val2.yaml:8: family.member:" in str(err.value)


def test_a_spec_base_may_not_declare_a_family(tmp_path: Path) -> None:
    (tmp_path / "_base.yaml").write_text(_family_block("val1"))
    (tmp_path / "s.yaml").write_text("extends: _base.yaml\nbenchmark: s\nversion: 1\n")
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path / "s.yaml")
    assert str(err.value) == (
        f"{tmp_path / '_base.yaml'}:1: family: not allowed in a spec base: each spec names its"
        " own place in its family"
    )


def test_family_on_a_spec_without_one_and_validate_on_a_broken_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", str(SUBMISSIONS / "eszsl"), "--spec", str(SPECS / "demo.yaml"), "--family"]
    )
    assert result.exit_code == 1
    assert (
        "--family: this spec declares no benchmark family (a 'family:' key naming its members);"
        " run it without --family" in " ".join(result.output.split())
    )
    paths = write_family(tmp_path)
    result = CliRunner().invoke(app, ["spec", "validate", str(paths[1])])
    assert result.exit_code == 0, result.output
    assert "family demo-fam member val2" in result.output
    paths[2].unlink()
    result = CliRunner().invoke(app, ["spec", "validate", str(paths[1])])
    assert result.exit_code == 1
    assert "family.members[2]: member spec 'fam-val3.yaml' not found" in result.output


# -- one job per (package, family) ---------------------------------------------------------------


class CountingBackend(InlineBackend):
    """The inline backend, keeping every job it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[Job] = []

    def submit(self, ticket: int, job: Job) -> None:
        self.jobs.append(job)
        super().submit(ticket, job)


def _members_of(job: Job) -> list[str]:
    task = json.loads(job.task)
    runs = task["runs"] if job.kind == "family" else [task]
    return [Path(run["spec"]).name for run in runs]


@pytest.fixture
def family(tmp_path: Path) -> list[Path]:
    return write_family(tmp_path / "specs")


@pytest.mark.slow
def test_one_job_per_package_and_family_each_record_stored(family: list[Path], db: str) -> None:
    packages = [SUBMISSIONS / "eszsl", SUBMISSIONS / "sae"]
    specs = [*family, SPECS / "demo.yaml"]
    backend = CountingBackend()
    report = run_matrix(
        [RunRequest(p, s, "local") for s in specs for p in packages],
        database_url=db,
        backend=backend,
        progress=False,
    )
    assert (report.count("done"), report.count("failed")) == (8, 0), report.results
    # 2 family jobs (one per package, its 3 members in order) and the 2 demo runs
    assert [(j.kind, _members_of(j)) for j in backend.jobs] == [
        ("family", FILES),
        ("family", FILES),
        ("run", ["demo.yaml"]),
        ("run", ["demo.yaml"]),
    ]
    assert backend.jobs[0].label == (
        "eszsl@1.0 on family demo-fam: val1 (demo-fam), val2 (demo-fam-val2), val3 (demo-fam-val3)"
    )
    stored = {(r.benchmark.id, r.submission.name): r for r in load_runs(open_store(db))}
    assert len(stored) == 8
    for (benchmark, _), record in stored.items():
        expected = {
            "demo-fam": ("demo-fam", "val1"),
            "demo-fam-val2": ("demo-fam", "val2"),
            "demo-fam-val3": ("demo-fam", "val3"),
            "demo": (None, None),
        }[benchmark]
        assert (record.benchmark.family, record.benchmark.family_member) == expected
    # the members chose their hyperparameters on their own validation classes
    chosen = {b: r.hyperparameters for (b, n), r in stored.items() if n == "eszsl"}
    assert len({json.dumps(chosen[b], sort_keys=True) for b in chosen}) >= 2, chosen

    # resumed: nothing is run again; with one member's run gone, only it is
    again = CountingBackend()
    report = run_matrix(
        [RunRequest(p, s, "local") for s in specs for p in packages],
        database_url=db,
        backend=again,
        progress=False,
    )
    assert report.count("skipped") == 8 and again.jobs == []


@pytest.mark.slow
def test_members_already_stored_are_skipped_the_rest_go_as_one_job(
    family: list[Path], db: str
) -> None:
    package = SUBMISSIONS / "eszsl"
    first = CountingBackend()
    report = run_matrix(
        [RunRequest(package, family[1], "local")], database_url=db, backend=first, progress=False
    )
    assert report.count("done") == 1 and [j.kind for j in first.jobs] == ["run"]
    rest = CountingBackend()
    report = run_matrix(
        [RunRequest(package, s, "local") for s in family_specs([family[2]])],
        database_url=db,
        backend=rest,
        progress=False,
    )
    assert [r.status for r in report.results] == ["done", "skipped", "done"]
    assert [(j.kind, _members_of(j)) for j in rest.jobs] == [("family", [FILES[0], FILES[2]])]


FAILS_ON_TEN = """\
import numpy as np


class Picky:
    def fit(self, task):
        if len(task.val_classes) == 10:
            raise RuntimeError("refusing 10 validation classes")
        self.embedding_ = task.embedding

    def save(self, directory):
        np.save(directory / "embedding.npy", self.embedding_)

    @classmethod
    def load(cls, directory):
        model = cls()
        model.embedding_ = np.load(directory / "embedding.npy")
        return model

    def predict(self, features, candidates):
        return np.asarray(features[:, :1] * 0 + self.embedding_[candidates, 0], dtype=np.float32)
"""


@pytest.mark.slow
def test_a_failed_member_fails_alone_its_siblings_are_stored(
    family: list[Path], db: str, tmp_path: Path
) -> None:
    package = tmp_path / "picky"
    package.mkdir()
    (package / "model.py").write_text(FAILS_ON_TEN)
    (package / "submission.yaml").write_text(
        "name: picky\nversion: '1'\nauthors: [T. Ester]\nkind: model\n"
        "model:\n  entrypoint: model:Picky\n"
    )
    backend = CountingBackend()
    report = run_matrix(
        [RunRequest(package, s, "local") for s in family],
        database_url=db,
        backend=backend,
        progress=False,
    )
    assert [j.kind for j in backend.jobs] == ["family"]
    assert [r.status for r in report.results] == ["done", "failed", "done"]
    assert "refusing 10 validation classes" in str(report.results[1].error)
    assert report.exit_code == 1
    assert sorted(r.benchmark.id for r in load_runs(open_store(db))) == [
        "demo-fam",
        "demo-fam-val3",
    ]


def test_a_family_job_that_fails_as_a_whole_fails_each_member(family: list[Path], db: str) -> None:
    """The worker died on every attempt: each member fails with the job's error."""

    class Dying(CountingBackend):
        def wait(self) -> list[tuple[int, Outcome]]:
            ticket, _ = self._queue.popleft()
            return [(ticket, Outcome(system_error="WorkerCrashedError: the worker died"))]

    backend = Dying()
    report = run_matrix(
        [RunRequest(SUBMISSIONS / "eszsl", s, "local") for s in family],
        database_url=db,
        backend=backend,
        max_retries=1,
        progress=False,
    )
    assert [j.kind for j in backend.jobs] == ["family", "family"]  # tried again once
    assert [r.status for r in report.results] == ["failed"] * 3
    assert {r.error for r in report.results} == {
        "WorkerCrashedError: the worker died (gave up after 2 attempts)"
    }


# -- records: store, migration, files ------------------------------------------------------------


def _family_record() -> RunRecord:
    record = store_records.make_record()
    return record.model_copy(
        update={
            "benchmark": record.benchmark.model_copy(
                update={"family": "xlsa17-awa2-ps", "family_member": "val2"}
            )
        }
    )


def test_family_round_trips_through_store_and_record_files(store_url: str) -> None:
    engine = open_store(store_url)
    record = _family_record()
    save_run(engine, record)
    (loaded,) = load_runs(engine)
    assert loaded == record
    assert (loaded.benchmark.family, loaded.benchmark.family_member) == ("xlsa17-awa2-ps", "val2")
    text = dump_record(record)
    assert '"family": "xlsa17-awa2-ps"' in text and '"family_member": "val2"' in text
    assert load_record(text, "x") == record
    engine.dispose()


def test_migration_0006_keeps_rows_stored_at_0005(store_url: str) -> None:
    engine = open_store(store_url)
    save_run(engine, _family_record())
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0005")
    assert "family" not in {c["name"] for c in inspect(engine).get_columns("zsl_benchmark")}
    upgrade(engine)
    columns = {c["name"] for c in inspect(engine).get_columns("zsl_benchmark")}
    assert {"family", "family_member"} <= columns
    (loaded,) = load_runs(engine)
    old = _family_record()
    assert loaded == old.model_copy(
        update={
            "benchmark": old.benchmark.model_copy(update={"family": None, "family_member": None})
        }
    )
    # the next run of that benchmark fills them in
    save_run(engine, old.model_copy(update={"created_at": old.created_at.replace(year=2030)}))
    assert [r.benchmark.family_member for r in load_runs(engine)] == ["val2"]
    engine.dispose()


def test_an_old_record_file_without_family_loads_as_none() -> None:
    text = dump_record(store_records.make_record())
    assert not re.search(r'"family', text)
    record = load_record(text, "old")
    assert record.benchmark.family is None and record.benchmark.family_member is None


# -- ray ------------------------------------------------------------------------------------------


@pytest.fixture
def ray_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """A Ray instance on this machine, two CPUs (what ESZSL's package asks for), whose worker gets
    its own (empty) ZSL_HOME: the family's benchmarks reach it only through the object store."""
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_DISABLE_USAGE_STATS", "1")
    driver_home = os.environ["ZSL_HOME"]
    monkeypatch.setenv("ZSL_HOME", str(tmp_path / "node-home"))
    ray.init(
        address="local",  # its own, whatever other Ray instance runs on this machine
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="WARNING",
        object_store_memory=100 * 1024 * 1024,
    )
    monkeypatch.setenv("ZSL_HOME", driver_home)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_a_family_job_on_ray_gets_every_member_benchmark_shipped(
    family: list[Path], db: str, ray_local: Any, tmp_path: Path
) -> None:
    report = run_matrix(
        [RunRequest(SUBMISSIONS / "eszsl", s, "local") for s in family],
        executor="ray",
        database_url=db,
        progress=False,
    )
    assert (report.count("done"), report.count("failed")) == (3, 0), report.results
    assert len({r.node for r in report.results}) == 1 and "ray:" in str(report.results[0].node)
    for stem, _, _ in MEMBERS:
        manifest = tmp_path / "node-home" / "benchmarks" / f"demo-{stem}" / "v1" / "manifest.json"
        assert manifest.is_file()
    members = {r.benchmark.id: r.benchmark.family_member for r in load_runs(open_store(db))}
    assert members == {"demo-fam": "val1", "demo-fam-val2": "val2", "demo-fam-val3": "val3"}


# -- end to end through `zsl run --family` -------------------------------------------------------


def _xlsa17_family(folder: Path, dataset: str, release_root: Path) -> list[Path]:
    """The three shipped PS specs of ``dataset``, family and file names kept, for 64-d fixture
    features found under ``release_root`` (ZSL_XLSA17_DIR) and 20 bootstraps."""
    import yaml

    from harness.spec import load_spec_data

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix in ("", "-val2", "-val3"):
        source = XLSA17 / f"{dataset.lower()}-ps{suffix}.yaml"
        data = load_spec_data(source)
        params = data["data"]["params"]
        params["class_map"] = str(source.parent / params["class_map"])
        data["hierarchy"]["file"] = str(source.parent / data["hierarchy"]["file"])
        data["features"]["dim"] = 64
        data["uncertainty"] = {"n_boot": 20}
        path = folder / source.name
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        paths.append(path)
    return paths


@pytest.mark.slow
def test_zsl_run_family_on_xlsa17_fixture_one_job_records_carry_the_family(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch, xlsa17_release: Callable[..., Path]
) -> None:
    from tests.xlsa17_fixture import XLSA17 as SHARED_XLSA17

    if not (SHARED_XLSA17 / "AWA2" / "att_splits.mat").is_file():
        pytest.skip("shared xlsa17 files absent")
    xlsa17_release(tmp_path / "release", "AWA2", dim=64)
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(tmp_path / "release"))
    paths = _xlsa17_family(tmp_path / "specs", "AWA2", tmp_path / "release")
    packages = [str(SUBMISSIONS / "eszsl"), str(SUBMISSIONS / "sae")]
    args = ["run", *packages, "--spec", str(paths[1]), "--family"]
    args += ["--executor", "local", "--jobs", "1", "--runner", "local", "--database-url", db]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "6 done, 0 failed, 0 skipped" in result.output
    stored = load_runs(open_store(db))
    records = sorted(stored, key=lambda r: (r.submission.name, r.benchmark.id))
    assert [(r.benchmark.id, r.benchmark.family, r.benchmark.family_member) for r in records] == [
        ("xlsa17-awa2-ps", "xlsa17-awa2-ps", "val1"),
        ("xlsa17-awa2-ps-val2", "xlsa17-awa2-ps", "val2"),
        ("xlsa17-awa2-ps-val3", "xlsa17-awa2-ps", "val3"),
    ] * 2
    # one test set: the members differ in their training/validation classes only
    assert len({r.benchmark.n_unseen for r in records}) == 1
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "0 done, 0 failed, 6 skipped" in again.output
    _check_robustness_page(stored, tmp_path / "site", db)


def _check_robustness_page(records: list[RunRecord], site: Path, db: str) -> None:
    """The site built from the store shows, for each package, the three members' primary ZSL
    scores of these runs, their mean and range, and the rank matrix counted over them."""
    built = CliRunner().invoke(
        app, ["leaderboard", "build", "--out", str(site), "--database-url", db]
    )
    assert built.exit_code == 0, built.output
    zsl: dict[str, dict[str, float]] = {}
    for record in records:
        metric = record.benchmark.primary["zsl"]
        (score,) = [s for s in record.scores if s.setting == "zsl" and s.metric == metric]
        zsl.setdefault(record.submission.name, {})[record.benchmark.family_member or ""] = (
            100 * score.value
        )
    tables = scan(site / "robustness.html").tables
    # The fixture's features are synthetic: left out unless the reader opts in (issue 29).
    assert "table-robustness-zsl" not in tables, sorted(tables)
    tables = {k.removesuffix("-with-uncounted"): v for k, v in tables.items()}
    rows = {row[0].split()[0]: row for row in tables["table-robustness-zsl"] if row}
    assert set(rows) == {"eszsl", "sae"}, rows
    for name, by_member in zsl.items():
        values = [by_member[m] for m in ("val1", "val2", "val3")]
        mean, spread = sum(values) / 3, max(values) - min(values)
        expected = [f"{v:.1f}" for v in (*values, mean, spread)]
        assert rows[name][1:6] == expected, (name, rows[name])
        assert rows[name][7] == "3/3", rows[name]
    # Rank matrix over the 3 member benchmarks: each package ranked 1st or 2nd on each (a
    # tie splits its count), by the ZSL scores above.
    counts = {row[0].split()[0]: row for row in tables["table-rank-counts-zsl"] if row}
    for name, other in (("eszsl", "sae"), ("sae", "eszsl")):
        first = sum(
            1.0 if zsl[name][m] > zsl[other][m] else 0.5 if zsl[name][m] == zsl[other][m] else 0
            for m in ("val1", "val2", "val3")
        )
        assert counts[name][1] == "3/3", counts[name]
        assert [float(c) for c in counts[name][3:5]] == [first, 3 - first], counts[name]

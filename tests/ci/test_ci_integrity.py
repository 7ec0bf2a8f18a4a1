"""`zsl ci pr` against a hostile pull request (issue 10, items 7b, 10 and 12).

- 7b: any exception while one package is validated, run, scored or stored is that package's
  failure; the other packages of the pull request are still scored, exported and reported.
- 10: a record file the pull request adds or edits is never trusted: its package is re-run and
  the record compared with the fresh run on every field but created_at, timings, environment
  and logs; a difference is flagged with its field path and fails the job, and the fresh record
  is exported in its place.
- 12: a pull request that edits harness/ is not scored by that harness: `zsl ci pr` refuses to
  run from a harness inside the scanned checkout that differs from the base, and `--repo` lets
  the base's harness score a separate PR checkout.
- 18 (tests/README.md): a record leaves the board only with its package: deleting, moving or
  overwriting the record file of a package still in the tree fails the job and the vetted record
  is exported again; deleting it with (or after) its package passes and says so.

Most tests replace the worker's ``run_planned`` (:mod:`harness.executors.task`: the run of a
plan) with a stand-in that returns records of one real run of ESZSL on the demo (made once per
module), so the comparison, not the model, is what runs; they run the matrix on the ``inline``
executor, in this process, where the stand-in is. The transductive test runs the real pipeline end to end, on the local process pool.
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import harness.ci.pr
import harness.executors.task
import harness.pipeline
import harness.site
import harness.submission.unpack
from harness.ci import (
    DIFF_FILENAME,
    SITE_DIRNAME,
    Execution,
    PullRequestResult,
    escape_markdown,
    record_differences,
    run_pull_request,
)
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.plan import RunPlan
from harness.records import RunRecord, run_key
from harness.results.records_io import read_records, record_path, write_records
from harness.store import open_store, save_run
from tests.ci.test_ci import (  # noqa: F401  (_isolated_git is an autouse fixture)
    _board_repo,
    _ci_runner,
    _isolated_git,
    cli,
    commit_all,
    git,
    record,
    write,
)
from tests.conftest import SPECS, SUBMISSIONS

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

T_BASE = datetime(2025, 4, 1, 8, 0, tzinfo=UTC)
T_FRESH = datetime(2025, 4, 2, 8, 0, tzinfo=UTC)
RESULTS = Path("leaderboard", "results")


# -- helpers --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    """One real run of ESZSL on the demo: a record with class means, details, leakage…"""
    home = tmp_path_factory.mktemp("zsl-home-integrity")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_HOME", str(home))
        patch.delenv("ZSL_DATABASE_URL", raising=False)
        return harness.pipeline.run_submission(
            SUBMISSIONS / "eszsl", SPECS / "demo.yaml", runner=_ci_runner(), store=False, quiet=True
        )


@pytest.fixture
def base_run(real_run: RunRecord) -> RunRecord:
    """The record CI committed when ESZSL was merged."""
    return real_run.model_copy(update={"created_at": T_BASE})


@pytest.fixture
def fresh_run(real_run: RunRecord) -> RunRecord:
    """What CI's re-run gives now: the same result, other volatile fields (never flagged)."""
    return real_run.model_copy(
        update={
            "created_at": T_FRESH,
            "timings": {"run": 12.5},
            "environment": {"python": "3.99"},
            "logs": {"reason": "exited 0", "stdout": "fresh run\n", "stderr": ""},
        }
    )


class FakeRuns:
    """Stands in for ``run_planned``: per package folder name, a record or an exception."""

    def __init__(self, outcomes: dict[str, RunRecord | BaseException]) -> None:
        self.outcomes = outcomes
        self.calls: list[str] = []

    def __call__(self, plan: RunPlan, **options: Any) -> RunRecord:
        name = plan.package.path.name
        self.calls.append(name)
        outcome = self.outcomes[name]
        if isinstance(outcome, BaseException):
            raise outcome
        if options.get("store", True):  # as the real one: stored in the throwaway store
            engine = open_store(options["database_url"])
            try:
                save_run(engine, outcome)
            finally:
                engine.dispose()
        return outcome


def fake_runs(
    monkeypatch: pytest.MonkeyPatch, plan: dict[str, RunRecord | BaseException]
) -> FakeRuns:
    runs = FakeRuns(plan)
    monkeypatch.setattr(harness.executors.task, "run_planned", runs)
    return runs


def add_package(repo: Path, folder: str, *, name: str | None = None, edit: str = "") -> Path:
    """A copy of the ESZSL package at ``submissions/<folder>``, renamed and edited."""
    target = repo / "submissions" / folder
    shutil.copytree(SUBMISSIONS / "eszsl", target)
    manifest = target / "submission.yaml"
    text = manifest.read_text(encoding="utf-8")
    if name is not None:
        text = text.replace("name: eszsl\n", f"name: {name}\n")
    if edit:
        text = text.replace(*edit.split(" => "))
    manifest.write_text(text, encoding="utf-8")
    return target


def forge(run: RunRecord, mutate: Callable[[dict[str, Any]], None]) -> RunRecord:
    """``run`` with one field edited in its canonical JSON, valid and self-consistent."""
    payload = run.model_dump(mode="json")
    mutate(payload)
    return RunRecord.model_validate(payload)


def pr(repo: Path, **options: Any) -> PullRequestResult:
    return run_pull_request(
        "main",
        repo_root=repo,
        results_dir=repo / RESULTS,
        out_dir=repo / "build" / "ci",
        runner="local",
        execution=Execution("inline"),  # where the stand-in for run_planned is
        **options,
    )


def exported(repo: Path, name: str) -> RunRecord:
    return next(r for r in read_records(repo / RESULTS) if r.submission.name == name)


def report(result: PullRequestResult) -> str:
    return result.report.read_text(encoding="utf-8")


def shown(repo: Path, run: RunRecord) -> str:
    return record_path(repo / RESULTS, run).relative_to(repo).as_posix()


# -- item 10: every field the site shows is reproduced or flagged ---------------------------------


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(payload: dict[str, Any]) -> None:
        *parents, last = path.replace("[", ".").replace("]", "").split(".")
        node: Any = payload
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if last.isdigit():
            node[int(last)] = value(node[int(last)]) if callable(value) else value
        else:
            node[last] = value(node.get(last)) if callable(value) else value

    return mutate


#: (field path as the report names it, how the forger edits it)
FORGERIES: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("scores[0].class_values.means[0]", _set("scores.0.class_values.means.0", lambda v: v / 2)),
    ("scores[0].class_values.counts[1]", _set("scores.0.class_values.counts.1", lambda v: v + 1)),
    ("scores[0].value", _set("scores.0.value", lambda v: min(1.0, v + 0.05))),
    ("scores[0].interval.lo", _set("scores.0.interval.lo", lambda v: v - 0.1)),
    ("scores[0].details.k", _set("scores.0.details.k", 5)),
    ("scores[0].details.note", _set("scores.0.details.note", "best in class")),
    ("scores[0].higher_is_better", _set("scores.0.higher_is_better", False)),
    ("scores[3].version", _set("scores.3.version", "0")),
    ("leakage.n_test", _set("leakage.n_test", 3)),
    ("leakage.match", _set("leakage.match", "exact")),
    ("leakage.source", _set("leakage.source", "imagenet-1k")),
    ("submission.declarations.transductive", _set("submission.declarations.transductive", True)),
    ("submission.declarations.extra_data", _set("submission.declarations.extra_data", True)),
    ("submission.declarations.features", _set("submission.declarations.features", "clip")),
    ("submission.authors[0]", _set("submission.authors.0", "A. Forger")),
    ("submission.authors", _set("submission.authors", lambda v: [*v, "Another Forger"])),
    ("submission.paper", _set("submission.paper", "https://example.org/other-paper")),
    ("submission.url", _set("submission.url", "https://example.org/code")),
    ("submission.description", _set("submission.description", "State of the art.")),
    ("submission.kind", _set("submission.kind", "predictions")),
    ("submission.package_hash", _set("submission.package_hash", "sha256:" + "0" * 64)),
    ("runner", _set("runner", "container")),
    ("harness_version", _set("harness_version", "0.0.1")),
    ("predictions_hashes.zsl", _set("predictions_hashes.zsl", "sha256:" + "1" * 64)),
    ("benchmark.structure.structural_ratio", _set("benchmark.structure.structural_ratio", 0.5)),
    ("benchmark.title", _set("benchmark.title", "Demo, the hard version")),
    ("benchmark.primary.zsl", _set("benchmark.primary.zsl", "top5")),
    ("benchmark.n_unseen", _set("benchmark.n_unseen", lambda v: v + 1)),
]


def test_forgeries_cover_fields_outside_the_old_fingerprint(real_run: RunRecord) -> None:
    # Each forgery changes exactly its field, and the record stays valid.
    for path, mutate in FORGERIES:
        assert record_differences(forge(real_run, mutate), real_run) == [path], path
    # Volatile fields never count.
    assert record_differences(real_run, real_run.model_copy(update={"created_at": T_FRESH})) == []


def _existing(repo: Path, base_run: RunRecord, forged: RunRecord, *, commit: bool = True) -> None:
    """ESZSL and its record are on main; the branch edits only the record."""
    add_package(repo, "eszsl")
    write_records([base_run], repo / RESULTS)
    commit_all(repo, "eszsl, scored by CI")
    git(repo, "checkout", "--quiet", "-b", "forgery")
    write_records([forged], repo / RESULTS)  # the file's id is recomputed: self-consistent
    if commit:
        commit_all(repo, "improve the record")


def _new(repo: Path, base_run: RunRecord, forged: RunRecord) -> None:
    """The branch adds ESZSL and a record for it."""
    git(repo, "checkout", "--quiet", "-b", "forgery")
    add_package(repo, "eszsl")
    write_records([forged], repo / RESULTS)
    commit_all(repo, "add eszsl with its record")


#: The forgeries CI flags: all but the prediction hashes, which a run on another platform changes
#: (harness.results.reproduction); a forged one is replaced by the fresh record (test below).
FLAGGED = [(p, m) for p, m in FORGERIES if not p.startswith("predictions_hashes")]


@pytest.mark.parametrize("scenario", ["existing", "new"])
@pytest.mark.parametrize(("path", "mutate"), FLAGGED, ids=[p for p, _ in FLAGGED])
def test_a_forged_field_is_flagged_fails_the_job_and_the_fresh_record_is_exported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    base_run: RunRecord,
    fresh_run: RunRecord,
    scenario: str,
    path: str,
    mutate: Callable[[dict[str, Any]], None],
) -> None:
    """Attack: edit a field the old fingerprint ignored (or any other), recompute the id.

    Rule: the record is re-made from its package, every non-volatile field compared; the exact
    field path is reported, the job fails and the fresh record is exported.
    """
    repo = _board_repo(tmp_path / "repo")
    forged = forge(base_run, mutate)
    {"existing": _existing, "new": _new}[scenario](repo, base_run, forged)
    runs = fake_runs(monkeypatch, {"eszsl": fresh_run})

    result = pr(repo)

    assert runs.calls == ["eszsl"]  # re-run even where the package did not change
    assert not result.ok
    where = shown(repo, forged)
    (problem,) = result.problems
    flag = f"{where}: ⚠ the committed record differed from a fresh run in: {path};"
    assert problem.startswith(flag), problem
    assert f"❌ {escape_markdown(flag, limit=1000)}" in report(result)
    assert exported(repo, "eszsl") == fresh_run  # the fresh record, not the committed one
    (outcome,) = result.outcomes
    assert outcome.status == "ok"
    if scenario == "existing":
        assert outcome.detail.startswith("re-run, as its record changed: scored on demo v1")
        # Nothing changed on the board: the fresh run is what main already shows.
        assert "No change to the leaderboard." in report(result)
    else:
        assert "1 new, 0 updated, 0 removed run on 1 benchmark." in report(result)


@pytest.mark.parametrize("scenario", ["existing", "new"])
def test_a_record_reproduced_within_tolerance_passes_and_the_fresh_record_is_exported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    base_run: RunRecord,
    fresh_run: RunRecord,
    scenario: str,
) -> None:
    """Another platform's record: other prediction hashes, a score off in its 9th digit. Not a
    problem (SCORE_TOLERANCE), but CI's own record is exported, so a forged hash cannot stay."""
    repo = _board_repo(tmp_path / "repo")
    elsewhere = forge(
        base_run,
        lambda payload: (
            _set("predictions_hashes.zsl", "sha256:" + "1" * 64)(payload),
            _set("scores.0.value", lambda v: v + 1e-9)(payload),
        ),
    )
    {"existing": _existing, "new": _new}[scenario](repo, base_run, elsewhere)
    fake_runs(monkeypatch, {"eszsl": fresh_run})

    result = pr(repo)

    assert result.ok, result.problems
    assert exported(repo, "eszsl") == fresh_run
    if scenario == "existing":
        assert "No change to the leaderboard." in report(result)


def test_an_uncommitted_forged_record_is_not_trusted_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord, fresh_run: RunRecord
) -> None:
    repo = _board_repo(tmp_path / "repo")
    forged = forge(base_run, _set("submission.declarations.transductive", True))
    _existing(repo, base_run, forged, commit=False)
    fake_runs(monkeypatch, {"eszsl": fresh_run})
    result = pr(repo)
    assert not result.ok
    assert "in: submission.declarations.transductive;" in result.problems[0]
    assert exported(repo, "eszsl") == fresh_run


def test_a_committed_record_equal_to_its_fresh_run_is_kept_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord, fresh_run: RunRecord
) -> None:
    """The records CI exported, committed in the pull request, pass and stay as they are."""
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "add-eszsl")
    add_package(repo, "eszsl")
    write_records([base_run], repo / RESULTS)  # what an earlier CI run of this PR exported
    commit_all(repo, "add eszsl and the exported record")
    before = record_path(repo / RESULTS, base_run).read_bytes()
    fake_runs(monkeypatch, {"eszsl": fresh_run})
    result = pr(repo)
    assert result.ok, result.problems
    assert record_path(repo / RESULTS, base_run).read_bytes() == before
    assert exported(repo, "eszsl") == base_run
    assert "lacks" not in report(result)


def test_a_changed_record_no_package_reproduces_is_refused_and_the_vetted_one_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord, fresh_run: RunRecord
) -> None:
    """Attack: improve the record of a package that is gone, or of a version nobody can run."""
    repo = _board_repo(tmp_path / "repo")
    gone = record("gone", top1=0.3)
    add_package(repo, "eszsl")
    write_records([base_run, gone], repo / RESULTS)
    commit_all(repo, "eszsl, and a record of a package removed since")
    vetted = record_path(repo / RESULTS, gone).read_bytes()
    git(repo, "checkout", "--quiet", "-b", "forgery")
    old_version = forge(base_run, _set("submission.version", "0.9"))
    write_records([record("gone", top1=0.99), old_version], repo / RESULTS)
    commit_all(repo, "records")
    fake_runs(monkeypatch, {"eszsl": fresh_run})

    result = pr(repo)

    assert not result.ok
    assert result.problems == [
        f"{shown(repo, gone)}: changed in this pull request, but no package reproduces it "
        "(gone@1.0 on cub-demo v1): no package under submissions/ is named 'gone'; records are "
        "written by CI, so it was not exported: commit the records `zsl ci pr` exports, never "
        "hand-written or edited ones",
        f"{shown(repo, old_version)}: changed in this pull request, but no package reproduces "
        "it (eszsl@0.9 on demo v1): its package submissions/eszsl does not make this run "
        "(another version, or a benchmark leaderboard/ci.yaml does not list); records are "
        "written by CI, so it was not exported: commit the records `zsl ci pr` exports, never "
        "hand-written or edited ones",
    ]
    assert record_path(repo / RESULTS, gone).read_bytes() == vetted  # main's record, restored
    assert not record_path(repo / RESULTS, old_version).exists()
    assert [run_key(r) for r in read_records(repo / RESULTS)] == [
        ("cub-demo", 1, "ale", "1.0"),
        ("cub-demo", 1, "gone", "1.0"),
        ("demo", 1, "eszsl", "1.0"),
    ]


def test_an_impostor_package_cannot_take_another_packages_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord, fresh_run: RunRecord
) -> None:
    """Attack: add submissions/evil named like an existing package, so its run replaces it."""
    repo = _board_repo(tmp_path / "repo")
    add_package(repo, "eszsl")
    write_records([base_run], repo / RESULTS)
    commit_all(repo, "eszsl")
    git(repo, "checkout", "--quiet", "-b", "impostor")
    add_package(repo, "evil")  # name: eszsl, version 1.0
    commit_all(repo, "evil")
    better = forge(fresh_run, _set("scores.0.value", 0.999))
    runs = fake_runs(monkeypatch, {"evil": better, "eszsl": fresh_run})
    result = pr(repo)
    assert runs.calls == []
    assert not result.ok
    (outcome,) = result.outcomes
    assert (outcome.package, outcome.status) == ("submissions/evil", "invalid")
    assert outcome.detail == (
        "the submission name 'eszsl' is also the name of submissions/eszsl; one package folder "
        "per submission name"
    )
    assert exported(repo, "eszsl") == base_run


def test_transductive_in_the_manifest_wins_over_a_committed_record_saying_false(
    tmp_path: Path, isolated_home: Path
) -> None:
    """Attack: declare transductive in the manifest, commit a record that says it is not.

    Rule: submission fields come from the manifest through a real run; the exported record and
    the site's results.json say transductive, and the committed record is flagged.
    """
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "transductive")
    package = add_package(
        repo, "tx", name="eszsl-tx", edit="transductive: false => transductive: true"
    )
    made = harness.pipeline.run_submission(
        package, SPECS / "demo.yaml", runner=_ci_runner(), store=False, quiet=True
    )
    assert made.submission.declarations["transductive"] is True
    claim = forge(made, _set("submission.declarations.transductive", False))
    write_records([claim], repo / RESULTS)
    commit_all(repo, "a transductive package whose record says it is not")

    result = run_pull_request(
        "main",
        repo_root=repo,
        results_dir=repo / RESULTS,
        out_dir=repo / "build" / "ci",
        runner=_ci_runner(),
    )

    assert not result.ok
    assert result.problems[0].startswith(
        f"{shown(repo, claim)}: ⚠ the committed record differed from a fresh run in: "
        "submission.declarations.transductive;"
    )
    assert exported(repo, "eszsl-tx").submission.declarations["transductive"] is True
    site = json.loads((repo / "build" / "ci" / SITE_DIRNAME / "results.json").read_text())
    (line,) = [r for r in site["records"] if r["record"]["submission"]["name"] == "eszsl-tx"]
    assert line["record"]["submission"]["declarations"]["transductive"] is True


# -- item 7b: one package's exception is that package's failure -----------------------------------

ERRORS = [
    OSError(errno.ELOOP, "Too many levels of symbolic links", "/proc/self/environ"),
    ValueError("could not convert string to float: 'x'"),
    RecursionError("maximum recursion depth exceeded"),
    KeyError("scores"),
]


@pytest.mark.parametrize("error", ERRORS, ids=[type(e).__name__ for e in ERRORS])
def test_any_exception_of_one_package_fails_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_run: RunRecord, error: Exception
) -> None:
    """Attack: a package whose run raises something else than HarnessError (e.g. an output
    link to /proc/self/environ) crashed the job and lost the honest packages' results."""
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "two")
    add_package(repo, "boom", name="boom")
    add_package(repo, "eszsl")
    commit_all(repo, "two packages")
    fake_runs(monkeypatch, {"boom": error, "eszsl": fresh_run})

    result = pr(repo)

    assert not result.ok
    boom, honest = result.outcomes
    assert (boom.package, boom.status) == ("submissions/boom", "failed")
    assert boom.detail == f"specs/demo.yaml: {type(error).__name__}: {error}"
    assert "\n" not in boom.detail
    assert (honest.package, honest.status) == ("submissions/eszsl", "ok")
    assert exported(repo, "eszsl") == fresh_run  # the honest run is scored and exported
    text = report(result)
    assert "**1 of 2 packages failed.**" in text
    assert "| — → 1 | eszsl 1.0 | new |" in text
    assert (repo / "build" / "ci" / SITE_DIRNAME / "index.html").is_file()


def test_an_exception_while_validating_one_package_makes_it_invalid_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_run: RunRecord
) -> None:
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "two")
    add_package(repo, "boom", name="boom")
    add_package(repo, "eszsl")
    commit_all(repo, "two packages")
    fake_runs(monkeypatch, {"eszsl": fresh_run})
    original = harness.submission.unpack.open_package

    def open_package(folder: Path, into: Any) -> Any:
        if Path(folder).name == "boom":
            raise TypeError("unhashable type: 'list'")
        return original(folder, into)

    monkeypatch.setattr(harness.submission.unpack, "open_package", open_package)
    result = pr(repo)
    boom, honest = result.outcomes
    assert (boom.status, boom.detail) == ("invalid", "TypeError: unhashable type: 'list'")
    assert honest.status == "ok"
    assert exported(repo, "eszsl") == fresh_run


def test_a_failing_site_build_is_a_problem_and_the_report_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_run: RunRecord
) -> None:
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "one")
    add_package(repo, "eszsl")
    commit_all(repo, "one package")
    fake_runs(monkeypatch, {"eszsl": fresh_run})

    def broken(*args: Any, **kwargs: Any) -> Path:
        raise RuntimeError("template exploded")

    monkeypatch.setattr(harness.site, "build_site", broken)
    result = pr(repo)
    assert result.problems == ["site build failed: RuntimeError: template exploded"]
    assert result.site is None and not result.ok
    assert "site build failed" in report(result)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), SystemExit(3)])
def test_an_interrupt_still_stops_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_run: RunRecord, interrupt: BaseException
) -> None:
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "two")
    add_package(repo, "boom", name="boom")
    commit_all(repo, "one package")
    fake_runs(monkeypatch, {"boom": interrupt})
    with pytest.raises(type(interrupt)):
        pr(repo)


# -- item 12: the base branch's harness scores the pull request -----------------------------------


def _repo_with_harness(root: Path) -> Path:
    """A board repository that also holds a harness/ (as the real one does), on main."""
    repo = _board_repo(root)
    write(repo / "harness" / "__init__.py", "")
    write(repo / "harness" / "ci.py", "def verdict():\n    return 'strict'\n")
    write(repo / "pyproject.toml", "[project]\nname = 'zsl-harness'\n")
    commit_all(repo, "the harness")
    git(repo, "checkout", "--quiet", "-b", "pr")
    return repo


PR_HARNESS_CHANGES: dict[str, Callable[[Path], None]] = {
    "edited module": lambda repo: write(
        repo / "harness" / "ci.py", "def verdict():\n    return 'lenient'\n"
    ),
    "new module": lambda repo: write(repo / "harness" / "sitecustomize.py", "import os\n"),
    "pyproject": lambda repo: write(
        repo / "pyproject.toml", "[project]\nname = 'zsl-harness'\ndependencies = ['evil']\n"
    ),
}


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "uncommitted"])
@pytest.mark.parametrize("change", list(PR_HARNESS_CHANGES))
def test_the_pr_harness_refuses_to_score_its_own_pull_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str, commit: bool
) -> None:
    """Attack: the PR edits harness/ and CI runs that harness on it. Rule: refuse, unless
    --trust-pr-harness (a local run of one's own change)."""
    repo = _repo_with_harness(tmp_path / "repo")
    PR_HARNESS_CHANGES[change](repo)
    if commit:
        commit_all(repo, "a friendlier harness")
    monkeypatch.setattr(harness.ci.pr, "running_harness_dir", lambda: (repo / "harness").resolve())

    with pytest.raises(HarnessError) as err:
        pr(repo)
    message = str(err.value)
    assert "lives in the repository being scored and differs there from the base main" in message
    assert "run the base branch's harness" in message and "--trust-pr-harness" in message
    assert "\n" not in message
    assert not (repo / "build" / "ci" / DIFF_FILENAME).exists()  # nothing was scored

    monkeypatch.chdir(repo)
    refused = cli.invoke(app, ["ci", "pr", "--base", "main", "--runner", "local", "--quiet"])
    assert refused.exit_code == 1
    assert "run the base branch's harness" in refused.stderr
    trusted = cli.invoke(
        app, ["ci", "pr", "--base", "main", "--runner", "local", "--quiet", "--trust-pr-harness"]
    )
    assert trusted.exit_code == 0, trusted.output
    assert (repo / "build" / "ci" / DIFF_FILENAME).is_file()


def test_an_unchanged_harness_inside_the_repository_may_score_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo_with_harness(tmp_path / "repo")
    write(repo / "harness" / "__pycache__" / "ci.cpython-311.pyc", "ignored\n")
    write(repo / ".gitignore", "__pycache__/\nbuild/\n")
    commit_all(repo, "ignore caches")
    monkeypatch.setattr(harness.ci.pr, "running_harness_dir", lambda: (repo / "harness").resolve())
    assert pr(repo).ok


def test_repo_option_scores_a_pr_checkout_with_the_base_checkouts_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_run: RunRecord
) -> None:
    """As the workflow runs it: the base's harness and ci.yaml/specs, the PR's packages and
    records. A PR that points ci.yaml at its own spec changes nothing."""
    main = _board_repo(tmp_path / "main")
    git(tmp_path, "clone", "--quiet", str(main), "base")
    git(tmp_path, "clone", "--quiet", str(main), "pr")
    checkout = tmp_path / "pr"
    git(checkout, "checkout", "--quiet", "-b", "add-eszsl")
    add_package(checkout, "eszsl")
    write(checkout / "leaderboard" / "ci.yaml", "specs:\n  - specs/mine.yaml\n")
    commit_all(checkout, "add eszsl, and my own benchmark")
    runs = fake_runs(monkeypatch, {"eszsl": fresh_run})
    monkeypatch.chdir(tmp_path)
    argv = ["ci", "pr", "--repo", "pr", "--base", "origin/main", "--runner", "local", "--quiet"]
    argv += ["--executor", "inline"]  # where the stand-in for run_planned is

    mine = cli.invoke(app, argv)  # the PR's own ci.yaml names a spec it does not even have
    assert mine.exit_code == 1 and "specs/mine.yaml" in mine.stderr

    result = cli.invoke(app, [*argv, "--config", "base/leaderboard/ci.yaml", "--out", "out"])
    assert result.exit_code == 0, result.output
    assert runs.calls == ["eszsl"]
    assert exported(checkout, "eszsl") == fresh_run  # into the PR checkout's records
    assert (tmp_path / "out" / DIFF_FILENAME).is_file()
    assert not (tmp_path / "base" / "leaderboard" / "results" / "demo").exists()


def test_a_link_above_the_results_folder_is_refused(tmp_path: Path) -> None:
    """Attack: commit leaderboard/ as a link, so CI reads and writes records elsewhere."""
    repo = _board_repo(tmp_path / "repo")
    git(repo, "checkout", "--quiet", "-b", "link")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(repo / "leaderboard", elsewhere)
    (repo / "leaderboard").symlink_to(elsewhere)
    commit_all(repo, "leaderboard elsewhere")
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    with pytest.raises(HarnessError, match=r"repo/leaderboard: is a symbolic link"):
        pr(repo, config_path=elsewhere / "ci.yaml")
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == before


# -- item 18: a run record leaves the board only with its package ---------------------------------


def _scored_on_main(repo: Path, base_run: RunRecord) -> Path:
    """ESZSL and the record CI exported for it on main; the branch ``removal`` is checked out.
    Returns the record's file."""
    add_package(repo, "eszsl")
    write_records([base_run], repo / RESULTS)
    commit_all(repo, "eszsl, scored by CI")
    git(repo, "checkout", "--quiet", "-b", "removal")
    return record_path(repo / RESULTS, base_run)


def _removal_refused(repo: Path, run: RunRecord, folders: str) -> str:
    return (
        f"{shown(repo, run)}: deleted in this pull request, but its package {folders} is still "
        "there (eszsl@1.0 on demo v1): a run record leaves the board only with its package "
        "(delete the package folder in the same pull request) or by a maintainer's `zsl results "
        "delete` on main; restore the file (it was exported again)"
    )


def test_deleting_the_record_of_a_present_package_fails_and_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord, fresh_run: RunRecord
) -> None:
    """Attack: a pull request whose only change deletes another package's record passed with
    "1 removed run". Rule: a record leaves only with its package (or by a maintainer's
    ``zsl results delete`` on main); the vetted record is exported again."""
    repo = _board_repo(tmp_path / "repo")
    path = _scored_on_main(repo, base_run)
    vetted = path.read_bytes()
    path.unlink()
    commit_all(repo, "drop a rival's record")
    runs = fake_runs(monkeypatch, {"eszsl": fresh_run})

    result = pr(repo)

    assert not result.ok
    assert result.problems == [_removal_refused(repo, base_run, "submissions/eszsl")]
    assert runs.calls == []  # nothing to re-make: the record is the vetted one
    assert path.read_bytes() == vetted
    text = report(result)
    assert f"❌ {escape_markdown(result.problems[0], limit=1000)}" in text
    assert "No change to the leaderboard." in text


def test_deleting_a_package_with_its_records_passes_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord
) -> None:
    repo = _board_repo(tmp_path / "repo")
    path = _scored_on_main(repo, base_run)
    shutil.rmtree(repo / "submissions" / "eszsl")
    path.unlink()
    commit_all(repo, "withdraw eszsl")
    fake_runs(monkeypatch, {})

    result = pr(repo)

    assert result.ok, result.problems
    (outcome,) = result.outcomes
    assert (outcome.package, outcome.status, outcome.detail) == (
        "submissions/eszsl",
        "deleted",
        "package removed, with its 1 run record",
    )
    assert not path.exists()
    text = report(result)
    assert "| submissions/eszsl | deleted: package removed, with its 1 run record |" in text
    assert "0 new, 0 updated, 1 removed run on 1 benchmark." in text


def test_deleting_the_record_of_a_package_gone_before_passes_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package deleted earlier left its record (the report said to delete it): deleting it
    now takes it off the board."""
    repo = _board_repo(tmp_path / "repo")
    gone = record("gone", top1=0.3)
    write_records([gone], repo / RESULTS)
    commit_all(repo, "a record whose package was removed since")
    git(repo, "checkout", "--quiet", "-b", "tidy")
    record_path(repo / RESULTS, gone).unlink()
    commit_all(repo, "its record too")
    fake_runs(monkeypatch, {})

    result = pr(repo)

    assert result.ok, result.problems
    text = report(result)
    assert (
        "Removed 1 run record whose package is no longer under submissions/: "
        f"{escape_markdown(shown(repo, gone))}."
    ) in text
    assert "| 2 → — | gone 1.0 | removed |" in text


@pytest.mark.parametrize("forged", [False, True], ids=["as-is", "forged"])
def test_moving_a_record_file_is_a_removal_plus_an_addition(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    base_run: RunRecord,
    fresh_run: RunRecord,
    forged: bool,
) -> None:
    """The file at the run's path is removed (refused while the package is there), the file
    added elsewhere is re-made by its package like any changed record, and the run is exported
    at its own path."""
    repo = _board_repo(tmp_path / "repo")
    path = _scored_on_main(repo, base_run)
    moved = path.with_name("eszsl-renamed.json")
    committed = forge(base_run, _set("scores.0.value", 0.999)) if forged else base_run
    write_records([committed], tmp_path / "export")
    path.unlink()
    shutil.copy(record_path(tmp_path / "export", committed), moved)
    commit_all(repo, "move the record")
    runs = fake_runs(monkeypatch, {"eszsl": fresh_run})

    result = pr(repo)

    assert runs.calls == ["eszsl"]
    assert not result.ok
    removal = _removal_refused(repo, base_run, "submissions/eszsl")
    if forged:
        flag, refused = result.problems
        assert flag.startswith(
            f"{moved.relative_to(repo).as_posix()}: ⚠ the committed record differed from a "
            "fresh run in: scores[0].value;"
        )
        assert refused == removal
        assert exported(repo, "eszsl") == fresh_run
    else:
        assert result.problems == [removal]
        assert exported(repo, "eszsl") == base_run  # reproduced: the committed record is kept
    assert path.is_file() and not moved.exists()


def test_overwriting_the_record_file_with_another_run_is_a_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_run: RunRecord
) -> None:
    """Attack variant: the path stays, its content becomes another run's (here the board's
    ``ale``, moved over it): ESZSL's run is gone all the same."""
    repo = _board_repo(tmp_path / "repo")
    path = _scored_on_main(repo, base_run)
    vetted = path.read_bytes()
    (ale,) = (repo / RESULTS).rglob("ale@*.json")
    ale_vetted = ale.read_bytes()
    path.write_bytes(ale_vetted)
    ale.unlink()
    commit_all(repo, "ale over eszsl")
    fake_runs(monkeypatch, {})

    result = pr(repo)

    assert not result.ok
    unreproduced, removal = result.problems
    assert unreproduced.startswith(f"{shown(repo, base_run)}: changed in this pull request, but")
    assert removal == _removal_refused(repo, base_run, "submissions/eszsl")
    assert (path.read_bytes(), ale.read_bytes()) == (vetted, ale_vetted)  # both as vetted


@pytest.mark.parametrize("how", ["folder-renamed", "submission-renamed"])
def test_deleting_the_record_of_a_package_under_another_folder_or_name_fails(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    base_run: RunRecord,
    fresh_run: RunRecord,
    how: str,
) -> None:
    """The package is the folder whose manifest has the record's submission name now, or had
    it at the fork point: moving the folder, or renaming the submission, keeps it present."""
    repo = _board_repo(tmp_path / "repo")
    path = _scored_on_main(repo, base_run)
    if how == "folder-renamed":
        shutil.move(repo / "submissions" / "eszsl", repo / "submissions" / "eszsl-v2")
        folder, made = "submissions/eszsl-v2", fresh_run
    else:
        manifest = repo / "submissions" / "eszsl" / "submission.yaml"
        manifest.write_text(
            manifest.read_text(encoding="utf-8").replace("name: eszsl\n", "name: eszsl-x\n"),
            encoding="utf-8",
        )
        folder = "submissions/eszsl"
        renamed = fresh_run.submission.model_copy(
            update={
                "name": "eszsl-x",
                "package_hash": harness.submission.unpack.open_package(
                    repo / folder, tmp_path / "work"
                ).hash(),
            }
        )
        made = fresh_run.model_copy(update={"submission": renamed})
    path.unlink()
    commit_all(repo, f"{how}, and its old record deleted")
    runs = fake_runs(monkeypatch, {Path(folder).name: made})

    result = pr(repo)

    assert runs.calls == [Path(folder).name]
    assert not result.ok
    assert result.problems == [_removal_refused(repo, base_run, folder)]
    assert path.is_file()  # exported again (or, moved folder: re-made by its fresh run)

"""The pull-request job (``zsl ci pr``): changed packages → runs → checks → records, site, report.

See docs/ci.md.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

import harness.site
import harness.submission.unpack
from harness.ci.config import CI_CONFIG, config_root, config_spec_paths, load_ci_config
from harness.ci.diff import (
    index_records,
    leaderboard_diff,
    same_result,
)
from harness.ci.git import (
    SUBMISSIONS,
    PackageChanges,
    all_packages,
    changed_packages,
    committed_files,
    committed_records,
    find_repo_root,
    manifest_name_at,
    merge_base,
    refuse_links_on_the_way,
    relative_to_root,
    resolve_commit,
    work_tree_changes,
)
from harness.ci.markdown import MAX_DETAIL, escape_markdown, one_line, short_list
from harness.class_embedding import not_applicable_reason
from harness.core.atomic import write_text_atomic
from harness.core.errors import HarnessError, error_text
from harness.core.tempdirs import run_directory
from harness.executors.matrix import RunRequest, RunResult, run_matrix
from harness.records import RunKey, RunRecord, run_key
from harness.results.records_io import (
    RECORD_SUFFIX,
    RecordFile,
    describe_key,
    load_record,
    read_record_files,
    read_records,
    write_records,
)
from harness.results.reported import reported_in
from harness.results.reproduction import result_differences
from harness.results.standing import badges_text, excluded_why
from harness.runners import sandbox
from harness.scoring import below_chance
from harness.site.text import format_value
from harness.spec import load_spec
from harness.store import open_store, save_run
from harness.submission.package import DATA_SUFFIXES, MANIFEST
from harness.submission.resources import CapNote, ResourceCaps, cap_resources

__all__ = [
    "DIFF_FILENAME",
    "SITE_DIRNAME",
    "Execution",
    "PackageOutcome",
    "PullRequestResult",
    "check_harness_is_base",
    "render_report",
    "run_pull_request",
    "running_harness_dir",
]

#: What ``zsl ci pr`` writes into its output folder.
DIFF_FILENAME = "leaderboard-diff.md"
SITE_DIRNAME = "site"
STORE_FILENAME = "store.sqlite3"

_MAX_PROBLEM = 1000  # characters of one problem of the job (with its field paths) kept


@dataclass(frozen=True)
class PackageOutcome:
    """What CI made of one package: ``ok``, ``invalid``, ``failed`` (its run), ``deleted`` or
    ``not-applicable`` (it uses a kind of class embedding no benchmark CI scores on has, so it
    ran nowhere: not a failure; :mod:`harness.class_embedding`).

    ``warnings``: one line per warning about one of its runs (a score below chance,
    :func:`harness.scoring.below_chance`), shown under the package's result.
    """

    package: str
    status: Literal["ok", "invalid", "failed", "deleted", "not-applicable"]
    detail: str
    warnings: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.status in ("invalid", "failed")


def render_report(
    outcomes: Sequence[PackageOutcome], diff: str, *, notes: Sequence[str] = ()
) -> str:
    """The pull-request report: one line per package (what failed and why), notes, the diff."""
    failed = [o for o in outcomes if o.failed]
    lines = ["## zsl leaderboard CI", ""]
    if not outcomes:
        lines.append("No submission package changed.")
    else:
        scored = [o for o in outcomes if o.status not in ("deleted", "not-applicable")]
        if failed:
            lines.append(f"**{len(failed)} of {len(scored)} packages failed.**")
        elif scored:
            lines.append(f"All {len(scored)} changed packages passed.")
        inapplicable = sum(o.status == "not-applicable" for o in outcomes)
        if inapplicable:
            lines.append(
                f"{inapplicable} package{'s' if inapplicable != 1 else ''} not applicable to"
                " any benchmark CI scores on (not a failure: see below)."
            )
        warned = sum(len(o.warnings) for o in outcomes)
        if warned:
            lines.append(
                f"**⚠️ {warned} score{'s' if warned != 1 else ''} below chance: see the "
                "warnings under the package.**"
            )
        lines += ["", "| Package | Result |", "| --- | --- |"]
        icons = {
            "ok": "✅ ok",
            "invalid": "❌ invalid",
            "failed": "❌ failed",
            "deleted": "deleted",
            "not-applicable": "➖ not applicable",
        }
        for outcome in outcomes:
            detail = escape_markdown(outcome.detail, limit=MAX_DETAIL)
            lines.append(
                f"| {escape_markdown(outcome.package)} | {icons[outcome.status]}: {detail} |"
            )
            for warning in outcome.warnings:
                shown = escape_markdown(warning, limit=_MAX_PROBLEM)
                lines.append(f"| | ⚠️ **warning**: {shown} |")
    for note in notes:
        lines += ["", note]
    return "\n".join(lines) + "\n\n" + diff


def _primary_summary(record: RunRecord) -> str:
    """The benchmark and its primary scores, in the spec's order of scores (the ``primary``
    mapping's order is not kept by a record's JSON export)."""
    parts = []
    for entry in record.scores:
        if record.benchmark.primary.get(entry.setting) == entry.metric:
            percent = 0.0 <= entry.value <= 1.0
            value = format_value(entry.value, percent=percent)
            parts.append(f"{entry.setting} {entry.metric} {value}")
    where = f"{record.benchmark.id} v{record.benchmark.version} {badges_text(record.benchmark)}"
    return f"{where} ({', '.join(parts)})" if parts else where


def _error_text(err: Exception, repo_root: Path | None) -> str:
    """One line for any exception (:func:`harness.core.errors.error_text`), paths made relative."""
    return one_line(error_text(err), repo_root)


def _shown(path: Path, roots: Sequence[Path]) -> str:
    for root in roots:
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return str(path)


@dataclass(frozen=True)
class Execution:
    """Where the pull request's runs execute (:mod:`harness.executors`): ``executor`` with
    ``jobs`` workers or CPUs, on the Ray cluster at ``ray_address``, each run tried again
    ``max_retries`` times when its worker or node died."""

    executor: str = "local"
    jobs: int | None = None
    ray_address: str | None = None
    max_retries: int = 2


@dataclass(frozen=True)
class _FileRule:
    """The suffixes a package may hold besides source and declared data (the CI configuration's
    ``allowed_data_suffixes``), and the configuration file as messages name it."""

    allowed: Collection[str]
    config_shown: str


def _undeclared_detail(package: str, files: Sequence[str], rule: _FileRule) -> str:
    """Why ``package`` fails for holding ``files`` (sorted), none of them source or declared
    data: the first named, what to do, how many more."""
    first = files[0]
    suffix = PurePosixPath(first).suffix.lower()
    where = f"allowed_data_suffixes in {rule.config_shown}"
    if suffix:
        allowed = f"{where} does not list '{suffix}'"
        todo = f"ask the leaderboard's maintainers to list '{suffix}' there"
    else:
        allowed = f"it has no suffix for {where} to list"
        todo = "delete it"
    more = (
        f" ({len(files) - 1} more such file(s): {short_list(files[1:], 3)})"
        if len(files) > 1
        else ""
    )
    declared = ", ".join(sorted(DATA_SUFFIXES))
    return (
        f"{package}/{first}: neither source nor a declared data format ({declared}, or the"
        f" package's prediction files), and {allowed}: convert it to a declared format, or"
        f" {todo}{more}"
    )


def _validate(
    package: str, repo_root: Path, caps: ResourceCaps, rule: _FileRule
) -> tuple[PackageOutcome | None, tuple[CapNote, ...], str]:
    """(None, notes, class embedding) when ``package`` (repository-relative) opens as a valid
    package within ``caps`` (the CI configuration's ``max_resources``), holding only files the
    leaderboard accepts (:meth:`~harness.submission.package.Package.undeclared_files` with
    ``rule``), with a note per resource its runs get less of than it declares and its
    ``declarations.class_embedding``; else (its outcome, (), "default").

    A package asking for more GPUs than ``caps`` is ``invalid``. Any exception while validating
    is this package's failure (``invalid``, with a one-line reason), never the job's: a hostile
    package must not take the other packages' results down with it. Only
    ``KeyboardInterrupt`` and ``SystemExit`` (not ``Exception``) pass through.
    """
    try:
        with run_directory("zsl-ci-validate-") as tmp:
            loaded = harness.submission.unpack.open_package(repo_root / package, tmp)
            capped = cap_resources(loaded.manifest.resources, caps)
            capped.check(f"{package}/{MANIFEST}")
            undeclared = loaded.undeclared_files(rule.allowed)
    except Exception as err:  # any failure of one package is that package's (see above)
        return PackageOutcome(package, "invalid", _error_text(err, repo_root)), (), "default"
    if undeclared:
        detail = one_line(_undeclared_detail(package, undeclared, rule))
        return PackageOutcome(package, "invalid", detail), (), "default"
    return None, capped.notes, loaded.manifest.declarations.class_embedding


def _with_caps(outcome: PackageOutcome, notes: Sequence[CapNote]) -> PackageOutcome:
    """``outcome`` with what its runs got less of than declared after its detail (a run that
    timed out at CI's cap says so next to its failure)."""
    if not notes:
        return outcome
    capped = "; ".join(str(note) for note in notes)
    return PackageOutcome(
        outcome.package,
        outcome.status,
        f"{outcome.detail}; resources capped: {capped}",
        outcome.warnings,
    )


def _package_outcome(
    package: str,
    results: Sequence[RunResult],
    *,
    repo_root: Path,
    spec_root: Path,
    not_applicable: Sequence[str] = (),
) -> PackageOutcome:
    """One package's outcome from its runs on every spec: ``ok`` with each benchmark's primary
    scores, or ``failed`` with every failing spec's reason joined into one line;
    ``not-applicable`` when it ran on none, ``not_applicable`` saying why for each spec."""
    failures = [
        f"{_shown(r.request.spec, [repo_root, spec_root])}: {one_line(r.error or '', repo_root)}"
        for r in results
        if r.record is None
    ]
    # The leaderboard takes runs of benchmarks that count across benchmarks only: not a
    # synthetic stand-in, not an unverified copy of a release, not an experimental set.
    failures += [
        f"{_shown(r.request.spec, [repo_root, spec_root])}: refused for the leaderboard: {why}"
        " (its runs stay out of the cross-benchmark tables; the leaderboard takes runs of"
        " verified releases, generated or own data that is not experimental)"
        for r in results
        if r.record is not None and (why := excluded_why(r.record.benchmark)) is not None
    ]
    if failures:
        return PackageOutcome(package, "failed", one_line("; ".join(failures)))
    if not results and not_applicable:
        return PackageOutcome(package, "not-applicable", one_line("; ".join(not_applicable)))
    detail = "scored on " + "; ".join(_primary_summary(r.record) for r in results if r.record)
    if not_applicable:
        detail += f"; not applicable: {'; '.join(not_applicable)}"
    warnings = tuple(
        f"{describe_key(run_key(r.record))}: {warning}"
        for r in results
        if r.record is not None
        for warning in below_chance(r.record)
    )
    return PackageOutcome(package, "ok", detail, warnings)


@dataclass
class PullRequestResult:
    """What ``zsl ci pr`` did: one outcome per package, and the files it wrote.

    ``problems`` are the job's own failures: a committed record that differs from a fresh run
    (forged or stale), a changed record no package reproduces, a failed site build.
    """

    outcomes: list[PackageOutcome]
    report: Path
    site: Path | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not any(o.failed for o in self.outcomes)


def _fresh_store(out_dir: Path) -> str:
    """The URL of an empty SQLite store under ``out_dir`` (an earlier one is removed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = (out_dir / STORE_FILENAME).absolute()
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"sqlite:///{path}"


def running_harness_dir() -> Path:
    """The folder of the ``harness`` package this process runs (resolved)."""
    return Path(harness.__file__).resolve().parent


def check_harness_is_base(commit: str, repo_root: Path, base: str | None = None) -> None:
    """Refuse to score ``repo_root`` with a harness that lives in it and differs from ``commit``.

    A pull request that edits ``harness/`` controls the sandbox and the verdict if its own
    harness scores it, so CI runs the base branch's harness from a separate checkout (and this
    check passes: the harness is outside the repository scored). Run from inside the
    repository, the harness (and the ``pyproject.toml`` beside it) must be the one of
    ``commit``: no tracked change, no untracked file.

    Raises
    ------
    HarnessError
        The running harness is in ``repo_root`` and differs from ``commit``; the message names
        what differs and says to run the base branch's harness (or ``--trust-pr-harness``).
    """
    root = find_repo_root(repo_root)
    here = running_harness_dir()
    try:
        inside = PurePosixPath(here.relative_to(root.resolve()).as_posix())
    except ValueError:
        return  # the harness is installed outside the repository it scores
    paths = [str(inside), str(inside.parent / "pyproject.toml")]
    differing = work_tree_changes(commit, paths, root, untracked=[str(inside)])
    if differing:
        shown = short_list(differing, 3)
        raise HarnessError(
            f"the harness running this job ({here}) lives in the repository being scored and "
            f"differs there from the base {base or commit} ({shown}): a pull request must not "
            "be scored by its own harness; run the base branch's harness (a separate checkout "
            "of the base, installed in its own environment) with --repo pointing at this "
            "checkout, as .github/workflows/leaderboard.yml does, or pass --trust-pr-harness "
            "to score your own local change"
        )


@dataclass
class _ChangedRecord:
    file: RecordFile
    shown: str  # its path, relative to the repository


@dataclass
class _RemovedRecord:
    record: RunRecord  # as vetted at the fork point
    shown: str  # its path at the fork point, relative to the repository


@dataclass
class _Records:
    """The pull request's record files against the fork point's (:func:`_split_records`)."""

    trusted: dict[RunKey, RunRecord]
    changed: dict[RunKey, _ChangedRecord]
    removed: list[_RemovedRecord]


def _split_records(
    results_dir: Path, results_rel: PurePosixPath, vetted: dict[PurePosixPath, bytes], fork: str
) -> _Records:
    """The record files under ``results_dir`` byte-identical to ``vetted`` (the fork point's
    files: trusted), every other one (changed), and the fork point's records whose file is gone
    or now holds another run (removed: a moved file is a removal plus an addition), each shown
    by its path from the repository."""
    head = read_record_files(results_dir) if os.path.lexists(results_dir) else []
    trusted: dict[RunKey, RunRecord] = {}
    changed: dict[RunKey, _ChangedRecord] = {}
    at_head: dict[PurePosixPath, RunKey] = {}
    for file in head:
        relative = PurePosixPath(file.path.relative_to(results_dir).as_posix())
        at_head[relative] = run_key(file.record)
        if vetted.get(relative) == file.text.encode("utf-8"):
            trusted[run_key(file.record)] = file.record
        else:
            changed[run_key(file.record)] = _ChangedRecord(
                file, (results_rel / relative).as_posix()
            )
    removed = []
    for relative, data in sorted(vetted.items()):
        if not relative.name.endswith(RECORD_SUFFIX) or at_head.get(relative) in trusted:
            continue
        shown = (results_rel / relative).as_posix()
        try:
            record = load_record(data.decode("utf-8"), f"{fork}:{shown}")
        except UnicodeDecodeError as err:
            raise HarnessError(f"{fork}:{shown}: cannot read ({err})") from None
        if at_head.get(relative) != run_key(record):
            removed.append(_RemovedRecord(record, shown))
    return _Records(trusted, changed, removed)


def _owners(root: Path) -> dict[str, list[str]]:
    """The package folders at ``HEAD`` by the submission name their manifest gives."""
    owners: dict[str, list[str]] = {}
    for folder in all_packages(root).modified:
        name = manifest_name_at("HEAD", folder, root)
        if name is not None:
            owners.setdefault(name, []).append(folder)
    return owners


def _reruns(
    changed: dict[RunKey, _ChangedRecord], owners: dict[str, list[str]], to_run: set[str]
) -> set[str]:
    """The packages outside ``to_run`` to run too: the one package of each changed record's
    submission name (each changed record is re-made by its package, changed or not)."""
    rerun = set()
    for key in changed:
        folders = owners.get(key[2], [])
        if len(folders) == 1 and folders[0] not in to_run:
            rerun.add(folders[0])
    return rerun


def _seeded_store(out_dir: Path, trusted: Iterable[RunRecord]) -> str:
    """The URL of a fresh store under ``out_dir`` holding the ``trusted`` runs.

    Storing a new run there checks it against them (same benchmark data, portable values)
    exactly as the real store would; an edited record never gets there."""
    url = _fresh_store(out_dir)
    engine = open_store(url)
    try:
        for record in trusted:
            save_run(engine, record)
    finally:
        engine.dispose()
    return url


def _score_packages(
    packages: list[str],
    rerun: set[str],
    owners: dict[str, list[str]],
    specs: Sequence[Path],
    *,
    repo_root: Path,
    database_url: str,
    runner: str,
    quiet: bool,
    spec_root: Path,
    execution: Execution,
    caps: ResourceCaps,
    rule: _FileRule,
) -> tuple[list[PackageOutcome], dict[RunKey, RunRecord], set[str]]:
    """(outcomes, fresh records, failed packages) of validating each of ``packages``, then
    running every valid one on every spec as one matrix into ``database_url``, each run held
    to ``caps`` (the CI configuration's ``max_resources``) as well as to the machine's.

    A package that fails on one benchmark is still tried on the others; any failure of one run
    (whatever it raised) is that run's (:func:`run_matrix`), so one package's failure never
    takes the others' results down."""
    checked: dict[str, PackageOutcome | None] = {}
    notes: dict[str, tuple[CapNote, ...]] = {}
    uses: dict[str, str] = {}
    for package in packages:
        name = manifest_name_at("HEAD", package, repo_root)
        others = [f for f in owners.get(name, []) if f != package] if name is not None else []
        if others:
            # Two folders of one name would make one run's record replace the other's.
            detail = (
                f"the submission name {name!r} is also the name of {', '.join(others)}; "
                "one package folder per submission name"
            )
            checked[package] = PackageOutcome(package, "invalid", detail)
        else:
            checked[package], notes[package], uses[package] = _validate(
                package, repo_root, caps, rule
            )
    reasons = _not_applicable(uses, specs, [repo_root, spec_root])
    requests = [
        RunRequest(repo_root / package, spec, runner, caps)
        for package, problem in checked.items()
        if problem is None
        for spec in specs
        if (package, spec) not in reasons
    ]
    report = run_matrix(
        requests,
        executor=execution.executor,
        jobs=execution.jobs,
        ray_address=execution.ray_address,
        database_url=database_url,
        max_retries=execution.max_retries,
        rerun=True,  # every package to run is run: a stored result is what is being checked
        progress=not quiet,
    )
    runs: dict[str, list[RunResult]] = {}
    for result in report.results:
        package = result.request.package.relative_to(repo_root).as_posix()
        runs.setdefault(package, []).append(result)
    outcomes: list[PackageOutcome] = []
    fresh: dict[RunKey, RunRecord] = {}
    failed: set[str] = set()
    for package, problem in checked.items():
        outcome = problem or _package_outcome(
            package,
            runs.get(package, []),
            repo_root=repo_root,
            spec_root=spec_root,
            not_applicable=[why for (p, _), why in reasons.items() if p == package],
        )
        outcome = _with_caps(outcome, notes.get(package, ()))
        if package in rerun:
            outcome = PackageOutcome(
                outcome.package,
                outcome.status,
                f"re-run, as its record changed: {outcome.detail}",
                outcome.warnings,
            )
        outcomes.append(outcome)
        if outcome.failed:
            failed.add(package)
        for result in runs.get(package, []):
            if result.record is not None:
                fresh[run_key(result.record)] = result.record
    return outcomes, fresh, failed


def _not_applicable(
    uses: dict[str, str], specs: Sequence[Path], roots: Sequence[Path]
) -> dict[tuple[str, Path], str]:
    """``(package, spec) -> why`` for each pair whose package uses a kind of class embedding
    the spec lacks (``uses``: each package's declaration): that pair is not run. A spec that
    does not load is left to its runs, which report it."""
    found: dict[tuple[str, Path], str] = {}
    for spec_path in specs:
        try:
            spec = load_spec(spec_path)
        except HarnessError:
            continue
        for package, declared in uses.items():
            reason = not_applicable_reason(declared, spec)
            if reason is not None:
                found[package, spec_path] = f"{_shown(spec_path, roots)}: {reason}"
    return found


def _unreproduced(name: str, owners: dict[str, list[str]], failed: set[str], config: str) -> str:
    """Why no fresh run of submission ``name`` came back (``config``: the CI config, shown)."""
    folders = owners.get(name, [])
    if not folders:
        return f"no package under {SUBMISSIONS}/ is named {name!r}"
    if len(folders) > 1:
        return f"several packages are named {name!r}"
    if folders[0] in failed:
        return f"its package {folders[0]} failed"
    return (
        f"its package {folders[0]} does not make this run (another version, or a "
        f"benchmark {config} does not list)"
    )


def _reconcile(
    changed: dict[RunKey, _ChangedRecord],
    fresh: dict[RunKey, RunRecord],
    trusted: dict[RunKey, RunRecord],
    owners: dict[str, list[str]],
    failed: set[str],
    *,
    fork: str,
    results_dir: Path,
    root: Path,
    config_shown: str,
) -> tuple[dict[RunKey, RunRecord], list[str]]:
    """(records to export, problems): the trusted records, each changed one checked against its
    fresh run, and the fresh runs that change a result.

    A changed record with no fresh run is a problem, and the fork point's record of its run (if
    any) is kept; one that differs from its fresh run is a problem, and the fresh run is kept;
    one its fresh run reproduces is kept as it is."""
    problems: list[str] = []
    merged = dict(trusted)
    fork_records: dict[RunKey, RunRecord] | None = None
    for key, change in sorted(changed.items()):
        new = fresh.get(key)
        if new is None:
            why = _unreproduced(key[2], owners, failed, config_shown)
            problems.append(
                f"{change.shown}: changed in this pull request, but no package reproduces it "
                f"({describe_key(key)}): {why}; records are written by CI, so it was not "
                "exported: commit the records `zsl ci pr` exports, never hand-written or "
                "edited ones"
            )
            if fork_records is None:  # keep what was vetted, if anything
                fork_records = index_records(committed_records(fork, results_dir, root))
            if key in fork_records:
                merged[key] = fork_records[key]
            continue
        found = result_differences(change.file.record, new)
        fields = [d.field for d in found if not d.within_tolerance]
        if fields:
            problems.append(
                f"{change.shown}: ⚠ the committed record differed from a fresh run in: "
                f"{short_list(fields)}; the fresh record was exported in its place (records are "
                "written by CI: commit the exported records, never edited ones)"
            )
            merged[key] = new
        elif found:
            # Reproduced within the tolerance for another platform's rounding (prediction
            # hashes, last digits of scores): no problem, but CI's record is the one exported,
            # so the board holds what this CI computed (the diff shows it as updated).
            merged[key] = new
        else:
            merged[key] = change.file.record  # reproduced: keep the file as it is
    for key, record in fresh.items():
        if key not in changed and not same_result(trusted.get(key), record):
            merged[key] = record
    return merged, problems


def _holders(
    removed: Sequence[_RemovedRecord], owners: dict[str, list[str]], fork: str, root: Path
) -> dict[str, list[str]]:
    """Submission name -> the package folders in the pull request's tree that hold it, for the
    names of the ``removed`` records: a folder whose manifest has the name now (``owners``) or
    had it at the fork point (renaming the submission, or breaking its manifest, keeps the
    package)."""
    names = {r.record.submission.name for r in removed}
    holders = {name: list(owners.get(name, [])) for name in names}
    for folder in all_packages(root).modified:
        before = manifest_name_at(fork, folder, root)
        if before in holders and folder not in holders[before]:
            holders[before].append(folder)
    return holders


def _check_removals(
    removed: Sequence[_RemovedRecord],
    holders: dict[str, list[str]],
    merged: dict[RunKey, RunRecord],
) -> tuple[list[str], list[_RemovedRecord]]:
    """(problems, accepted): a removed record whose package is still in the tree is a problem,
    and its vetted record goes back into ``merged`` (unless its run is there already: moved and
    reproduced); the others are accepted, as they left with their package."""
    problems, accepted = [], []
    for gone in removed:
        key = run_key(gone.record)
        folders = holders.get(key[2], [])
        if not folders:
            accepted.append(gone)
            continue
        problems.append(
            f"{gone.shown}: deleted in this pull request, but its package {', '.join(folders)} "
            f"is still there ({describe_key(key)}): a run record leaves the board only with its "
            "package (delete the package folder in the same pull request) or by a maintainer's "
            "`zsl results delete` on main; restore the file (it was exported again)"
        )
        merged.setdefault(key, gone.record)
    return problems, accepted


def _deleted_outcomes(
    folders: Sequence[str],
    merged: dict[RunKey, RunRecord],
    *,
    commit: str,
    root: Path,
    results_rel: PurePosixPath,
    removed: Counter[str],
) -> list[PackageOutcome]:
    """The outcomes of the deleted package ``folders``, counting the records of theirs this pull
    request removed (``removed``: by submission name) and naming those left."""
    outcomes = []
    for folder in folders:
        name = manifest_name_at(commit, folder, root)
        left = sum(1 for key in merged if key[2] == name)
        gone = removed.get(name, 0) if name is not None else 0
        detail = "package removed"
        if gone:
            detail += f", with its {gone} run record{'s' if gone != 1 else ''}"
        if left:
            detail += (
                f"; {left} run record{'s' if left != 1 else ''} of {name} remain in "
                f"{results_rel}: delete them to take it off the board"
            )
        outcomes.append(PackageOutcome(folder, "deleted", detail))
    return outcomes


def run_pull_request(
    base: str,
    *,
    repo_root: Path,
    results_dir: Path,
    out_dir: Path,
    runner: str = "sandbox",
    config_path: Path | None = None,
    every_package: bool = False,
    quiet: bool = True,
    trust_pr_harness: bool = False,
    execution: Execution | None = None,
) -> PullRequestResult:
    """Validate, run and score the packages changed since ``base``; write the report and the site.

    See docs/ci.md, `run_pull_request`.
    """
    root = find_repo_root(repo_root)
    commit = resolve_commit(base, root)
    if not trust_pr_harness:
        check_harness_is_base(commit, root, base)
    config_path = config_path if config_path is not None else root / CI_CONFIG
    config = load_ci_config(config_path)
    spec_root = config_root(config_path, root)
    specs = config_spec_paths(config, spec_root, config_path)
    results_rel = relative_to_root(results_dir, root)  # refuses a link on the way down
    results_dir = root / results_rel
    refuse_links_on_the_way(out_dir, root)
    changes = changed_packages(commit, root)
    if every_package:
        changes = PackageChanges(modified=all_packages(root).modified, deleted=changes.deleted)
    before = committed_records(commit, results_dir, root)

    # Which record files can be trusted: only those byte-identical to the fork point's (what
    # CI vetted when it merged them). Anything else was written by whoever made the change.
    fork = merge_base(commit, root)
    vetted = committed_files(fork, results_dir, root)
    records = _split_records(results_dir, results_rel, vetted, fork)
    trusted, changed = records.trusted, records.changed
    owners = _owners(root)
    to_run = set(changes.changed)
    rerun = _reruns(changed, owners, to_run)
    to_run |= rerun
    if to_run and runner == "sandbox" and not sandbox.available():
        raise HarnessError(
            "the sandbox runner can't start here (bubblewrap missing, or user namespaces "
            "disallowed); install bubblewrap or pass --runner"
        )
    url = _seeded_store(out_dir, trusted.values())
    config_shown = _shown(config_path, [root, spec_root])
    outcomes, fresh, failed = _score_packages(
        sorted(to_run),
        rerun,
        owners,
        specs,
        repo_root=root,
        database_url=url,
        runner=runner,
        quiet=quiet,
        spec_root=spec_root,
        execution=execution or Execution(),
        caps=config.resource_caps(config_shown),
        rule=_FileRule(frozenset(config.allowed_data_suffixes), config_shown),
    )
    merged, problems = _reconcile(
        changed,
        fresh,
        trusted,
        owners,
        failed,
        fork=fork,
        results_dir=results_dir,
        root=root,
        config_shown=config_shown,
    )
    holders = _holders(records.removed, owners, fork, root) if records.removed else {}
    refused, accepted = _check_removals(records.removed, holders, merged)
    problems += refused
    committed = {**trusted, **{key: change.file.record for key, change in changed.items()}}
    outcomes += _deleted_outcomes(
        changes.deleted,
        merged,
        commit=commit,
        root=root,
        results_rel=results_rel,
        removed=Counter(r.record.submission.name for r in accepted),
    )

    write_records(merged.values(), results_dir, prune=True)
    after = read_records(results_dir)
    notes = []
    deleted_names = (
        {manifest_name_at(commit, folder, root) for folder in changes.deleted}
        if accepted
        else set()
    )
    orphans = [r.shown for r in accepted if r.record.submission.name not in deleted_names]
    if orphans:
        notes.append(
            f"Removed {len(orphans)} run record{'s' if len(orphans) != 1 else ''} whose package "
            f"is no longer under {SUBMISSIONS}/: {escape_markdown(short_list(orphans, 3))}."
        )
    stale = [r for key, r in fresh.items() if not same_result(committed.get(key), r)]
    if stale:
        notes.append(
            f"This commit's {escape_markdown(str(results_rel))} lacks {len(stale)} of the run "
            "records above (new or changed): commit the exported records (the "
            "`leaderboard-results` artifact, or run `zsl ci pr` locally) so that the merge "
            "publishes them."
        )
    site: Path | None = None
    try:
        site = harness.site.build_site(
            after, out_dir / SITE_DIRNAME, reported=reported_in(results_dir.parent / "reported")
        )
    except Exception as err:  # the report must still be written
        problems.append(f"site build failed: {_error_text(err, root)}")
    for problem in problems:
        notes.append(f"❌ {escape_markdown(problem, limit=_MAX_PROBLEM)}")
    diff = leaderboard_diff(before, after, reproduced=set(fresh))
    report = out_dir / DIFF_FILENAME
    write_text_atomic(report, render_report(outcomes, diff, notes=notes))
    return PullRequestResult(outcomes=outcomes, report=report, site=site, problems=problems)

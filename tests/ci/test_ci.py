"""`zsl ci`: changed packages from real git history, the Markdown leaderboard diff, the PR job.

The diff is checked against Markdown written out by hand; hostile strings are rendered with a
CommonMark parser (markdown-it-py, which rich already depends on) to show they stay text. The
pull-request job runs end to end on the demo in a temporary git repository holding one cheap
model submission (ESZSL).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from harness.ci import (
    CI_CONFIG,
    DIFF_FILENAME,
    PackageChanges,
    changed_packages,
    committed_records,
    config_spec_paths,
    escape_markdown,
    leaderboard_diff,
    load_ci_config,
)
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.records import BenchmarkInfo, Interval, RunRecord, ScoreEntry, SubmissionInfo, run_key
from harness.results.records_io import read_records, record_path, write_records
from harness.site.model import plan_site
from harness.site.text import format_value
from tests.conftest import REPO, SPECS, SUBMISSIONS

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

cli = CliRunner()
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
WORKFLOW = REPO / ".github" / "workflows" / "leaderboard.yml"


# -- helpers --------------------------------------------------------------------------------------


def score(setting: str, metric: str, value: float, **extra: Any) -> ScoreEntry:
    return ScoreEntry(
        setting=setting, metric=metric, function=f"fn_{metric}", version="1", value=value, **extra
    )


def record(
    name: str,
    *,
    top1: float,
    h: float | None = None,
    benchmark: str = "cub-demo",
    benchmark_version: int = 1,
    title: str = "CUB demo",
    version: str = "1.0",
    package: str = "a",
    top1_version: str = "1",
    top1_interval: tuple[float, float] | None = None,
    created_at: datetime = T0,
) -> RunRecord:
    """A run with ZSL top-1 (and GZSL H when given); primary metrics top1 and H."""
    interval = None
    if top1_interval is not None:
        lo, hi = top1_interval
        interval = Interval(lo=lo, hi=hi, scheme="images_within_class", n_boot=1000)
    scores = [
        ScoreEntry(
            setting="zsl",
            metric="top1",
            function="per_class_top_k_accuracy",
            version=top1_version,
            value=top1,
            interval=interval,
        )
    ]
    if h is not None:
        scores.append(score("gzsl", "H", h))
    return RunRecord(
        benchmark=BenchmarkInfo(
            id=benchmark,
            version=benchmark_version,
            title=title,
            hash="sha256:" + "b" * 64,
            spec_hash="sha256:" + "c" * 64,
            primary={"zsl": "top1", "gzsl": "H"},
        ),
        submission=SubmissionInfo(
            name=name, version=version, kind="model", package_hash="sha256:" + package * 64
        ),
        predictions_hashes={"zsl": "sha256:" + "d" * 64},
        harness_version="0.1.0",
        runner="sandbox",
        scores=scores,
        created_at=created_at,
    )


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    # Neither the user's git configuration (signing, hooks, default branch) nor their identity.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "CI Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "ci@example.org")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def write(path: Path, text: str = "x\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", message)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", "-b", "main")
    return path


# -- changed packages -----------------------------------------------------------------------------


def test_changed_packages_sorts_added_modified_deleted_since_the_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_repo(tmp_path / "repo")
    write(repo / "submissions/README.md")
    for name in ("alpha", "beta", "gamma", "epsilon"):
        write(repo / f"submissions/{name}/submission.yaml", f"name: {name}\n")
    write(repo / "submissions/alpha/model.py")
    write(repo / "harness/x.py")
    commit_all(repo, "base")
    git(repo, "checkout", "--quiet", "-b", "feature")
    write(repo / "submissions/alpha/model.py", "changed\n")  # modified (not its manifest)
    shutil.rmtree(repo / "submissions/beta")  # deleted
    write(repo / "submissions/delta/submission.yaml")  # added
    write(repo / "submissions/notes/readme.txt")  # added folder without a manifest: reported
    write(repo / "submissions/README.md", "changed\n")  # not in a package
    write(repo / "harness/x.py", "changed\n")  # not under submissions/
    git(repo, "mv", "submissions/gamma", "submissions/gamma2")  # a rename: delete + add
    commit_all(repo, "feature")
    # A change on main after the fork is not the feature's change (BASE...HEAD).
    git(repo, "checkout", "--quiet", "main")
    write(repo / "submissions/epsilon/model.py")
    commit_all(repo, "main moves on")
    git(repo, "checkout", "--quiet", "feature")

    changes = changed_packages("main", repo)
    assert changes == PackageChanges(
        added=("submissions/delta", "submissions/gamma2", "submissions/notes"),
        modified=("submissions/alpha",),
        deleted=("submissions/beta", "submissions/gamma"),
    )
    assert changes.changed == (
        "submissions/alpha",
        "submissions/delta",
        "submissions/gamma2",
        "submissions/notes",
    )
    # From a subfolder, and against a commit id, the answer is the same.
    base = git(repo, "rev-parse", "main").strip()
    assert changed_packages(base, repo / "submissions") == changes
    assert changed_packages("HEAD", repo) == PackageChanges()

    monkeypatch.chdir(repo)
    result = cli.invoke(app, ["ci", "changed", "--base", "main"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "added\tsubmissions/delta",
        "added\tsubmissions/gamma2",
        "added\tsubmissions/notes",
        "modified\tsubmissions/alpha",
        "deleted\tsubmissions/beta",
        "deleted\tsubmissions/gamma",
    ]


def test_changed_packages_refuses_unknown_revisions_and_non_repositories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_repo(tmp_path / "repo")
    write(repo / "submissions/a/submission.yaml")
    commit_all(repo, "base")
    with pytest.raises(
        HarnessError, match=r"--base 'origin/nope': unknown revision in .*fetch-depth"
    ):
        changed_packages("origin/nope", repo)
    with pytest.raises(HarnessError, match=r"--base '--output=x': not a git revision"):
        changed_packages("--output=x", repo)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(HarnessError, match=r"plain is not inside a git repository"):
        changed_packages("main", plain)
    monkeypatch.chdir(plain)
    result = cli.invoke(app, ["ci", "changed", "--base", "main"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "is not inside a git repository" in result.stderr


def test_committed_records_reads_the_base_revision_not_the_work_tree(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    results = repo / "leaderboard" / "results"
    write(repo / "README.md")
    commit_all(repo, "no results yet")
    assert committed_records("HEAD", results, repo) == []
    first = record("ale", top1=0.5)
    write_records([first], results)
    commit_all(repo, "first")
    second = record("ale", top1=0.6)
    write_records([second, record("dap", top1=0.1)], results)
    commit_all(repo, "second")
    write(record_path(results, first), "not json\n")  # uncommitted damage is not read
    assert committed_records("HEAD~1", results, repo) == [first]
    assert committed_records("HEAD", results, repo) == [second, record("dap", top1=0.1)]
    assert committed_records("HEAD~2", results, repo) == []


# -- the leaderboard diff -------------------------------------------------------------------------

BEFORE = [
    record("ale", top1=0.50, h=0.48),
    record("conse", top1=0.52, h=0.10),
    record("dap", top1=0.40, h=0.30),
    record("sje", top1=0.30, h=0.20),
    record("ale", top1=0.70, benchmark="awa-demo", benchmark_version=2, title="AwA demo"),
    record("sje", top1=0.60, benchmark="awa-demo", benchmark_version=2, title="AwA demo"),
]
AFTER = [
    record("ale", top1=0.55, h=0.50, package="f", created_at=T0 + timedelta(days=1)),
    # Same results, another date: not a change.
    record("conse", top1=0.52, h=0.10, created_at=T0 + timedelta(days=2)),
    record("sje", top1=0.30, h=0.20),
    record("eszsl", top1=0.60, h=0.52, top1_interval=(0.58, 0.62)),
    record(
        "ale",
        top1=0.71,
        top1_version="2",
        benchmark="awa-demo",
        benchmark_version=2,
        title="AwA demo",
    ),
    record("sje", top1=0.60, benchmark="awa-demo", benchmark_version=2, title="AwA demo"),
]
HEADER = (
    "| Rank | Submission | Change | Before | After | Δ |\n| ---: | --- | --- | ---: | ---: | ---: |"
)
EXPECTED_DIFF = f"""### Leaderboard diff

1 new, 2 updated, 1 removed runs on 2 benchmarks.

#### awa-demo v2 — AwA demo

**ZSL · top1 (%)**

{HEADER}
| 1 | ale 1.0 | updated (metric v1 → v2) | 70.0 | 71.0 |  |
| 2 → 1 | sje 1.0 | moved | 60.0 | 60.0 | +0.0 |

Metric versions mixed in this table (v1, v2): runs are ranked only against runs of the same version; re-score the older runs.

#### cub-demo v1 — CUB demo

**ZSL · top1 (%)**

{HEADER}
| — → 1 | eszsl 1.0 | new | — | 60.0 [58.0, 62.0] |  |
| 2 | ale 1.0 | updated (package) | 50.0 | 55.0 | +5.0 |
| 1 → 3 | conse 1.0 | moved | 52.0 | 52.0 | +0.0 |
| 3 → — | dap 1.0 | removed | 40.0 | — |  |

**GZSL · H (%)**

{HEADER}
| — → 1 | eszsl 1.0 | new | — | 52.0 |  |
| 1 → 2 | ale 1.0 | updated (package) | 48.0 | 50.0 | +2.0 |
| 2 → — | dap 1.0 | removed | 30.0 | — |  |
"""


def test_leaderboard_diff_matches_hand_written_markdown() -> None:
    assert leaderboard_diff(BEFORE, AFTER) == EXPECTED_DIFF
    # Input order does not matter.
    assert leaderboard_diff(BEFORE[::-1], AFTER[::-1]) == EXPECTED_DIFF


def test_leaderboard_diff_ranks_transductive_runs_apart() -> None:
    """A transductive newcomer with the best score takes no inductive run's rank (as on the site)."""
    honest = [record("ale", top1=0.5), record("dap", top1=0.3)]
    best = record("tx", top1=0.9)
    declared = best.submission.model_copy(update={"declarations": {"transductive": True}})
    diff = leaderboard_diff(honest, [*honest, best.model_copy(update={"submission": declared})])
    assert "| — → 1 | tx 1.0 (transductive: ranked apart) | new | — | 90.0 |  |" in diff
    assert "ale 1.0" not in diff and "dap 1.0" not in diff  # their inductive ranks stay 1 and 2


def test_leaderboard_diff_without_changes_and_with_lower_is_better_metrics() -> None:
    assert leaderboard_diff(BEFORE, BEFORE) == (
        "### Leaderboard diff\n\nNo change to the leaderboard.\n"
    )

    def cost(name: str, value: float) -> RunRecord:
        entry = score("zsl", "hcost", value, higher_is_better=False)
        base = record(name, top1=0.5)
        info = base.benchmark.model_copy(update={"primary": {"zsl": "hcost"}})
        return base.model_copy(update={"scores": [entry], "benchmark": info})

    before = [cost("a", 2.0), cost("b", 1.0)]
    diff = leaderboard_diff(before, [*before, cost("d", 1.5), cost("c", 1.5)])
    # Competition ranking: the tied newcomers share rank 2, so "a" drops to 4.
    assert diff.endswith(
        "**ZSL · hcost**\n\n"
        f"{HEADER}\n"
        "| — → 2 | c 1.0 | new | — | 1.50 |  |\n"
        "| — → 2 | d 1.0 | new | — | 1.50 |  |\n"
        "| 2 → 4 | a 1.0 | moved | 2.00 | 2.00 | +0.00 |\n"
    )
    assert "2 new, 0 updated, 0 removed runs on 1 benchmark." in diff
    single = leaderboard_diff(before, [cost("b", 1.0)])
    assert "0 new, 0 updated, 1 removed run on 1 benchmark." in single


def test_leaderboard_diff_ranks_and_formats_runs_as_the_site_does() -> None:
    """The diff's ranks and numbers are the site's: one ranking rule and one number format."""
    runs = [
        record("a", top1=0.5, top1_interval=(0.45, 0.55)),
        record("b", top1=0.5),
        record("c", top1=0.7),
        record("d", top1=0.123456),
        record("t", top1=0.9),
        record("u", top1=0.5),
    ]
    for i in (4, 5):  # transductive runs: ranked apart, in both places
        declared = runs[i].submission.model_copy(update={"declarations": {"transductive": True}})
        runs[i] = runs[i].model_copy(update={"submission": declared})
    site = plan_site(runs).benchmarks[0].settings[0]
    assert site.setting == "zsl" and site.primary is not None
    column = site.primary
    diff = leaderboard_diff([], runs)
    rows = re.findall(r"^\| — → (\d+) \| (\w) 1\.0[^|]* \| new \| — \| ([^|]+) \|", diff, re.M)
    assert len(rows) == len(runs)
    for rank, name, value in rows:
        assert int(rank) == column.rank_of(f"{name}@1.0")[0]
        entry = column.entries[f"{name}@1.0"]
        shown = format_value(entry.value, percent=column.percent)
        if entry.interval is not None:
            bounds = (entry.interval.lo, entry.interval.hi)
            shown += " [{}, {}]".format(*(format_value(v, percent=column.percent) for v in bounds))
        assert value == shown
    assert [(rank, name) for rank, name, _ in rows] == [
        ("1", "c"),
        ("1", "t"),
        ("2", "a"),
        ("2", "b"),
        ("2", "u"),
        ("4", "d"),
    ]


def test_leaderboard_diff_flags_runs_this_ci_job_did_not_reproduce() -> None:
    eszsl = ("cub-demo", 1, "eszsl", "1.0")
    lines = leaderboard_diff(BEFORE, AFTER, reproduced={eszsl}).splitlines()
    assert "| — → 1 | eszsl 1.0 | new | — | 60.0 [58.0, 62.0] |  |" in lines
    assert (
        "| 2 | ale 1.0 | updated (package) ⚠ not reproduced by this CI run | 50.0 | 55.0 | +5.0 |"
        in lines
    )
    # Moved and removed runs are not results anybody produced: never flagged.
    assert "| 1 → 3 | conse 1.0 | moved | 52.0 | 52.0 | +0.0 |" in lines
    assert "| 3 → — | dap 1.0 | removed | 40.0 | — |  |" in lines


def test_escape_markdown_neutralises_markup_mentions_links_and_line_breaks() -> None:
    assert escape_markdown("a|b") == "a\\|b"
    assert escape_markdown("<b>x</b>") == "\\<b\\>x\\</b\\>"
    assert escape_markdown("`code` *em* _em_ ~~s~~ $x$") == (
        "\\`code\\` \\*em\\* \\_em\\_ \\~\\~s\\~\\~ \\$x\\$"
    )
    assert escape_markdown("[t](javascript:alert(1))") == "\\[t\\]\\(javascript:alert\\(1\\)\\)"
    assert escape_markdown("@octocat fixes #12") == "\\@\u200boctocat fixes \\#\u200b12"
    assert escape_markdown("https://x.org www.y.org") == "https:\u200b//x.org www\u200b.y.org"
    assert escape_markdown("one\ntwo\r\n\tthree\u2028four") == "one two three four"
    assert escape_markdown("\u202eevil\u200f") == "evil"  # bidi overrides dropped
    long = escape_markdown("x" * 500)
    assert len(long) == 200 and long.endswith("…")


HOSTILE_NAME = "<script>alert(1)</script>"
HOSTILE_VERSION = "1 | @octocat `x`"
HOSTILE_TITLE = (
    "[click](javascript:alert(1)) **b** <img src=x onerror=alert(1)> ![i](http://e/i.png)\n# h"
)


def test_hostile_strings_render_as_text() -> None:
    hostile = record(
        HOSTILE_NAME,
        top1=0.4,
        h=0.3,
        version=HOSTILE_VERSION,
        title=HOSTILE_TITLE,
        benchmark="<b>bench</b>",
    )
    diff = leaderboard_diff(BEFORE, [*BEFORE, hostile])
    html = MarkdownIt("commonmark").enable("table").render(diff)
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert "<code>" not in html and "<em>" not in html and "<h1>" not in html
    assert "<b>" not in html
    assert "<h4>&lt;b&gt;bench&lt;/b&gt; v1 — [click](javascript:alert(1)) **b** " in html
    assert "&lt;img src=x onerror=alert(1)&gt; ![i](http:\u200b//e/i.png) # h</h4>" in html
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt; 1 | @\u200boctocat `x`</td>" in html
    # Every table row keeps its six cells: no pipe from a name splits one.
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    assert len(rows) == 4
    for row in rows:
        assert len(re.findall(r"<t[hd][ >]", row)) == 6, row
    # The only bold text is the tables' own titles.
    assert re.findall(r"<strong>(.*?)</strong>", html) == ["ZSL · top1 (%)", "GZSL · H (%)"]


# -- configuration --------------------------------------------------------------------------------


def test_ci_config_of_the_repository_lists_existing_specs() -> None:
    path = REPO / CI_CONFIG
    specs = config_spec_paths(load_ci_config(path), REPO, path)
    assert specs == [SPECS / "demo.yaml"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "specs: [specs/demo.yaml]\nrunner: local\n",
            r"ci\.yaml:2: runner: unknown key 'runner'\. Allowed keys: allowed_data_suffixes,"
            r" max_resources, specs",
        ),
        ("specs: []\n", r"ci\.yaml:1: specs: List should have at least 1 item"),
        ("- specs/demo.yaml\n", r"ci\.yaml:1: must be a mapping with the key 'specs'"),
        ("specs: [a\n", r"ci\.yaml:2: not valid YAML"),
        ("specs: [a]\nspecs: [b]\n", r"ci\.yaml:2: duplicate key 'specs' \(first at line 1\)"),
    ],
)
def test_ci_config_errors_name_the_file_line_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(HarnessError, match=message):
        load_ci_config(path)


def test_ci_config_lists_every_problem_at_its_line_like_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text("# benchmarks\nspecz:\n  - a.yaml\nspecs:\n  - 3\n  - [x]\n", encoding="utf-8")
    with pytest.raises(HarnessError) as err:
        load_ci_config(path)
    assert str(err.value) == (
        f"3 problems in {path}:\n"
        f"  {path}:2: specz: unknown key 'specz'. Did you mean 'specs'? Allowed keys:"
        " allowed_data_suffixes, max_resources, specs\n"
        f"  {path}:5: specs[0]: Input should be a valid string; got 3\n"
        f"  {path}:6: specs[1]: Input should be a valid string"
    )


def test_ci_config_specs_must_exist_inside_the_repository(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text("specs: [specs/none.yaml]\n", encoding="utf-8")
    with pytest.raises(HarnessError, match=r"ci\.yaml:1: specs\[0\]: 'specs/none\.yaml' not found"):
        config_spec_paths(load_ci_config(path), tmp_path, path)
    path.write_text("specs:\n  - specs/demo.yaml\n  - ../demo.yaml\n", encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "demo.yaml").write_text("id: demo\n", encoding="utf-8")
    with pytest.raises(
        HarnessError, match=r"ci\.yaml:3: specs\[1\]: '\.\./demo\.yaml' must be a relative path"
    ):
        config_spec_paths(load_ci_config(path), tmp_path, path)


# -- the pull-request job, end to end -------------------------------------------------------------


def _board_repo(root: Path) -> Path:
    """A repository with the demo spec, leaderboard/ci.yaml and one committed record (main)."""
    repo = new_repo(root)
    (repo / "specs").mkdir()
    shutil.copy(SPECS / "demo.yaml", repo / "specs" / "demo.yaml")
    shutil.copytree(SPECS / "demo", repo / "specs" / "demo")
    write(repo / "leaderboard" / "ci.yaml", "specs:\n  - specs/demo.yaml\n")
    write_records([record("ale", top1=0.5, h=0.4)], repo / "leaderboard" / "results")
    commit_all(repo, "base")
    return repo


def _ci_runner() -> str:
    from harness.runners import sandbox

    return "sandbox" if sandbox.available() else "local"


@pytest.mark.slow
def test_pr_scores_a_new_package_exports_records_builds_site_and_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    repo = _board_repo(tmp_path / "repo")
    results = repo / "leaderboard" / "results"
    committed = record_path(results, record("ale", top1=0.5, h=0.4)).read_bytes()
    git(repo, "checkout", "--quiet", "-b", "add-eszsl")
    shutil.copytree(SUBMISSIONS / "eszsl", repo / "submissions" / "eszsl")
    commit_all(repo, "add eszsl")
    monkeypatch.chdir(repo)
    argv = ["ci", "pr", "--base", "main", "--runner", _ci_runner(), "--quiet"]

    result = cli.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "ok submissions/eszsl: scored on demo v1 [generated data] (zsl top1 " in result.stdout
    diff_path = repo / "build" / "ci" / DIFF_FILENAME
    assert f"diff: {Path('build/ci') / DIFF_FILENAME}" in result.stdout
    diff = diff_path.read_text(encoding="utf-8")

    # The records: the committed one untouched, the new run exported next to it.
    records = read_records(results)
    assert [run_key(r) for r in records] == [
        ("cub-demo", 1, "ale", "1.0"),
        ("demo", 1, "eszsl", "1.0"),
    ]
    assert record_path(results, records[0]).read_bytes() == committed
    eszsl = records[1]
    top1 = eszsl.score("zsl", "top1")
    h = eszsl.score("gzsl", "H")
    assert top1 is not None and top1.interval is not None and h is not None and h.interval

    def cell(entry: ScoreEntry) -> str:
        assert entry.interval is not None
        return f"{entry.value * 100:.1f} [{entry.interval.lo * 100:.1f}, {entry.interval.hi * 100:.1f}]"

    lines = diff.splitlines()
    assert lines[:6] == [
        "## zsl leaderboard CI",
        "",
        "All 1 changed packages passed.",
        "",
        "| Package | Result |",
        "| --- | --- |",
    ]
    assert lines[6] == (
        "| submissions/eszsl | ✅ ok: scored on demo v1 \\[generated data\\] \\(zsl top1 "
        f"{top1.value * 100:.1f}, gzsl H {h.value * 100:.1f}\\) |"
    )
    assert "This commit's leaderboard/results lacks 1 of the run records above" in diff
    assert "1 new, 0 updated, 0 removed run on 1 benchmark." in diff
    assert f"| — → 1 | eszsl 1.0 | new | — | {cell(top1)} |  |" in lines
    assert f"| — → 1 | eszsl 1.0 | new | — | {cell(h)} |  |" in lines
    assert "⚠" not in diff

    site = repo / "build" / "ci" / "site" / "index.html"
    assert site.is_file()
    assert (repo / "build" / "ci" / "store.sqlite3").is_file()
    assert not (isolated_home / "zsl.sqlite3").exists()  # the user's store is never touched

    # Committing the exported records and running again reproduces them: no file changes, and
    # the diff no longer asks for them.
    exported = record_path(results, eszsl).read_bytes()
    commit_all(repo, "records")
    result = cli.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert record_path(results, eszsl).read_bytes() == exported
    assert git(repo, "status", "--porcelain", "--", "leaderboard").strip() == ""
    diff = diff_path.read_text(encoding="utf-8")
    assert "lacks" not in diff and "⚠" not in diff
    assert f"| — → 1 | eszsl 1.0 | new | — | {cell(top1)} |  |" in diff.splitlines()


def test_pr_reports_invalid_deleted_packages_and_hand_edited_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _board_repo(tmp_path / "repo")
    results = repo / "leaderboard" / "results"
    write(repo / "submissions" / "old" / "submission.yaml", "name: old-one\n")
    write_records([record("old-one", top1=0.2)], results)
    commit_all(repo, "an old package")
    git(repo, "checkout", "--quiet", "-b", "broken")
    write(repo / "submissions" / "broken" / "submission.yaml", "name: broken\nkind: banana\n")
    shutil.rmtree(repo / "submissions" / "old")
    forged = record_path(results, record("forged", top1=0.99))
    write_records([record("forged", top1=0.99)], results)  # not produced by any run
    commit_all(repo, "break things")
    monkeypatch.chdir(repo)

    result = cli.invoke(app, ["ci", "pr", "--base", "main", "--runner", "local", "--quiet"])
    assert result.exit_code == 1
    manifest = "submissions/broken/submission.yaml"
    assert f"error: invalid submissions/broken: 3 problems in {manifest}:" in result.stderr
    assert f"{manifest}:2: kind: must be one of 'predictions', 'model'; got 'banana'" in (
        result.stderr
    )
    # Records are written by CI: a record no package reproduces is refused and not exported.
    refusal = (
        "leaderboard/results/cub-demo/v1/forged@1.0.json: changed in this pull request, but no "
        "package reproduces it (forged@1.0 on cub-demo v1): no package under submissions/ is "
        "named 'forged'; records are written by CI"
    )
    assert f"error: {refusal}" in " ".join(result.stderr.split())
    diff = (repo / "build" / "ci" / DIFF_FILENAME).read_text(encoding="utf-8")
    lines = diff.splitlines()
    assert "**1 of 1 packages failed.**" in lines
    broken = next(line for line in lines if line.startswith("| submissions/broken |"))
    assert broken.startswith(
        f"| submissions/broken | ❌ invalid: 3 problems in {manifest}: {manifest}:"
    )
    assert "kind" in broken
    assert lines[lines.index(broken) + 1] == (
        "| submissions/old | deleted: package removed; 1 run record of old-one remain in "
        "leaderboard/results: delete them to take it off the board |"
    )
    assert any(line.startswith(f"❌ {escape_markdown(refusal, limit=1000)}") for line in lines)
    assert "forged 1.0" not in diff  # never on the board, so not in the diff either
    assert "No change to the leaderboard." in lines
    assert not forged.exists()
    assert git(repo, "status", "--porcelain", "--", "leaderboard").strip() == (
        f"D {forged.relative_to(repo).as_posix()}"
    )


def test_publish_builds_the_site_from_committed_records_only(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_records([record("ale", top1=0.5, h=0.4)], results)
    out = tmp_path / "site"
    result = cli.invoke(app, ["ci", "publish", "--results", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out.absolute() / "index.html")
    assert "cub-demo" in (out / "index.html").read_text(encoding="utf-8")
    # git keeps no empty folder: without records the site is built empty, not refused.
    empty = tmp_path / "empty-site"
    result = cli.invoke(
        app, ["ci", "publish", "--results", str(tmp_path / "no"), "--out", str(empty)]
    )
    assert result.exit_code == 0, result.output
    assert (empty / "index.html").is_file()


# -- the workflow ---------------------------------------------------------------------------------


def _zsl_commands(workflow: dict[str, Any]) -> list[list[str]]:
    commands = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in str(step.get("run", "")).splitlines():
                words = shlex.split(line, comments=True)
                if words[:1] == ["zsl"]:
                    commands.append(words[1:])
    return commands


def test_workflow_is_thin_and_calls_existing_zsl_ci_commands() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request_target" not in triggers
    assert set(triggers["pull_request"]["paths"]) >= {"submissions/**", "leaderboard/**"}
    assert triggers["push"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read"}

    pr_job, publish_job = workflow["jobs"]["pull-request"], workflow["jobs"]["publish"]
    assert pr_job["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert publish_job["permissions"] == {
        "contents": "read",
        "pages": "write",
        "id-token": "write",
    }
    assert publish_job["concurrency"]["group"]
    checkouts = [s for s in pr_job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert [c["with"].get("fetch-depth") for c in checkouts] == [None, 0]  # pr/ has the base
    uses = [step.get("uses", "").split("@")[0] for step in publish_job["steps"]]
    assert "actions/upload-pages-artifact" in uses and "actions/deploy-pages" in uses
    assert "actions/github-script" in [s.get("uses", "").split("@")[0] for s in pr_job["steps"]]
    # Untrusted values reach scripts only through the environment.
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            assert "${{" not in str(step.get("run", "")), step

    commands = _zsl_commands(workflow)
    assert [c[:2] for c in commands] == [["ci", "pr"], ["ci", "publish"]]
    root = typer.main.get_command(app)
    for words in commands:
        path = [w for w in words if not w.startswith("-")][:2]
        command: Any = root
        for name in path:
            command = getattr(command, "commands", {}).get(name)
            assert command is not None, f"zsl {' '.join(path)} does not exist"
        options = {opt for param in command.params for opt in param.opts}
        for word in words:
            if word.startswith("--"):
                assert word.split("=")[0] in options, f"zsl {' '.join(path)}: no option {word}"
        result = cli.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, result.output

    # The report's advice names the artifact that holds the exported records.
    artifacts = [
        s["with"]["name"] for s in pr_job["steps"] if "upload-artifact" in s.get("uses", "")
    ]
    assert "leaderboard-results" in artifacts
    # The comment step posts the file the pr step writes.
    pr_words = commands[0]
    out = pr_words[pr_words.index("--out") + 1]
    script = next(s for s in pr_job["steps"] if "github-script" in s.get("uses", ""))
    assert f"'{out}/{DIFF_FILENAME}'" in script["with"]["script"]


def _run_lines(step: dict[str, Any]) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in str(step.get("run", "")).splitlines()]


def test_workflow_scores_pull_requests_with_the_base_harness() -> None:
    """Attack: a PR edits harness/ (the sandbox, the comparison) and CI installs and trusts it.

    Rule: the base commit is checked out apart and installed into its own environment; only
    submissions/ and leaderboard/results/ are taken from the PR checkout.
    """
    text = WORKFLOW.read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    assert "pull_request_target" not in workflow[True]
    assert "pull_request_target" not in text.split("\nname:", 1)[1]  # only the comment says it
    steps = workflow["jobs"]["pull-request"]["steps"]
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    by_path = {c["with"]["path"]: c["with"] for c in checkouts}
    assert set(by_path) == {"base", "pr"}
    assert by_path["base"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert "ref" not in by_path["pr"]  # the pull request (GitHub's merge commit)
    assert by_path["pr"]["fetch-depth"] == 0
    for options in by_path.values():
        assert options["persist-credentials"] is False

    # Every pip install installs the base checkout, and only it, into a venv of its own.
    installs = []
    for step in steps:
        for words in _run_lines(step):
            if "pip" in " ".join(words[:1]) and "install" in words:
                installs.append((step, words))
    assert installs, "no install step"
    for _step, words in installs:
        assert words[0].endswith("/bin/pip"), words  # the venv's pip, not the runner's
        targets = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
        assert targets and all(t.startswith(("base/", "./base[", "./base/")) for t in targets)
        assert "-e" not in words and "--editable" not in words
        assert not any(t.startswith(("pr", "./pr", ".")) and "base" not in t for t in targets)
    install_step = installs[0][0]
    assert "python -m venv" in install_step["run"]
    assert "GITHUB_PATH" in install_step["run"]  # its zsl is the one the next steps run
    for step in steps:
        assert "pip install -e" not in str(step.get("run", "")), step
        assert "setup.py" not in str(step.get("run", "")), step

    # zsl ci pr scans the PR checkout, with the base's configuration and specs.
    (pr_words,) = [w[1:] for s in steps for w in _run_lines(s) if w[:3] == ["zsl", "ci", "pr"]]

    def option(name: str) -> str:
        return pr_words[pr_words.index(name) + 1]

    assert option("--repo") == "pr"
    assert option("--config").startswith("base/")
    assert option("--results").startswith("pr/")
    assert option("--base") == "$BASE_SHA"
    assert "--trust-pr-harness" not in pr_words
    env = next(s for s in steps if "zsl ci pr" in str(s.get("run", "")))["env"]
    assert env["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    records = next(s for s in steps if s.get("with", {}).get("name") == "leaderboard-results")
    assert records["with"]["path"] == option("--results")
    # The header comment and the README say so.
    header = text.split("\nname:", 1)[0]
    assert "BASE branch's harness" in header and "--repo pr" in header
    readme = (REPO / "leaderboard" / "README.md").read_text(encoding="utf-8")
    assert "base branch's harness" in readme and "--repo pr" in readme


def test_pr_refuses_runs_of_benchmarks_that_do_not_count_for_the_leaderboard(
    tmp_path: Path,
) -> None:
    from harness.ci.pr import _package_outcome
    from harness.executors.matrix import RunRequest, RunResult
    from harness.records import RawInputs

    spec = tmp_path / "specs" / "s.yaml"

    def result(raw: RawInputs | None, experimental: bool = False) -> RunResult:
        run = record("eszsl", top1=0.5)
        info = run.benchmark.model_copy(update={"raw_inputs": raw, "experimental": experimental})
        return RunResult(
            RunRequest(tmp_path / "eszsl", spec),
            "ok",
            "eszsl on s",
            record=run.model_copy(update={"benchmark": info}),
        )

    generated = RawInputs(origin="generated", verified=True, how="the demo generator")
    ok = _package_outcome(
        "submissions/eszsl", [result(generated)], repo_root=tmp_path, spec_root=tmp_path
    )
    assert (ok.status, ok.detail) == (
        "ok",
        "scored on cub-demo v1 [generated data] (zsl top1 50.0)",
    )
    tail = (
        " (its runs stay out of the cross-benchmark tables; the leaderboard takes runs of verified"
        " releases, generated or own data that is not experimental)"
    )
    for raw, experimental, why in (
        (RawInputs(origin="synthetic", verified=True, how="h"), False, "synthetic data"),
        (RawInputs(origin="release", verified=False, how="h"), False, "unverified source"),
        (generated, True, "experimental"),
        (None, False, "source not recorded"),
    ):
        refused = _package_outcome(
            "submissions/eszsl", [result(raw, experimental)], repo_root=tmp_path, spec_root=tmp_path
        )
        assert refused.status == "failed"
        assert refused.detail == (
            f"specs/s.yaml: refused for the leaderboard: cub-demo v1: {why}{tail}"
        ), why

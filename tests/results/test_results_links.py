"""No symbolic link is followed under a folder of run records (issue 10, item 11).

Attack: ``leaderboard/results/<bench>/<version>`` committed as a symbolic link made
``zsl results export`` write outside the repository. Rule: reading, writing and pruning refuse a
link anywhere under the results folder (and the folder itself), naming it, before anything is
written or deleted; the writer opens every folder with ``O_NOFOLLOW`` so a link swapped in after
that check is refused too; and CI refuses a link committed in git (mode 120000) under it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.ci import committed_records
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.results import records_io
from harness.results.records_io import (
    dump_record,
    read_records,
    record_path,
    write_records,
)
from harness.store import open_store, save_run
from tests.ci.test_ci import _isolated_git, commit_all, git, new_repo, write  # noqa: F401
from tests.store_records import make_record

RECORD = make_record(benchmark="cub-demo", name="ale")  # cub-demo/v1/ale@1.0.json
OTHER = make_record(benchmark="awa2", name="sje")
PRECIOUS = "precious\n"


def _tree(folder: Path) -> dict[str, object]:
    """Everything under ``folder`` (names, link targets, file bytes), to show it is unchanged."""
    found: dict[str, object] = {}
    if not os.path.lexists(folder):
        return found
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "folder"
    return found


class Layout:
    def __init__(self, tmp: Path) -> None:
        self.repo = tmp / "repo"
        self.root = self.repo / "leaderboard" / "results"
        self.outside = tmp / "outside"
        self.outside.mkdir(parents=True)
        # A record out there that a prune through the link would delete, and a file an export
        # through it would overwrite.
        (self.outside / "stale@1.0.json").write_text(dump_record(OTHER), encoding="utf-8")
        (self.outside / "ale@1.0.json").write_text(PRECIOUS, encoding="utf-8")


def _benchmark_folder(layout: Layout) -> Path:
    layout.root.mkdir(parents=True)
    link = layout.root / "cub-demo"
    link.symlink_to(layout.outside, target_is_directory=True)
    return link


def _version_folder(layout: Layout) -> Path:
    (layout.root / "cub-demo").mkdir(parents=True)
    link = layout.root / "cub-demo" / "v1"
    link.symlink_to(layout.outside, target_is_directory=True)
    return link


def _record_file(layout: Layout) -> Path:
    (layout.root / "cub-demo" / "v1").mkdir(parents=True)
    link = layout.root / "cub-demo" / "v1" / "ale@1.0.json"
    link.symlink_to(layout.outside / "ale@1.0.json")
    return link


def _results_root(layout: Layout) -> Path:
    layout.root.parent.mkdir(parents=True)
    layout.root.symlink_to(layout.outside, target_is_directory=True)
    return layout.root


def _inside_the_repository(layout: Layout) -> Path:
    # A link to a folder of the repository itself (say, its specs) is refused as well.
    specs = layout.repo / "specs"
    specs.mkdir(parents=True)
    (specs / "demo.yaml").write_text("benchmark: demo\n", encoding="utf-8")
    layout.root.mkdir(parents=True)
    link = layout.root / "cub-demo"
    link.symlink_to(Path("..", "..", "specs"), target_is_directory=True)  # relative
    return link


def _dangling(layout: Layout) -> Path:
    layout.root.mkdir(parents=True)
    link = layout.root / "cub-demo"
    link.symlink_to(layout.outside.parent / "nowhere", target_is_directory=True)
    return link


def _dotted_name(layout: Layout) -> Path:
    # "..." reads like ".." in a listing; it is a link to a folder outside.
    (layout.root / "cub-demo").mkdir(parents=True)
    link = layout.root / "cub-demo" / "..."
    link.symlink_to(layout.outside, target_is_directory=True)
    return link


def _dotted_folder_holding_a_link(layout: Layout) -> Path:
    # A real folder named ".. " (trailing space) that holds a link to the outside.
    folder = layout.root / ".. "
    folder.mkdir(parents=True)
    link = folder / "v1"
    link.symlink_to(layout.outside, target_is_directory=True)
    return link


VARIANTS: dict[str, Callable[[Layout], Path]] = {
    "benchmark folder": _benchmark_folder,
    "version folder": _version_folder,
    "record file": _record_file,
    "results root": _results_root,
    "folder inside the repository": _inside_the_repository,
    "dangling": _dangling,
    "'...' link": _dotted_name,
    "'.. ' folder with a link": _dotted_folder_holding_a_link,
}


@pytest.mark.parametrize("prune", [False, True], ids=["export", "export --prune"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_export_refuses_a_link_and_writes_nothing_anywhere(
    tmp_path: Path, variant: str, prune: bool
) -> None:
    layout = Layout(tmp_path)
    link = VARIANTS[variant](layout)
    outside, repo = _tree(layout.outside), _tree(layout.repo)
    with pytest.raises(HarnessError) as err:
        write_records([RECORD], layout.root, prune=prune)
    message = str(err.value)
    assert message.startswith(f"{link}: is a symbolic link"), message
    assert "\n" not in message
    assert _tree(layout.outside) == outside  # nothing written, nothing deleted out there
    assert _tree(layout.repo) == repo  # nor in the repository (no half export)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_read_refuses_a_link_naming_it(tmp_path: Path, variant: str) -> None:
    layout = Layout(tmp_path)
    link = VARIANTS[variant](layout)
    with pytest.raises(HarnessError, match=r"is a symbolic link") as err:
        read_records(layout.root)
    assert str(err.value).startswith(f"{link}: ")


def test_a_link_swapped_in_after_the_check_is_refused_by_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-check is not the only guard: folders are opened with O_NOFOLLOW, files created
    with O_EXCL|O_NOFOLLOW, so a link planted between the check and the write is refused."""
    layout = Layout(tmp_path)
    link = _version_folder(layout)
    outside = _tree(layout.outside)
    monkeypatch.setattr(records_io, "_scan", lambda root: [])  # as if the link came later
    with pytest.raises(HarnessError, match=r"is a symbolic link") as err:
        write_records([RECORD], layout.root)
    assert str(err.value).startswith(f"{link}: ")
    assert _tree(layout.outside) == outside


def test_a_record_file_replaced_by_a_link_after_the_check_is_replaced_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = Layout(tmp_path)
    link = _record_file(layout)
    monkeypatch.setattr(records_io, "_scan", lambda root: [])
    with pytest.raises(HarnessError, match=r"is a symbolic link"):
        write_records([RECORD], layout.root)  # reading the old text refuses the link
    assert (layout.outside / "ale@1.0.json").read_text(encoding="utf-8") == PRECIOUS
    assert link.is_symlink()


def test_prune_never_deletes_through_a_linked_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = Layout(tmp_path)
    write_records([RECORD], layout.root)
    link = layout.root / "awa2"
    link.symlink_to(layout.outside, target_is_directory=True)
    monkeypatch.setattr(records_io, "_scan", lambda root: [])  # even past the first check
    with pytest.raises(HarnessError, match=r"is a symbolic link") as err:
        write_records([RECORD], layout.root, prune=True)
    assert str(err.value).startswith(f"{link}: ")
    assert (layout.outside / "stale@1.0.json").is_file()


def test_zsl_results_export_refuses_a_linked_version_folder(tmp_path: Path) -> None:
    """The command of the original report: `zsl results export` into a tree with a link."""
    layout = Layout(tmp_path)
    link = _version_folder(layout)
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    save_run(open_store(url), RECORD)
    outside = _tree(layout.outside)
    argv = ["results", "export", "--results", str(layout.root), "--database-url", url, "--prune"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1, result.output
    assert f"{link}: is a symbolic link" in " ".join(result.stderr.split())
    assert _tree(layout.outside) == outside


def test_special_files_are_refused_without_hanging(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_records([RECORD], root)
    fifo = record_path(root, RECORD).with_name("fifo.json")
    os.mkfifo(fifo)
    with pytest.raises(HarnessError, match=r"fifo\.json: is not a regular file"):
        read_records(root)
    with pytest.raises(HarnessError, match=r"fifo\.json: is not a regular file"):
        write_records([RECORD], root, prune=True)
    assert fifo.exists()


def test_real_folders_still_export_read_and_prune(tmp_path: Path) -> None:
    root = tmp_path / "results"
    paths = write_records([RECORD, OTHER], root).paths
    assert read_records(root) == sorted([RECORD, OTHER], key=records_io.run_key)
    result = write_records([RECORD], root, prune=True)
    assert result.removed == [paths[1]]
    assert not (root / "awa2").exists()
    assert [p.stat().st_mode & 0o777 for p in paths[:1]] == [0o644]


# -- committed in git -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("leaderboard/results/demo/v1", "../../../../outside"),
        ("leaderboard/results/demo", "/tmp"),
        ("leaderboard/results/demo/v1/ale@1.0.json", "/etc/passwd"),
        ("leaderboard/results/...", "../.."),
    ],
)
def test_committed_records_refuses_a_link_in_the_git_tree(
    tmp_path: Path, link: str, target: str
) -> None:
    """A mode 120000 entry under the results folder was skipped silently; now it is refused."""
    repo = new_repo(tmp_path / "repo")
    write_records([make_record(benchmark="awa2")], repo / "leaderboard" / "results")
    path = repo / link
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    write(repo / "README.md")
    commit_all(repo, "a link among the records")
    assert git(repo, "ls-tree", "-r", "HEAD", "--", link).startswith("120000 ")
    with pytest.raises(HarnessError) as err:
        committed_records("HEAD", repo / "leaderboard" / "results", repo)
    message = str(err.value)
    assert message.startswith(f"HEAD:{link}: is a symbolic link in git"), message

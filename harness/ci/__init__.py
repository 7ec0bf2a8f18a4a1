"""The leaderboard's CI steps, runnable locally: what a change touched, score it, show the diff.

A pull request that adds or changes a package under ``submissions/`` is validated, run (model code
under the ``sandbox`` runner) and scored on every benchmark that ``leaderboard/ci.yaml`` lists.
The runs go to a throwaway SQLite store seeded with the records committed in
``leaderboard/results``, never to the user's store; the updated records are exported back into
``leaderboard/results`` and the report compares them with the records committed at the base
revision. :func:`leaderboard_diff` renders that comparison as Markdown for a pull-request
comment: every string that came from a submission or a record is escaped, so a hostile name shows
as text and mentions or links nobody.

See docs/ci.md.
"""

from harness.ci.config import CI_CONFIG, CIConfig, config_spec_paths, load_ci_config
from harness.ci.diff import leaderboard_diff, record_differences
from harness.ci.git import PackageChanges, changed_packages, committed_records, find_repo_root
from harness.ci.markdown import escape_markdown
from harness.ci.pr import (
    DIFF_FILENAME,
    SITE_DIRNAME,
    Execution,
    PackageOutcome,
    PullRequestResult,
    run_pull_request,
)
from harness.ci.publish import publish_site

__all__ = [
    "CI_CONFIG",
    "DIFF_FILENAME",
    "SITE_DIRNAME",
    "CIConfig",
    "Execution",
    "PackageChanges",
    "PackageOutcome",
    "PullRequestResult",
    "changed_packages",
    "committed_records",
    "config_spec_paths",
    "escape_markdown",
    "find_repo_root",
    "leaderboard_diff",
    "load_ci_config",
    "publish_site",
    "record_differences",
    "run_pull_request",
]

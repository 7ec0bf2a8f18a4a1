"""The leaderboard's CI steps, runnable locally: what a change touched, score it, show the diff.

A pull request that adds or changes a package under ``submissions/`` is validated, run (model code
under the ``sandbox`` runner) and scored on every benchmark that ``leaderboard/ci.yaml`` lists.
The runs go to a throwaway SQLite store seeded with the records committed in
``leaderboard/results``, never to the user's store; the updated records are exported back into
``leaderboard/results`` and the report compares them with the records committed at the base
revision. :func:`leaderboard_diff` renders that comparison as Markdown for a pull-request
comment: every string that came from a submission or a record is escaped, so a hostile name shows
as text and mentions or links nobody.

What the site shows is never taken from the pull request on trust. A record file that differs
from the fork point (added, edited, or not committed) is re-made by its package, changed or not,
and compared with the fresh run on every field but :data:`harness.records.RUN_METADATA_FIELDS`,
allowing what another platform's rounding changes (prediction hashes, scores within
:data:`harness.results.reproduction.SCORE_TOLERANCE`); a difference beyond that, or a changed
record no package reproduces, fails the job, and the fresh record is what gets exported.
Submission fields (declarations, authors, paper…) come from the package's manifest through that
run. The harness that judges is the base branch's: CI checks it out apart and points ``--repo``
at the pull request's checkout (:func:`check_harness_is_base` refuses the pull request's own).
Nothing under the results folder may be a symbolic link, on disk or in git.

One module per job; each imports only what its job touches. This package exports what the
``zsl ci`` commands and other code use; the helpers stay in their modules:

- :mod:`harness.ci.config` -- ``leaderboard/ci.yaml``: the model, its loading (file:line errors).
- :mod:`harness.ci.git` -- git plumbing: changed and all packages, commits, merge base, files and
  records of a revision, the results folder's path without links.
- :mod:`harness.ci.markdown` -- submitted text made literal Markdown, messages made one line.
- :mod:`harness.ci.diff` -- record comparison and the Markdown leaderboard diff (the site's ranks
  and number format).
- :mod:`harness.ci.pr` -- the pull-request job: packages → runs → checks → records, site, report.
- :mod:`harness.ci.publish` -- the merge-to-main job: the site from the committed records.
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

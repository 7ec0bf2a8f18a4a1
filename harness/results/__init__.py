"""Run records in git, the prediction archive, and re-scoring.

Results in git
--------------

The leaderboard is built from reviewed data: every scored run is one JSON file under
``leaderboard/results/``, committed like code. ::

    zsl results export                 # store -> leaderboard/results/ (one file per run)
    zsl results export --prune         # ... and delete files of runs no longer stored
    zsl results import                 # leaderboard/results/ -> store, one transaction
    zsl results rescore --dry-run      # which stored runs have outdated metric versions
    zsl results rescore                # re-score them from their archived predictions

A record file is ``leaderboard/results/<benchmark>/v<version>/<submission>@<version>.json``
and holds ``{"format": "zsl-run-record/2", "id": "sha256:…", "record": {…}}``: the benchmark,
spec, package and prediction hashes, the harness and metric versions, the runner, environment,
timings and every score with its interval. The ``id`` is the sha256 of the record's canonical
JSON; ``import`` recomputes it and refuses a file whose content does not match (naming the
file), so an edit by hand is caught. The file's *name* comes from the run (benchmark version,
submission version), not from its content: re-scoring or re-running a submission version
rewrites the same file, and the pull request shows a diff of the scores that changed. Names are
percent-encoded to ``[A-Za-z0-9._+-]`` (a submission called ``a/b`` or ``<script>`` gets a
safe file name, never a path outside the folder). The text is stable (sorted keys, two-space
indent, UTF-8, final newline): exporting the same store twice gives identical bytes.

``import`` is all or nothing: every file is read and verified first (format, schema, id, no
two files for the same run), then all records are saved in one transaction.

Every stored run keeps the prediction files it was scored from, in the prediction archive
(``ZSL_HOME/predictions``, or ``ZSL_PREDICTIONS_DIR``), named by the sha256 of their bytes and
verified on every read. When a metric's behaviour changes its version is bumped, and
``zsl results rescore`` re-scores every stored run whose metric versions (or metric list) no
longer match the registry and its spec, from those archived files, without running any model
again; ``--force`` re-scores every run. Runs imported from records have no archived
predictions: rescore reports them as skipped (and exits non-zero), re-run those submissions
instead. After a rescore, ``zsl results export`` shows the new scores as a diff for review.

Modules: :mod:`~harness.results.records_io` (record files), :mod:`~harness.results.store_io`
(store <-> folder), :mod:`~harness.results.prediction_archive` (prediction archive),
:mod:`~harness.results.rescore` (re-scoring).
"""

from harness.results.records_io import (
    RECORD_FORMAT,
    dump_record,
    load_record,
    read_records,
    record_id,
    record_path,
    write_records,
)

__all__ = [
    "RECORD_FORMAT",
    "dump_record",
    "load_record",
    "read_records",
    "record_id",
    "record_path",
    "write_records",
]

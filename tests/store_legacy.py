"""The store schema before migrations (revision 0001), as ``create_all`` made it.

DDL printed from ``git show 505930a:harness/store/models.py`` (the last commit without
migrations) with ``CreateTable``/``CreateIndex`` for each dialect. The tests build an
unversioned store from it, the way a store of that code looks on disk, and check that
migration 0001 creates the same schema and that ``open_store`` adopts such a store.
"""

from __future__ import annotations

_TABLES = """
CREATE TABLE zsl_benchmark (
	id {serial} NOT NULL,
	benchmark VARCHAR NOT NULL,
	version INTEGER NOT NULL,
	hash VARCHAR NOT NULL,
	title VARCHAR NOT NULL,
	spec_hash VARCHAR NOT NULL,
	"primary" JSON NOT NULL,
	n_classes INTEGER NOT NULL,
	n_seen INTEGER NOT NULL,
	n_unseen INTEGER NOT NULL,
	PRIMARY KEY (id),
	CONSTRAINT uq_benchmark_version UNIQUE (benchmark, version)
);
CREATE INDEX ix_zsl_benchmark_benchmark ON zsl_benchmark (benchmark);
CREATE TABLE zsl_submission (
	id {serial} NOT NULL,
	name VARCHAR NOT NULL,
	version VARCHAR NOT NULL,
	kind VARCHAR NOT NULL,
	package_hash VARCHAR NOT NULL,
	authors JSON NOT NULL,
	paper VARCHAR,
	url VARCHAR,
	description VARCHAR NOT NULL,
	declarations JSON NOT NULL,
	PRIMARY KEY (id),
	CONSTRAINT uq_submission_version UNIQUE (name, version)
);
CREATE INDEX ix_zsl_submission_name ON zsl_submission (name);
CREATE TABLE zsl_run (
	id {serial} NOT NULL,
	benchmark_id INTEGER NOT NULL,
	submission_id INTEGER NOT NULL,
	package_hash VARCHAR NOT NULL,
	predictions_hashes JSON NOT NULL,
	harness_version VARCHAR NOT NULL,
	runner VARCHAR NOT NULL,
	environment JSON NOT NULL,
	timings JSON NOT NULL,
	leakage JSON NOT NULL,
	logs JSON NOT NULL,
	created_at {datetime} NOT NULL,
	updated_at {datetime} NOT NULL,
	PRIMARY KEY (id),
	CONSTRAINT uq_run_benchmark_submission UNIQUE (benchmark_id, submission_id),
	FOREIGN KEY(benchmark_id) REFERENCES zsl_benchmark (id) ON DELETE RESTRICT,
	FOREIGN KEY(submission_id) REFERENCES zsl_submission (id) ON DELETE RESTRICT
);
CREATE INDEX ix_zsl_run_benchmark_id ON zsl_run (benchmark_id);
CREATE INDEX ix_zsl_run_submission_id ON zsl_run (submission_id);
CREATE TABLE zsl_score (
	id {serial} NOT NULL,
	run_id INTEGER NOT NULL,
	position INTEGER NOT NULL,
	setting VARCHAR NOT NULL,
	metric VARCHAR NOT NULL,
	function VARCHAR NOT NULL,
	version VARCHAR NOT NULL,
	value FLOAT NOT NULL,
	higher_is_better BOOLEAN NOT NULL,
	details JSON NOT NULL,
	interval JSON,
	PRIMARY KEY (id),
	CONSTRAINT uq_score_run_setting_metric UNIQUE (run_id, setting, metric),
	FOREIGN KEY(run_id) REFERENCES zsl_run (id) ON DELETE CASCADE
);
CREATE INDEX ix_zsl_score_run_id ON zsl_score (run_id);
"""

_TYPES = {
    "sqlite": {"serial": "INTEGER", "datetime": "DATETIME"},
    "postgresql": {"serial": "SERIAL", "datetime": "TIMESTAMP WITH TIME ZONE"},
}

LEGACY_TABLES = ("zsl_benchmark", "zsl_submission", "zsl_run", "zsl_score")


def legacy_ddl(dialect: str) -> list[str]:
    """The CREATE statements of the pre-migration store on ``dialect`` (sqlite, postgresql)."""
    sql = _TABLES.format(**_TYPES[dialect])
    return [statement.strip() for statement in sql.split(";") if statement.strip()]

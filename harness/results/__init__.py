"""Run records in git, the prediction archive, and re-scoring.

See docs/results.md.
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

"""zsl-harness: declarative zero-shot learning benchmarks, honest scoring, a static leaderboard."""

__version__ = "0.1.0"

"""The static leaderboard site: jinja2 templates rendered from run records."""

from harness.site.builder import build_site

__all__ = ["build_site"]

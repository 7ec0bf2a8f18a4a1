"""Revisions of the store schema, oldest first: ``v<revision>_<slug>.py``."""

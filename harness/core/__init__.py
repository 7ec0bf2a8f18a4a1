"""The base every package of the harness builds on: errors, hashing, atomic writes, YAML and text
I/O, registries, run identity, temporary folders and ``/proc`` reading.

Modules here import only the standard library, third-party packages and ``harness.core``
(checked by the import contracts in ``pyproject.toml``).
"""

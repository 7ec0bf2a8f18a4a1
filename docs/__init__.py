"""docs/ is a package only so that pytest imports its conftest as ``docs.conftest``.

As a plain folder, its ``conftest.py`` and ``tests/conftest.py`` would both be the top-level
module ``conftest``, and ``--doctest-modules`` refuses the second ("import file mismatch").
"""

"""Submission packages: the ``submission.yaml`` schema and its loading (:mod:`.package`), safe
unpacking, content rules, declared resources, prediction files, the model loader the worker
uses, and the scaffold with its template (``template/``: copied into new packages, never
imported by the harness)."""

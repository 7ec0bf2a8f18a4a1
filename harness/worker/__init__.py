"""What runs inside a sandbox: the worker (:mod:`harness.worker.phases`, started by every runner
as ``python -m harness.worker.phases``) and its process hygiene (:mod:`harness.worker.guard`).

Model code shares the sandbox and can rewrite any of it, so nothing here judges the model. The
worker imports only ``harness.core`` and the formats it shares with the harness (bundles, the
runners' wire protocol and output names, prediction files); the import contracts in
``pyproject.toml`` keep it that way.
"""

"""A fake ``docker``/``podman`` for the container runner tests (no engine needed).

It appends its argv as one JSON line to ``$FAKE_CONTAINER_LOG``. ``run`` obeys
``$FAKE_CONTAINER_MODE``: ``worker`` (default) runs the worker here with the ``-v`` mounts
mapped back to host paths; ``exit:N`` exits with N; ``sleep`` sleeps (to force a timeout).
``image inspect`` answers an image with id :data:`IMAGE_ID` (labels from ``$FAKE_IMAGE_LABELS``,
JSON), or "No such image" in mode ``noimage``; ``container inspect`` answers a state that
exited normally. Every other command (``kill``, ``rm``) succeeds. Tests put a wrapper named
``docker`` on PATH.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time

IMAGE_ID = "sha256:" + "5" * 64


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_CONTAINER_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    mode = os.environ.get("FAKE_CONTAINER_MODE", "worker")
    if argv[:2] == ["image", "inspect"]:
        if mode == "noimage":
            print(f"Error: No such image: {argv[-1]}", file=sys.stderr)
            return 1
        labels = json.loads(os.environ.get("FAKE_IMAGE_LABELS", "{}"))
        print(json.dumps({"Id": IMAGE_ID, "Config": {"Labels": labels}}))
        return 0
    if argv[:2] == ["container", "inspect"]:
        print(json.dumps({"ExitCode": 0, "OOMKilled": False}))
        return 0
    if not argv or argv[0] != "run":
        return 0
    if mode.startswith("exit:"):
        return int(mode.split(":", 1)[1])
    if mode == "sleep":
        time.sleep(600)
        return 0
    mounts = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "-v":
            host, inside, _ = value.rsplit(":", 2)
            mounts[inside] = host
    start = argv.index("harness.worker.phases") - 2  # python -m harness.worker.phases ...
    cmd = [sys.executable, *[mounts.get(a, a) for a in argv[start + 1 :]]]
    return subprocess.call(cmd, cwd=mounts["/out"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

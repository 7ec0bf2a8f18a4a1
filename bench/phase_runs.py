"""What separate runs for fit and each prediction pass cost (issue 26; not a test).

Since fit and every prediction pass are runs of their own (a fresh sandbox each, the fitted
state saved, checked and copied between them: :mod:`harness.runners.judge`), a model run starts
six sandboxes on a benchmark with a validation fit where it started one. This measures what
that costs end to end, against the code before the change, on the AWA2-size fixture
(``zsl data synthetic-xlsa17``, 2048-d), as a user runs it::

    zsl run PKG --spec specs/xlsa17/awa2-ps.yaml --runner sandbox --no-store

``--before DIR`` names a checkout of the code before (with its own ``DIR/.venv``, whose ``zsl``
runs that code); both run the same packages (this checkout's ``submissions/`` or the
``--packages`` folder of each side) on the same frozen fixture, alternately, ``--repeat`` times
each, and the report gives each side's median wall time, the overhead in percent and its
verdict against the target (<= 15 % over the code before). Without ``--before`` only this
checkout is measured. The machine state (load average, CPUs) is recorded with the figures.

    .venv/bin/python bench/phase_runs.py --before /path/to/old-checkout [--methods eszsl,sae]
        [--repeat 3] [--out bench/methods-report.json]

With ``--out`` naming an existing report, the figures go under its ``phase_runs`` key and the
rest of it is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from methods import REPO, _env, make_fixture, spec_of, timed

TARGET_OVERHEAD_PCT = 15.0
DATASET = "AWA2"


def _zsl_of(checkout: Path) -> str:
    return str(checkout / ".venv" / "bin" / "zsl")


def machine_state() -> dict[str, object]:
    """What the figures were measured on: CPUs and the load averages at the time."""
    return {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def measure(
    work: Path, methods: list[str], sides: dict[str, Path], repeat: int
) -> dict[str, object]:
    """Each method on each side, ``repeat`` times, alternating sides (one fixture, frozen once
    per side in its own ``ZSL_HOME``)."""
    fixture = make_fixture(work, DATASET)
    envs = {}
    for side, checkout in sides.items():
        env = _env(fixture, work / f"home-{side}")
        prepared = timed([_zsl_of(checkout), "data", "prepare", str(spec_of(DATASET))], env)
        if prepared["exit_code"] != 0:
            raise SystemExit(f"{side}: zsl data prepare failed: {str(prepared['stderr'])[-2000:]}")
        envs[side] = env
    report: dict[str, object] = {}
    for method in methods:
        seconds: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(repeat):
            for side, checkout in sides.items():
                ran = timed(
                    [_zsl_of(checkout), "run", str(checkout / "submissions" / method), "--spec",
                     str(spec_of(DATASET)), "--runner", "sandbox", "--no-store"],
                    envs[side],
                )  # fmt: skip
                if ran["exit_code"] != 0:
                    raise SystemExit(f"{side} {method}: {str(ran['stderr'])[-2000:]}")
                seconds[side].append(float(ran["seconds"]))  # type: ignore[arg-type]
        entry: dict[str, object] = {
            side: {"seconds": values, "median_seconds": round(statistics.median(values), 2)}
            for side, values in seconds.items()
        }
        if "before" in sides:
            after = statistics.median(seconds["after"])
            before = statistics.median(seconds["before"])
            overhead = round(100.0 * (after - before) / before, 1)
            entry.update(
                overhead_pct=overhead,
                target_overhead_pct=TARGET_OVERHEAD_PCT,
                overhead_target="pass" if overhead <= TARGET_OVERHEAD_PCT else "fail",
            )
        report[method] = entry
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, help="a checkout of the code before, with .venv")
    parser.add_argument("--methods", default="eszsl,sae")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/zsl-bench-phase-runs"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sides = {"after": REPO}
    if args.before is not None:
        sides = {"before": args.before.resolve(), "after": REPO}
    args.work.mkdir(parents=True, exist_ok=True)
    state_before = machine_state()
    figures = measure(args.work, args.methods.split(","), sides, args.repeat)
    result = {
        "dataset": DATASET,
        "runner": "sandbox",
        "repeat": args.repeat,
        "machine": {"before": state_before, "after": machine_state()},
        "methods": figures,
    }
    print(json.dumps(result, indent=1))
    if args.out is not None:
        report = json.loads(args.out.read_text()) if args.out.is_file() else {}
        report["phase_runs"] = result
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

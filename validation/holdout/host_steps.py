"""A hold-out workload's steps on two clocks: each step's wall time beside the CPU time of the thread that
runs the loop (`time.thread_time`), and the host's own speed at that step: the wall time of a fixed
pure-Python loop run as the step starts (`probe_ms`; both step times include it), in which neither the GPU
nor the workload's libraries take part. When the step's wall and CPU time rise with the probe, the host runs
slower (its clock, caches or neighbours); when they rise without it, the thread waited or did more.

    python validation/holdout/host_steps.py unet_diffusion --steps 60 --sync-steps

Arguments after the workload go to the workload script (fixes.py's `--fix NAME` first, if any). The last line
of standard output (after the script's own) is the steady steps (after the first `--skip`) as JSON,
{"wall_ms": [...], "cpu_ms": [...], "probe_ms": [...]}; their medians go to standard error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixes  # noqa: E402


def probe_ms() -> float:
    """The host's speed now: the wall time of a fixed pure-Python loop (about 1 ms on the device hosts)."""
    t0 = time.perf_counter()
    s = 0
    for i in range(20000):
        s += i * i
    return 1e3 * (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=fixes.WORKLOADS)
    p.add_argument("--fix", choices=fixes.FIXES, default=None)
    p.add_argument("--skip", type=int, default=8, help="warm-up steps left out")
    ours, rest = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    mod = fixes.load(ours.workload)
    if ours.fix:
        fixes.apply(mod, ours.workload, ours.fix)
    marks: list[tuple[float, float]] = []
    probes: list[float] = []

    def clocked(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
        def step_start() -> Any:  # the loop calls loss_of once a step, first thing
            marks.append((time.perf_counter(), time.thread_time()))
            probes.append(probe_ms())  # inside the step it starts, like the workload's own host work
            return loss_of()

        return model, step_start, opt

    fixes.wrap_train(mod, clocked)
    sys.argv = [os.path.join(fixes.HERE, f"{ours.workload}.py"), *rest]
    mod.main()
    steps = list(itertools.pairwise(marks))[ours.skip :]
    wall = [1e3 * (b[0] - a[0]) for a, b in steps]
    cpu = [1e3 * (b[1] - a[1]) for a, b in steps]
    probe = probes[ours.skip : ours.skip + len(steps)]
    if not wall:
        print("host_steps.py: error: no steps after --skip", file=sys.stderr)
        return 2
    columns = {"wall_ms": wall, "cpu_ms": cpu, "probe_ms": probe}
    print(json.dumps({name: [round(x, 3) for x in xs] for name, xs in columns.items()}))
    print(
        f"median step {statistics.median(wall):.2f} ms wall, {statistics.median(cpu):.2f} ms CPU, "
        f"probe {statistics.median(probe):.3f} ms [{min(probe):.3f} … {max(probe):.3f}]",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

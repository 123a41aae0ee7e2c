"""`brrrtui report --json FILE` with today's code and a baseline checkout's, in alternating whole-process runs.

    python -m benchmarks.bench_report_pairs FILE --baseline DIR [--pairs 9]

Each pair runs today's code, then the baseline's (a git worktree of another commit), on the same file, each
in a fresh interpreter whose import path is that checkout. The machine's cores are shared with other work, so
its speed moves within minutes; alternating puts both sides of a pair in the same moment, and the median of
the pairs' wall-time ratios is the figure to read. Per side: median wall time (the whole command: start,
imports, load, analysis, JSON to /dev/null), CPU time (user + system) and peak RSS, both from `os.wait4` of
a small launcher's child, so that the peak is the command's own (Linux carries the peak RSS of the process
that forks across `exec`). A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

# measure: its launcher, the command's own wall, CPU and peak RSS (wait4)
from benchmarks.bench_analyze import ROOT, commit_of, measure


def run(root: str, path: str) -> dict[str, float]:
    """One `report --json` of `path` with the code of checkout `root`."""
    out = measure(root, ["-m", "brrrtui", "report", "--json", path])
    if isinstance(out, str):
        raise SystemExit(f"{root}: report failed: {out}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="a recording or a Chrome trace")
    ap.add_argument("--baseline", required=True, metavar="DIR", help="a checkout of the code to compare with")
    ap.add_argument("--pairs", type=int, default=9, help="alternating pairs of runs (default 9)")
    ns = ap.parse_args()
    path = os.path.abspath(ns.file)
    print(
        f"{path}: {os.path.getsize(path) / 1e6:.0f} MB; today {commit_of(ROOT)}, baseline {commit_of(ns.baseline)}"
    )
    runs: dict[str, list[dict[str, float]]] = {"today": [], "baseline": []}
    for _ in range(ns.pairs):
        runs["today"].append(run(ROOT, path))
        runs["baseline"].append(run(ns.baseline, path))
    for name, rs in runs.items():
        wall, cpu, rss = (statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_mb"))
        walls = " ".join(f"{r['wall_s']:.2f}" for r in rs)
        print(
            f"{name:9} wall {wall:.2f} s  CPU {cpu:.2f} s  peak RSS {rss:.0f} MiB  (medians; walls {walls})"
        )
    ratios = [t["wall_s"] / b["wall_s"] for t, b in zip(runs["today"], runs["baseline"], strict=True)]
    print(
        f"today / baseline wall time, median of the {ns.pairs} pairs' ratios: {statistics.median(ratios):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

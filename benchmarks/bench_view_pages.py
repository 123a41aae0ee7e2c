"""A view that pages through every window of a recording: the lanes it keeps, and how long the paging takes.

    python -m benchmarks.bench_view_pages RECORDING [--baseline DIR]

In a fresh process per checkout (today's, and a baseline's: a git worktree of another commit), the recording
is loaded and analysed as `view` does, its snapshot built, and then every window's timeline lanes are asked
for in turn, as `.` pressed on every page would (brrrtui.present.lanes_by_window). Printed: the windows, the
paging's wall time, and the memory the lanes still hold afterwards and at most (tracemalloc, from just before
the paging). A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys

from benchmarks.bench_analyze import checkouts, commit_of, run_child

CHILD = """
import json, sys, time, tracemalloc
from analyzers.analyze import analyze
from brrrtui.present.snapshot import build_snapshot
from brrrtui.recording.load import load_trace
snap = build_snapshot(analyze(load_trace(sys.argv[2])))
tracemalloc.start()
t = time.perf_counter()
for w in snap.windows:
    snap.lanes[w]
wall = time.perf_counter() - t
kept, peak = tracemalloc.get_traced_memory()
print(json.dumps({"windows": len(snap.windows), "wall_s": wall, "kept_mib": kept / 2**20, "peak_mib": peak / 2**20}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of the code to compare with")
    ns = ap.parse_args()
    path = os.path.abspath(ns.recording)
    roots = checkouts(ns.baseline)
    for name, root in roots.items():
        r = run_child(CHILD, root, path)
        print(
            f"{name:9} {commit_of(root)}: {r['windows']:.0f} windows paged through in {r['wall_s']:.2f} s;"
            f" lanes kept {r['kept_mib']:.0f} MiB, at most {r['peak_mib']:.0f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

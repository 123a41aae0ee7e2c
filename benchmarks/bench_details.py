"""What the UI thread computes when a pane selects something in a big recording: the details pane's kernel,
line, gap, kernel-name and op views and the search, today's code against a baseline checkout's.

    python -m benchmarks.bench_details RECORDING [--baseline DIR]

In a fresh process per checkout, the recording is loaded, analysed and its snapshot built; then each view is
built three times and the fastest is printed (ms), with baseline / today. The items: the middle GPU row, the
two hottest lines, the middle gap, the middle row's kernel name, the first op of the hottest line, and two
searches. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys

from benchmarks.bench_analyze import checkouts, commit_of, run_child

CHILD = """
import json, sys, time
from analyzers.analyze import analyze
from brrrtui.present.details import describe
from brrrtui.present.search import search
from brrrtui.present.selection import Kind, Node
from brrrtui.present.snapshot import build_snapshot
from brrrtui.recording.load import load_trace
snap = build_snapshot(analyze(load_trace(sys.argv[2])))
a = snap.analysis
row = len(a.trace.gpu) // 2
line = Node(Kind.LINE, (snap.hot_lines[0].line_id,))
items = {
    "kernel": lambda: describe(snap, Node(Kind.KERNEL, (row,))),
    "hottest line": lambda: describe(snap, line),
    "second line": lambda: describe(snap, Node(Kind.LINE, (snap.hot_lines[1].line_id,))),
    "gap": lambda: describe(snap, Node(Kind.GAP, (len(a.gaps) // 2,))),
    "kernel name": lambda: describe(snap, Node(Kind.KERNEL_NAME, (int(a.trace.gpu.name[row]),))),
    "the hottest line's first op": lambda: describe(snap, next(n for _, n in describe(snap, line).children
                                                             if n.kind == Kind.OP)),
    "search 'mul'": lambda: search(snap, "mul"),
    "search 'train.py:41'": lambda: search(snap, "train.py:41"),
}
out = {}
for name, fn in items.items():
    times = []
    for _ in range(3):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    out[name] = min(times) * 1000
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of the code to compare with")
    ns = ap.parse_args()
    path = os.path.abspath(ns.recording)
    roots = checkouts(ns.baseline)
    got = {name: run_child(CHILD, root, path) for name, root in roots.items()}
    commits = {name: commit_of(root) for name, root in roots.items()}
    print(
        f"{path}: {os.path.getsize(path) / 1e6:.0f} MB; ms, fastest of 3: "
        + ", ".join(f"{k} {v}" for k, v in commits.items())
    )
    print(
        f"{'':30}"
        + "".join(f" {name:>10}" for name in roots)
        + ("   baseline / today" if "baseline" in got else "")
    )
    for item in got["today"]:
        cells = "".join(f" {got[name][item]:>10.1f}" for name in roots)
        ratio = f"   ×{got['baseline'][item] / got['today'][item]:.1f}" if "baseline" in got else ""
        print(f"{item:30}{cells}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

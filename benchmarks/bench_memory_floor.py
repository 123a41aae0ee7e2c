"""What a whole `report` of a recording must hold before any pass runs, against what it peaks at, as multiples
of the file: the interpreter with brrrtui's modules imported, the row tables a load makes (their bytes), and the
process's peak RSS after the load and after the analysis.

    python -m benchmarks.bench_memory_floor run.brrr [--baseline DIR]

Each side runs in a fresh interpreter (`--baseline`: a checkout of another commit, run the same way after
today's). The interpreter and the rows are the floor of any analysis that holds every row at once, as `report`
and `view` do; a peak RSS target below that floor needs an analysis that reads a few windows at a time. A
benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak() -> int:
    """The process's peak RSS so far. Linux carries the forking process's peak across `exec`
    (bench_analyze.py measures from outside for that reason); here that parent holds ~14 MiB, below every
    figure read, so the child's own peak is what shows."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def child(path: str) -> None:
    """In a fresh interpreter whose import path is the checkout under test: the figures, as one JSON line."""
    from analyzers.analyze import analyze_with_other_phases
    from brrrtui.recording.load import load_trace
    from brrrtui.runtime.allocator import tune_for_analysis

    tune_for_analysis()  # as `report` does, before it loads
    imported = _rss()
    trace = load_trace(path)
    rows = sum(
        v.nbytes
        for t in (trace.gpu, trace.runtime, trace.ops, trace.spans, trace.line_samples)
        for v in t.columns.values()
        if v.strides[0]  # a one-value column (np.broadcast_to) holds no memory
    )
    loaded = _peak()
    analyze_with_other_phases(trace)
    print(json.dumps({"imported": imported, "rows": rows, "load_peak": loaded, "peak": _peak()}))


def run(root: str, path: str) -> dict[str, int]:
    # `root`'s brrrtui, this checkout's benchmarks (for a checkout of its own that has none)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, ROOT]), PYTHONSAFEPATH="1")
    code = "import sys; from benchmarks.bench_memory_floor import child; child(sys.argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", code, path], capture_output=True, text=True, env=env, cwd=root
    )
    if proc.returncode:
        raise SystemExit(f"{root}: {proc.stderr.strip().splitlines()[-1:]}")
    out: dict[str, int] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("--baseline", help="a checkout of another commit, measured the same way")
    ns = ap.parse_args()
    size = os.path.getsize(ns.recording)
    print(f"{ns.recording}: {size / MIB:.1f} MiB")
    print(
        "  side       interpreter   rows   floor   peak after load   peak after analysis   (MiB, x the file)"
    )
    for name, root in [("today", ROOT), *([("baseline", ns.baseline)] if ns.baseline else [])]:
        m = run(root, ns.recording)
        floor = m["imported"] + m["rows"]
        cells = [m["imported"], m["rows"], floor, m["load_peak"], m["peak"]]
        print(f"  {name:<9}" + "".join(f"  {v / MIB:5.0f} {v / size:4.2f}x" for v in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

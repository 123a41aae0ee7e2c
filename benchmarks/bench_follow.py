"""What reading a live recording costs per new window: a full load_recording against a Follower's poll.

    python -m benchmarks.bench_follow --windows 50

Writes the synthetic run of benchmarks/synthetic_run.py (windows of 20 steps of 1,000 kernels; 3 ops, 1
launch, 1 span per kernel) into a recording one window at a time, as the recorder does, and after each window times a full
`load_recording` and a `Follower.poll()` (brrrtui/recording/follow.py) of the same file in this process.
Prints both for the first, middle and last windows and their ratio: a poll reads only what the window added,
so its cost stays flat while a full load grows with the recording. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks.synthetic_run import generate
from brrrtui.recording.follow import Follower
from brrrtui.recording.store import RecordingWriter, load_recording

WINDOW_TABLES = ("gpu", "runtime", "ops", "spans", "windows")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--windows", type=int, default=50)
    ns = p.parse_args()
    trace = generate(ns.windows * 20_000)
    path = os.path.join(tempfile.mkdtemp(prefix="brrr-follow-"), "live.brrr")
    w = RecordingWriter(path)
    w.append(
        {
            "strings": list(enumerate(trace.strings)),
            "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)],
        }
    )
    follower = Follower(path)
    rows: list[tuple[int, int, float, float]] = []
    for window in sorted(set(trace.windows.window.tolist())):
        w.append(
            {
                name: getattr(trace, name).take(np.nonzero(getattr(trace, name).window == window)[0])
                for name in WINDOW_TABLES
            }
        )
        t0 = time.perf_counter()
        full = load_recording(path)
        t1 = time.perf_counter()
        polled = follower.poll()
        t2 = time.perf_counter()
        assert len(polled.gpu) == len(full.gpu) and len(polled.ops) == len(full.ops)
        rows.append((window + 1, len(full.gpu), t1 - t0, t2 - t1))
    w.close()
    print(f"{'windows':>8} {'kernels':>10} {'load_recording s':>17} {'Follower.poll s':>16} {'ratio':>6}")
    for k in sorted({0, len(rows) // 2, len(rows) - 1}):
        n, kernels, full_s, poll_s = rows[k]
        print(f"{n:>8} {kernels:>10,} {full_s:>17.3f} {poll_s:>16.3f} {full_s / poll_s:>6.1f}")
    polls = [r[3] for r in rows]
    print(
        f"poll, median of the first 5 / of the last 5 windows: {np.median(polls[:5]):.3f} / {np.median(polls[-5:]):.3f} s"
    )
    os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

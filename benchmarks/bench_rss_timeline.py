"""Where the analysis of a big recording reaches its peak RSS: the process's RSS sampled every 3 ms while it
loads the recording and analyses it (`analyze`, the phase the run leads with), with each pass's stretch.

    python -m benchmarks.bench_rss_timeline run.brrr [--threads 1]

tracemalloc (benchmarks/bench_passes.py) counts what the passes hold; RSS is what the machine gives the
process: the high-water mark of a heap that keeps what it freed for the next pass (brrrtui/runtime/allocator.py),
and passes that run together on threads (brrrtui/runtime/parallel.py) hold their temporaries at the same time.
`--threads 1` runs the passes one by one. Prints the highest RSS, then per pass (in the order they started)
its start and end (s from the start) and the RSS when it started, its highest during it and at its end. A
benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import analyzers.analyze as analyze_module
import brrrtui.runtime.parallel as parallel
from benchmarks.bench_passes import PASSES  # (module, pass) of what analyze() calls by name
from brrrtui.recording.load import load_trace

PAGE = os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("--threads", type=int, default=parallel.THREADS, help="analysis threads (1: one by one)")
    ns = ap.parse_args()
    parallel.THREADS = ns.threads
    samples: list[tuple[float, int]] = []
    marks: list[tuple[str, float, float]] = []
    done = threading.Event()

    def sample() -> None:
        with open("/proc/self/statm") as f:
            while not done.is_set():
                f.seek(0)
                samples.append((time.perf_counter(), int(f.read().split()[1]) * PAGE))
                time.sleep(0.003)

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            marks.append((name, t, time.perf_counter()))
            return out

        return run

    for module, name in PASSES:
        setattr(module, name, timed(name, getattr(module, name)))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    trace = timed("load", load_trace)(ns.recording)
    analyze_module.analyze(trace)
    done.set()
    sampler.join()

    def mib(a: float, b: float) -> float:
        return max((r for t, r in samples if a <= t <= b), default=0) / 2**20

    print(f"{ns.recording}: highest RSS {max(r for _, r in samples) / 2**20:.0f} MiB, {ns.threads} thread(s)")
    print(f"  {'pass':22} {'from':>6} {'to':>6} {'start':>6} {'peak':>6} {'end':>6}  MiB")
    for name, a, b in sorted(marks, key=lambda m: m[1]):
        print(
            f"  {name:22} {a - t0:6.2f} {b - t0:6.2f} {mib(a, a + 0.01):6.0f} {mib(a, b):6.0f} {mib(b - 0.01, b):6.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

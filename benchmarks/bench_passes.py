"""Where `analyze()` spends its CPU time and memory, pass by pass, on a big recording.

    python -m benchmarks.bench_passes --kernels 1000000            # the synthetic run (benchmarks/synthetic_run.py)
    python -m benchmarks.bench_passes path/to/run.brrr [--repeat 3]

Each pass of analyzers.analyze.analyze (the functions it and analyzers.pass_groups call by name: link_calls,
roofline, gaps_and_waits, ...) is wrapped, and the passes run one by one (not on threads):

- CPU s: the pass's process CPU time (`time.process_time`, which other sessions' load on shared cores inflates
  less than wall time), the least over `--repeat` analyses without tracemalloc;
- kept MB: what the pass left allocated when it returned (tracemalloc, numpy's buffers included), and peak MB:
  the most held at any moment during it, counted from the start of the process (the loaded trace and the
  passes before it included): the analysis's peak is the largest of these.

The first lines give the load (CPU s, kept MB). Process RSS adds the interpreter and the imported modules
(~60 MB) to tracemalloc's figures. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import analyzers.analyze as analyze_module
import analyzers.pass_groups as pass_groups
from benchmarks.synthetic_run import generate, write_recording
from brrrtui.recording.load import load_trace
from brrrtui.runtime import parallel

# (module, pass) of the functions analyze() calls by name; with the passes one by one (THREADS = 1), each
# pass's process CPU time and tracemalloc's figures are its own
PASSES = [
    *(
        (analyze_module, n)
        for n in "select_windows trim_close_stalls fusion_chains _module_tree _line_stats".split()
    ),
    *((pass_groups, n) for n in "link_calls link_lines roofline gaps_and_waits launch_timing".split()),
    *((pass_groups, n) for n in "unprofiled_gaps kernel_stats library_line_stats fusable_pairs".split()),
    (analyze_module, "_findings"),
]
MB = 1e6


def _wrapped(
    name: str, f: Callable[..., Any], seen: dict[str, list[float]], traced: bool
) -> Callable[..., Any]:
    @functools.wraps(f)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if traced:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        t = time.process_time()
        out = f(*args, **kwargs)
        cpu = time.process_time() - t
        kept, peak = (
            (tracemalloc.get_traced_memory()[0] - before, tracemalloc.get_traced_memory()[1])
            if traced
            else (0, 0)
        )
        seen.setdefault(name, [0.0, 0.0, 0.0])
        seen[name][0] += cpu
        seen[name][1] += kept
        seen[name][2] = max(seen[name][2], peak)
        return out

    return timed


def measure(path: str, repeat: int) -> None:
    parallel.THREADS = 1
    originals = {n: (m, getattr(m, n)) for m, n in PASSES}
    cpu: dict[str, float] = {}
    load_trace(path)  # once before timing: the first call also imports the readers
    t = time.process_time()
    trace = load_trace(path)
    load_cpu = time.process_time() - t
    for _ in range(repeat):  # CPU time, without tracemalloc's overhead
        seen: dict[str, list[float]] = {}
        for n, (m, f) in originals.items():
            setattr(m, n, _wrapped(n, f, seen, False))
        t = time.process_time()
        analyze_module.analyze(trace)
        seen["analyze (all)"] = [time.process_time() - t, 0.0, 0.0]
        for n, v in seen.items():
            cpu[n] = min(cpu.get(n, float("inf")), v[0])
    del trace
    tracemalloc.start()
    trace = load_trace(path)
    loaded, load_peak = tracemalloc.get_traced_memory()
    seen = {}
    for n, (m, f) in originals.items():
        setattr(m, n, _wrapped(n, f, seen, True))
    tracemalloc.reset_peak()
    analysis = analyze_module.analyze(trace)  # kept: what the analysis holds when it is done
    end = tracemalloc.get_traced_memory()[0]
    peak = max(v[2] for v in seen.values())  # each pass resets tracemalloc's peak
    del analysis
    print(f"{path} ({os.path.getsize(path) / MB:.0f} MB)")
    print(f"  {'pass':<22} {'CPU s':>7} {'kept MB':>8} {'peak MB':>8}")
    print(f"  {'load_trace':<22} {load_cpu:7.3f} {loaded / MB:8.0f} {load_peak / MB:8.0f}")
    for n in [*(n for _, n in PASSES), "analyze (all)"]:
        kept, top = (seen[n][1], seen[n][2]) if n in seen else (end - loaded, peak)
        if n in cpu:
            print(f"  {n:<22} {cpu[n]:7.3f} {kept / MB:8.0f} {top / MB:8.0f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("path", nargs="?", help="a recording (default: a synthetic run of --kernels kernels)")
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3, help="analyses timed; the least CPU time is shown")
    ns = p.parse_args()
    if ns.path:
        measure(ns.path, ns.repeat)
        return 0
    with tempfile.TemporaryDirectory(prefix="brrrtui-passes-") as tmp:
        path = os.path.join(tmp, f"run{ns.kernels}.brrr")
        write_recording(generate(ns.kernels), path)
        measure(path, ns.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())

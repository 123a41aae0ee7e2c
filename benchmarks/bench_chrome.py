"""How fast, and in how much memory, does a big torch.profiler Chrome trace load and analyse?

    git worktree add /tmp/base <old commit>
    python -m benchmarks.bench_chrome --kernels 300000 --baseline /tmp/base [--hta-python /tmp/hta/bin/python]
    python -m benchmarks.bench_chrome --kernels 1000000 --modes bulk,json.load --keep /tmp/bench

Writes the synthetic run of benchmarks/synthetic_run.py as the Chrome JSON torch.profiler writes (~1 KB per
kernel: 6 events), optionally gzipped (--gzip), then runs each reader in a fresh process, measured from
outside through bench_analyze's launcher (wall time of the whole process, peak RSS by os.wait4):

- bulk:      today's load_chrome (msgspec, brrrtui/recording/chrome/bulk.py) + analyze
- bulk-load: the same load_chrome alone (the reader's own time and memory)
- json path: today's load_chrome(fast=False): json.load + the event-by-event reader + analyze
- baseline:  the --baseline checkout's load_chrome + analyze (the reader before, in the same run)
- json.load: the standard library's json.load of the file alone (the floor of any json-based reader)
- hta:       HolisticTraceAnalysis (--hta-python: an interpreter that has it): TraceAnalysis + temporal and
             idle-time breakdowns, what the issue's HTA figures measured

With --repeat N each reader runs N times, interleaved, and the fastest run is reported: use 2 or more, since
the first reader of a run may read a 1 GB file from disk while the others find it in the page cache (seen: the
bulk reader first, 37 s to load for 16 s of CPU; the next reader 15 s). Prints a table with each reader's
wall time, CPU time (user + system, os.wait4) and peak RSS, and their ratios to bulk's. A benchmark, not a
test.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

MODES = ("bulk", "bulk-load", "json path", "baseline", "json.load", "hta")


def child(mode: str, path: str) -> None:
    """One reader; prints its split (load s, analyze s) to stderr as JSON."""
    t0 = time.perf_counter()
    if mode == "json.load":
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            json.load(f)
        print(json.dumps({"load_s": time.perf_counter() - t0, "analyze_s": 0.0}), file=sys.stderr)
        return
    if mode == "hta":
        import logging

        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis

        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
        t1 = time.perf_counter()
        ta.get_temporal_breakdown(visualize=False)
        ta.get_idle_time_breakdown(visualize=False)
        print(json.dumps({"load_s": t1 - t0, "analyze_s": time.perf_counter() - t1}), file=sys.stderr)
        return
    from analyzers.analyze import analyze
    from brrrtui.recording.chrome.load import load_chrome

    t0 = time.perf_counter()  # after the imports (the wall time has them)
    trace = load_chrome(path, fast=False) if mode == "json path" else load_chrome(path)
    t1 = time.perf_counter()
    if mode != "bulk-load":
        analyze(trace)
    print(json.dumps({"load_s": t1 - t0, "analyze_s": time.perf_counter() - t1, "kernels": len(trace.gpu)}),
          file=sys.stderr)  # fmt: skip


def run(mode: str, path: str, root: str, python: str) -> dict[str, float] | str:
    from benchmarks.bench_analyze import measure

    r = measure(root, [os.path.abspath(__file__), "--child", mode, path], python=python)
    if isinstance(r, str):
        return r
    return {**json.loads(r.pop("stderr").strip().splitlines()[-1]), **r}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", type=int, default=300_000)
    p.add_argument("--gzip", action="store_true", help="write the trace as .json.gz")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of: {', '.join(MODES)}")
    p.add_argument("--baseline", metavar="DIR", help="a checkout of the code to compare with (git worktree)")
    p.add_argument("--hta-python", metavar="PYTHON", help="an interpreter with HolisticTraceAnalysis")
    p.add_argument("--keep", metavar="DIR", help="write the trace here and keep it")
    p.add_argument("--repeat", type=int, default=1, help="run each reader N times, report the fastest")
    p.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.child:
        child(*ns.child)
        return 0
    from benchmarks.synthetic_run import ROOT, generate, write_chrome

    work = ns.keep or tempfile.mkdtemp(prefix="brrr-bench-")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"trace{ns.kernels}.json")
    if not os.path.exists(path + (".gz" if ns.gzip else "")):
        t = time.perf_counter()
        write_chrome(generate(ns.kernels), path)
        if ns.gzip:
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=1) as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)
        print(f"wrote {path}{'.gz' if ns.gzip else ''} in {time.perf_counter() - t:.1f} s")
    path += ".gz" if ns.gzip else ""
    mb = os.path.getsize(path) / 1e6
    print(
        f"{ns.kernels:,} kernels, {mb:.0f} MB{' gzipped' if ns.gzip else ''}; today: {ROOT}; baseline: {ns.baseline or '-'}"
    )
    from benchmarks.bench_analyze import best

    modes = [
        m
        for m in ns.modes.split(",")
        if not (m == "baseline" and not ns.baseline or m == "hta" and not ns.hta_python)
    ]
    results: dict[str, list[dict[str, float] | str]] = {m: [] for m in modes}
    for _ in range(ns.repeat):  # interleaved, so that a busy spell of the machine hits every reader alike
        for mode in modes:
            root = ns.baseline if mode == "baseline" else ROOT
            r = run(mode, path, root, ns.hta_python if mode == "hta" else sys.executable)
            results[mode].append(r)
            print(f"  {mode}: {r if isinstance(r, str) else round(r['wall_s'], 2)}", flush=True)
    rows = [(mode, best(rs)) for mode, rs in results.items()]
    print(
        f"\n{'reader':<10} {'wall s':>7} {'CPU s':>7} {'load s':>7} {'analyze s':>10} {'peak RSS MB':>12} {'RSS/file':>9}"
    )
    for mode, r in rows:
        if isinstance(r, str):
            print(f"{mode:<10} failed: {r}")
        else:
            print(f"{mode:<10} {r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['load_s']:>7.2f} {r['analyze_s']:>10.2f}"
                  f" {r['peak_rss_mb']:>12.0f} {r['peak_rss_mb'] / mb:>9.2f}")  # fmt: skip
    bulk = dict(rows).get("bulk")
    for mode, r in rows:
        if mode != "bulk" and isinstance(r, dict) and isinstance(bulk, dict):
            print(f"{mode} / bulk: wall {r['wall_s'] / bulk['wall_s']:.1f}x, CPU {r['cpu_s'] / bulk['cpu_s']:.1f}x,"
                  f" load {r['load_s'] / bulk['load_s']:.1f}x,"
                  f" analysis {r['analyze_s'] / max(bulk['analyze_s'], 1e-9):.1f}x,"
                  f" peak RSS {r['peak_rss_mb'] / bulk['peak_rss_mb']:.1f}x")  # fmt: skip
    if not ns.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

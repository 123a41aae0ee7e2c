"""`brrrtui view` on a big torch.profiler trace: how long until the first frame, and until the first analysis?

    python -m benchmarks.bench_view_first_frame [--events 2000000] [--keep DIR] [--repeat 1]
    python -m benchmarks.bench_view_first_frame --kernels 1000000 [--baseline DIR] [--keep DIR] [--repeat 3]
    python -m benchmarks.bench_view_first_frame --recording REC [--baseline DIR] [--repeat 3]

The trace is the one-step ResNet-50 H200 trace of the tests (tests/fixtures/resnet50_h200_tui.json.gz, 10k
events) laid end to end until it holds `--events` events (ids and correlations offset per copy, one profiler
span over all of it), written as .json.gz. Each measurement runs in a fresh process, the app headless
(Textual's run_test, 160x48), timed from just before the command's work (imports done):

- baseline "read twice": what `view` did before, on a terminal: the CLI read the file to check it
  (`load_trace`), then the app read it again in its worker before its first analysis;
- "read once": what `view` does now on a terminal: the app starts at once and reads the file in its worker,
  its progress in the header.

With --kernels N the file is instead the synthetic training run of benchmarks/synthetic_run.py written as a
recording (format 2), and `view` reads it once; --recording REC views that recording instead (a real model's
at scale: benchmarks/tiled_recording.py); --baseline DIR runs the same on another checkout's code (a git
worktree), interleaved, for a ratio measured in the same run.

For each: the first frame (run_test hands over the app once it is ready, its first screen drawn; what the
header says then), the first verdicts on screen (a big recording's first look: its newest window analysed
alone, brrrtui.session.first_look) and the first analysis of the whole phase on screen; with a recording also
the process's peak RSS up to then and its RSS then (/proc/self/status). Ratios are read once / read twice, or baseline / today, both measured in the
same run. A benchmark, not a test: nothing is asserted.
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

# run_child writes the checkout's bytecode first, as installed code has it
from benchmarks.bench_analyze import checkouts, commit_of, run_child

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "resnet50_h200_tui.json.gz")
ID_ARGS = ("External id", "correlation", "Sequence number", "Python id", "Python parent id", "Ev Idx")


def write_trace(path: str, events: int) -> int:
    """The fixture's events laid end to end `events // 10k` times; returns the number of events written."""
    with gzip.open(FIXTURE, "rt") as f:
        doc = json.load(f)
    evs = doc.pop("traceEvents")
    meta = [e for e in evs if e.get("ph") != "X" or e.get("cat") == "Trace"]
    body = [e for e in evs if e.get("ph") == "X" and e.get("cat") != "Trace"]
    t0 = min(e["ts"] for e in body)
    period = max(e["ts"] + e.get("dur", 0) for e in body) - t0 + 1000.0
    stride = {
        k: 1 + max(int(e["args"][k]) for e in body if isinstance(e.get("args", {}).get(k), int))
        for k in ID_ARGS
    }
    copies = max(1, events // len(body))
    for e in meta:
        if e.get("cat") == "Trace":
            e["dur"] = copies * period
    written = len(meta)
    with gzip.open(path, "wt", compresslevel=1) as out:
        head = json.dumps(doc)[:-1]
        out.write(head + ', "traceEvents": [')
        out.write(",".join(json.dumps(e) for e in meta))
        for c in range(copies):
            shifted = []
            for e in body:
                e2 = dict(e, ts=e["ts"] + c * period)
                args = e.get("args")
                if args:
                    a2 = dict(args)
                    for k in ID_ARGS:
                        if isinstance(a2.get(k), int):
                            a2[k] += c * stride[k]
                    e2["args"] = a2
                shifted.append(json.dumps(e2))
            out.write("," + ",".join(shifted))
            written += len(shifted)
        out.write("]}")
    return written


CHILD = """
import asyncio, json, sys, time
from brrrtui.recording.load import load_trace
from brrrtui.tui.app import make_app
path, mode = sys.argv[2], sys.argv[3]

async def main():
    t0 = time.perf_counter()
    if mode == "twice":
        load_trace(path)  # the CLI's check, as `view` did before
    app = make_app(path, None, None)
    async with app.run_test(size=(160, 48)) as pilot:  # entered once the app is ready: its first frame drawn
        first = time.perf_counter() - t0
        header = str(app.main.query_one("#status").render())
        shown = None  # the first verdicts on screen: a big recording's first look, else the analysis
        while app.analyses < 1:
            if shown is None and app.snapshot is not None:
                shown = time.perf_counter() - t0
            await pilot.pause(0.02)
        analysed = time.perf_counter() - t0
        ok = app.snapshot is not None
        mem = memory()
    verdicts = analysed if shown is None else shown
    print(json.dumps({"first_frame_s": first, "verdicts_s": verdicts, "analysed_s": analysed, "header": header,
                      "ok": ok, **mem}))

def memory():
    # this process's own peak and current RSS (VmHWM is the address space's: not carried over from the
    # process that started it, as ru_maxrss is across exec)
    with open("/proc/self/status") as f:
        kb = {k: int(v.split()[0]) for k, v in (ln.split(":", 1) for ln in f) if k in ("VmHWM", "VmRSS")}
    return {"peak_rss_mb": kb["VmHWM"] / 1024, "rss_mb": kb["VmRSS"] / 1024}

asyncio.run(main())
"""


def measure(path: str, mode: str, root: str = ROOT) -> dict:
    return run_child(CHILD, root, path, mode)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000, help="events in the trace (default 2,000,000)")
    ap.add_argument("--keep", metavar="DIR", help="write the trace here and keep it (reused if there)")
    ap.add_argument("--repeat", type=int, default=1, help="measurements of each (default 1)")
    ap.add_argument("--kernels", type=int, help="a synthetic recording of this many kernels instead")
    ap.add_argument("--recording", metavar="REC", help="view this recording instead")
    ap.add_argument("--baseline", metavar="DIR", help="with a recording: a checkout to compare with")
    ns = ap.parse_args()
    work = ns.keep or tempfile.mkdtemp(prefix="brrrtui-bench-")
    os.makedirs(work, exist_ok=True)
    if ns.kernels or ns.recording:
        recording(work, ns.kernels, ns.baseline, ns.repeat, ns.recording)
        if not ns.keep:
            shutil.rmtree(work)
        return 0
    path = os.path.join(work, f"resnet_x{ns.events}.json.gz")
    if not os.path.exists(path):
        t = time.perf_counter()
        n = write_trace(path, ns.events)
        print(
            f"wrote {path}: {n:,} events, {os.path.getsize(path) / 1e6:.0f} MB, {time.perf_counter() - t:.0f} s"
        )
    else:
        print(f"reusing {path} ({os.path.getsize(path) / 1e6:.0f} MB)")
    rows: dict[str, list[dict]] = {"twice": [], "once": []}
    for _ in range(ns.repeat):
        for mode in ("twice", "once"):  # interleaved: the machine's load falls on both alike
            rows[mode].append(measure(path, mode))
    best = {m: {k: min(r[k] for r in rs) for k in ("first_frame_s", "analysed_s")} for m, rs in rows.items()}
    names = {"twice": "read twice (baseline: view before)", "once": "read once (view now)"}
    print(f"{'':38} {'first frame':>12} {'first analysis':>15}")
    for m in ("twice", "once"):
        print(f"{names[m]:38} {best[m]['first_frame_s']:>10.2f} s {best[m]['analysed_s']:>13.2f} s")
    for k, label in (("first_frame_s", "first frame"), ("analysed_s", "first analysis")):
        print(f"ratio once / twice, {label}: {best['once'][k] / best['twice'][k]:.3f}")
    print(f"header at the first frame, read once: {rows['once'][0]['header']!r}")
    print(f"header at the first frame, read twice: {rows['twice'][0]['header']!r}")
    if not ns.keep:
        os.remove(path)
    return 0


def recording(work: str, kernels: int, baseline: str | None, repeat: int, path: str | None = None) -> None:
    """`view` of a recording (`path`, else a synthetic one of `kernels` kernels): first frame and first
    analysis, today's code and the baseline's."""
    path = path or os.path.join(work, f"run{kernels}.v2.brrr")
    if not os.path.exists(path):
        from benchmarks.synthetic_run import generate, write_recording

        write_recording(generate(kernels), path)
    print(f"{path}: {os.path.getsize(path) / 1e6:.0f} MB; today: {ROOT} at {commit_of(ROOT)}")
    roots = checkouts(baseline)
    runs: dict[str, list[dict]] = {k: [] for k in roots}
    for _ in range(repeat):
        for name, root in roots.items():  # interleaved
            runs[name].append(measure(path, "once", root))
    print(
        f"{'':10} {'first frame':>12} {'first verdicts':>15} {'first analysis':>15} {'peak RSS':>10}"
        f" {'RSS then':>10}   (fastest of {repeat})"
    )
    best = {}
    for name, rs in runs.items():
        keys = ("first_frame_s", "verdicts_s", "analysed_s", "peak_rss_mb", "rss_mb")
        best[name] = {k: min(r[k] for r in rs) for k in keys}
        b = best[name]
        print(
            f"{name:10} {b['first_frame_s']:>10.2f} s {b['verdicts_s']:>13.2f} s {b['analysed_s']:>13.2f} s"
            f" {b['peak_rss_mb']:>7.0f} MB {b['rss_mb']:>7.0f} MB"
        )
        print(f"           header at the first frame: {rs[0]['header']!r}")
    if "baseline" in best:
        for k, label in (
            ("first_frame_s", "first frame"),
            ("verdicts_s", "first verdicts"),
            ("analysed_s", "first analysis"),
            ("peak_rss_mb", "peak RSS"),
            ("rss_mb", "RSS at the first analysis"),
        ):
            print(f"ratio baseline / today, {label}: {best['baseline'][k] / best['today'][k]:.2f}")


if __name__ == "__main__":
    sys.exit(main())

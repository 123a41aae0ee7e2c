"""CPU cost per new window of live mode, from the 1st to the 100th window: the recorder's write and the TUI's
read + analysis + snapshot, against the full re-read and re-analysis live mode did before (the baseline).

    python -m benchmarks.bench_live_windows --windows 100
    python -m benchmarks.bench_live_windows --windows 100 --app

Writes the synthetic run of benchmarks/synthetic_run.py (windows of `--steps-per-window` steps of 1,000
kernels, ~6 events per kernel: 4 steps make a window of ~24 k events, the size brrrtui sizes its windows to)
into a recording one window at a time through the recorder's Sink, as its writer thread does: before each
window `--between` small batches of steps and telemetry (the recorder commits them about once a second: 36
at one window every ~36 s, so 100 windows are an hour), then the window's batch, one transaction each. After
each window it runs, in this process, what the live TUI's analysis worker runs (brrrtui.session.Source): a
Follower poll, the analysis of the newest LIVE_WINDOWS windows of the lead phase, cut out by the
WindowIndex, and the snapshot. The baseline, the whole recording read (`load_recording`) and analysed
(`analyse_trace`, every window of the lead phase), is timed after the 1st, 10th, 50th and last windows only
(it is what grows). CPU times of this process (time.process_time); "write" is every batch of the window.
The window's rows reach the Sink as the row tuples a WindowBatch message carries (their conversion to
columns is timed; unpickling the message is not). A benchmark, not a test.

With --app, the live app itself runs headless (120x40) on the recording: per window, the CPU time of this
whole process from the WindowAdded event until the app has shown the new snapshot (the worker's read,
analysis and snapshot, and the UI thread applying it), with the app's live path, then, in the same run, with
the app reading and analysing as before (its Source in view mode: load_recording + analyse_trace per window).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

from analyzers.phases.live_windows import LIVE_WINDOWS, ROW_TABLES
from benchmarks import synthetic_run
from benchmarks.synthetic_run import generate
from brrrtui.contract.model import Table, Trace
from brrrtui.record.sink import Sink
from brrrtui.recording.store import load_recording
from brrrtui.session import Source, analyse_trace


def cpu(fn, *args, **kw):  # noqa: ANN001, ANN201 - a timer
    t0 = time.process_time()
    out = fn(*args, **kw)
    return out, time.process_time() - t0


def window_batches(trace: Trace, between: int = 0):
    """(window, batches) in window order: `between` small batches (the steps up to the window's end in as
    many parts, each with 10 telemetry rows: the recorder commits steps and telemetry about once a second),
    then the window's batch: its row tables and windows row (and the steps, when `between` is 0)."""
    steps, done = trace.steps, 0
    ends = np.sort(steps.t_ns)
    for row in np.argsort(trace.windows.window, kind="stable").tolist():
        win = int(trace.windows.window[row])
        upto = int(np.searchsorted(ends, trace.windows.end_ns[row], side="right"))
        batch: dict[str, Any] = {
            n: row_tuples(getattr(trace, n).take(np.nonzero(getattr(trace, n).window == win)[0]))
            for n in ROW_TABLES
        }
        batch["windows"] = row_tuples(trace.windows.take(np.array([row])))
        parts = np.array_split(np.arange(done, upto), between) if between else []
        small = [{"steps": steps.take(part), "telemetry": telemetry(int(ends[done]))} for part in parts]
        if not between:
            batch["steps"] = steps.take(np.arange(done, upto))
        done = max(done, upto)
        yield win, [*small, batch]


def row_tuples(table: Table) -> list[tuple[Any, ...]]:
    """A table as the rows a WindowBatch message carries (the recorder turns them into columns)."""
    return list(zip(*(v.tolist() for v in table.columns.values()), strict=True))


def telemetry(t_ns: int) -> list[tuple[int, float, float, float, float]]:
    """A second of NVML samples (10 Hz), as the recorder's sampler commits them."""
    return [(t_ns + i * 100_000_000, 50.0, 1e10, 300.0, 1980.0) for i in range(10)]


def open_sink(trace: Trace, path: str) -> Sink:
    """A fresh recording at `path`, locked and written as the recorder does: meta, then the names."""
    sink = Sink(path, on_failure=lambda text: print(text, file=sys.stderr))
    sink.open()
    sink.set_meta(status="running", device={"name": trace.device.name, "num_sms": trace.device.num_sms})
    sink.append(
        {
            "strings": list(enumerate(trace.strings)),
            "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)],
        }
    )
    return sink


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--windows", type=int, default=100)
    p.add_argument("--steps-per-window", type=int, default=4)
    p.add_argument(
        "--between", type=int, default=36, help="steps+telemetry batches before each window (36: ~36 s apart)"
    )
    p.add_argument("--app", action="store_true", help="time the live app headless, and as it was")
    ns = p.parse_args()
    synthetic_run.STEPS_PER_WINDOW = ns.steps_per_window
    trace = generate(ns.windows * ns.steps_per_window * synthetic_run.KERNELS_PER_STEP)
    folder = tempfile.mkdtemp(prefix="brrr-live-")
    if ns.app:
        import asyncio

        live = asyncio.run(app_costs(trace, os.path.join(folder, "live.brrr"), False, ns.between))
        base = asyncio.run(app_costs(trace, os.path.join(folder, "base.brrr"), True, ns.between))
        report_app(live, base)
        return 0
    path = os.path.join(folder, "live.brrr")
    sink = open_sink(trace, path)
    source = Source(path, follow=True)
    n_windows = len(trace.windows)
    sampled = sorted({1, min(10, n_windows), min(50, n_windows), n_windows})
    rows: list[dict[str, float]] = []
    for k, (_, batches) in enumerate(window_batches(trace, ns.between), 1):
        write_s = sum(cpu(sink.append, batch)[1] for batch in batches)
        whole, read_s = cpu(source.read)
        snap, analyse_s = cpu(source.analyse, whole, k, running=True)
        row = {"window": k, "kernels": len(whole.gpu), "write": write_s, "read": read_s, "analyse": analyse_s}
        row["analysed"] = len(snap.analysis.windows)
        if k in sampled:
            full, load_s = cpu(load_recording, path)
            _, full_s = cpu(analyse_trace, full, None, k)
            row["baseline"] = load_s + full_s
        rows.append(row)
    sink.close()
    report(rows, sampled)
    os.remove(path)
    return 0


def report(rows: list[dict[str, float]], sampled: list[int]) -> None:
    print(
        f"live windows analysed: the newest {LIVE_WINDOWS} of the lead phase (analyzers.phases.live_windows)"
    )
    head = ("window", "kernels", "analysed", "write ms", "read ms", "analyse ms", "live ms", "baseline ms")
    print(" ".join(f"{h:>11}" for h in head))
    for k in sampled:
        r = rows[k - 1]
        live = r["write"] + r["read"] + r["analyse"]
        cells = [f"{k:>11}", f"{r['kernels']:>11,}", f"{r['analysed']:>11}"]
        cells += [f"{1e3 * r[c]:>11.1f}" for c in ("write", "read", "analyse")]
        cells += [f"{1e3 * live:>11.1f}", f"{1e3 * (r['write'] + r['baseline']):>11.1f}"]
        print(" ".join(cells))
    first, last = rows[0], rows[-1]
    tenth = rows[min(10, len(rows)) - 1]

    def live(r: dict[str, float]) -> float:
        return r["write"] + r["read"] + r["analyse"]

    def base(r: dict[str, float]) -> float:
        return r["write"] + r["baseline"]

    print(
        f"last / first window: live {live(last) / live(first):.2f}, baseline {base(last) / base(first):.2f}"
    )
    print(
        f"last / 10th window:  live {live(last) / live(tenth):.2f}, baseline {base(last) / base(tenth):.2f}"
    )
    for c in ("write", "read", "analyse"):
        v = [r[c] for r in rows]
        print(
            f"{c}, median of the first 5 / 10th-14th / last 5 windows: {1e3 * np.median(v[:5]):.1f} / "
            f"{1e3 * np.median(v[9:14]):.1f} / {1e3 * np.median(v[-5:]):.1f} ms"
        )
    print(f"baseline at the last window / live at the last window: {base(last) / live(last):.1f}x")


async def app_costs(trace: Trace, path: str, baseline: bool, between: int) -> list[float]:
    """CPU seconds of this process per window, from its WindowAdded until the app shows the snapshot."""
    from brrrtui.record.feed import Feed, WindowAdded
    from brrrtui.tui.app import make_app

    sink, windows = open_sink(trace, path), window_batches(trace, between)
    for batch in next(windows)[1]:
        sink.append(batch)
    feed = Feed()
    app = make_app(path, feed, "train.py", poll_s=0.05)
    if baseline:  # the app as it was: the whole recording read and every window of the phase analysed
        app._source = Source(path, follow=False, script="train.py")
    costs: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.analyses >= 1)
        for k, (win, batches) in enumerate(windows, 2):
            t0 = time.process_time()
            for batch in batches:
                sink.append(batch)
            feed.put(WindowAdded(win, len(batches[-1]["gpu"]), len(batches[-1]["ops"])))
            await until(pilot, lambda k=k: app.analyses >= k)
            costs.append(time.process_time() - t0)
        assert app.state.error is None, app.state.error
    sink.close()
    os.remove(path)
    return costs


async def until(pilot, predicate) -> None:  # noqa: ANN001 - a Textual pilot
    while not predicate():
        await pilot.pause(0.01)


def report_app(live: list[float], base: list[float]) -> None:
    print("the live app, headless: CPU s of the process per window (write, read, analysis, snapshot, UI)")
    print(f"{'window':>7} {'live app':>10} {'as it was':>10} {'ratio':>7}")
    n = len(live) + 1
    for k in sorted({2, min(10, n), min(50, n), n}):
        print(f"{k:>7} {live[k - 2]:>10.3f} {base[k - 2]:>10.3f} {base[k - 2] / live[k - 2]:>7.1f}")
    for name, v in (("live app", live), ("as it was", base)):
        first, mid, last = np.median(v[:5]), np.median(v[8:13]), np.median(v[-5:])
        print(
            f"{name}, median of windows 2-6 / 10-14 / the last 5: {first:.3f} / {mid:.3f} / {last:.3f} s;"
            f" last / first {last / first:.2f}, last / 10th {last / mid:.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())

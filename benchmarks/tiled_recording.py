"""A long recording made of a real one's steady window, repeated: real kernels, ops, spans and lines at scale.

    python -m benchmarks.tiled_recording tests/fixtures/h200_hf_gpt2_steady.brrr.gz /tmp/tiled.brrr --kernels 1000000

The synthetic run (synthetic_run.py) has 3 ops, 1 span and 1 launch per kernel, no device and no finding;
an H200 recording of Hugging Face GPT-2 has ~5.5 ops, 2.4 spans and 1.3 launches per kernel, ceilings,
findings, fusion chains and a module tree. This repeats the recording's first steady-state window, as a long
run's windows would come, one every `--every` optimizer steps, until the copies hold `--kernels` kernels:
each copy's rows shifted in time by that many steps (at the recording's median step time), its window id,
step numbers, correlation ids and autograd sequence numbers past the previous copy's. The steps between
copies are synthesised at the median step time, so the run is one steady state. The copies are analysed
alike, so the figures per step are the recording's; the cost of analysing them is a real model's at scale.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from analyzers.analyze import phases_of
from analyzers.phases.run_phases import Phase
from brrrtui.contract.model import STEP_SCHEMA, Table, Trace
from brrrtui.recording.load import load_trace
from brrrtui.recording.store import write_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WINDOW_TABLES = ("gpu", "runtime", "ops", "spans", "line_samples", "capture_costs")


def tile(trace: Trace, kernels: int, every: int) -> Trace:
    """`trace`'s first steady window repeated until the copies hold at least `kernels` GPU rows."""
    lead, windows = phases_of(trace).lead()
    if lead is not Phase.STEADY or not windows:
        raise SystemExit(f"{trace.source}: no steady-state window to repeat")
    win = int(windows[0])
    w = trace.windows.take(np.flatnonzero(trace.windows.window == win))
    first, last = int(w.first_step[0]), int(w.last_step[0])
    steps = trace.steps
    med = int(np.median(np.diff(steps.t_ns)))
    period = every * med
    rows = {name: np.flatnonzero(getattr(trace, name).window == win) for name in WINDOW_TABLES}
    per_copy = len(rows["gpu"])
    copies = max(1, -(-kernels // per_copy))
    corr_step = int(max(trace.gpu.correlation.max(), trace.runtime.correlation.max())) + 1
    seq_step = int(trace.ops.seq.max()) + 1

    def copies_of(table: Table, name: str) -> Table:
        one = table.take(rows[name]) if name in rows else table
        parts = []
        for c in range(copies):
            # in int64: a load holds some columns narrowed (recording.columns.KEY_COLUMNS), too narrow for
            # the offsets of many copies
            cols = {k: v.astype(np.int64) if v.dtype.kind == "i" else v for k, v in one.columns.items()}
            for col in ("start_ns", "end_ns", "t_ns"):
                if col in cols:
                    cols[col] = cols[col] + c * period
            if "window" in cols:
                cols["window"] = cols["window"] + c
            if "correlation" in cols:
                cols["correlation"] = np.where(
                    cols["correlation"] >= 0, cols["correlation"] + c * corr_step, -1
                )
            if "seq" in cols:
                cols["seq"] = np.where(cols["seq"] >= 0, cols["seq"] + c * seq_step, -1)
            for col in ("first_step", "last_step"):
                if col in cols:
                    cols[col] = np.where(cols[col] >= 0, cols[col] + c * every, -1)
            parts.append(Table({k: np.asarray(v) for k, v in cols.items()}))
        return Table({k: np.concatenate([p[k] for p in parts]) for k in one.columns})

    # the steps: the window's own as recorded, the others at the median step time, one steady run
    own = {int(s): int(t) for s, t in zip(steps.step.tolist(), steps.t_ns.tolist(), strict=True)}
    n_steps = first + copies * every
    t_first = own.get(first, int(steps.t_ns[0]))
    step_t = t_first + (np.arange(n_steps, dtype=np.int64) - first) * med
    for c in range(copies):
        for s in range(first, last + 1):
            if s in own:
                step_t[s + c * every] = own[s] + c * period
    new_steps = {k: np.full(n_steps, -1, dtype=d) for k, d in STEP_SCHEMA.items()}
    new_steps["step"], new_steps["t_ns"] = np.arange(n_steps, dtype=np.int64), step_t
    telemetry = trace.telemetry
    near = (telemetry.t_ns >= w.start_ns[0] - period // 2) & (telemetry.t_ns < w.start_ns[0] + period // 2)
    tables: dict[str, Any] = {name: copies_of(getattr(trace, name), name) for name in WINDOW_TABLES}
    return replace(
        trace,
        windows=copies_of(w, "windows"),
        steps=Table(new_steps),
        telemetry=copies_of(telemetry.take(np.flatnonzero(near)), "telemetry"),
        _ids=None,
        **tables,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording", help="a recording with a steady-state window (.brrr or .brrr.gz)")
    ap.add_argument("out", help="the long recording to write")
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=100, help="optimizer steps from one window to the next")
    ns = ap.parse_args()
    long = tile(load_trace(ns.recording), ns.kernels, ns.every)
    if os.path.exists(ns.out):
        os.remove(ns.out)
    write_trace(long, ns.out)
    print(
        f"{ns.out}: {len(long.windows)} windows, {len(long.gpu):,} kernels, {len(long.ops):,} ops, "
        f"{len(long.spans):,} spans, {len(long.runtime):,} launches; {os.path.getsize(ns.out) / 1e6:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Timeline drawing cost at 10k vs 1M kernels: it should not grow with the trace.

    python -m benchmarks.bench_timeline [--width 200] [--repeat 200] [--no-app]

Part 1 times the pure renderer (bin one lane into `width` cells, then choose glyphs) at several zoom
levels. Part 2 runs the whole app headless (200x60) on a synthetic analysis and measures, per key press
(zoom, cursor, next kernel), the CPU time the process spends handling the key and repainting the screen
(`time.process_time` around `pilot.press`; the pilot's own idle polling sleeps, so wall time would mostly
measure its sleep granularity), plus one full repaint of every visible line of the timeline widget.
Every figure is printed with its ratio to the 10k baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import numpy as np

from analyzers.link.links import link
from analyzers.results import (
    Analysis,
    Breakdown,
    OverheadCorrection,
)
from brrrtui.contract.model import (
    GPU_SCHEMA,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
    Device,
    Peaks,
    SourceLine,
    Table,
    Trace,
    empty_table,
)
from brrrtui.present.lanes import GAP_LABELS, GAP_ROLES, ITEM_ROLES
from brrrtui.present.timeline import IntervalIndex, bin_index, lane_cells

SIZES = (10_000, 1_000_000)
ORIGIN = 1_795_962_644_000_000_000


def synthetic_kernels(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n back-to-back kernels of 1-200 µs with 0-20 µs idle between them, regimes mixed."""
    rng = np.random.default_rng(seed)
    dur = rng.integers(1_000, 200_000, n)
    idle = rng.integers(0, 20_000, n)
    start = ORIGIN + np.cumsum(dur + idle) - dur - idle
    return start, start + dur, rng.integers(0, 3, n)


def synthetic_analysis(n: int) -> Analysis:
    start, end, regime = synthetic_kernels(n)
    strings = ["sm90_xmma_gemm_bf16", "vectorized_elementwise_kernel", "reduce_kernel"]
    gpu = Table(
        {
            "window": np.zeros(n, np.int32),
            "kind": np.zeros(n, np.int8),
            "name": regime.astype(np.int32),
            "start_ns": start,
            "dur_ns": end - start,
            "device": np.zeros(n, np.int32),
            "stream": np.full(n, 7, np.int32),
            "correlation": np.arange(n, dtype=np.int64),
            "grid": np.full(n, -1, np.int32),
            "block": np.full(n, -1, np.int32),
            "bytes": np.full(n, -1, np.int64),
        }  # fmt: skip
    )
    assert set(gpu.columns) == set(GPU_SCHEMA)
    gap_start = end[:-1]
    gap_dur = start[1:] - end[:-1]
    keep = gap_dur > 10_000
    gaps = Table(
        {
            "window": np.zeros(int(keep.sum()), np.int32),
            "stream": np.full(int(keep.sum()), 7, np.int32),
            "start_ns": gap_start[keep],
            "dur_ns": gap_dur[keep],
            "cause": np.zeros(int(keep.sum()), np.int8),
            "line": np.full(int(keep.sum()), -1, np.int64),
        }  # fmt: skip
    )
    w0, w1 = int(start[0]), int(end[-1])
    trace = Trace(
        strings=strings,
        lines=[SourceLine("train.py", 1, "<module>")],
        gpu=gpu,
        runtime=empty_table(RUNTIME_SCHEMA),
        ops=empty_table(OP_SCHEMA),
        spans=empty_table(SPAN_SCHEMA),
        windows=Table(
            {
                k: np.array([v], dtype=dt)
                for (k, dt), v in zip(WINDOW_SCHEMA.items(), (0, 0, w0, w1, 0, 9, -1, n), strict=True)
            }
        ),  # fmt: skip
        steps=empty_table(STEP_SCHEMA),
        telemetry=empty_table(TELEMETRY_SCHEMA),
        device=Device(name="synthetic"),
    )
    span = w1 - w0
    busy = int((end - start).sum())
    bd = Breakdown(span, busy // 2, busy - busy // 2, span - busy)
    return Analysis(
        trace=trace, links=link(trace), peaks=Peaks(8e14, 6.7e13, 4.26e12, "synthetic"),
        kernel_regime=regime.astype(np.int8), kernel_flops=np.full(n, np.nan), kernel_bytes=np.full(n, np.nan),
        gaps=gaps, kernels=[], lines=[], findings=[], breakdown=bd, window_breakdowns={0: bd},
        overhead=OverheadCorrection(None, None, bd.overhead_ns / span, None), steps_analysed=0,
    )  # fmt: skip


def time_render(n: int, width: int, repeat: int) -> dict[str, float]:
    start, end, regime = synthetic_kernels(n)
    items = IntervalIndex.build(start, end, regime, np.arange(n), ORIGIN)
    gap = IntervalIndex.build(end[:-1], start[1:], np.zeros(n - 1, np.int64), np.arange(n - 1), ORIGIN)
    extent = float(end[-1] - ORIGIN)
    out = {}
    for label, zoom in (("fit", 1), ("zoom x64", 64), ("zoom x65536", 65536)):
        span = extent / zoom
        t0s = np.random.default_rng(1).uniform(0, extent - span, repeat)
        samples = []
        for t0 in t0s:
            tic = time.perf_counter()
            cells = lane_cells(
                bin_index(items, t0, t0 + span, width),
                bin_index(gap, t0, t0 + span, width),
                ITEM_ROLES,
                GAP_ROLES,
                GAP_LABELS,
            )
            samples.append(time.perf_counter() - tic)
            assert len(cells) == width
        out[label] = statistics.median(samples)
    return out


async def time_keys(n: int, repeat: int) -> dict[str, float]:
    from brrrtui.tui.app import make_app

    analysis = synthetic_analysis(n)
    app = make_app("synthetic.brrr", None, "synthetic", analyze=lambda trace: analysis)
    # the app loads `path` itself; hand it the synthetic trace instead
    import brrrtui.recording.load

    real_load = brrrtui.recording.load.load_trace
    brrrtui.recording.load.load_trace = lambda path: analysis.trace  # type: ignore[assignment]
    try:
        async with app.run_test(size=(200, 60)) as pilot:
            while app.analyses < 1:
                await pilot.pause(0.05)
            await pilot.pause()
            out = {}
            for label, keys in (
                ("zoom in (+)", ["plus"]),
                ("cursor (right)", ["right"]),
                ("next kernel (])", ["right_square_bracket"]),
                ("zoom out (-)", ["minus"]),
            ):
                samples = []
                for _ in range(repeat):
                    tic = time.process_time()
                    await pilot.press(*keys)
                    samples.append(time.process_time() - tic)
                    if label.startswith("zoom in") and app.main.timeline.view.zoom > 1e4:
                        await pilot.press("0")
                out[label] = statistics.median(samples)
            tl = app.main.timeline
            region = tl.size.region
            samples = []
            for _ in range(repeat):
                tl._cells_key = None  # force re-binning, as after any view change
                tl._styles_cache.clear()  # and Textual's own line cache
                tic = time.perf_counter()
                tl.render_lines(region)
                samples.append(time.perf_counter() - tic)
            out["timeline repaint"] = statistics.median(samples)
            return out
    finally:
        brrrtui.recording.load.load_trace = real_load


def report(title: str, results: dict[int, dict[str, float]]) -> None:
    base = results[SIZES[0]]
    print(f"\n{title}")
    print(f"{'case':<20}" + "".join(f"{n:>14,}" for n in SIZES) + "   ratio 1M/10k")
    for case in base:
        row = "".join(f"{results[n][case] * 1e3:>11.3f} ms" for n in SIZES)
        print(f"{case:<20}{row}   {results[SIZES[-1]][case] / base[case]:>8.2f}x")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=200, help="timeline cells (default 200)")
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--no-app", action="store_true", help="skip the headless-app key timings")
    ns = p.parse_args()
    report(
        f"render one lane ({ns.width} cells), median of {ns.repeat}",
        {n: time_render(n, ns.width, ns.repeat) for n in SIZES},
    )
    if not ns.no_app:
        keys = {n: asyncio.run(time_keys(n, max(10, ns.repeat // 10))) for n in SIZES}
        report("whole app at 200x60: CPU per key press (handling + repaint); timeline repaint (wall)", keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-line overhead without the profiler: brrrtui's estimate against the kernel stream's measurement.

brrrtui's verdicts come from short profiler windows, whose steps run slower on the CPU; per line, the idle
left at unprofiled speed comes from each window replayed with a faster CPU (analyzers/idle/unprofiled_replay.py).
A recording made with `--stream` also holds every kernel of the unprofiled steps between windows, each with
the line the windows taught (`analyzers.stream.lines`). From those, the GPU idle of unprofiled steps is measured directly: each
device-wide idle gap is charged to the line of the kernel that ends it (the launch the GPU waited for).

    python validation/unprofiled_lines.py run.brrr [--top 10] [--min-ms 0.1] [--json out.json]

Only whole steady-state steps between two windows count (warm-up steps and the gap across a window, where
the stream pauses, are left out). Prints, per line, overhead share = idle / (GPU + idle) per step, estimated
(windows) and measured (stream: over all steps, and in the median step, which is what the estimate is fitted
to), and the differences in points, for the top lines with at least --min-ms of GPU + idle a step; and the
same for the whole step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from analyzers.analyze import analyze  # noqa: E402
from analyzers.results import Analysis  # noqa: E402
from analyzers.stream.lines import stream_view  # noqa: E402
from brrrtui.recording.load import load_trace  # noqa: E402


def steady_unprofiled_steps(a: Analysis, seg_start: int, seg_end: int) -> list[tuple[int, int]]:
    """The steps [t_k, t_k+1) of the steady state that lie inside one stream segment (no window in them)."""
    steps = a.trace.steps
    first = a.phases.run.steady_from_step if a.phases is not None else None
    t, k = steps.t_ns, steps.step
    out = []
    for i in range(len(t) - 1):
        if first is not None and k[i] < first:
            continue
        if seg_start <= t[i] and t[i + 1] <= seg_end:
            out.append((int(t[i]), int(t[i + 1])))
    return out


def measured(a: Analysis) -> tuple[dict[int, np.ndarray], float, int]:
    """(line -> its (GPU ns, idle ns) in each steady unprofiled step of the stream, shape (steps, 2)), the
    steps' summed span, and their number. Only whole steps between two windows count: a gap across a window
    (the stream pauses there) and the warm-up steps before the steady state would otherwise be charged as
    idle."""
    view = stream_view(a)
    s = view.stream
    after = s["after_window"]
    per_step: list[dict[int, list[float]]] = []
    span = 0.0
    for seg in np.unique(after):
        rows = np.nonzero(after == seg)[0]
        rows = rows[np.argsort(s.start_ns[rows], kind="stable")]
        start, end, line = s.start_ns[rows], s.start_ns[rows] + s.dur_ns[rows], view.line[rows]
        # device-wide idle before each kernel, within the segment: charged to the kernel that ends it
        reach = np.maximum.accumulate(end)
        prev = np.concatenate(([start[0]], reach[:-1]))
        gap = np.maximum(0, start - prev)
        busy = np.maximum(0, end - np.maximum(start, prev))
        for t0, t1 in steady_unprofiled_steps(a, int(start[0]), int(end[-1])):
            inside = (start >= t0) & (start < t1) & (line >= 0)
            step: dict[int, list[float]] = {}
            for lid, g, b in zip(
                line[inside].tolist(), gap[inside].tolist(), busy[inside].tolist(), strict=True
            ):
                acc = step.setdefault(int(lid), [0.0, 0.0])
                acc[0] += b
                acc[1] += g
            per_step.append(step)
            span += t1 - t0
    lines = {lid for step in per_step for lid in step}
    out = {lid: np.array([step.get(lid, [0.0, 0.0]) for step in per_step]) for lid in lines}
    return out, span, len(per_step)


def share(gpu: float, idle: float) -> float:
    return idle / (gpu + idle) if gpu + idle > 0 else 0.0


def compare(a: Analysis, top: int, min_ms: float = 0.0) -> dict[str, object]:
    """The top lines (those of at least `min_ms` GPU + idle a step, measured: a share of nothing means
    nothing), estimated against measured."""
    by_line, span, n_steps = measured(a)
    if not by_line or not n_steps or not a.steps_analysed:
        return {"error": "no streamed kernels with a line, or no steps: record with --stream"}
    rows = []
    for s in a.lines[:top]:
        steps = by_line.get(s.line_id, np.zeros((n_steps, 2)))
        m_gpu, m_idle = steps.sum(axis=0).tolist()
        med_gpu, med_idle = np.median(steps, axis=0).tolist()
        if (m_gpu + m_idle) / n_steps / 1e6 < min_ms:
            continue
        est = share(s.gpu_ns, s.idle_ns)
        meas = share(m_gpu, m_idle)
        median = share(med_gpu, med_idle)
        rows.append({"line": f"{os.path.basename(s.line.file)}:{s.line.line}",
                     "est_gpu_ms": s.gpu_ns / a.steps_analysed / 1e6, "est_idle_ms": s.idle_ns / a.steps_analysed / 1e6,
                     "meas_gpu_ms": m_gpu / n_steps / 1e6, "meas_idle_ms": m_idle / n_steps / 1e6,
                     "est_share": est, "meas_share": meas, "diff_points": 100 * (est - meas),
                     "meas_median_idle_ms": med_idle / 1e6, "meas_median_share": median,
                     "diff_median_points": 100 * (est - median),
                     "profiled_idle_ms": s.idle_profiled_ns / a.steps_analysed / 1e6})  # fmt: skip
    total_idle = sum(float(v[:, 1].sum()) for v in by_line.values())
    return {"unprofiled_steps": n_steps, "stream_span_ms": span / 1e6,
            "run_overhead_measured": total_idle / span if span else None,
            "run_overhead_corrected": a.overhead.corrected_overhead_fraction,
            "run_overhead_raw": a.overhead.raw_overhead_fraction, "lines": rows}  # fmt: skip


def _percent(fraction: object) -> str:
    return f"{fraction:.1%}" if isinstance(fraction, float) else "unknown"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recording")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--min-ms", type=float, default=0.1, help="leave out lines of less GPU + idle a step")
    p.add_argument("--json")
    ns = p.parse_args()
    result = compare(analyze(load_trace(ns.recording)), ns.top, ns.min_ms)
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(result, f, indent=1)
    if "error" in result:
        print(result["error"])
        return 1
    print(f"unprofiled steps in the stream: {result['unprofiled_steps']}; run overhead: measured "
          f"{result['run_overhead_measured']:.1%}, corrected {_percent(result['run_overhead_corrected'])}, "
          f"raw {result['run_overhead_raw']:.1%}")  # fmt: skip
    rows = result["lines"]
    within = sum(abs(r["diff_points"]) <= 5 for r in rows)  # type: ignore[attr-defined]
    within_median = sum(abs(r["diff_median_points"]) <= 5 for r in rows)  # type: ignore[attr-defined]
    print(f"{within} of {len(rows)} lines within 5 points of the steps' mean, "  # type: ignore[arg-type]
          f"{within_median} of the median step's")  # fmt: skip
    print(f"{'line':<28}{'est gpu/idle ms':>18}{'meas gpu/idle ms':>18}{'median idle':>12}{'est':>7}{'meas':>7}"
          f"{'diff':>7}{'median':>7}{'diff':>7}")  # fmt: skip
    for r in result["lines"]:  # type: ignore[attr-defined]
        print(f"{r['line']:<28}{r['est_gpu_ms']:>9.2f}/{r['est_idle_ms']:<8.2f}{r['meas_gpu_ms']:>9.2f}/"
              f"{r['meas_idle_ms']:<8.2f}{r['meas_median_idle_ms']:>12.2f}{r['est_share']:>7.1%}"
              f"{r['meas_share']:>7.1%}{r['diff_points']:>+7.1f}{r['meas_median_share']:>7.1%}"
              f"{r['diff_median_points']:>+7.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

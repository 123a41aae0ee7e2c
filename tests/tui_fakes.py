"""Test doubles for the TUI tests: a stand-in `analyze()` and small synthetic recordings.

`fake_analyze` mimics `analyzers.analyze.analyze`'s result types with crude rules (matmul/conv kernels are
compute, kernels under 4 µs overhead, the rest memory; every idle stretch over 2 µs on a stream is a gap
caused by the host). The TUI tests check how results are shown, not whether they are right.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from fixtures.synthetic import PHASED_STEPS, phased_trace as synthetic_phased_trace

from analyzers.analyze import choose_windows, phases_of, select_windows
from analyzers.findings.facts import Facts
from analyzers.link.links import link
from analyzers.phases.run_phases import Phase
from analyzers.results import (
    GAP_CAUSE_CODES,
    REGIME_CODES,
    REGIMES_BY_CODE,
    Analysis,
    Breakdown,
    Finding,
    GapCause,
    KernelStat,
    LineStat,
    OverheadCorrection,
    Regime,
)
from brrrtui.contract.model import GpuKind, Peaks, Table, Trace
from brrrtui.present.finding_words import Words, facts_words
from brrrtui.recording.store import RecordingWriter

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "resnet50_h200_tui.json.gz")


@dataclass(frozen=True)
class Worded(Facts):
    """The made-up findings' facts: their words, written out."""

    message: str
    action: str


@facts_words.register
def _worded(facts: Worded, f: Finding) -> Words:
    return Words(facts.message, facts.action)


_COMPUTE_WORDS = ("gemm", "conv", "xmma", "cutlass", "wgrad", "dgrad", "fprop", "matmul")


def fake_analyze(
    trace: Trace, peaks_override: Peaks | None = None, windows=None, phase: Phase | None = None
) -> Analysis:
    """Like analyze(): only the windows of `phase` (default: the phase the run leads with), or `windows`."""
    phases = phases_of(trace)
    phase, chosen = choose_windows(phases, windows, phase)
    trace = select_windows(trace, chosen)
    links = link(trace)
    gpu = trace.gpu
    n = len(gpu)
    names = [trace.name(i).lower() for i in gpu.name.tolist()]
    regime = np.full(n, REGIME_CODES[Regime.MEMORY], dtype=np.int8)
    for k, nm in enumerate(names):
        if any(w in nm for w in _COMPUTE_WORDS):
            regime[k] = REGIME_CODES[Regime.COMPUTE]
        elif gpu.dur_ns[k] < 4_000:
            regime[k] = REGIME_CODES[Regime.OVERHEAD]
    flops = np.where(regime == 0, gpu.dur_ns * 4.0e5, np.nan)  # 400 TFLOP/s for compute kernels
    nbytes = np.where(regime == 1, gpu.dur_ns * 2.0e3, np.nan)  # 2 TB/s for memory kernels
    peaks = peaks_override or trace.peaks or Peaks(8.0e14, 6.7e13, 4.26e12, "datasheet:test", 60 << 20)

    # gaps: idle stretches between consecutive kernels of a stream
    g_rows: list[tuple] = []
    for w, s in sorted(
        {(int(a), int(b)) for a, b in zip(gpu.window.tolist(), gpu.stream.tolist(), strict=True)}
    ):
        rows = np.nonzero((gpu.window == w) & (gpu.stream == s))[0]
        rows = rows[np.argsort(gpu.start_ns[rows])]
        ends = np.maximum.accumulate(gpu.start_ns[rows] + gpu.dur_ns[rows])
        idle = gpu.start_ns[rows][1:] - ends[:-1]
        for k in np.nonzero(idle > 2_000)[0].tolist():
            nxt = rows[k + 1]
            cause = GapCause.SYNC if idle[k] > 200_000 else GapCause.HOST
            g_rows.append(
                (w, s, int(ends[k]), int(idle[k]), GAP_CAUSE_CODES[cause], int(links.kernel_line[nxt]))
            )
    cols = list(zip(*g_rows, strict=True)) if g_rows else [[]] * 6
    gaps = Table(
        {
            name: np.asarray(c, dtype=dt)
            for name, c, dt in zip(
                ("window", "stream", "start_ns", "dur_ns", "cause", "line"),
                cols,
                (np.int32, np.int32, np.int64, np.int64, np.int8, np.int64),
                strict=True,
            )
        }
    )

    by_name: dict[int, list[int]] = defaultdict(list)
    for k, nm in enumerate(gpu.name.tolist()):
        by_name[nm].append(k)
    kernels = []
    for nm, rows in by_name.items():
        r = np.asarray(rows)
        gpu_ns = int(gpu.dur_ns[r].sum())
        reg = REGIMES_BY_CODE[int(np.bincount(regime[r], minlength=3).argmax())]
        f = float(np.nansum(flops[r])) if np.isfinite(flops[r]).any() else None
        b = float(np.nansum(nbytes[r])) if np.isfinite(nbytes[r]).any() else None
        kernels.append(
            KernelStat(
                trace.name(nm),
                len(r),
                gpu_ns,
                reg,
                f,
                b,
                f / gpu_ns * 1e9 if f else None,
                b / gpu_ns * 1e9 if b else None,
                0.5 if reg is Regime.COMPUTE else 0.47 if reg is Regime.MEMORY else 0.01,
                reg is Regime.COMPUTE,
                False,
            )  # fmt: skip
        )
    kernels.sort(key=lambda k: -k.gpu_ns)

    steps = max(len(trace.steps), 1)
    lines = []
    for lid in sorted(set(links.kernel_line.tolist()) - {-1}):
        r = np.nonzero(links.kernel_line == lid)[0]
        by_reg = {reg: int(gpu.dur_ns[r][regime[r] == REGIME_CODES[reg]].sum()) for reg in Regime}
        idle = int(gaps.dur_ns[gaps.line == lid].sum()) if len(gaps) else 0
        dom = max(Regime, key=lambda x: by_reg[x] + (idle if x is Regime.OVERHEAD else 0))
        gpu_ns = int(gpu.dur_ns[r].sum())
        lines.append(
            LineStat(
                trace.lines[lid],
                lid,
                gpu_ns,
                by_reg,
                0,
                idle,
                float(np.nansum(flops[r])) or None,
                float(np.nansum(nbytes[r])) or None,
                int((gpu.kind[r] == GpuKind.KERNEL).sum()),
                dom,
                gpu_ns / steps,
            )  # fmt: skip
        )
    lines.sort(key=lambda s: -s.gpu_ns)

    findings: list[Finding] = []
    mem_lines = [s for s in lines if s.gpu_ns_by_regime[Regime.MEMORY] > 0]
    if mem_lines:
        s = mem_lines[0]
        r = np.nonzero((links.kernel_line == s.line_id) & (regime == 1))[0][:3]
        findings.append(
            Finding(
                "fusion",
                (s.line,),
                s.gpu_ns_by_regime[Regime.MEMORY] * 0.3 / steps,
                Worded(
                    f"{len(r)} memory-bound pointwise kernels in a row on {s.line} re-read their inputs from DRAM.",
                    "Fuse them: torch.compile the function, or write the chain as one op.",
                ),
                tuple(int(x) for x in r),
                int(gpu.window[r[0]]) if len(r) else -1,
            )  # fmt: skip
        )
    if len(gaps):
        big = int(np.argmax(gaps.dur_ns))
        lid = int(gaps.line[big])
        findings.append(
            Finding(
                "overhead",
                (trace.lines[lid],) if lid >= 0 else (),
                float(gaps.dur_ns[big]),
                Worded(
                    "The GPU sat idle while Python issued the next kernels.",
                    "Capture the step with CUDA graphs or torch.compile(mode='reduce-overhead').",
                ),
                (),
                int(gaps.window[big]),
            )  # fmt: skip
        )

    def breakdown(mask_gpu: np.ndarray, w0: int, w1: int) -> Breakdown:
        span = max(w1 - w0, 0)
        c = int(gpu.dur_ns[mask_gpu & (regime == 0)].sum())
        m = int(gpu.dur_ns[mask_gpu & (regime == 1)].sum())
        c, m = min(c, span), min(m, max(span - c, 0))
        return Breakdown(span, c, m, span - c - m)

    wb = {}
    for k, w in enumerate(trace.windows.window.tolist()):
        wb[int(w)] = breakdown(gpu.window == w, int(trace.windows.start_ns[k]), int(trace.windows.end_ns[k]))
    total = Breakdown(
        sum(b.span_ns for b in wb.values()),
        sum(b.compute_ns for b in wb.values()),
        sum(b.memory_ns for b in wb.values()),
        sum(b.overhead_ns for b in wb.values()),
    )
    return Analysis(
        trace=trace, links=links, peaks=peaks, kernel_regime=regime, kernel_flops=flops, kernel_bytes=nbytes,
        gaps=gaps, kernels=kernels, lines=lines, findings=findings, breakdown=total, window_breakdowns=wb,
        overhead=OverheadCorrection(None, None, total.fraction(Regime.OVERHEAD), None),
        steps_analysed=len(trace.steps), notes=["fake analysis for the TUI tests"],
        windows=tuple(int(w) for w in trace.windows.window.tolist()), phase=phase, phases=phases,
    )  # fmt: skip


TRAIN_PY = """\
import torch

def step(x, w):
    y = x @ w
    y = y.cos().cos()
    loss = y.sum()
    return loss.item()

for i in range(100):
    step(torch.randn(64, 64), torch.randn(64, 64))
"""


def write_recording(
    path: str,
    windows: int = 1,
    kernels_per_window: int = 40,
    script_dir: str | None = None,
    names: dict[int, str] | None = None,
    function: str = "step",
) -> str:
    """A small recording with exact lines: per window, `kernels_per_window` kernels from lines 4, 5, 6, 7 of
    TRAIN_PY (written next to it as train.py), with a 50 µs host gap after every tenth kernel. `names` replaces
    strings by index (0-2 the kernels, 3-5 their ops); `function` names the lines' function."""
    script_dir = script_dir or os.path.dirname(path)
    script = os.path.join(script_dir, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN_PY)
    w = RecordingWriter(path)
    w.set_meta(argv=[script], cwd=script_dir, started_at_ns=1_000_000_000, status="running")
    w.append(
        {
            "strings": [
                (k, (names or {}).get(k, s))
                for k, s in [
                    (0, "ampere_sgemm_64x64_nn"),
                    (1, "vectorized_elementwise_kernel<cos>"),
                    (2, "reduce_kernel<sum>"),
                    (3, "aten::mm"),
                    (4, "aten::cos"),
                    (5, "aten::sum"),
                    (6, "cudaLaunchKernel"),
                    (7, "aten::item"),
                    (8, "cudaStreamSynchronize"),
                ]
            ],
            "lines": [
                (0, script, 4, function),
                (1, script, 5, function),
                (2, script, 6, function),
                (3, script, 7, function),
            ],
        }  # fmt: skip
    )
    for k in range(windows):
        append_window(w, k, kernels_per_window)
    return path


def append_window(w: RecordingWriter, window: int, n: int) -> None:
    t = 2_000_000_000 + window * 1_000_000_000
    start = t
    gpu, rt, ops, spans = [], [], [], []
    pattern = [(0, 3, 0, 20_000), (1, 4, 1, 3_000), (1, 4, 1, 3_000), (2, 5, 2, 2_000)]
    for i in range(n):
        name, op, line, dur = pattern[i % 4]
        corr = window * 100_000 + i
        ops.append((window, op, t, 6_000, 1, i, -1, -1, -1, float("nan")))
        spans.append((window, line, t - 500, 7_000, 1, -1, -1))
        rt.append((window, 6, t + 1_000, 3_000, 1, corr))
        gpu.append((window, 0, name, t + 8_000, dur, 0, 7, corr, -1, -1, -1))
        t += dur + 1_000 + (50_000 if i % 10 == 9 else 0)
    ops.append((window, 7, t, 30_000, 1, n, -1, -1, -1, float("nan")))
    spans.append((window, 3, t - 500, 31_000, 1, -1, -1))
    rt.append((window, 8, t + 1_000, 28_000, 1, -1))
    end = t + 40_000
    w.append(
        {
            "windows": [(window, 0, start, end, window * 2, window * 2 + 1, 1_000_000, len(gpu) + len(ops))],
            "steps": [(window * 2, start + 10), (window * 2 + 1, end)],
            "gpu": gpu,
            "runtime": rt,
            "ops": ops,
            "spans": spans,
            "telemetry": [
                (start + k * 100_000_000, 50.0 + 10 * k, 4.0e10 + 1e9 * k, 300.0 + 20 * k, 1980.0)
                for k in range(5)
            ],
        }  # fmt: skip
    )


def fixture_snapshot():
    """Snapshot of the resnet fixture under the fake analysis (source resolved from tests/fixtures)."""
    from brrrtui.present.snapshot import build_snapshot
    from brrrtui.recording.load import load_trace

    return build_snapshot(fake_analyze(load_trace(FIXTURE)))


def recording_snapshot(tmp_path, windows: int = 2):
    from brrrtui.present.snapshot import build_snapshot
    from brrrtui.recording.load import load_trace

    path = write_recording(str(tmp_path / "run.brrr"), windows=windows)
    return build_snapshot(fake_analyze(load_trace(path)))


def resnet_copy(directory) -> str:
    """The resnet fixture and its script, as a user would have them: side by side in one folder."""
    import shutil

    shutil.copy(FIXTURE, os.path.join(directory, "resnet50_h200_tui.json.gz"))
    shutil.copy(
        os.path.join(HERE, "fixtures", "resnet_train.py.txt"), os.path.join(directory, "resnet_train.py")
    )
    return os.path.join(directory, "resnet50_h200_tui.json.gz")


async def wait_until(pilot, predicate, timeout_s: float = 20.0) -> None:
    """Let the app run until predicate() holds (analysis runs in a thread worker)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.02)
    await pilot.pause()


async def analysed(pilot, count: int = 1) -> None:
    await wait_until(pilot, lambda: pilot.app.analyses >= count)


def run_async(test):
    """Run an async test function with asyncio.run (no pytest async plugin needed); fixtures still work."""
    import asyncio
    import functools

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return wrapper


ROOT = os.path.dirname(HERE)
H200_RECORDINGS = ("h200_known_regimes", "h200_gpt_small", "h200_bert")


def h200_recording(name: str, directory) -> str:
    """A recorded H200 fixture, un-gzipped into `directory` (recordings are SQLite files)."""
    import gzip
    import shutil

    path = os.path.join(str(directory), f"{name}.brrr")
    with gzip.open(os.path.join(HERE, "fixtures", f"{name}.brrr.gz")) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


PHASED_PY = """\
import torch

def build():
    w = torch.randn(8192, 8192, device="cuda")  # set-up: weights initialised
    return w.to(torch.bfloat16)

def step(x, w):
    y = x @ w  # every step: one GEMM
    return y.float().sum()

w = build()
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for i in range(40):
    step(x, w)
"""


def phased_trace(script: str) -> Trace:
    """The phased run of fixtures.synthetic for a script of the TUI tests: set-up on line 4, the step on line 8."""
    return synthetic_phased_trace(script, setup_line=4, step_line=8, setup_kernels_ms=(2, 20, 38, 54))


def _rows(table: Table, keep: np.ndarray) -> list[tuple]:
    cols = [table.columns[c][keep].tolist() for c in table.columns]
    return list(zip(*cols, strict=True))


def write_phased_recording(path: str, windows: int = 3, steps: int = PHASED_STEPS) -> str:
    """The phased run as a recording (train.py written next to it), or its first `windows` windows and `steps`
    steps; `append_phased` adds the rest the way the recorder would."""
    script = os.path.join(os.path.dirname(path), "train.py")
    with open(script, "w") as f:
        f.write(PHASED_PY)
    trace = phased_trace(script)
    w = RecordingWriter(path)
    w.set_meta(argv=[script], cwd=os.path.dirname(path), started_at_ns=int(trace.steps.t_ns[0]) - 10**9,
               device={"name": "NVIDIA H200"})  # fmt: skip
    w.append(
        {
            "strings": list(enumerate(trace.strings)),
            "lines": [(k, ln.file, ln.line, ln.function) for k, ln in enumerate(trace.lines)],
        }
    )
    w.close()
    return append_phased(path, range(windows), range(steps))


def append_phased(path: str, windows: range, steps: range) -> str:
    trace = phased_trace(os.path.join(os.path.dirname(path), "train.py"))
    batch: dict[str, list[tuple]] = {}
    for name in ("windows", "gpu", "runtime", "ops", "spans"):
        table = getattr(trace, name)
        batch[name] = _rows(table, np.isin(table.window, list(windows)))
    batch["steps"] = _rows(trace.steps, np.isin(trace.steps.step, list(steps)))
    w = RecordingWriter(path)
    w.append(batch)
    w.close()
    return path

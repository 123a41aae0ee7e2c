"""Communication is a gap cause: the GPU idle while the rank sits inside a CPU-side collective (gloo's
`gloo:all_reduce`, its device-to-host copy and stream synchronize included) is COMMUNICATION in the gaps, the
breakdown's communication component (not overhead, not idle) and the line's verdict, and the gap's advice is
the communication finding's cure: the straggler. Hand-built traces with exact times; the recorded gloo runs of
the ranks tests run on the CPU (no GPU, no gap), so rank 0 of a gloo run over CUDA tensors is built by hand
(test_issue39_communication.gloo_rank0)."""

from __future__ import annotations

import dataclasses
import json

from conftest import run_brrrtui
from fixtures.synthetic import TraceBuilder
from test_issue39_communication import GEMM, gloo_rank0

from analyzers.analyze import analyze
from analyzers.comm.ranks import RankComparison, Straggler, name_straggler
from analyzers.results import GAP_CAUSE_CODES, FindingKind, GapCause, Regime
from brrrtui.contract.model import SourceLine
from brrrtui.present.details import Node, describe
from brrrtui.present.lanes import GAP_LABELS, GAP_ROLES
from brrrtui.present.snapshot import build_snapshot
from brrrtui.present.verdicts import line_verdict
from brrrtui.recording.store import write_trace
from brrrtui.tui.widgets._roles import ROLES, THEME_VARIABLES

MS = 1_000_000
COMM = GAP_CAUSE_CODES[GapCause.COMMUNICATION]
HOST = GAP_CAUSE_CODES[GapCause.HOST]


def two_collectives():
    """One 60 ms step (times in ms); the collectives run on gloo's worker thread (tid 9, no line)::

        CPU tid 1  [backward, train.py:10 ...............................][opt, train.py:11 .......]
        CPU tid 9            [gloo:all_reduce 10-30]    [gloo 40-44]
        GPU        [gemm 1-10]          idle 10-31      [gemm 31-40] idle 40-50 [adam 50-58]

    The gap 10-31 (21 ms) is 20/21 inside a collective: COMMUNICATION, on the backward's line (where the loop
    waited at the gap's middle). The gap 40-50 (10 ms) is 4/10 inside one, under half: the CPU launched the
    optimizer late, HOST on its line. Compute + memory: 9 + 9 + 8 = 26 ms; communication 21 ms; overhead the
    other gaps: 60 - 26 - 21 = 13 ms (0-1, 40-50, 58-60)."""
    b = TraceBuilder()
    bwd = b.line("train.py", 10, "step")
    opt = b.line("train.py", 11, "step")
    b.span(bwd, 0, 49 * MS)
    b.launch(GEMM, cpu_ns=MS // 2, gpu_ns=1 * MS, dur_ns=9 * MS)
    b.op("gloo:all_reduce", 10 * MS, 20 * MS, tid=9)
    b.launch(GEMM, cpu_ns=30 * MS + MS // 2, gpu_ns=31 * MS, dur_ns=9 * MS)
    b.op("gloo:all_reduce", 40 * MS, 4 * MS, tid=9)
    b.span(opt, 49 * MS, 11 * MS)
    b.launch("multi_tensor_apply_kernel", cpu_ns=49 * MS + MS // 2, gpu_ns=50 * MS, dur_ns=8 * MS)
    b.window(0, 60 * MS, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, 60 * MS)
    return b.build()


def _gaps(a):
    g = a.gaps
    t0 = int(a.trace.windows.start_ns[0])
    return [
        ((int(s) - t0) / MS, int(d) / MS, int(c), int(ln))
        for s, d, c, ln in zip(g.start_ns, g.dur_ns, g.cause, g.line, strict=True)
    ]


def test_a_gap_mostly_inside_a_collective_is_communication_one_under_half_is_not():
    a = analyze(two_collectives())
    gaps = _gaps(a)
    assert [g for g in gaps if g[2] == COMM] == [(10.0, 21.0, COMM, 0)]  # the backward's line
    assert (40.0, 10.0, HOST, 1) in gaps  # 4 of its 10 ms in the collective: the late launch's


def test_the_breakdown_counts_the_wait_as_communication_not_overhead():
    b = analyze(two_collectives()).breakdown
    assert b.compute_ns + b.memory_ns == 26 * MS
    assert b.communication_ns == 21 * MS and b.communication_hidden_ns == 0
    assert b.overhead_ns == 13 * MS and b.idle_ns == 13 * MS  # the other gaps: 1 + 10 + 2 ms
    assert b.compute_ns + b.memory_ns + b.communication_ns + b.overhead_ns == b.span_ns == 60 * MS


def test_the_line_waiting_in_the_collective_is_communication_bound():
    a = analyze(two_collectives())
    line = next(s for s in a.lines if s.line == SourceLine("train.py", 10, "step"))
    # its idle: the leading 1 ms (its gemm launched late) and the 21 ms in the collective; 18 ms of compute
    assert line.idle_profiled_ns == 22 * MS and line.gpu_ns_by_regime[Regime.COMPUTE] == 18 * MS
    assert line.regime is Regime.COMMUNICATION
    text = line_verdict(line, communication_idle_ns=21 * MS)
    assert text.startswith("communication-bound: ") and "21 ms of it inside collectives" in text
    opt = next(s for s in a.lines if s.line == SourceLine("train.py", 11, "step"))
    assert opt.regime is Regime.OVERHEAD  # 10 ms of host idle against 8 ms of memory


def test_gloo_rank0_the_wait_is_communication_in_gaps_breakdown_and_line():
    """rank 0 of the issue: the GPU idles 30 -> 63.6 ms, 31 ms of it inside gloo:all_reduce (with its DtoH
    copy and cudaStreamSynchronize). The whole gap is communication; the other gaps (0-1, 68-70) are not."""
    a = analyze(gloo_rank0())
    gaps = _gaps(a)
    assert [g[:3] for g in gaps if g[2] == COMM] == [(30.0, 33.6, COMM)]
    sync = GAP_CAUSE_CODES[GapCause.SYNC]
    assert sync not in [g[2] for g in gaps]
    b = a.breakdown
    assert b.communication_ns == 33_600_000
    assert b.overhead_ns == b.idle_ns == (70 - 29 - 4.4 - 33.6) * MS == 3 * MS
    line = next(s for s in a.lines if s.line == SourceLine("train.py", 20, "step"))
    assert line.regime is Regime.COMMUNICATION and line.idle_profiled_ns == 34_600_000  # 1 + 33.6 ms


def test_the_gap_inside_the_collective_is_on_the_loop_s_line_when_gloo_runs_it_on_its_worker():
    """gloo's worker thread has no line; the gap ends inside the optimizer's span (train.py:21), but the loop
    waited inside the backward (train.py:20) while the collective ran."""
    a = analyze(gloo_rank0(collective_tid=9))
    (gap,) = [g for g in _gaps(a) if g[2] == COMM]
    assert a.trace.lines[gap[3]] == SourceLine("train.py", 20, "step")


def test_a_real_item_sync_outside_the_collective_stays_a_sync_gap():
    a = analyze(gloo_rank0(item_at_ms=72))
    gaps = _gaps(a)
    sync = GAP_CAUSE_CODES[GapCause.SYNC]
    assert [a.trace.lines[g[3]].line for g in gaps if g[2] == sync] == [22]
    assert [g[:3] for g in gaps if g[2] == COMM] == [(30.0, 33.6, COMM)]


def test_the_gap_s_advice_is_the_cure_that_names_the_straggler():
    """The gap's details: a communication verdict, and the communication finding's cure, which (with the ranks
    side by side) names the rank this one waits for."""
    a = analyze(gloo_rank0())
    straggler = Straggler(
        rank=1,
        late_ns=30e6,
        basis="communication",
        line=SourceLine("train.py", 25, "step"),
        line_extra_ns=29e6,
    )
    comparison = RankComparison((), ((1, 1),), 0, straggler, 70e6, 0.4)
    a = dataclasses.replace(a, findings=name_straggler(a.findings, comparison, shown=0))
    snap = build_snapshot(a)
    row = next(i for i, c in enumerate(a.gaps.cause.tolist()) if c == COMM)
    detail = describe(snap, Node("gap", (row,)))
    text = detail.text()
    assert detail.title == "GPU idle 33.6 ms: communication" and "inside a collective" in text
    assert "this rank waits for rank 1, 30 ms per step late, most of it on train.py:25" in text
    assert "Keep values on the GPU" not in text and "Launch fewer kernels" not in text


def test_the_timeline_letters_and_colours_have_the_cause():
    assert GAP_LABELS[COMM] == "N" and GAP_ROLES[COMM] == "gap-communication"
    assert "gap-communication" in ROLES and "gap-communication" in THEME_VARIABLES


def test_report_json_breakdown_and_line_name_communication(tmp_path):
    path = tmp_path / "two.brrr.gz"
    write_trace(two_collectives(), str(path))
    proc = run_brrrtui("report", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["breakdown_ns"]["communication"] == 21 * MS and out["breakdown_ns"]["overhead"] == 13 * MS
    first = next(ln for ln in out["lines"] if ln["line"] == 10)
    assert first["regime"] == "communication" and first["idle_profiled_ns"] == 22 * MS
    assert FindingKind.SYNC.value not in [f["kind"] for f in out["findings"]]


def test_the_line_verdict_counts_the_wait_as_communication_and_a_nccl_line_s_idle_as_overhead():
    """Without the split given, a line that is communication-bound only with its idle has its idle counted as
    communication (22 of its 40 ms); a line whose collective kernels outweigh the rest keeps its idle as
    overhead (10 of 15 ms are the kernels')."""
    a = analyze(two_collectives())
    line = next(s for s in a.lines if s.line == SourceLine("train.py", 10, "step"))
    assert line_verdict(line).startswith("communication-bound: 55% of its time is communication")
    nccl = dataclasses.replace(
        line,
        gpu_ns_by_regime={
            Regime.COMPUTE: 2 * MS,
            Regime.MEMORY: 0,
            Regime.OVERHEAD: 0,
            Regime.COMMUNICATION: 10 * MS,
        },
        idle_ns=3 * MS,
        regime=Regime.COMMUNICATION,
    )
    assert line_verdict(nccl).startswith("communication-bound: 67% of its time is communication")
    assert "inside collectives" not in line_verdict(nccl)


def test_the_regime_bar_shows_the_wait_as_communication():
    from brrrtui.present.regime_bar import regime_bar

    text = "".join(s for s, _ in regime_bar("window 0", analyze(two_collectives()).breakdown, 20))
    assert " N 35%" in text and " O 22%" in text  # 21 and 13 of 60 ms


def test_a_module_whose_kernels_waited_inside_a_collective_is_communication_bound():
    """gloo_rank0's optimizer step run inside an nn.Module (`model.opt`, a 4.4 ms kernel): the 31 ms the GPU
    waited inside the all-reduce before it is communication in the module's regime, not overhead; the 2.6 ms
    of other idle before it stays overhead."""
    from test_issue39_communication import F32, MS

    from brrrtui.contract.model import GpuKind

    b = TraceBuilder()
    bwd, opt = b.line("train.py", 20, "step"), b.line("train.py", 21, "step")
    b.span(bwd, 0, 62 * MS)
    b.launch(GEMM, cpu_ns=1 * MS, gpu_ns=1 * MS, dur_ns=29 * MS)
    b.op("gloo:all_reduce", 30 * MS, 31 * MS, shapes=[[1048576]], dtypes=[F32])
    b.launch("Memcpy DtoH (Device -> Pinned)", cpu_ns=30 * MS + 100_000, gpu_ns=30 * MS + 200_000,
             dur_ns=800_000, stream=30, kind=GpuKind.MEMCPY, nbytes=4 * 1048576)  # fmt: skip
    b.runtime("cudaStreamSynchronize", 30 * MS + 200_000, 800_000, tid=9)
    b.span(opt, 63 * MS, 7 * MS, modules=[("model", "Net"), ("model.opt", "Step")])
    b.op("aten::_foreach_add_", 63 * MS + 100_000, 1 * MS)
    b.launch("multi_tensor_apply_kernel", cpu_ns=63 * MS + 500_000, gpu_ns=63 * MS + 600_000, dur_ns=4_400_000)
    b.window(0, 70 * MS, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, 70 * MS)
    a = analyze(b.build())
    assert a.modules is not None
    node = next(n for n in a.modules.nodes if n.path == "model.opt")
    waited = int(a.gaps.dur_ns[a.gaps.cause == GAP_CAUSE_CODES[GapCause.COMMUNICATION]].sum())
    assert waited > node.gpu_ns and node.idle_ns >= waited
    assert node.regime is Regime.COMMUNICATION

"""Issue 39, communication is its own cause: two DDP ranks over gloo, and rank 0's GPU idles while it waits
inside the all-reduce for the straggler. gloo moves CUDA tensors through host memory (a device-to-host copy,
a stream synchronize on its worker thread, the copy back), and that synchronize made the wait a `.item()`
sync ("keep the value on the GPU"). Hand-built rank-0 trace with exact times; end to end through
`brrrtui report --json`."""

from __future__ import annotations

import json

from conftest import run_brrrtui
from fixtures.synthetic import F32, TraceBuilder

from analyzers.analyze import analyze
from analyzers.results import FindingKind
from brrrtui.contract.model import GpuKind
from brrrtui.present.finding_words import action, message
from brrrtui.recording.store import write_trace

MS = 1_000_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def gloo_rank0(item_at_ms: int | None = None, collective_tid: int = 1):
    """One 70 ms step of rank 0 (times in ms):

        CPU tid 1  [backward, train.py:20 ..........................................] [opt.step, :21 ....]
                      [gloo:all_reduce 30-61 on train.py:20 ...................]
        CPU tid 9       [cudaStreamSynchronize 30.2-31]      [copy back 61]
        GPU        [gemm 1-30][DtoH 30.2-31]  idle 31-61.1  [HtoD 61.1-61.5] idle [AdamW 63.6-68]

    The GPU's kernels idle from 30 to 63.6 ms (copies fill no gap), 31 ms of it inside the collective; the
    other gaps (0-1, 68-70) lie outside it. `item_at_ms`: a `.item()` on the main thread after the optimizer, its
    own synchronize and a 2 ms gap before the next kernel (a real host sync, outside any collective).
    `collective_tid`: the thread the collective's op runs on (gloo's worker: 9, no line of its own)."""
    b = TraceBuilder()
    bwd = b.line("train.py", 20, "step")
    opt = b.line("train.py", 21, "step")
    end = 70 if item_at_ms is None else 80
    b.span(bwd, 0, 62 * MS)
    b.launch(GEMM, cpu_ns=1 * MS, gpu_ns=1 * MS, dur_ns=29 * MS)
    b.op("gloo:all_reduce", 30 * MS, 31 * MS, shapes=[[1048576]], dtypes=[F32], tid=collective_tid)
    b.launch("Memcpy DtoH (Device -> Pinned)", cpu_ns=30 * MS + 100_000, gpu_ns=30 * MS + 200_000, dur_ns=800_000,
             stream=30, kind=GpuKind.MEMCPY, nbytes=4 * 1048576)  # fmt: skip
    b.runtime("cudaStreamSynchronize", 30 * MS + 200_000, 800_000, tid=9)
    b.launch("Memcpy HtoD (Pinned -> Device)", cpu_ns=61 * MS - 50_000, gpu_ns=61 * MS + 100_000, dur_ns=400_000,
             tid=9, stream=30, kind=GpuKind.MEMCPY, nbytes=4 * 1048576)  # fmt: skip
    b.span(opt, 63 * MS, 7 * MS)
    b.launch(
        "multi_tensor_apply_kernel", cpu_ns=63 * MS + 500_000, gpu_ns=63 * MS + 600_000, dur_ns=4_400_000
    )
    if item_at_ms is not None:
        log = b.line("train.py", 22, "step")
        b.span(log, item_at_ms * MS, 3 * MS)
        b.op("aten::item", item_at_ms * MS, 1 * MS)
        b.runtime("cudaStreamSynchronize", item_at_ms * MS + 100_000, 800_000)
        b.launch("vectorized_elementwise_kernel", cpu_ns=(item_at_ms + 2) * MS, gpu_ns=(item_at_ms + 2) * MS
                 + 10_000, dur_ns=1 * MS)  # fmt: skip
    b.window(0, end * MS, first_step=1, last_step=1)
    b.step(0, 0)
    b.step(1, end * MS)
    return b.build()


def test_the_wait_inside_a_gloo_all_reduce_is_communication_not_a_sync():
    a = analyze(gloo_rank0())
    kinds = [f.kind for f in a.findings]
    assert (
        FindingKind.SYNC not in kinds and FindingKind.H2D not in kinds and FindingKind.OVERHEAD not in kinds
    )
    top = a.findings[0]
    assert top.kind is FindingKind.COMMUNICATION
    assert top.saving_ns == 31_000_000  # the idle the collective covers: 30 -> 61 ms, exactly
    assert [(ln.file, ln.line) for ln in top.lines] == [("train.py", 20)]
    assert "inside gloo:all_reduce from train.py:20" in message(top) and "not a host sync" in message(top)
    assert "straggler" in action(top) and "overlap" in action(top)
    assert "keep the value on the GPU" not in action(top)


def test_a_collective_on_gloo_s_worker_thread_takes_the_line_the_loop_waited_on():
    a = analyze(gloo_rank0(collective_tid=9))
    top = a.findings[0]
    assert top.kind is FindingKind.COMMUNICATION and top.saving_ns == 31_000_000
    assert [(ln.file, ln.line) for ln in top.lines] == [("train.py", 20)]  # inside loss.backward()
    assert FindingKind.SYNC not in [f.kind for f in a.findings]


def test_a_real_item_sync_outside_the_collective_stays_a_sync():
    a = analyze(gloo_rank0(item_at_ms=72))
    sync = [f for f in a.findings if f.kind is FindingKind.SYNC]
    assert [[(ln.file, ln.line) for ln in f.lines] for f in sync] == [[("train.py", 22)]]
    comm = next(f for f in a.findings if f.kind is FindingKind.COMMUNICATION)
    assert comm.saving_ns == 31_000_000


def test_report_json_names_communication_for_rank0(tmp_path):
    path = tmp_path / "rank0.brrr.gz"
    write_trace(gloo_rank0(), str(path))
    proc = run_brrrtui("report", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    assert findings[0]["kind"] == "communication" and "gloo:all_reduce" in findings[0]["message"]
    assert "sync" not in [f["kind"] for f in findings]


def test_the_cure_names_the_straggler_the_ranks_comparison_found():
    """With the run's ranks side by side (analyzers.comm.ranks), rank 0's communication finding names what it
    waited for: rank 1, 30 ms per step late on its own slow line."""
    from analyzers.comm.ranks import RankComparison, Straggler, name_straggler
    from brrrtui.contract.model import SourceLine

    slow_line = SourceLine("train.py", 25, "step")
    straggler = Straggler(rank=1, late_ns=30e6, basis="communication", line=slow_line, line_extra_ns=29e6)
    comparison = RankComparison((), ((1, 1),), 0, straggler, 70e6, 0.4)
    findings = analyze(gloo_rank0()).findings
    named = name_straggler(findings, comparison, shown=0)
    comm = next(f for f in named if f.kind is FindingKind.COMMUNICATION)
    assert action(comm).startswith(
        "this rank waits for rank 1, 30 ms per step late, most of it on train.py:25"
    )
    assert [f.kind for f in named] == [f.kind for f in findings]
    assert name_straggler(findings, comparison, shown=1) == findings  # the straggler itself waits for no one

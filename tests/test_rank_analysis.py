"""The ranks of a distributed run side by side (analyzers.comm.ranks), on hand-built traces whose figures are exact:
time in collectives per step, the straggler and its line, windows some rank lacks."""

import dataclasses

import pytest
from fixtures.synthetic import T0, TraceBuilder

from analyzers.comm.ranks import compare_ranks, is_comm_kernel, is_comm_op
from brrrtui.contract.model import LINE_SAMPLE_SCHEMA, WindowMode, table_from_rows

MS = 1_000_000
STEP = 100 * MS
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def rank_trace(
    wait_ms: float,
    extra_line_ms: float = 0.0,
    step_ms: float = 100,
    t0: int = T0,
    windows=((10, 11),),
    overlap_ms: float = 0.0,
    gemm_ms: float = 20.0,
):
    """20 steps of `step_ms`; step windows over `windows`; in each windowed step a `gemm_ms` GEMM and an
    all-reduce that waits `wait_ms` (two overlapping NCCL kernels ending together: the whole wait and its last
    60 %), its first `overlap_ms` hidden under a GEMM on another stream; the main thread sampled every 1 ms:
    `extra_line_ms` on train.py:7 (the straggler's own work), the rest of the step on train.py:9."""
    b = TraceBuilder(t0=t0)
    slow, loop = b.line("train.py", 7), b.line("train.py", 9)
    step_ns = int(step_ms * MS)
    samples = []
    for i in range(20):
        b.step(i, (i + 1) * step_ns)
    for w, (first, last) in enumerate(windows):
        b.window(first * step_ns, (last + 1) * step_ns, first_step=first, last_step=last, window=w)
        for s in range(first, last + 1):
            start = s * step_ns  # step s runs from t(step s-1) to t(step s)
            end = start + step_ns - int(10 * MS)
            if wait_ms:
                b.gpu_row(ALLREDUCE, end - int(wait_ms * MS), int(wait_ms * MS), window=w)
                b.gpu_row(
                    ALLREDUCE, end - int(0.6 * wait_ms * MS), int(0.6 * wait_ms * MS), window=w, stream=9
                )
            b.gpu_row("sm90_xmma_gemm_bf16", start, int(gemm_ms * MS), window=w)
            if overlap_ms:
                b.gpu_row(
                    "sm90_xmma_gemm_bf16", end - int(wait_ms * MS), int(overlap_ms * MS), window=w, stream=3
                )
            for k in range(int(step_ms)):
                line = slow if k < extra_line_ms else loop
                samples.append((w, line, T0 + start + k * MS))
    trace = b.build()
    return dataclasses.replace(trace, line_samples=table_from_rows(samples, LINE_SAMPLE_SCHEMA))


def test_collective_names():
    assert is_comm_kernel(ALLREDUCE) and is_comm_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t")
    assert is_comm_op("gloo:all_reduce") and not is_comm_op("c10d::allreduce_")  # enqueue only, not the wait
    assert not is_comm_kernel("sm90_xmma_gemm_bf16")


def test_the_rank_the_others_wait_for_is_the_straggler_with_its_line():
    # ranks 0, 1, 3 wait 30 ms per step in the all-reduce; rank 2 waits 2 ms: the others wait 28 ms for it,
    # which it spends on train.py:7. Rank 3's clock is 5 s off: durations only, so it does not matter.
    traces = {
        0: rank_trace(30),
        1: rank_trace(30),
        2: rank_trace(2, extra_line_ms=28, gemm_ms=25),
        3: rank_trace(30, t0=T0 + 5_000_000_000),
    }
    c = compare_ranks(traces)
    assert c.common_windows == ((10, 11),) and c.unaligned_windows == 0
    assert [r.comm_ns_per_step for r in c.ranks] == [30 * MS, 30 * MS, 2 * MS, 30 * MS]  # overlap merged
    assert [r.busy_ns_per_step for r in c.ranks] == [70 * MS, 70 * MS, 98 * MS, 70 * MS]
    s = c.straggler
    assert s is not None and s.rank == 2 and s.basis == "communication"
    assert s.late_ns == 28 * MS
    assert (s.line.file, s.line.line) == ("train.py", 7) and s.line_extra_ns == pytest.approx(28 * MS)
    assert s.kernel == "sm90_xmma_gemm_bf16" and s.kernel_extra_ns == 5 * MS  # collectives are not counted
    assert c.imbalance == pytest.approx(98 / 77 - 1)
    # steps outside windows (and the step after one): 100 ms everywhere
    assert {r.step_ns for r in c.ranks} == {100 * MS} and all(r.steps == 20 for r in c.ranks)


def test_equal_waits_name_no_straggler():
    c = compare_ranks({0: rank_trace(10), 1: rank_trace(10.2)})
    assert c.straggler is None  # 0.2 ms apart: under 5 % of a 100 ms step


def test_without_collectives_the_slowest_median_step_is_the_straggler():
    c = compare_ranks(
        {0: rank_trace(0, step_ms=100), 1: rank_trace(0, step_ms=130), 2: rank_trace(0, step_ms=100)}
    )
    assert all(r.comm_ns_per_step is None for r in c.ranks)
    s = c.straggler
    assert s is not None and s.rank == 1 and s.basis == "step time" and s.late_ns == 30 * MS


def test_a_window_only_some_ranks_hold_is_counted_and_left_out():
    both = ((10, 11),)
    c = compare_ranks({0: rank_trace(30, windows=both + ((15, 16),)), 1: rank_trace(2, windows=both)})
    assert c.common_windows == both and c.unaligned_windows == 1
    assert c.ranks[0].windows == 2 and c.ranks[0].comm_ns_per_step == 30 * MS
    assert c.straggler is not None and c.straggler.rank == 1


def test_time_windows_and_a_single_rank():
    t = rank_trace(30)
    w = t.windows
    w.columns["mode"] = w.mode.copy()
    w.mode[:] = int(WindowMode.TIME)  # set-up windows are each rank's own: never compared
    c = compare_ranks({0: t, 1: rank_trace(30)})
    assert c.common_windows == () and c.unaligned_windows == 1
    single = compare_ranks({0: rank_trace(30)})
    assert single.straggler is None and single.imbalance is None


def test_the_ranks_text_names_the_straggler_its_line_and_another_host_clock():
    from analyzers.comm.clocks import clock_offsets
    from brrrtui.present.ranks_report import ranks_json, ranks_text

    traces = {
        0: rank_trace(30),
        1: rank_trace(2, extra_line_ms=28, gemm_ms=26),
        2: rank_trace(30, t0=T0 + 5_000_000_000),
    }
    c, clocks = compare_ranks(traces), clock_offsets(traces)
    text = ranks_text(c, 0, ["rank 3 is left out: gone"], clocks)
    assert "Ranks: 3 (1 window on the same steps on every rank, steps 10–11)" in text
    assert "in collectives/step  busy/step  exposed comm/step" in text  # NCCL kernels: exposure shown
    assert "Straggler: rank 1, late by 28 ms per step (the other ranks wait for it in collectives)" in text
    assert "its line: train.py:7 (step) takes 28 ms more per step than on the other ranks" in text
    assert "its kernel: sm90_xmma_gemm_bf16 takes 6 ms more GPU time per step" in text
    assert "Clock: rank 2 reads 5 s ahead of rank 0 (from 4 collective ends, spread 0 ns)" in text
    assert "Clock: rank 1" not in text and "note: rank 3 is left out: gone" in text
    doc = ranks_json(c, 0, [], clocks)
    assert doc["straggler"]["rank"] == 1 and doc["straggler"]["line"] == {
        "file": "train.py",
        "line": 7,
        "function": "step",
    }
    assert [o["offset_ns"] for o in doc["clock_offsets"]] == [0.0, 0.0, 5e9]
    assert [r["exposed_comm_ns_per_step"] for r in doc["ranks"]] == [30 * MS, 2 * MS, 30 * MS]


def test_exposed_communication_is_nccl_time_no_other_kernel_overlaps():
    c = compare_ranks({0: rank_trace(30), 1: rank_trace(30, overlap_ms=12)})
    assert [r.comm_ns_per_step for r in c.ranks] == [30 * MS, 30 * MS]
    assert [r.exposed_comm_ns_per_step for r in c.ranks] == [30 * MS, 18 * MS]
    b = TraceBuilder()
    for s in range(12):
        b.step(s, (s + 1) * 100 * MS)
    b.window(1000 * MS, 1200 * MS, first_step=10, last_step=11)
    b.op("gloo:all_reduce", 1050 * MS, 5 * MS)
    gloo = compare_ranks({0: b.build(), 1: b.build()}).ranks[0]
    assert gloo.comm_ns_per_step == 2.5 * MS and gloo.exposed_comm_ns_per_step is None  # exposure: GPU only


def test_the_cure_follows_the_cause():
    from brrrtui.present.ranks_report import ranks_text

    # rank 1's own line explains its lateness
    line = compare_ranks({0: rank_trace(30), 1: rank_trace(2, extra_line_ms=28)})
    assert line.straggler.cause == "line"
    assert "→ the other ranks wait while this rank runs its line" in ranks_text(line, 0, [], {})
    # rank 1 runs the same GEMM 28 ms slower and no line stands out: its GPU
    gpu = compare_ranks({0: rank_trace(30), 1: rank_trace(2, gemm_ms=48), 2: rank_trace(30)})
    assert (
        gpu.straggler.rank == 1 and gpu.straggler.cause == "gpu" and gpu.straggler.kernel_extra_ns == 28 * MS
    )
    assert "→ this rank runs the same kernels slower: look at that GPU's clocks" in ranks_text(gpu, 0, [], {})
    # exposed all-reduce: the least any rank shows (rank 1 hides 12 of its 30 ms): 18 % of a 100 ms step
    exposed = compare_ranks({0: rank_trace(30), 1: rank_trace(30, overlap_ms=12)})
    text = ranks_text(exposed, 0, [], {})
    assert (
        exposed.exposed.rank == 1 and "Exposed communication: 18 ms per step on rank 1 (18% of a step" in text
    )
    assert "bucket_cap_mb" in text and "set_modules_to_backward_prefetch" in text
    quiet = ranks_text(compare_ranks({0: rank_trace(5), 1: rank_trace(5)}), 0, [], {})
    assert "Exposed communication" not in quiet  # 5 % of a step: no cure offered


def test_the_header_names_the_rank_on_screen():
    from brrrtui.present.status import RunState, rank_label, status_spans

    files = {0: "run.rank0.brrr", 1: "run.rank1.brrr"}
    assert rank_label({"rank_set": {"run": "run.brrr", "files": files, "shown": 1}}) == "rank 1 of 2"
    assert rank_label({}) is None and rank_label({"rank_set": {"files": files}}) is None
    text = "".join(
        t for t, _ in status_spans(RunState(name="run.rank1.brrr", live=False, rank="rank 1 of 2"))
    )
    assert "run.rank1.brrr  rank 1 of 2" in text
    assert "rank" not in "".join(t for t, _ in status_spans(RunState(name="x.brrr", live=False)))

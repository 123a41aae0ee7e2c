"""GPU idle gaps: exact lengths, causes and the lines they are charged to, on hand-built timelines."""

from __future__ import annotations

import numpy as np
from fixtures.synthetic import BF16, T0, TraceBuilder

from analyzers.analyze import analyze
from analyzers.cost.peaks import resolve_peaks
from analyzers.cost.roofline import roofline
from analyzers.idle import gaps as gp, launch_timing as lt
from analyzers.link.links import link
from analyzers.results import GAP_CAUSE_CODES, GapCause
from brrrtui.contract.model import GpuKind

N = 1 << 24
MUL = dict(shapes=[[4 * N], []], dtypes=[BF16, "Scalar"])
ADD = dict(shapes=[[N], [N], []], dtypes=[BF16, BF16, "Scalar"])


def device_gaps(trace):
    links = link(trace)
    roof = roofline(trace, links, resolve_peaks(trace))
    gaps = gp.classify_gaps(trace, links, gp.find_gaps(trace, ~roof.host_copy), roof.host_copy)
    return gaps, links, roof


def rows(gaps):
    """(start, dur, cause, line) relative to T0."""
    return [
        (int(s) - T0, int(d), GapCause(list(GAP_CAUSE_CODES)[c]), int(ln))
        for s, d, c, ln in zip(gaps.start_ns, gaps.dur_ns, gaps.cause, gaps.line, strict=True)
    ]


def sync_trace() -> tuple[TraceBuilder, dict[str, int]]:
    """
    CPU  |line 10: mul, launch A|line 11: loss.item() ... cudaStreamSynchronize ...|     |line 12: add, launch B|
    GPU        [A ..................... 10-100 us]   [DtoH]                               [B 300-350 us]
    gaps |0-10 host|                          100 ------------ SYNC (200 us) ------------ 300|   350 - 400 other|
    """
    b = TraceBuilder()
    ln = {k: b.line("train.py", n) for k, n in (("fwd", 10), ("item", 11), ("next", 12))}
    b.span(ln["fwd"], 0, 20_000)
    b.op("aten::mul", 1_000, 10_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", cpu_ns=2_000, gpu_ns=10_000, dur_ns=90_000)
    b.span(ln["item"], 20_000, 130_000)
    b.op("aten::item", 21_000, 129_000, shapes=[[]], dtypes=[BF16])
    b.op("aten::_local_scalar_dense", 22_000, 127_000, shapes=[[]], dtypes=[BF16])
    b.launch("Memcpy DtoH (Device -> Pinned)", 23_000, 100_000, 1_000, kind=GpuKind.MEMCPY, nbytes=4)
    b.runtime("cudaStreamSynchronize", 30_000, 110_000)  # returns at 140 us, after A ended at 100 us
    b.span(ln["next"], 250_000, 60_000)
    b.op("aten::add", 255_000, 50_000, **ADD)
    b.launch(
        "vectorized_elementwise_kernel<add>",
        cpu_ns=280_000,
        gpu_ns=300_000,
        dur_ns=50_000,
        launch_dur_ns=5_000,
    )
    b.window(0, 400_000)
    return b, ln


def test_sync_gap_has_exact_length_and_the_item_line():
    b, ln = sync_trace()
    gaps, _, _ = device_gaps(b.build())
    assert rows(gaps) == [
        (0, 10_000, GapCause.HOST, ln["fwd"]),  # window start -> A: A's launch came after the window opened
        (100_000, 200_000, GapCause.SYNC, ln["item"]),  # the DtoH copy does not make the GPU busy
        (350_000, 50_000, GapCause.OTHER, -1),  # trailing: no CPU operator runs
    ]


def test_host_wait_and_queued_kernel_wait():
    """
    CPU  launch A       launch B (after A ended)  launch C (B still running)
    GPU  [A 5-55]    55 host 70 [B 70-90] 90 other 95 [C 95-100]
    """
    b = TraceBuilder()
    la, lb, lc = (b.line("t.py", n) for n in (1, 2, 3))
    for line, cpu, gpu, dur in (
        (la, 0, 5_000, 50_000),
        (lb, 60_000, 70_000, 20_000),
        (lc, 65_000, 95_000, 5_000),
    ):
        b.span(line, cpu, 4_000)
        b.op("aten::mul", cpu, 3_000, **MUL)
        b.launch(
            "vectorized_elementwise_kernel<mul>",
            cpu_ns=cpu + 500,
            gpu_ns=gpu,
            dur_ns=dur,
            launch_dur_ns=1_000,
        )
    b.window(5_000, 100_000)
    gaps, _, _ = device_gaps(b.build())
    assert rows(gaps) == [(55_000, 15_000, GapCause.HOST, lb), (90_000, 5_000, GapCause.OTHER, lc)]


def test_host_to_device_copy_gap():
    b = TraceBuilder()
    lx, lh, ly = b.line("t.py", 5), b.line("t.py", 6), b.line("t.py", 7)
    b.span(lx, 0, 5_000)
    b.op("aten::mul", 0, 4_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", cpu_ns=1_000, gpu_ns=0, dur_ns=40_000)
    b.span(lh, 39_000, 95_000)
    b.op("aten::to", 39_500, 94_000, shapes=[[N]], dtypes=[BF16])
    b.op("aten::copy_", 39_800, 93_000, shapes=[[N], [N], []], dtypes=[BF16, BF16, "Scalar"])
    b.launch("Memcpy HtoD (Pageable -> Device)", 40_000, 50_000, 70_000, kind=GpuKind.MEMCPY, nbytes=2 * N,
             launch_dur_ns=90_000)  # fmt: skip
    b.span(ly, 134_000, 5_000)
    b.op("aten::mul", 134_000, 4_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", cpu_ns=135_000, gpu_ns=140_000, dur_ns=20_000)
    b.window(0, 160_000)
    gaps, _, _ = device_gaps(b.build())
    assert rows(gaps) == [(40_000, 100_000, GapCause.H2D, lh)]


def test_dataloader_gap():
    b = TraceBuilder()
    lk, ld = b.line("t.py", 20), b.line("t.py", 19, "<module>")
    b.span(lk, 0, 5_000)
    b.op("aten::mul", 0, 4_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", cpu_ns=1_000, gpu_ns=2_000, dur_ns=20_000)
    b.span(ld, 6_000, 500_000)
    b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 7_000, 490_000)
    b.span(lk, 510_000, 5_000)
    b.op("aten::mul", 510_000, 4_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", cpu_ns=511_000, gpu_ns=515_000, dur_ns=20_000)
    b.window(2_000, 535_000)
    gaps, _, _ = device_gaps(b.build())
    assert rows(gaps) == [(22_000, 493_000, GapCause.DATA, ld)]


def test_device_gaps_need_every_stream_idle():
    b = TraceBuilder()
    b.gpu_row("k1", 0, 100, stream=7)
    b.gpu_row("k2", 50, 100, stream=8)
    b.gpu_row("k3", 200, 100, stream=7)
    b.window(0, 300)
    trace = b.build()
    busy = np.ones(3, dtype=bool)
    dev = gp.find_gaps(trace, busy)  # stream 7 alone is idle 100..200: no gap until stream 8 ends at 150
    assert list(zip((dev.start_ns - T0).tolist(), dev.dur_ns.tolist(), dev.stream.tolist(), strict=True)) == [
        (150, 50, -1)
    ]


def test_gaps_plus_busy_time_tile_the_window():
    b, _ = sync_trace()
    a = analyze(b.build())
    assert int(a.gaps.dur_ns.sum()) == a.breakdown.idle_ns == 260_000
    assert a.breakdown.memory_ns == 140_000 and a.breakdown.compute_ns == 0
    assert a.breakdown.overhead_ns == 260_000
    line_idle = {s.line.line: s.idle_ns for s in a.lines}
    assert line_idle == {10: 10_000, 11: 200_000, 12: 0}
    sync = [f for f in a.findings if f.kind == "sync"]
    assert len(sync) == 1 and sync[0].lines[0].line == 11 and sync[0].saving_ns == 200_000


def test_launch_bound_kernels_finish_before_the_next_launch():
    b = TraceBuilder()
    for i in range(4):  # a launch every 10 us, 2 us kernels: the GPU waits for each one
        b.launch("tiny", cpu_ns=i * 10_000, gpu_ns=i * 10_000 + 5_000, dur_ns=2_000)
    b.launch("long", cpu_ns=40_000, gpu_ns=45_000, dur_ns=50_000)
    b.window(0, 100_000)
    trace = b.build()
    lb = lt.launch_bound(trace, link(trace), np.ones(5, dtype=bool))
    assert lb.tolist() == [True, True, True, True, False]
    assert lt.per_launch_ns(lt.same_stream_gaps(trace, np.ones(5, dtype=bool))) == 8_000.0


def test_first_call_module_loading_is_warm_up_charged_to_no_line():
    b = TraceBuilder()
    la, lb = b.line("t.py", 1), b.line("t.py", 2)
    b.span(la, 0, 3_000)
    b.op("aten::mul", 0, 2_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", 500, 1_000, 4_000)
    b.span(lb, 4_000, 20_000)
    b.op("aten::add", 4_100, 19_000, **ADD)  # first call: 14 us of module loading
    b.op("Lazy Function Loading", 18_000, 40)
    b.launch("vectorized_elementwise_kernel<add>", 21_000, 24_000, 4_000)
    b.window(1_000, 28_000)
    gaps, _, _ = device_gaps(b.build())
    assert rows(gaps) == [(5_000, 19_000, GapCause.OTHER, -1)]


def test_sync_outside_any_traced_line_stays_unattributed():
    b = TraceBuilder()
    la, lb = b.line("t.py", 1), b.line("t.py", 2)
    b.span(la, 0, 3_000)
    b.op("aten::mul", 0, 2_000, **MUL)
    b.launch("vectorized_elementwise_kernel<mul>", 500, 1_000, 10_000)
    b.runtime("cudaDeviceSynchronize", 3_500, 8_000)  # torch.cuda.synchronize(): no torch op, no span
    b.span(lb, 20_000, 5_000)
    b.op("aten::add", 20_100, 4_000, **ADD)
    b.launch("vectorized_elementwise_kernel<add>", 21_000, 24_000, 4_000)
    b.window(1_000, 28_000)
    gaps, _, _ = device_gaps(b.build())
    assert rows(gaps) == [(11_000, 13_000, GapCause.SYNC, -1)]  # not charged to line 2, which launched next


def test_sampled_lines_pick_the_line_the_cpu_was_executing_in_each_gap():
    from analyzers.link.sampled_lines import sampled_lines
    from brrrtui.contract.model import LINE_SAMPLE_SCHEMA, table_from_rows

    samples = table_from_rows(
        [(0, 7, 100), (0, 9, 150), (0, 9, 160), (0, 7, 170), (0, 9, 180), (0, 3, 400), (0, 5, 900)],
        LINE_SAMPLE_SCHEMA,
    )
    g0 = np.array([90, 390, 500, 850])
    g1 = np.array([200, 410, 600, 950])
    wanted = np.array([True, True, True, False])
    # gap 1: lines 7, 9, 9, 7, 9 -> 9; gap 2: 3; gap 3: no sample; gap 4: not wanted (a SYNC gap, say)
    assert sampled_lines(samples, g0, g1, wanted).tolist() == [9, 3, -1, -1]


def test_sampled_lines_are_each_gaps_most_sampled_line_lowest_id_on_ties() -> None:
    """Against the definition, one gap at a time: random samples (NONE lines among them), gaps that overlap,
    nest and hold none, and ties."""
    from analyzers.link.sampled_lines import sampled_lines
    from brrrtui.contract.model import LINE_SAMPLE_SCHEMA, Table

    rng = np.random.default_rng(3)
    n = 4000
    t = rng.integers(0, 100_000, n)
    line = rng.integers(-1, 6, n)  # few lines: ties are common
    samples = Table(
        {"window": np.zeros(n, np.int32), "line": line.astype(np.int32), "t_ns": t, "cpu_ns": np.full(n, -1)}
    )
    assert set(samples.columns) == set(LINE_SAMPLE_SCHEMA)
    g0 = rng.integers(0, 100_000, 3000)
    g1 = g0 + rng.integers(0, 400, 3000)
    wanted = rng.random(3000) < 0.8

    def one_by_one(a: int, b: int) -> int:
        inside = line[(t >= a) & (t < b)]
        if not len(inside):
            return -1
        values, counts = np.unique(inside, return_counts=True)
        return int(values[np.argmax(counts)])

    expected = [
        one_by_one(a, b) if w else -1 for a, b, w in zip(g0.tolist(), g1.tolist(), wanted, strict=True)
    ]
    got = sampled_lines(samples, g0, g1, wanted).tolist()
    assert got == expected
    assert sum(e >= 0 for e in expected) > 1000 and -1 in [
        one_by_one(a, b) for a, b in zip(g0, g1, strict=True)
    ]

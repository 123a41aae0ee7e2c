"""Lanes, snapshot, drill-down details and search over real (fixture) and synthetic recordings."""

import numpy as np
from tui_fakes import fixture_snapshot, recording_snapshot

from analyzers.results import REGIME_CODES, Regime
from brrrtui.present.details import SUMMARY, Node, describe, display_path
from brrrtui.present.finding_words import action
from brrrtui.present.lanes import CPU_OP, CPU_SYNC, build_lanes
from brrrtui.present.search import search
from brrrtui.present.verdicts import kernel_verdict


def test_fixture_lanes_hold_every_kernel_and_the_top_level_ops_of_each_thread():
    snap = fixture_snapshot()
    wl = snap.lanes[0]
    assert [lane.label for lane in wl.lanes] == ["GPU0 s7", "bwd 615", "CPU 590"]
    gpu = wl.lanes[0]
    assert len(gpu.items) == len(snap.trace.gpu) == 961
    assert len(gpu.gaps) == len(snap.analysis.gaps)
    # classes are the analysis' regime codes, rows point back at the gpu table
    assert set(np.unique(gpu.items.cls)) <= set(REGIME_CODES.values())
    assert np.array_equal(np.sort(gpu.items.rows), np.arange(961))
    cpu = wl.lanes[2]
    parents = snap.analysis.links.op_parent[cpu.items.rows]
    assert (parents < 0).all()
    assert wl.start_ns <= snap.trace.gpu.start_ns.min()


def test_sync_ops_are_classed_apart_on_cpu_lanes(tmp_path):
    snap = recording_snapshot(tmp_path, windows=1)
    cpu = [lane for lane in snap.lanes[0].lanes if lane.kind == "cpu"][0]
    names = [snap.trace.name(int(snap.trace.ops.name[r])) for r in cpu.items.rows]
    classes = dict(zip(names, cpu.items.cls.tolist(), strict=True))
    assert classes["aten::item"] == CPU_SYNC and classes["aten::mm"] == CPU_OP


def test_drill_chain_summary_line_op_kernels_kernel_gap_finding():
    snap = fixture_snapshot()
    summary = describe(snap, SUMMARY)
    assert "NVIDIA H200" in summary.text() and "compute 9.8%" in summary.text()
    kinds = [n.kind for _, n in summary.children]
    assert kinds[: len(snap.findings)] == ["finding"] * len(snap.findings) and "line" in kinds
    line = describe(snap, next(n for _, n in summary.children if n.kind == "line"))
    assert line.title == "tests/fixtures/resnet_train.py:12" or line.title.endswith("resnet_train.py:12")
    assert "verdict: overhead-bound" in line.text()
    op_node = next(n for _, n in line.children if n.kind == "op")
    op = describe(snap, op_node)
    assert op.title == "aten::native_batch_norm" and "shapes [[128,256,56,56]" in op.text()
    kname = describe(snap, op.children[0][1])
    assert "memory-bound" in kname.text() and "batch_norm_collect_statistics" in kname.title
    kernel = describe(snap, kname.children[0][1])
    assert "grid [8,128,1] block [32,16,1]" in kernel.text()
    # a kernel followed by an idle gap offers the gap, and the gap offers its advice
    g = snap.analysis.gaps
    gpu = snap.trace.gpu
    before = int(np.nonzero(gpu.start_ns + gpu.dur_ns == g.start_ns[0])[0][0])
    kernel = describe(snap, Node("kernel", (before,)))
    gap_node = next(n for label, n in kernel.children if n.kind == "gap" and "idle after" in label)
    assert gap_node == Node("gap", (0,))
    gap = describe(snap, gap_node)
    assert gap.title.startswith("GPU idle") and "advice:" in gap.text()
    finding = describe(snap, Node("finding", (0,)))
    assert action(snap.findings[0]) in finding.text()


def test_details_of_a_vanished_item_say_so():
    snap = fixture_snapshot()
    assert describe(snap, Node("kernel", (10**9,))).title == "gone"


def test_kernel_verdict_names_the_roof_and_the_remedy():
    snap = fixture_snapshot()
    v = kernel_verdict(snap, Regime.COMPUTE, 4e11, None, 1e6, 1, True)
    assert v.startswith("compute-bound: 400 TFLOP/s of 800 TFLOP/s (50% of the roof)")
    assert "fusing" in kernel_verdict(snap, Regime.MEMORY, None, 2e9, 1e6)
    assert "launch" in kernel_verdict(snap, Regime.OVERHEAD, None, None, 2_000, 1)
    unaligned = "cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1"
    v = kernel_verdict(snap, Regime.MEMORY, 1e11, 2e8, 1e6, 1, True, unaligned)
    assert v.startswith("memory-bound on chip: its operands are aligned to 2 bytes")
    assert "100 TFLOP/s of 800 TFLOP/s (12%)" in v and "multiple of 64" in v and "fusion does not help" in v


def test_display_path_is_relative_and_clickable(tmp_path, monkeypatch):
    snap = recording_snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert display_path(snap, snap.hot_lines[0].line) == "train.py:4"
    missing = snap.hot_lines[0].line.__class__("gone/elsewhere.py", 3, "f")
    assert display_path(snap, missing) == "gone/elsewhere.py:3"


def test_search_finds_kernels_by_name_and_lines_by_code(tmp_path):
    snap = recording_snapshot(tmp_path)
    hits = search(snap, "SGEMM")
    assert [h.kind for h in hits] == ["kernel"] and hits[0].key == "ampere_sgemm_64x64_nn"
    by_code = search(snap, "cos().cos")
    assert [(h.kind, snap.lines_by_id[h.key].line.line) for h in by_code] == [("line", 5)]
    assert search(snap, "  ") == []


def test_a_window_without_ops_or_gaps_still_builds(tmp_path):
    snap = recording_snapshot(tmp_path, windows=1)
    a = snap.analysis
    a.gaps = a.gaps.take(np.zeros(0, dtype=np.int64))
    wl = build_lanes(a, 0)
    assert len(wl.lanes[0].gaps) == 0


def test_without_gpu_work_hot_lines_rank_by_cpu_time(tmp_path):
    import dataclasses

    from brrrtui.present.snapshot import build_snapshot

    a = recording_snapshot(tmp_path, windows=1).analysis
    cpu = {4: 5_000, 5: 9_000, 6: 1_000, 7: 30_000}
    a.lines = [
        dataclasses.replace(s, gpu_ns=0, idle_ns=0, host_ns=cpu.get(s.line.line, 0)) for s in a.lines
    ] + [dataclasses.replace(a.lines[0], line=a.lines[0].line.__class__(a.lines[0].line.file, 7, "step"),
                             line_id=3, gpu_ns=0, idle_ns=0, host_ns=30_000)]  # fmt: skip
    a.trace = dataclasses.replace(a.trace, gpu=a.trace.gpu.take(np.zeros(0, dtype=np.int64)))  # no GPU activity
    snap = build_snapshot(a)
    assert snap.cpu_only
    assert [s.line.line for s in snap.hot_lines] == [7, 5, 4, 6]


def test_every_drill_step_describes_on_real_analyses(tmp_path):
    """Walk the drill-down tree (breadth first, 400 nodes) of the real analysis of each H200 recording and
    the resnet trace: every node a pane offers must describe itself."""
    from tui_fakes import FIXTURE, H200_RECORDINGS, h200_recording

    from analyzers.analyze import analyze
    from brrrtui.present.snapshot import build_snapshot
    from brrrtui.recording.load import load_trace

    paths = [h200_recording(name, tmp_path) for name in H200_RECORDINGS] + [FIXTURE]
    for path in paths:
        snap = build_snapshot(analyze(load_trace(path)))
        seen, queue = set(), [SUMMARY]
        kinds = set()
        while queue and len(seen) < 400:
            node = queue.pop(0)
            if node in seen:
                continue
            seen.add(node)
            d = describe(snap, node)
            assert d.title not in ("gone",) and not d.title.startswith("unknown"), (path, node)
            assert d.body, (path, node)
            kinds.add(node.kind)
            queue += [n for _, n in d.children]
        assert {"summary", "line", "op", "kname", "kernel", "finding"} <= kinds, (path, kinds)


def test_every_windows_rows_come_from_one_search_of_each_table():
    """rows_of_windows gives each window the gpu, op and gap rows a mask per window selects, in table order:
    on a four-window H200 recording analysed whole, its gaps out of window order and a window they lack."""
    import os

    from analyzers.analyze import analyze
    from brrrtui.present.lanes import rows_of_windows
    from brrrtui.recording.load import load_trace

    path = os.path.join(os.path.dirname(__file__), "fixtures", "h200_known_regimes_sleep20.brrr.gz")
    trace = load_trace(path)
    a = analyze(trace, windows=trace.windows.window.tolist())
    a.gaps = a.gaps.take(np.argsort(-a.gaps.window, kind="stable")[1:])  # last window first, one gap fewer
    windows = [*trace.windows.window.tolist(), 99]
    found = rows_of_windows(a, windows)
    for w in windows:
        masks = (a.trace.gpu.window == w, a.trace.ops.window == w, a.gaps.window == w)
        for got, mask in zip(found[w], masks, strict=True):
            np.testing.assert_array_equal(got, np.nonzero(mask)[0])
    assert sum(len(found[w][0]) for w in windows) == len(a.trace.gpu) > 0


def test_a_lanes_class_codes_are_np_uniques():
    from brrrtui.present.timeline import IntervalIndex

    rng = np.random.default_rng(3)
    for codes in (
        rng.integers(0, 6, 5000),
        rng.integers(-3, 3, 50),
        np.zeros(0, dtype=np.int64),
        [70_000, 2],
    ):
        c = np.asarray(codes, dtype=np.int64)
        t = np.arange(len(c))
        np.testing.assert_array_equal(IntervalIndex.build(t, t + 1, c, t, 0).classes, np.unique(c))

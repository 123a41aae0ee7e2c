"""The live analysis (analyzers/phases/live_windows.py, brrrtui.session.Source): a recording written one window at a
time and followed, analysed after each window, gives exactly what analyze() gives on the whole recording read
from scratch: restricted to the newest windows of the lead phase while the script runs, all of them after."""

from __future__ import annotations

import dataclasses

import numpy as np
from fixtures.synthetic import BF16, TraceBuilder
from tui_fakes import analysed, h200_recording, run_async

from analyzers.analyze import analyze, phases_of, select_windows
from analyzers.phases.live_windows import ROW_TABLES, WindowIndex, live_windows
from analyzers.phases.run_phases import Phase
from brrrtui.contract.model import Table, Trace
from brrrtui.present.snapshot import build_snapshot
from brrrtui.record.feed import Exited, Feed, WindowAdded
from brrrtui.recording.follow import Follower
from brrrtui.recording.store import RecordingWriter, load_recording
from brrrtui.session import Source
from brrrtui.tui.app import make_app

MS = 1_000_000
SKIP_META = {"format", "format_version", "columns", "load_notes"}


def write_by_window(trace: Trace, path: str):
    """Write `trace` as the recorder does: meta and names first, then per window the steps up to its end and
    one batch of its rows; yields after each window. The steps after the last window come at the end."""
    w = RecordingWriter(path)
    meta = {k: v for k, v in trace.meta.items() if k not in SKIP_META}
    w.set_meta(**{"device": {"name": trace.device.name}, **meta, "status": "running"})
    w.append(
        {
            "strings": list(enumerate(trace.strings)),
            "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)],
        }
    )
    steps_written = 0
    steps = trace.steps
    for row in np.argsort(trace.windows.window, kind="stable").tolist():
        win = int(trace.windows.window[row])
        upto = int(np.searchsorted(np.sort(steps.t_ns), trace.windows.end_ns[row], side="right"))
        batch = {name: rows_of(getattr(trace, name), win) for name in (*ROW_TABLES, "capture_costs")}
        batch["windows"] = trace.windows.take(np.array([row]))
        batch["steps"] = steps.take(np.arange(steps_written, upto))
        steps_written = max(steps_written, upto)
        w.append(batch)
        yield win
    w.append({"steps": steps.take(np.arange(steps_written, len(steps))), "telemetry": trace.telemetry})
    w.close()


def rows_of(table: Table, window: int) -> Table:
    return table.take(np.nonzero(table.window == window)[0])


def expected(path: str, keep: int | None):
    """analyze() of the recording read from scratch: the newest `keep` lead windows, or all of them."""
    whole = load_recording(path)
    windows, total = live_windows(phases_of(whole), None, keep)
    return analyze(whole, windows=windows) if len(windows) < total else analyze(whole)


def assert_same_analysis(got, want) -> None:
    assert got.windows == want.windows and got.phase is want.phase
    assert got.breakdown == want.breakdown and got.window_breakdowns == want.window_breakdowns
    assert got.overhead == want.overhead and got.steps_analysed == want.steps_analysed
    assert got.kernels == want.kernels
    assert got.lines == want.lines and got.library_lines == want.library_lines
    assert got.findings == want.findings
    assert got.modules == want.modules
    assert [n for n in got.notes if not n.startswith("live: ")] == want.notes
    for name in (
        "kernel_regime",
        "kernel_flops",
        "kernel_bytes",
        "kernel_unit_peak_flops_per_s",
        "kernel_launch_bound",
    ):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    for mine, theirs in zip(got.kernel_rates(), want.kernel_rates(), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    tables = [(getattr(got.trace, n), getattr(want.trace, n)) for n in ("gpu", "ops", "runtime", "spans")]
    for a, b in [*tables, (got.gaps, want.gaps)]:
        assert a.columns.keys() == b.columns.keys()
        for c in a.columns:
            np.testing.assert_array_equal(a[c], b[c])  # NaN equals NaN
    assert got.per_launch_ns == want.per_launch_ns or (got.per_launch_ns is None) == (
        want.per_launch_ns is None
    )
    s, t = build_snapshot(got), build_snapshot(want)
    assert s.hot_lines == t.hot_lines and s.findings == t.findings and s.windows == t.windows


def follow_and_compare(trace: Trace, path: str, keep: int) -> list[tuple[int, ...]]:
    """After each window: the live analysis == analyze() of the file read whole. Returns the windows analysed."""
    source = Source(path, follow=True, keep=keep)
    seen = []
    for _ in write_by_window(trace, path):
        got = source.analysis(source.read(), None, None, running=True)
        assert_same_analysis(got, expected(path, keep))
        seen.append(got.windows)
    final = source.analysis(source.read(), None, None, running=False)
    assert_same_analysis(final, analyze(load_recording(path)))
    assert not any(n.startswith("live: ") for n in final.notes)
    return seen


def many_windows_trace(windows: int = 10) -> Trace:
    """A run of 5 ms steps with one profiled step (10 ms) every tenth step, one window each. Every window runs a
    GEMM (line 41), a mul -> add chain of pointwise kernels (line 42) whose length depends on the window, and a
    loss.item() sync (line 43); so the newest windows and all of them give different figures."""
    b = TraceBuilder()
    gemm, act, loss = b.line("train.py", 41), b.line("train.py", 42), b.line("train.py", 43)
    t, step = 200 * MS, 0
    b.step(step, t)
    shapes = [[4096, 4096], [4096, 4096]]
    for w in range(windows):
        for _ in range(9):
            step, t = step + 1, t + 5 * MS
            b.step(step, t)
        start, step, t = t, step + 1, t + 10 * MS
        b.span(gemm, start + 100_000, 1 * MS, window=w)
        b.op("aten::mm", start + 100_000, 900_000, shapes=shapes, dtypes=[BF16, BF16], window=w)
        b.launch("sm90_xmma_gemm_bf16bf16", start + 200_000, start + 1 * MS, 2 * MS, window=w)
        cpu, gpu = start + 1_200_000, start + 3_100_000
        b.span(act, cpu, 100_000 * (w % 4 + 2), window=w)
        for k in range(w % 4 + 2):
            name = ("mul", "add")[k % 2]
            b.op(f"aten::{name}", cpu, 90_000, shapes=shapes, dtypes=[BF16, BF16], window=w)
            b.launch(
                f"vectorized_elementwise_kernel<{name}>", cpu + 10_000, gpu, 60_000 + 10_000 * w, window=w
            )
            cpu, gpu = cpu + 100_000, gpu + 70_000 + 10_000 * w
        b.span(loss, start + 5 * MS, 3 * MS, window=w)
        b.op("aten::item", start + 5 * MS, 3 * MS, window=w)
        b.runtime("cudaStreamSynchronize", start + 5_100_000, 2_800_000, window=w)
        b.window(start, t, first_step=step, last_step=step, window=w)
        b.step(step, t)
    return b.build()


def repeated_steady_window(trace: Trace, copies: int) -> Trace:
    """A recorded run with its steady window copied onto later steps (every 10 steps from it), shifted in time
    by the recorded step ends, with new window ids and correlation ids."""
    phases = phases_of(trace)
    src = max(phases.windows_in(Phase.STEADY))
    wt = trace.windows
    row = int(np.nonzero(wt.window == src)[0][0])
    first = int(wt.first_step[row])
    ends = dict(zip(trace.steps.step.tolist(), trace.steps.t_ns.tolist(), strict=True))
    tables = {n: [getattr(trace, n)] for n in (*ROW_TABLES, "windows", "capture_costs")}
    for k in range(1, copies + 1):
        to = first + 10 * k
        if to - 1 not in ends or to + int(wt.last_step[row]) - first not in ends:
            break
        shift = ends[to - 1] - ends[first - 1]
        for name in tables:
            tables[name].append(_shifted(getattr(trace, name), src, int(wt.window.max()) + k, shift, 10 * k))
    cat = {
        n: Table({c: np.concatenate([t[c] for t in ts]) for c in ts[0].columns}) for n, ts in tables.items()
    }
    return dataclasses.replace(trace, _ids=None, **cat)


def _shifted(table: Table, src: int, new: int, shift: int, steps: int) -> Table:
    t = table.take(np.nonzero(table.window == src)[0])
    cols = dict(t.columns)
    cols["window"] = np.full(len(t), new, dtype=cols["window"].dtype)
    for c in ("start_ns", "end_ns", "t_ns"):
        if c in cols:
            cols[c] = cols[c] + shift
    for c in ("first_step", "last_step"):
        if c in cols:
            cols[c] = cols[c] + steps
    if "correlation" in cols:
        cols["correlation"] = np.where(cols["correlation"] >= 0, cols["correlation"] + new * 10**7, -1)
    return Table(cols)


# ---------------------------------------------------------------------------------------------------- tests


def test_the_index_cuts_the_rows_select_windows_keeps_from_interleaved_batches():
    rng = np.random.default_rng(7)
    trace = many_windows_trace(6)
    index = WindowIndex()
    # grow the gpu table by batches that split windows and mix them (the cut must keep row order)
    order = np.concatenate([rng.permutation(np.nonzero(trace.gpu.window == w)[0]) for w in range(6)])
    order[5:9] = order[5:9][::-1]
    grown = trace.gpu.take(order)
    for n in (3, 7, 7, 20, len(grown)):
        index.add(dataclasses.replace(trace, gpu=grown.take(np.arange(n))))
    full = dataclasses.replace(trace, gpu=grown)
    for chosen in ([0], [2, 4], [5, 1], [0, 1, 2, 3, 4, 5], [9]):
        cut = index.cut(full, chosen)
        want = select_windows(full, chosen)
        assert np.array_equal(cut.gpu.start_ns, want.gpu.start_ns) and len(cut.gpu) == len(want.gpu)
        assert np.array_equal(cut.ops.start_ns, want.ops.start_ns)
    # a trace older than the index (fewer rows) is cut within its own rows
    older = dataclasses.replace(trace, gpu=grown.take(np.arange(7)))
    assert np.array_equal(index.cut(older, [0, 1]).gpu.start_ns, select_windows(older, [0, 1]).gpu.start_ns)


def test_live_windows_are_the_newest_of_the_lead_phase():
    phases = phases_of(many_windows_trace(10))
    lead, windows = phases.lead()
    assert lead is Phase.STEADY and len(windows) >= 8
    assert live_windows(phases, None, 3) == (sorted(windows)[-3:], len(windows))
    assert live_windows(phases, None, None) == (sorted(windows), len(windows))


def test_hand_built_run_followed_window_by_window_equals_analyze(tmp_path):
    seen = follow_and_compare(many_windows_trace(10), str(tmp_path / "run.brrr"), keep=3)
    assert max(len(w) for w in seen) == 3 and seen[-1] == (7, 8, 9)  # the newest three, once there are more


def test_recorded_h200_run_followed_window_by_window_equals_analyze(tmp_path):
    recorded = load_recording(h200_recording("h200_hf_gpt2_modules", tmp_path))
    trace = repeated_steady_window(recorded, copies=11)
    assert len(trace.windows) == 13
    seen = follow_and_compare(trace, str(tmp_path / "live.brrr"), keep=8)
    assert len(seen[-1]) == 8 and len(seen[-1]) < len(phases_of(trace).windows_in(Phase.STEADY))


def test_recorded_h200_bert_followed_equals_analyze(tmp_path):
    """Two recorded windows, no copies: fewer than `keep`, so every step is analyze() of the file."""
    trace = load_recording(h200_recording("h200_bert", tmp_path))
    follow_and_compare(trace, str(tmp_path / "live.brrr"), keep=8)


@run_async
async def test_the_live_app_updates_on_each_window_through_the_follower_and_the_newest_windows(
    tmp_path, monkeypatch
):
    import brrrtui.recording.load

    polls, loads = [], []
    real_poll = Follower.poll
    monkeypatch.setattr(Follower, "poll", lambda self: polls.append(1) or real_poll(self))
    monkeypatch.setattr(brrrtui.recording.load, "load_trace", lambda *a, **kw: loads.append(a))
    path = str(tmp_path / "run.brrr")
    writing = write_by_window(many_windows_trace(6), path)
    next(writing)  # window 0
    feed = Feed()
    app = make_app(path, feed, "train.py", poll_s=0.02)  # the real analysis
    app._source.keep = 2
    async with app.run_test(size=(120, 40)) as pilot:
        await analysed(pilot)
        for n, win in enumerate(writing, 2):
            feed.put(WindowAdded(window=win, kernels=4, ops=5))
            await analysed(pilot, n)
            a = app.snapshot.analysis
            assert a.windows == expected(path, 2).windows and len(a.windows) <= 2
            assert app.snapshot.windows == list(a.windows)  # the timeline's pages: the windows analysed
            assert a.lines == expected(path, 2).lines and a.findings == expected(path, 2).findings
        assert a.windows == (4, 5) and any(n.startswith("live: the newest 2 of") for n in a.notes)
        assert len(polls) == app.analyses and not loads  # every analysis read only what was added
        feed.put(Exited(0))  # the script ended: every window of the lead phase, as brrrtui report
        await analysed(pilot, app.analyses + 1)
        final = app.snapshot.analysis
        assert final.windows == analyze(load_recording(path)).windows and len(final.windows) > 2
        assert not any(n.startswith("live: ") for n in final.notes)


def test_a_trace_of_another_file_is_analysed_whole_and_leaves_the_index_alone(tmp_path):
    """The live app analyses a trace it did not follow (a rank's file read for `r`) as view mode does."""
    path = str(tmp_path / "live.brrr")
    for _ in write_by_window(many_windows_trace(5), path):
        pass
    other = str(tmp_path / "other.brrr")
    for _ in write_by_window(many_windows_trace(10), other):
        pass
    source = Source(path, follow=True, keep=2)
    source.analysis(source.read(), None, None, running=True)
    seen = dict(source.index.seen)
    snap = source.analyse(load_recording(other), 1, running=True)
    assert snap.analysis.windows == analyze(load_recording(other)).windows and len(snap.analysis.windows) > 2
    assert source.index.seen == seen

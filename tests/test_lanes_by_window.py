"""A snapshot's window lanes: built when a window is first asked for, equal to building them all at once."""

import os
import threading

import numpy as np
from tui_fakes import recording_snapshot

from analyzers.analyze import analyze
from brrrtui.present import lanes_by_window
from brrrtui.present.lanes import WindowLanes, build_lanes
from brrrtui.present.snapshot import build_snapshot
from brrrtui.recording.load import load_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def _same(a: WindowLanes, b: WindowLanes) -> bool:
    """Same window, span and lanes: every lane's key, label, kind and interval columns, items and gaps."""
    if (a.window, a.start_ns, a.end_ns, a.stream) != (b.window, b.start_ns, b.end_ns, b.stream):
        return False
    if [(x.key, x.label, x.holds) for x in a.lanes] != [(x.key, x.label, x.holds) for x in b.lanes]:
        return False
    for x, y in zip(a.lanes, b.lanes, strict=True):
        for index_a, index_b in ((x.items, y.items), (x.gaps, y.gaps)):
            if index_a.origin_ns != index_b.origin_ns:
                return False
            for col in ("start", "end", "cls", "rows"):
                if not np.array_equal(getattr(index_a, col), getattr(index_b, col)):
                    return False
    return True


def test_a_snapshot_builds_the_window_it_opens_on_and_the_others_when_asked(tmp_path):
    snap = recording_snapshot(tmp_path, windows=3)
    lanes = snap.lanes
    assert list(lanes) == snap.windows and len(lanes) == 3
    assert lanes.built() == [snap.windows[-1]]  # the default page, built off the UI thread
    first = snap.windows[0]
    assert first in lanes and 999 not in lanes and lanes.get(999) is None
    assert lanes.built() == [snap.windows[-1]]  # asking whether it has a window builds nothing
    shown = lanes[first]
    assert lanes.built() == [first, snap.windows[-1]] and lanes[first] is shown  # kept, not built again
    for w in snap.windows:
        assert _same(lanes[w], build_lanes(snap.analysis, w))


def test_real_recordings_lanes_equal_those_built_all_at_once():
    for name in ("h200_gpt2_compile_block_after.brrr.gz", "h200_known_regimes_sleep20.brrr.gz"):
        trace = load_trace(os.path.join(FIXTURES, name))
        a = analyze(trace, windows=trace.windows.window.tolist())  # every window, not the lead phase's
        snap = build_snapshot(a)
        assert len(snap.windows) >= 2, name
        for w in snap.windows:
            assert _same(snap.lanes[w], build_lanes(a, w)), (name, w)


def test_each_window_is_built_once_when_threads_ask_at_the_same_time(tmp_path, monkeypatch):
    calls: list[int] = []
    real = lanes_by_window.build_lanes
    started = threading.Barrier(8)

    def counting(analysis, window, sync=None, rows=None):
        calls.append(window)
        return real(analysis, window, sync, rows)

    snap = recording_snapshot(tmp_path, windows=3)
    monkeypatch.setattr(lanes_by_window, "build_lanes", counting)
    got: list[list[WindowLanes]] = []

    def ask() -> None:
        started.wait()
        got.append([snap.lanes[w] for w in snap.windows])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == sorted(snap.windows[:-1])  # the last was built with the snapshot
    assert all(all(x is y for x, y in zip(g, got[0], strict=True)) for g in got)


def test_only_the_windows_asked_for_last_stay_built(tmp_path):
    snap = recording_snapshot(tmp_path, windows=4)
    w0, w1, w2, w3 = snap.windows
    lanes = lanes_by_window.LanesByWindow(snap.analysis, snap.windows, keep=2)
    first = lanes[w0]
    lanes[w1]
    assert lanes[w0] is first  # asked again: kept, and now the last asked for
    lanes[w2]  # three asked for, two kept: w1 was asked for longest ago
    assert lanes.built() == [w0, w2]
    lanes[w3]
    assert lanes.built() == [w2, w3]
    again = lanes[w0]  # built again, equal to the first build
    assert again is not first and _same(again, first) and lanes.built() == [w0, w3]

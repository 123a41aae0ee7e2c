"""A folded kernel stream in the timeline: the pages between windows show the folded rows' time profile (200 ms
buckets classed by the regime holding most of their time) beside the raw rows, their titles count both, and a
folded bucket is drawn but never selected."""

import numpy as np
from stream_fold_fixture import record
from tui_fakes import analysed, run_async

from analyzers.analyze import analyze
from brrrtui.present.lanes import INFERRED, STREAMED, PageKey
from brrrtui.present.snapshot import build_snapshot
from brrrtui.record.fold import StreamFolder
from brrrtui.recording.store import load_recording
from brrrtui.tui.app import make_app

NAME = "h200_known_regimes"


def _recording(tmp_path) -> str:
    return record(
        str(tmp_path / "folded.brrr"), NAME, tmp_path, StreamFolder(keep_rows=3_000, chunk_rows=2_000)
    )


def test_folded_pages_hold_the_time_profile_and_the_raw_rows(tmp_path):
    trace = load_recording(_recording(tmp_path))
    snap = build_snapshot(analyze(trace))
    busy = trace.stream_busy
    folded_pages = sorted({int(a) for a in busy.after_window.tolist()})
    assert folded_pages and all(PageKey(a, True) in snap.pages for a in folded_pages)
    shared = 0  # busy rows in a bucket another fold's row also holds
    for after in folded_pages:
        wl = snap.page_lanes(PageKey(after, True))
        items = np.concatenate([lane.items.rows for lane in wl.lanes])
        classes = np.concatenate([lane.items.cls for lane in wl.lanes])
        mine = busy.after_window == after
        # one item per 200 ms bucket of a lane, as long as every fold's busy time in it (two folds that each
        # took part of a bucket wrote a row each: drawn apart, the shorter hid under the longer)
        buckets = {
            (int(d), int(s), int(b))
            for d, s, b in zip(busy.device[mine], busy.stream[mine], busy.bucket[mine], strict=True)
        }
        assert int((items < 0).sum()) == len(buckets)
        shared += int(mine.sum()) - len(buckets)
        drawn = sum(int((lane.items.end - lane.items.start)[lane.items.rows < 0].sum()) for lane in wl.lanes)
        assert drawn == int(np.minimum(busy.dur_ns[mine], busy.bucket_ns[mine]).sum())
        assert ((classes[items < 0] >= INFERRED) & (classes[items < 0] < STREAMED)).all()
        raw = int((trace.stream.after_window == after).sum())
        assert int((items >= 0).sum()) == raw
        assert all(lane.items.start.min() >= 0 for lane in wl.lanes)  # nothing drawn before the page
        assert wl.end_ns - wl.start_ns > 1_000_000
    assert shared > 0  # the small folds here cut buckets


@run_async
async def test_walking_the_folded_pages(tmp_path, monkeypatch):
    path = _recording(tmp_path)
    monkeypatch.chdir(tmp_path)
    app = make_app(path, None, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        snap = app.snapshot
        await pilot.press("home")
        seen = []
        for _ in range(len(snap.pages) + 1):
            await pilot.press("comma")
        for _ in range(len(snap.pages)):
            seen.append(tl.page)
            if tl.page.stream and tl.page.window in set(snap.trace.stream_busy.after_window.tolist()):
                folded = int(
                    snap.trace.stream_agg["count"][snap.trace.stream_agg.after_window == tl.page.window].sum()
                )
                assert f" + {folded:,} folded · " in tl.border_title
                await pilot.press("home", "right_square_bracket", "right_square_bracket")
                assert tl.selection is None or tl.selection.row >= 0
                await pilot.press("0")
                assert tl.selection is None or tl.selection.row >= 0
            await pilot.press("full_stop")
        assert seen == snap.pages

"""The kernel stream in the app: stream pages between window pages, their details, and following a live stream
incrementally (StreamReader) with a bounded tail in memory."""

import numpy as np
from stream_fixture import copy_rows, make_stream_recording, window_rows
from tui_fakes import analysed, fake_analyze, run_async, wait_until

import brrrtui.recording.load
import brrrtui.recording.store
import brrrtui.recording.stream_reader
from brrrtui.present.lanes import PageKey
from brrrtui.record.feed import Feed, StreamAdded, WindowAdded
from brrrtui.recording.follow import Follower
from brrrtui.recording.store import RecordingWriter, load_recording
from brrrtui.tui.app import make_app

SIZE = (120, 40)


def page_rows(tl) -> int:
    return sum(len(lane.items) for lane in tl.lanes.lanes)


@run_async
async def test_dot_and_comma_walk_through_windows_and_stream_pages(tmp_path, monkeypatch):
    path = make_stream_recording(tmp_path, before=True)
    monkeypatch.chdir(tmp_path)
    app = make_app(path, None, None)  # the real analysis
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        assert tl.page == PageKey(0) and tl.window == 0  # a finished recording opens on its newest window
        await pilot.press("full_stop")
        assert tl.page == PageKey(0, True) and tl.window is None
        assert "stream after window 1 · 753 kernels · lines inferred (99.6% matched)" in tl.border_title
        assert all(lane.kind == "stream" for lane in tl.lanes.lanes)
        await pilot.press("full_stop")  # the last page: stays
        assert tl.page == PageKey(0, True)
        await pilot.press("home", "right_square_bracket")
        sel = tl.selection
        assert sel is not None and sel.kind == "streamed"
        details = app.main.details
        assert details.node.kind == "streamed"
        snap = app.snapshot
        lid = int(snap.stream.line[sel.row])
        line = snap.trace.lines[lid]
        text = details.detail.text()
        assert f"{line.line} (inferred)" in text and "like window 0's kernel" in text
        assert snap.stream_name(int(snap.stream.stream.name[sel.row])) in text
        assert "(inferred)" in tl.selection_text()
        # g: from the streamed kernel to its inferred line
        await pilot.press("g")
        assert app.main.source.current_stat() is not None
        assert app.main.source.current_stat().line_id == lid
        await pilot.press("tab", "tab", "tab", "tab")  # back to the timeline
        await pilot.press("comma", "comma")
        assert tl.page == PageKey(-1, True)
        assert "stream before the first window · 250 kernels" in tl.border_title
        await pilot.press("comma")
        assert tl.page == PageKey(-1, True)
        await pilot.press("full_stop")
        assert tl.page == PageKey(0) and "window 1/1" in tl.border_title


@run_async
async def test_go_to_a_window_kernel_from_a_stream_page(tmp_path, monkeypatch):
    path = make_stream_recording(tmp_path)
    monkeypatch.chdir(tmp_path)
    app = make_app(path, None, None, analyze=fake_analyze)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        await pilot.press("full_stop", "home", "right_square_bracket")
        t = int(app.snapshot.stream.template_row[tl.selection.row])
        assert tl.go_to("kernel", t)
        assert tl.page == PageKey(0) and tl.selection.kind == "kernel" and tl.selection.row == t
        row = int(np.nonzero(app.snapshot.stream.stream.after_window == 0)[0][-1])
        assert tl.go_to("streamed", row) and tl.page == PageKey(0, True) and tl.selection.row == row


def _append_copies(writer, trace, copy: int, repeats: int = 1) -> int:
    """Stream `repeats` more copies of window 0 after the last one; returns the rows added."""
    rows = window_rows(trace, 0)
    g = trace.gpu
    span = int((g.start_ns[rows] + g.dur_ns[rows]).max() - g.start_ns[rows].min())
    end = int(trace.windows.end_ns.max())
    batch = copy_rows(trace, 0, 0, repeats, end + 1_000_000 + copy * (span + 1_000_000), first_copy=copy)
    writer.append({"stream": batch})
    return len(batch)


class Counter:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *a, **kw):
        self.calls += 1
        return self.fn(*a, **kw)


def _live_app(tmp_path, repeats: int):
    """A live app on a stream recording of `repeats` x 250 rows, and a writer to append more to it."""
    path = make_stream_recording(tmp_path, repeats=repeats, unknown=0)
    feed = Feed()
    app = make_app(path, feed, "train.py", analyze=fake_analyze, poll_s=0.02, stream_s=0.05)
    return load_recording(path), feed, app, RecordingWriter(path)


@run_async
async def test_live_stream_is_followed_incrementally_without_reloading(tmp_path, monkeypatch):
    whole = Counter(brrrtui.recording.load.load_trace)
    monkeypatch.setattr(brrrtui.recording.load, "load_trace", whole)
    loads = Counter(Follower.poll)  # live, a full analysis reads only the batches added (brrrtui.session.Source)
    monkeypatch.setattr(Follower, "poll", lambda self: loads(self))
    polls = Counter(brrrtui.recording.stream_reader.StreamReader.poll)
    monkeypatch.setattr(brrrtui.recording.stream_reader.StreamReader, "poll", lambda self, *a, **kw: polls(self, *a, **kw))
    trace, feed, app, writer = _live_app(tmp_path, repeats=1)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        assert tl.page == PageKey(0, True) and page_rows(tl) == 250  # live: follows the newest page
        assert loads.calls == 1
        for copy in range(1, 4):
            n = _append_copies(writer, trace, copy)
            feed.put(StreamAdded(n, 250 * (copy + 1), 0))
            await wait_until(pilot, lambda c=copy: app.stream_updates >= c)
            assert page_rows(tl) == 250 * (copy + 1)
            assert f"{250 * (copy + 1):,} kernels" in tl.border_title
        assert loads.calls == 1 and app.analyses == 1  # no full reload: the reader did it
        assert polls.calls >= 3
        snap = app.snapshot
        assert snap.stream.total_rows == 1000 and len(snap.stream.stream) == 1000
        assert (snap.stream.template_row >= 0).all()  # the new rows are matched too

        # a full analysis (a new window) reloads; the reader continues where that load ended: no duplicates
        feed.put(WindowAdded(window=0, kernels=250, ops=0))
        await analysed(pilot, 2)
        assert loads.calls == 2 and app._reader.rowid == 1000 and whole.calls == 0
        n = _append_copies(writer, trace, 4)
        feed.put(StreamAdded(n, 1250, 0))
        await wait_until(pilot, lambda: app.stream_updates >= 4)
        assert len(app.snapshot.stream.stream) == 1250 and page_rows(tl) == 1250

        # the user went back a page: updates no longer move the timeline
        await pilot.press("comma")
        assert tl.page == PageKey(0)
        n = _append_copies(writer, trace, 5)
        feed.put(StreamAdded(n, 1500, 0))
        await wait_until(pilot, lambda: app.stream_updates >= 5)
        assert tl.page == PageKey(0) and len(app.snapshot.stream.stream) == 1500
    writer.close()


@run_async
async def test_live_stream_keeps_at_most_stream_tail_rows(tmp_path, monkeypatch):
    tail = 400
    monkeypatch.setattr(brrrtui.recording.store, "STREAM_TAIL", tail)
    trace, feed, app, writer = _live_app(tmp_path, repeats=2)  # 500 rows: the load is trimmed to 400
    path = writer.path
    sizes = []
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        sizes.append(len(app.snapshot.stream.stream))
        for copy in range(2, 6):
            n = _append_copies(writer, trace, copy, repeats=1 + copy % 2)
            feed.put(StreamAdded(n, 0, 0))
            await wait_until(pilot, lambda c=copy: app.stream_updates >= c - 1)
            sizes.append(len(app.snapshot.stream.stream))
            snap = app.snapshot
            total = snap.stream.total_rows
            # the rows held are the newest: the last row held is the last row written
            last = load_recording(path).stream
            assert total == len(last)
            assert int(snap.stream.stream.start_ns[-1]) == int(last.start_ns[-1])
            assert (
                snap.stream_row(total) == len(snap.stream.stream) - 1
                and snap.stream_row(total - tail) is None
            )
        tl = app.main.timeline
        assert page_rows(tl) == tail
    writer.close()
    assert sizes[0] == tail and max(sizes) == tail


@run_async
async def test_pause_freezes_the_stream_too(tmp_path):
    trace, feed, app, writer = _live_app(tmp_path, repeats=1)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        tl = app.main.timeline
        await pilot.press("p")
        n = _append_copies(writer, trace, 1)
        feed.put(StreamAdded(n, 500, 0))
        await wait_until(pilot, lambda: app.stream_updates >= 1)
        assert page_rows(tl) == 250 and app.pending is not None
        await pilot.press("p")
        assert page_rows(tl) == 500 and app.pending is None
    writer.close()


def test_stream_page_160x48(snap_compare, tmp_path, monkeypatch):
    """A stream page of the recorded GPT fixture: inferred regimes dimmer, unknown kernels neutral, a
    streamed kernel's details."""
    from tui_fakes import ROOT

    path = make_stream_recording(tmp_path)
    monkeypatch.chdir(ROOT)

    async def run_before(pilot):
        await analysed(pilot)
        await pilot.press("full_stop", "home", "right_square_bracket")
        await pilot.pause()

    assert snap_compare(make_app(path, None, None), terminal_size=(160, 48), run_before=run_before)

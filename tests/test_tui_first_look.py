"""A big recording opens on its newest window analysed alone, then on the whole phase once that is analysed."""

import threading

from tui_fakes import analysed, run_async, wait_until, write_recording

from analyzers.analyze import analyze as real_analyze
from brrrtui import session as live
from brrrtui.present.selection import Kind, Node
from brrrtui.present.status import status_spans
from brrrtui.recording.load import load_trace
from brrrtui.tui.app import make_app

SIZE = (160, 40)


def test_a_first_look_is_the_newest_window_analysed_alone(tmp_path):
    trace = load_trace(write_recording(str(tmp_path / "run.brrr"), windows=3))
    whole = live.analyse_trace(trace, None, 1)
    assert live.first_look(trace, None, 1) is None  # 489 events: small enough to analyse at once
    snap = live.first_look(trace, None, 1, min_events=0)
    assert snap is not None and snap.first_look and not whole.first_look
    newest = max(whole.windows)
    assert len(whole.windows) == 3 and snap.windows == [newest] and snap.first_look == tuple(whole.windows)
    assert snap.window_place(newest) == whole.window_place(newest) == (3, 3)  # as its pages count it
    assert len(snap.trace.gpu) == len(trace.gpu) // 3  # its rows only
    assert snap.analysis.notes[0] == (
        f"first look: window {newest} alone, the newest of 3 warm-up windows; all of them are being analysed"
    )
    one = load_trace(write_recording(str(tmp_path / "one.brrr"), windows=1))
    assert live.first_look(one, None, 1, min_events=0) is None  # nothing to look at first

    def failing(trace, peaks=None, windows=None, phase=None):
        raise ValueError("no")

    assert live.first_look(trace, None, 1, failing, min_events=0) is None  # the whole analysis says why


@run_async
async def test_the_view_shows_the_first_look_until_the_whole_phase_is_analysed(tmp_path, monkeypatch):
    monkeypatch.setattr(live, "FIRST_LOOK_EVENTS", 0)
    path = write_recording(str(tmp_path / "run.brrr"), windows=3)
    whole_started, release = threading.Event(), threading.Event()

    def analyze(trace, peaks=None, windows=None, phase=None):
        if windows is None:  # the whole phase: held until the test has seen the first look
            whole_started.set()
            assert release.wait(20)
        return real_analyze(trace, peaks, windows=windows, phase=phase)

    app = make_app(path, None, None, analyze=analyze)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None and whole_started.is_set())
        first = app.snapshot
        assert first.first_look and len(first.windows) == 1 and app.analyses == 0
        assert "analysing…" in "".join(chunk for chunk, _ in status_spans(app.state))
        assert app.main.timeline.window == first.windows[0]
        assert "timeline · warm-up window 3/3 · steps" in str(app.main.timeline.border_title)
        log = "\n".join(strip.text for strip in app.main.log_pane.lines)
        assert f"first look: window {first.windows[0]} alone" in log
        await pilot.press("P", "r")  # no phase or rank switch while the whole phase is analysed
        said = [str(n.message) for n in app._notifications]
        assert any("still running" in m for m in said) and any("Still analysing" in m for m in said)
        await pilot.press("l", "l", "enter")  # a kernel of the first look, drilled into
        shown = app.main.details.stack[1]
        assert shown.kind == Kind.KERNEL and int(first.trace.gpu.window[shown.key[0]]) == first.windows[0]
        release.set()
        await analysed(pilot)
        await pilot.pause()
        snap = app.snapshot
        assert not snap.first_look and len(snap.windows) == 3 and app.analyses == 1
        assert "analysing…" not in "".join(chunk for chunk, _ in status_spans(app.state))
        assert app.main.timeline.window == first.windows[0]  # still the page it opened on
        # the kernel at the cursor, as the whole analysis numbers its rows (not the first look's row number)
        node, sel = app.main.details.stack[-1], app.main.timeline.selection
        assert (
            node == Node(Kind.KERNEL, (sel.row,)) and int(snap.trace.gpu.window[sel.row]) == first.windows[0]
        )
        assert snap.trace.gpu.start_ns[sel.row] == first.trace.gpu.start_ns[shown.key[0]]
        log = "\n".join(strip.text for strip in app.main.log_pane.lines)
        # the whole analysis's opening lines follow the first look's
        assert "120 GPU activities in 3 warm-up window(s) of 3" in log

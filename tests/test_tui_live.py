"""The live path: a recorder (faked here) appends windows to a recording and announces them on the Feed."""

from tui_fakes import analysed, append_window, fake_analyze, run_async, wait_until, write_recording

from brrrtui.record.feed import Exited, Feed, LogLine, StepsAdded, TelemetrySample, WindowAdded
from brrrtui.recording.store import RecordingWriter
from brrrtui.tui.app import make_app
from brrrtui.tui.screens.confirm_quit import ConfirmQuit

SIZE = (120, 36)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@run_async
async def test_new_windows_flow_into_the_ui_and_pause_freezes_it(tmp_path):
    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    feed = Feed()
    clock = Clock()
    app = make_app(path, feed, "train.py", analyze=fake_analyze, poll_s=0.02, clock=clock)
    writer = RecordingWriter(path)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        main = app.main
        tl = main.timeline
        assert tl.window == 0
        assert app.state.running and app.state.live

        # the recorder lands window 1 and says so
        append_window(writer, 1, 40)
        feed.put(StepsAdded(last_step=3, count=2))
        feed.put(TelemetrySample(5, 87.0, 4.1e10, 610.0, 1980.0))
        feed.put(LogLine("stdout", "step 3 loss 0.25"))
        feed.put(LogLine("stderr", "warning: slow"))
        feed.put(WindowAdded(window=1, kernels=40, ops=41))
        await analysed(pilot, 2)
        assert tl.window == 1  # follows the newest window
        assert app.state.windows == 2 and app.state.steps == 4
        assert main.log_pane.lines_written >= 2
        log_text = "\n".join(strip.text for strip in main.log_pane.lines)
        assert "step 3 loss 0.25" in log_text and "warning: slow" in log_text
        assert main.query_one("#telemetry").cols["util"][-1] == 87.0
        assert "87%" in str(main.query_one("#telemetry").render())
        clock.t += 65
        await pilot.pause(1.1)  # the once-a-second tick
        assert "1:05" in str(main.query_one("#status").render())

        # paused: a new window is analysed but not shown until unpaused
        await pilot.press("p")
        append_window(writer, 2, 40)
        feed.put(WindowAdded(window=2, kernels=40, ops=41))
        await analysed(pilot, 3)
        assert tl.window == 1 and app.pending is not None
        assert app.state.windows == 3  # the header still counts what was captured
        await pilot.press("p")
        assert tl.window == 2 and app.pending is None

        # the script exits: the header says so and q no longer asks
        feed.put(Exited(0))
        await wait_until(pilot, lambda: not app.state.running)
        assert "finished, exit 0" in str(main.query_one("#status").render())
        await pilot.press("q")
        await pilot.pause()
        assert app._exit
    writer.close()


@run_async
async def test_live_app_starts_before_the_recording_exists(tmp_path):
    path = str(tmp_path / "later.brrr")
    feed = Feed()
    app = make_app(path, feed, "train.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        assert app.analyses == 0 and app.main.timeline.snapshot is None
        write_recording(path, windows=1)
        feed.put(WindowAdded(window=0, kernels=40, ops=41))
        await analysed(pilot)
        assert app.main.timeline.window == 0


@run_async
async def test_a_broken_recording_is_reported_not_raised(tmp_path):
    path = tmp_path / "bad.brrr"
    path.write_bytes(b"SQLite format 3\x00garbage" * 10)
    feed = Feed()
    app = make_app(str(path), feed, "train.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        feed.put(WindowAdded(window=0, kernels=1, ops=1))
        await analysed(pilot)
        assert app.state.error and "bad.brrr" in app.state.error
        assert app.state.error in str(app.main.query_one("#status").render())


@run_async
async def test_analysis_never_runs_on_the_ui_thread(tmp_path):
    import threading

    threads = []

    def analyze(trace):
        threads.append(threading.current_thread())
        return fake_analyze(trace)

    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    feed = Feed()
    app = make_app(path, feed, "train.py", analyze=analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        feed.put(WindowAdded(window=0, kernels=40, ops=41))
        feed.put(WindowAdded(window=0, kernels=40, ops=41))  # two in one drain: one more analysis, not two
        await analysed(pilot, 2)
        await pilot.pause(0.2)
    assert len(threads) == 2
    assert all(t is not threading.main_thread() for t in threads)


@run_async
async def test_ctrl_c_stops_the_script_and_ctrl_q_asks_like_q(tmp_path):
    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    feed = Feed()
    calls = []
    app = make_app(
        path, feed, "train.py", analyze=fake_analyze, poll_s=0.02, on_interrupt=lambda: calls.append(1)
    )
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("ctrl+q")  # while the script runs: asks, like q
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("n")
        assert not app._exit
        await pilot.press("ctrl+c")  # once: the recorder stops the script; the UI stays
        await pilot.pause()
        assert calls == [1] and not app._exit
        log = "\n".join(strip.text for strip in app.main.log_pane.lines)
        assert "stopping the script" in log
        feed.put(Exited(-2))  # the script ended on the SIGINT
        await wait_until(pilot, lambda: not app.state.running)
        assert "killed by SIGINT" in str(app.main.query_one("#status").render())
        await pilot.press("ctrl+q")  # the script has ended: no question
        await pilot.pause()
        assert app._exit


@run_async
async def test_ctrl_c_twice_kills_the_script_and_quits(tmp_path):
    path = write_recording(str(tmp_path / "run.brrr"), windows=1)
    calls = []
    app = make_app(
        path, Feed(), "train.py", analyze=fake_analyze, poll_s=0.02, on_interrupt=lambda: calls.append(1)
    )
    async with app.run_test(size=SIZE) as pilot:
        await analysed(pilot)
        await pilot.press("ctrl+c", "ctrl+c")
        await pilot.pause()
        assert calls == [1, 1] and app._exit

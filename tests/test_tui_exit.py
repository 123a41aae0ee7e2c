"""The script's end in live mode, with a real recorder: its exit reaches the header, the log and the recording
when it happens (not when the user quits), `q` then quits without asking, and its last output lines are
printed after the TUI (its traceback, which the log pane took off screen)."""

import sys

from tui_fakes import fake_analyze, run_async, wait_until

from brrrtui.record.feed import Exited, Feed
from brrrtui.record.recorder import Recorder, RunSpec
from brrrtui.recording.load import load_trace
from brrrtui.tui.app import make_app
from brrrtui.tui.screens.confirm_quit import ConfirmQuit

SIZE = (120, 36)
CRASH_PY = "print('step 1 loss 0.5')\nraise ValueError('boom [bold')\n"


def _spec(tmp_path) -> RunSpec:
    script = tmp_path / "crash.py"
    script.write_text(CRASH_PY)
    return RunSpec([str(script)], str(tmp_path / "run.brrr"), python=sys.executable, calibrate=False,
                   capture_output=True)  # fmt: skip


@run_async
async def test_the_exit_reaches_header_log_and_recording_while_the_ui_runs(tmp_path):
    spec = _spec(tmp_path)
    feed = Feed()
    recorder = Recorder(spec, feed=feed)
    recorder.start()
    recorder.wait_in_background()
    app = make_app(spec.out_path, feed, "crash.py", analyze=fake_analyze, poll_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.state.running, timeout_s=120)
        assert "finished, exit 1" in str(app.main.query_one("#status").render())
        log = "\n".join(strip.text for strip in app.main.log_pane.lines)
        assert "step 1 loss 0.5" in log
        assert "script finished, exit 1: ValueError: boom [bold" in log
        assert recorder.child is not None and recorder.child.returncode == 1  # reaped, no zombie
        meta = load_trace(spec.out_path).meta
        assert meta["exit_code"] == 1 and meta["ended_at_ns"] > 0  # written when it ended
        assert any("ValueError: boom" in line for line in meta["output_tail"])
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmQuit)
        assert app._exit
    assert recorder.finish() == 1


class _FakeApp:
    """Stands in for the TUI: runs until the script's Exited event arrives, like a user who waits."""

    def __init__(self, path, feed, script, on_interrupt=None, **options):  # options: make_app's (analyze=…)
        self.feed = feed

    def run(self):
        import time

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(isinstance(ev, Exited) for ev in self.feed.drain()):
                return
            time.sleep(0.05)
        raise AssertionError("the script's exit never reached the UI")


def test_live_run_prints_the_scripts_last_output_after_the_tui(tmp_path, monkeypatch, capsys):
    import brrrtui.cli as cli
    import brrrtui.tui.app

    spec = _spec(tmp_path)
    monkeypatch.setattr(cli, "_tui_available", lambda: True)
    monkeypatch.setattr(brrrtui.tui.app, "make_app", _FakeApp)
    code = cli.main(["-o", spec.out_path, "--no-calibrate", *spec.target])
    err = capsys.readouterr().err
    assert code == 1
    assert "step 1 loss 0.5" in err and "Traceback" in err and "ValueError: boom [bold" in err
    assert err.index("ValueError") < err.index("recording kept in")


def test_live_help_says_stdin_is_dev_null(capsys):
    import brrrtui.cli as cli

    try:
        cli.main(["--help"])
    except SystemExit:
        pass
    assert "stdin is /dev/null" in capsys.readouterr().out

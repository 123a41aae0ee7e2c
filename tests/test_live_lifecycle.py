"""The live run follows the script's process, not its output pipe, and a capture channel the script closes
is reported, not silent. Through the CLI: the live run in-process with a stand-in for the TUI (the real one
needs a terminal), the headless one as a user runs it."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from conftest import ROOT, SCRIPTS

from brrrtui.record.feed import Exited

EXIT_SEEN_S = 1.0  # the bound: the header leaves "running" within a second of the script's exit


class _WatchingApp:
    """Stands in for the TUI: runs until the script's Exited event arrives (at most 20 s), noting when."""

    seen_at: float | None = None

    def __init__(self, path, feed, script, on_interrupt=None, **options):
        self.feed = feed

    def run(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(isinstance(ev, Exited) for ev in self.feed.drain()):
                _WatchingApp.seen_at = time.time()
                return
            time.sleep(0.01)

    def exit(self):
        pass


def test_the_scripts_exit_is_seen_within_a_second_while_an_orphan_holds_its_stdout(
    tmp_path, monkeypatch, capsys
):
    import brrrtui.cli as cli
    import brrrtui.tui.app

    pidfile, exited, out = tmp_path / "orphan.pid", tmp_path / "exited", tmp_path / "run.brrr"
    monkeypatch.setattr(cli, "_tui_available", lambda: True)
    monkeypatch.setattr(brrrtui.tui.app, "make_app", _WatchingApp)
    monkeypatch.setenv("BRRRTUI_CALIBRATE", "0")
    _WatchingApp.seen_at = None
    try:
        t0 = time.monotonic()
        code = cli.main(["-o", str(out), "--no-calibrate", os.path.join(SCRIPTS, "orphan_stdout.py"), str(pidfile),
                         str(exited)])  # fmt: skip
        returned_s = time.monotonic() - t0
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    err = capsys.readouterr().err
    assert code == 0, err
    assert _WatchingApp.seen_at is not None, "the script's exit never reached the UI"
    lag = _WatchingApp.seen_at - float(exited.read_text())
    assert lag < EXIT_SEEN_S, f"the exit reached the UI {lag:.2f} s after the script's"
    assert returned_s < 20, returned_s  # the run ended with the script, not with its orphan
    db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    db.close()
    assert meta["status"] == "finished" and meta["exit_code"] == 0
    assert meta["ended_at_ns"] / 1e9 - float(exited.read_text()) < EXIT_SEEN_S
    assert "stdout: the script is done" in meta["output_tail"]
    assert "the script is done" in err  # its last lines, printed after the UI


def test_a_capture_channel_the_script_closes_is_reported_and_never_written_into_its_files(tmp_path):
    ready, folder, out = tmp_path / "ready", tmp_path / "files", tmp_path / "run.brrr"
    folder.mkdir()
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    r = subprocess.run(
        [sys.executable, "-m", "brrrtui", "record", "-o", str(out), "--no-calibrate",
         os.path.join(SCRIPTS, "closes_channel.py"), str(ready), str(folder)],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "the script closed brrrtui's capture channel" in r.stderr, r.stderr
    db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    db.close()
    assert any("closed brrrtui's capture channel" in n for n in meta["notes"]), meta.get("notes")
    assert meta["status"] == "finished"
    files = sorted(folder.iterdir())
    assert len(files) > 100
    written = [f.name for f in files if f.stat().st_size]
    assert written == [], f"brrrtui wrote into the script's files {written[:5]}"


class _TerminatedApp:
    """Stands in for the TUI: once the script is up, brrrtui itself gets SIGTERM (a supervisor stopping it);
    runs until the handler asks it to exit (at most 20 s)."""

    ready = ""

    def __init__(self, path, feed, script, on_interrupt=None, **options):
        self.exited = False

    def run(self):
        deadline = time.monotonic() + 20
        while not os.path.exists(_TerminatedApp.ready):
            assert time.monotonic() < deadline, "the script never got going"
            time.sleep(0.02)
        os.kill(
            os.getpid(), signal.SIGTERM
        )  # to this process: brrrtui's handler is in place while the UI runs
        while not self.exited and time.monotonic() < deadline:
            time.sleep(0.02)

    def exit(self):
        self.exited = True


def test_sigterm_to_the_live_run_reaches_the_script_and_finishes_the_recording(tmp_path, monkeypatch, capsys):
    import brrrtui.cli as cli
    import brrrtui.tui.app

    ready, out = tmp_path / "ready", tmp_path / "run.brrr"
    monkeypatch.setattr(cli, "_tui_available", lambda: True)
    monkeypatch.setattr(brrrtui.tui.app, "make_app", _TerminatedApp)
    _TerminatedApp.ready = str(ready)
    code = cli.main(
        ["-o", str(out), "--no-calibrate", os.path.join(SCRIPTS, "ready_then_sleep.py"), str(ready)]
    )
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGTERM, err
    pid = int(ready.read_text())
    try:
        os.kill(pid, 0)
        raise AssertionError("the script runs on")
    except ProcessLookupError:
        pass
    db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    db.close()
    assert meta["status"] == "killed by SIGTERM"
    assert meta["outcome"]["signals_passed_on"] == ["SIGTERM"]

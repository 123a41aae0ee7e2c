"""What was captured before a crash, a kill or Ctrl-C stays readable."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from conftest import ROOT, SCRIPTS

from brrrtui.recording.load import load_trace

FAST_WINDOWS = ["--window-steps", "2", "--duty", "1", "--min-gap", "0"]


def start(out: str, script: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    return subprocess.Popen(
        [sys.executable, "-m", "brrrtui", "record", "-o", out, *FAST_WINDOWS, os.path.join(SCRIPTS, script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_windows(out: str, n: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
            try:
                if db.execute("SELECT count(*) FROM windows").fetchone()[0] >= n:
                    return
            finally:
                db.close()
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"fewer than {n} windows in {out} after {timeout} s")


def child_pid(out: str) -> int:
    db = sqlite3.connect(out)
    try:
        return json.loads(db.execute("SELECT value FROM meta WHERE key='pid'").fetchone()[0])
    finally:
        db.close()


def test_kill_9_of_the_script_keeps_the_recording(tmp_path):
    out = str(tmp_path / "k.brrr")
    proc = start(out, "sleeper.py")
    wait_for_windows(out, 2)
    os.kill(child_pid(out), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 9
    assert "killed by SIGKILL" in err
    trace = load_trace(out)
    assert len(trace.windows) >= 2 and len(trace.ops) > 0 and len(trace.steps) > 0
    assert trace.meta["status"] == "killed by SIGKILL"


def test_kill_9_of_brrrtui_keeps_the_recording_and_the_script_runs_on(tmp_path):
    out = str(tmp_path / "p.brrr")
    proc = start(out, "sleeper.py")
    wait_for_windows(out, 2)
    pid = child_pid(out)
    proc.kill()
    proc.wait(timeout=30)
    try:
        trace = load_trace(out)  # while the orphaned script still runs
        assert len(trace.windows) >= 2 and len(trace.ops) > 0
        assert trace.meta["status"] == "running"
        time.sleep(0.5)
        os.kill(pid, 0)  # the script was not taken down with brrrtui
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_ctrl_c_once_stops_the_script_and_keeps_the_recording(tmp_path):
    out = str(tmp_path / "c.brrr")
    proc = start(out, "sleeper.py")
    wait_for_windows(out, 2)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "KeyboardInterrupt" in err  # the script's own traceback, as without brrrtui
    trace = load_trace(out)
    assert len(trace.windows) >= 2
    assert trace.meta["status"] == "killed by SIGINT"


def test_ctrl_c_twice_stops_brrrtui_even_if_the_script_ignores_it(tmp_path):
    out = str(tmp_path / "s.brrr")
    proc = start(out, "stubborn.py")
    wait_for_windows(out, 1)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Ctrl-C again to stop brrrtui" in err
    trace = load_trace(out)
    assert len(trace.windows) >= 1
    assert "stopped with Ctrl-C" in trace.meta["status"]

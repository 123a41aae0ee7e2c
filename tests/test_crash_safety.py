"""What was captured before a crash, a kill or Ctrl-C stays readable."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from conftest import ROOT, SCRIPTS, run_brrrtui

from brrrtui.recording.load import load_trace

FAST_WINDOWS = ["--window-steps", "2", "--duty", "1", "--min-gap", "0"]


def start(out: str, script: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    return subprocess.Popen(
        [sys.executable, "-m", "brrrtui", "record", "-o", out, *FAST_WINDOWS, os.path.join(SCRIPTS, script),
         *args],
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
        # it says "running", but no recorder holds it: incomplete, and since when
        assert trace.meta["status"].startswith("incomplete (stopped at ")
        assert "the last batch was committed at" in trace.meta["load_notes"][-1]
        report = run_brrrtui("report", out)
        assert report.returncode == 0 and "note: this recording is incomplete" in report.stdout
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


def test_sigterm_of_the_script_still_sends_its_last_steps(tmp_path):
    out, marker = str(tmp_path / "t.brrr"), str(tmp_path / "done")
    proc = start(out, "quick_steps.py", marker)
    deadline = time.time() + 60
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.1)
    os.kill(child_pid(out), signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 15, err
    trace = load_trace(out)
    assert trace.meta["status"] == "killed by SIGTERM"
    assert len(trace.steps) == 300  # the steps after the last batch arrived too


def test_ctrl_c_inside_the_profilers_start_keeps_every_step(tmp_path):
    """The interrupted window never opened: nothing to close at exit, and the steps not yet sent still go."""
    out, done = str(tmp_path / "i.brrr"), str(tmp_path / "done")
    proc = start(out, "interrupted_open.py", done)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "KeyboardInterrupt" in err and "could not finish cleanly" not in err, err
    trace = load_trace(out)
    assert len(trace.windows) == 2
    assert len(trace.steps) == int(open(done).read()) + 1  # the step whose hook was interrupted too


def test_a_second_recorder_of_the_same_file_is_refused_and_the_first_keeps_its_data(tmp_path):
    out = str(tmp_path / "same.brrr")
    first = start(out, "sleeper.py")
    try:
        wait_for_windows(out, 1)
        second = run_brrrtui("record", "-o", out, os.path.join(SCRIPTS, "exit3.py"))
        assert second.returncode == 2 and "Traceback" not in second.stderr
        assert second.stderr.strip().splitlines() == [second.stderr.strip()]
        assert "is being recorded by another brrrtui" in second.stderr
        wait_for_windows(out, 2)
    finally:
        os.kill(child_pid(out), signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 128 + 15 and "Traceback" not in err, err
    assert len(load_trace(out).windows) >= 2
    assert not os.path.exists(out + ".lock")


def test_a_recording_deleted_mid_run_continues_in_a_sibling_and_keeps_the_exit_code(tmp_path):
    out, marker = str(tmp_path / "gone.brrr"), str(tmp_path / "done")
    proc = start(out, "quick_steps.py", marker)
    wait_for_windows(out, 1)
    pid = child_pid(out)
    os.remove(out)
    deadline = time.time() + 60
    while not (os.path.exists(out + ".1") and os.path.exists(marker)) and time.time() < deadline:
        time.sleep(0.1)
    os.kill(pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 15 and "Traceback" not in err, err
    assert err.count(f"the recording continues in {out}.1") == 1, err
    assert f"-> {out}.1 (brrrtui view {out}.1)" in err
    trace = load_trace(out + ".1")
    assert len(trace.windows) >= 1 and len(trace.steps) == 300  # what the deleted file held, and the rest
    assert trace.meta["status"] == "killed by SIGTERM"

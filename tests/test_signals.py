"""Signals reach the script as they would without brrrtui, and the recording says how the run ended.

End to end through the CLI (`python -m brrrtui record ...`), brrrtui in a process group of its own with the
script, as under a terminal. A terminal's Ctrl-C is modelled by SIGINT to that group (what the terminal
does: the script and brrrtui both receive it), `kill PID` by SIGINT to brrrtui alone."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SCRIPTS, run_brrrtui
from tui_fakes import run_async, wait_until

from brrrtui.recording.load import load_trace

TIMEOUT_S = 60


def start(tmp_path, script: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    return subprocess.Popen(
        [sys.executable, "-m", "brrrtui", "record", "-o", str(tmp_path / "run.brrr"), "--no-calibrate",
         os.path.join(SCRIPTS, script), *args],
        env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def wait_for(path: str, proc: subprocess.Popen, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise AssertionError(f"brrrtui ended before {path} appeared: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.02)
    time.sleep(0.05)  # the file is written whole


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, err


def meta(path) -> dict:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def send(proc: subprocess.Popen, sig: int, to: str) -> None:
    if to == "group":
        os.killpg(proc.pid, sig)  # a terminal's Ctrl-C (or hang-up): every process of the foreground group
    else:
        os.kill(proc.pid, sig)  # `kill PID`: brrrtui alone


# ---------------------------------------------------------------- Ctrl-C


@pytest.mark.parametrize("to", ["group", "alone"])
def test_one_ctrl_c_is_one_sigint_and_the_checkpoint_save_completes(tmp_path, to):
    """The script saves 40 chunks in its KeyboardInterrupt handler (3.2 s); plain Python saves all 40. A second
    SIGINT from brrrtui cut it short at ~25."""
    out, ready = str(tmp_path / "chunks"), str(tmp_path / "ready")
    proc = start(tmp_path, "checkpoint_on_ctrl_c.py", out, ready)
    wait_for(ready, proc)
    send(proc, signal.SIGINT, to)
    code, err = finish(proc)
    assert open(out).read() == "40", err
    assert "saved 40 chunks" not in err and err.count("KeyboardInterrupt") == 0, err
    assert code == 0, err
    m = meta(tmp_path / "run.brrr")
    assert m["status"] == "finished"
    assert m["outcome"]["signals_received"] == ["SIGINT"]
    assert m["outcome"]["signals_passed_on"] == ([] if to == "group" else ["SIGINT"])


@pytest.mark.parametrize("to", ["group", "alone"])
def test_a_second_ctrl_c_stops_the_script_at_once(tmp_path, to):
    out, ready = str(tmp_path / "chunks"), str(tmp_path / "ready")
    proc = start(tmp_path, "checkpoint_on_ctrl_c.py", out, ready, "sleep", "400", "0.05")  # a 20 s save
    wait_for(ready, proc)
    send(proc, signal.SIGINT, to)
    wait_for(out, proc)  # saving
    t0 = time.monotonic()
    send(proc, signal.SIGINT, to)
    code, err = finish(proc)
    assert time.monotonic() - t0 < 10
    assert code == 130, err
    assert int(open(out).read()) < 400
    assert "stopped with Ctrl-C" in meta(tmp_path / "run.brrr")["status"]


# ---------------------------------------------------------------- SIGTERM and SIGHUP


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("to", ["group", "alone"])
def test_sigterm_and_sighup_reach_a_script_that_handles_them_once(tmp_path, sig, to):
    """The script handles the signal and works on 1.5 s: it sees it once, the recording is finished."""
    out, ready = str(tmp_path / "signals"), str(tmp_path / "ready")
    name = signal.Signals(sig).name
    proc = start(tmp_path, "signal_counter.py", out, ready, "1.5", name)
    wait_for(ready, proc)
    send(proc, sig, to)
    code, err = finish(proc)
    assert open(out).read().split() == [name], err
    assert code == 0, err
    m = meta(tmp_path / "run.brrr")
    assert m["status"] == "finished" and m["exit_code"] == 0 and m["outcome"]["signals_received"] == [name]
    assert m["outcome"]["signals_passed_on"] == ([] if to == "group" else [name])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_to_brrrtui_end_the_script_and_finish_the_recording(tmp_path, sig):
    """Sent to brrrtui alone: the script gets it (here its default action ends it), brrrtui finishes the
    recording and exits as the script did. SIGHUP used to kill brrrtui at once: the recording stayed
    "running" and the script ran on."""
    ready = str(tmp_path / "ready")
    proc = start(tmp_path, "ready_then_sleep.py", ready)
    wait_for(ready, proc)
    pid = int(open(ready).read())
    send(proc, sig, "alone")
    code, err = finish(proc)
    name = signal.Signals(sig).name
    assert code == 128 + sig, err
    assert f"script was killed by {name}" in err
    deadline = time.monotonic() + 5
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid), "the script runs on"
    trace = load_trace(str(tmp_path / "run.brrr"))
    assert trace.meta["status"] == f"killed by {name}"
    assert trace.meta["outcome"]["signals_passed_on"] == [name]
    report = run_brrrtui("report", str(tmp_path / "run.brrr"))
    assert report.returncode == 0, report.stderr
    assert f"note: the script's run ended: killed by {name}" in report.stdout
    assert "killed or crashed" not in report.stdout


# ---------------------------------------------------------------- the recorded status


def test_a_script_that_raised_is_recorded_as_raised_not_finished(tmp_path):
    proc = start(tmp_path, "raises.py")
    code, err = finish(proc)
    assert code == 1 and "ValueError: boom from the script" in err
    trace = load_trace(str(tmp_path / "run.brrr"))
    assert trace.meta["status"] == "raised ValueError (exit code 1)"
    assert trace.meta["outcome"] == {"exit_code": 1, "exception": "ValueError"}
    report = run_brrrtui("report", str(tmp_path / "run.brrr"))
    assert "note: the script's run ended: raised ValueError (exit code 1)" in report.stdout, report


def test_an_exit_code_is_recorded_as_such(tmp_path):
    proc = start(tmp_path, "exit3.py")
    code, err = finish(proc)
    assert code == 3, err
    trace = load_trace(str(tmp_path / "run.brrr"))
    assert trace.meta["status"] == "exited with code 3" and trace.meta["outcome"] == {"exit_code": 3}


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of its own (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_disk_full_run_is_recorded_as_disk_full_not_killed_or_crashed(tmp_path, small_disk):
    out, ready, go = small_disk / "run.brrr", str(tmp_path / "ready"), str(tmp_path / "go")
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "brrrtui", "record", "-o", str(out), "--no-calibrate",
         os.path.join(SCRIPTS, "wait_then_exit.py"), ready, go, "3"],
        env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    wait_for(ready, proc)
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)  # the rest of the disk
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    open(go, "w").close()
    code, err = finish(proc)
    assert code == 3, err
    assert "Traceback" not in err
    (small_disk / "filler").unlink()  # room for the reader's own journal check
    trace = load_trace(str(out))
    assert trace.meta["status"] == "exited with code 3; recording cut short: disk full", trace.meta
    assert trace.meta["outcome"]["disk_full"] is True
    report = run_brrrtui("report", str(out))
    assert "killed or crashed" not in report.stdout
    assert "recording cut short: disk full" in report.stdout


@run_async
async def test_the_view_header_says_how_the_recorded_run_ended(tmp_path):
    from brrrtui.tui.app import make_app

    proc = start(tmp_path, "raises.py")
    finish(proc)
    app = make_app(str(tmp_path / "run.brrr"), feed=None, script=None)
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_until(pilot, lambda: app.analyses >= 1 or app.load_error is not None, timeout_s=60)
        header = str(app.main.query_one("#status").render())
        assert "▣ recording: raised ValueError (exit code 1)" in header, header
        log = "\n".join(strip.text for strip in app.main.log_pane.lines)
        assert "the script's run ended: raised ValueError (exit code 1)" in log

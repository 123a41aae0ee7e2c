"""Signal timing, generated: a Ctrl-C at any moment of a run, to the process group or to brrrtui alone, with
the script asleep or busy in Python. Each example is a real `brrrtui record` run, bounded in time (a hang is a
failure). A few examples in the normal suite; BRRRTUI_SIGNAL_EXAMPLES=N runs N."""

import os
import signal
import subprocess
import sys
import tempfile
import time

from conftest import ROOT, SCRIPTS
from hypothesis import HealthCheck, given, settings, strategies as st

from brrrtui.recording.load import load_trace

EXAMPLES = int(os.environ.get("BRRRTUI_SIGNAL_EXAMPLES", "5"))
RUN_S = 60  # one run, start to end
CHUNKS, CHUNK_S = "12", "0.2"  # the checkpoint the script saves on Ctrl-C: 2.4 s, past every grace period

timing = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    database=None,
)


def record(folder: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    return subprocess.Popen(
        [sys.executable, "-m", "brrrtui", "record", "-o", os.path.join(folder, "run.brrr"), "--no-calibrate",
         os.path.join(SCRIPTS, "checkpoint_on_ctrl_c.py"), *args],
        env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def ended(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=RUN_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("brrrtui hung") from None
    return proc.returncode, err


def ctrl_c(proc: subprocess.Popen, to: str) -> None:
    try:
        os.killpg(proc.pid, signal.SIGINT) if to == "group" else os.kill(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        pass


@timing
@given(
    delay=st.floats(0, 0.5),
    to=st.sampled_from(["group", "alone"]),
    work=st.sampled_from(["sleep", "busy"]),
)
def test_one_ctrl_c_while_the_script_works_is_one_sigint(delay, to, work):
    with tempfile.TemporaryDirectory() as folder:
        out, ready = os.path.join(folder, "chunks"), os.path.join(folder, "ready")
        proc = record(folder, out, ready, work, CHUNKS, CHUNK_S)
        deadline = time.monotonic() + RUN_S
        while not os.path.exists(ready):
            assert proc.poll() is None and time.monotonic() < deadline, "the script never got going"
            time.sleep(0.01)
        time.sleep(delay)
        ctrl_c(proc, to)
        code, err = ended(proc)
        assert open(out).read() == CHUNKS, err  # a second SIGINT cuts the save short
        assert code == 0, err
        meta = load_trace(os.path.join(folder, "run.brrr")).meta
        assert meta["status"] == "finished"


@timing
@given(after=st.floats(0, 2.0), to=st.sampled_from(["group", "alone"]))
def test_a_ctrl_c_at_any_moment_of_the_start_ends_the_run_cleanly(after, to):
    """From brrrtui's own start through the script's: the run ends (no hang, no orphan), brrrtui's exit code
    is the script's, the recording is finished and says how, and the script, once its handler is in, saved
    its checkpoint whole."""
    with tempfile.TemporaryDirectory() as folder:
        out, ready = os.path.join(folder, "chunks"), os.path.join(folder, "ready")
        proc = record(folder, out, ready, "sleep", CHUNKS, CHUNK_S)
        time.sleep(after)
        ctrl_c(proc, to)
        code, err = ended(proc)
        path = os.path.join(folder, "run.brrr")
        if not os.path.exists(path):  # brrrtui itself was still starting: nothing started
            if err.startswith("Fatal Python error: init_import_site"):  # the interpreter's own start
                return
            assert code in (130, -signal.SIGINT), err
            if err != "brrrtui: interrupted\n":  # or in the interpreter's start, before cli.main ran
                assert err == "" or err.endswith("KeyboardInterrupt\n") and "cli.py" not in err, err
            return
        assert "brrrtui/" not in err.replace(SCRIPTS, ""), err  # no traceback through brrrtui's code
        if os.path.exists(ready) and os.path.exists(out):
            assert open(out).read() == CHUNKS, err
        meta = load_trace(path).meta
        assert meta["status"] in ("finished", "killed by SIGINT", "raised KeyboardInterrupt (exit code 1)"), (
            meta
        )
        assert code == (0 if meta["status"] == "finished" else 130 if "SIGINT" in meta["status"] else 1), err
        pid = meta.get("pid")
        if isinstance(pid, int):
            try:
                os.kill(pid, 0)
                raise AssertionError("the script outlived brrrtui")
            except ProcessLookupError:
                pass

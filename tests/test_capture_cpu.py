"""The capture path end to end on the CPU: the same commands a user runs, on scripts with known lines."""

import json
import os
import sqlite3
import sys
import time

import numpy as np
import pytest
from conftest import SCRIPTS, line_of, run_brrrtui

from analyzers.link.links import link
from brrrtui.recording.load import load_trace

TRAIN = os.path.join(SCRIPTS, "train_lines.py")
SIBLING = os.path.join(SCRIPTS, "sibling.py")


def at(marker: str, path: str = TRAIN) -> tuple[str, int]:
    return os.path.basename(path), line_of(path, marker)


def meta(path: str) -> dict:
    db = sqlite3.connect(path)
    try:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()


@pytest.fixture(scope="module")
def train_recording(tmp_path_factory) -> tuple[str, object]:
    out = str(tmp_path_factory.mktemp("rec") / "train.brrr")
    # --window-steps 2 and a duty of 1.0 (no spacing): several windows in a short run
    proc = run_brrrtui(
        "record",
        "-o",
        out,
        "--window-steps",
        "2",
        "--duty",
        "1",
        "--min-gap",
        "0",
        TRAIN,
        "40",
        "--help",
        "-o",
        "x",
    )
    return out, proc


def test_record_passes_arguments_and_output_through(train_recording):
    out, proc = train_recording
    assert proc.returncode == 0, proc.stderr
    # everything after the script belongs to it, even flags that look like brrrtui's own
    assert f"argv ['{TRAIN}', '40', '--help', '-o', 'x'] __main__ True" in proc.stdout
    assert "brrrtui: no CUDA GPU: recording CPU ops and source lines only" in proc.stderr
    assert proc.stderr.count("no CUDA GPU") == 1
    # Kineto's own log lines (USDT: ... profiler_start/stop, one pair per window) stay off the script's stderr
    assert "USDT:" not in proc.stderr and "profiler_stop" not in proc.stderr


def test_recording_holds_every_step_and_the_run_facts(train_recording):
    out, _ = train_recording
    m = meta(out)
    assert m["status"] == "finished" and m["exit_code"] == 0
    assert m["argv"] == [TRAIN, "40", "--help", "-o", "x"]
    assert m["cwd"] and m["started_at_ns"] < m["ended_at_ns"]
    trace = load_trace(out)
    assert trace.steps.step.tolist() == list(range(40))  # one timestamp per optimizer step, not only windows
    assert np.all(np.diff(trace.steps.t_ns) > 0)
    assert len(trace.windows) >= 2
    step_windows = trace.windows.mode == 0  # (a time window may also open during set-up, before any step)
    assert step_windows.sum() >= 2
    assert (trace.windows.last_step[step_windows] - trace.windows.first_step[step_windows]).max() == 1
    # every step's optimizer.step() is timed, and from the second step on the zero_grad() before it
    opt_ns, zero_grad_ns = trace.steps.optimizer_ns, trace.steps.zero_grad_ns
    assert (opt_ns > 0).all() and (opt_ns < np.diff(trace.steps.t_ns, prepend=0)).all()
    assert zero_grad_ns[0] == -1 and (zero_grad_ns[1:] > 0).all()


def test_operators_and_module_calls_resolve_to_their_exact_line(train_recording):
    out, _ = train_recording
    trace = load_trace(out)
    links = link(trace)

    # Step windows open and close at step boundaries, so each backward op's forward op is in its window. The
    # time-based window at set-up opens at whatever line the script is on when its tick lands (under load,
    # inside step 0's forward): a backward op whose forward it missed takes its `loss.backward()` line.
    step_windows = trace.windows.window[trace.windows.mode == 0]

    def lines_of(op_name: str) -> set[tuple[str, int]]:
        rows = np.nonzero((trace.ops.name == trace.sid(op_name)) & np.isin(trace.ops.window, step_windows))[0]
        return {
            (os.path.basename(trace.lines[i].file), trace.lines[i].line)
            for i in links.op_line[rows]
            if i >= 0
        }

    # x @ w, and the mm inside lin(z)'s backward (AddmmBackward0), which belongs to lin(z)'s line
    assert lines_of("aten::mm") == {at("matmul"), at("module")}
    assert lines_of("aten::mul") >= {at("scale"), at("double", SIBLING)}  # 0.5 * y; t * 2 in a sibling
    assert lines_of("aten::addmm") == {at("module")}  # lin(z) resolves to the calling line
    # backward nodes take the line of the forward op that created them
    assert lines_of("autograd::engine::evaluate_function: AddmmBackward0") == {at("module")}
    assert lines_of("autograd::engine::evaluate_function: MulBackward0") == {at("double", SIBLING)}
    assert lines_of("autograd::engine::evaluate_function: ReluBackward0") == {at("sibling_call")}
    # the optimizer's ops come from the opt.step() line
    assert at("step") in lines_of("aten::add_") | lines_of("aten::_foreach_add_")


def test_exit_code_and_traceback_match_plain_python(tmp_path):
    import subprocess

    proc = run_brrrtui("record", "-o", str(tmp_path / "e.brrr"), os.path.join(SCRIPTS, "exit3.py"))
    assert proc.returncode == 3
    assert meta(str(tmp_path / "e.brrr"))["exit_code"] == 3

    script = os.path.join(SCRIPTS, "raises.py")
    ours = run_brrrtui("record", "-o", str(tmp_path / "r.brrr"), script)
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True)
    assert ours.returncode == plain.returncode == 1
    own_lines = [ln for ln in ours.stderr.splitlines() if not ln.startswith("brrrtui: ")]
    assert own_lines == plain.stderr.splitlines()  # not one frame of brrrtui's in it


def test_module_mode_runs_like_python_dash_m(tmp_path):
    proc = run_brrrtui("record", "-o", str(tmp_path / "m.brrr"), "-m", "pkg", "--flag", cwd=SCRIPTS)
    assert proc.returncode == 0, proc.stderr
    assert "module run __main__ ['--flag']" in proc.stdout


def test_time_based_windows_without_an_optimizer(tmp_path):
    out = str(tmp_path / "i.brrr")
    proc = run_brrrtui("record", "-o", out, os.path.join(SCRIPTS, "infer_loop.py"), "3")
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    assert len(trace.windows) >= 1 and set(trace.windows.mode.tolist()) == {1}
    # a 0.2 s time window closes at the next user statement after its deadline (before the line trace that
    # finds it, a tight op loop kept it open 1.4-2.9 s)
    assert (trace.windows.end_ns[0] - trace.windows.start_ns[0]) / 1e9 < 1.0
    assert len(trace.steps) == 0
    links = link(trace)
    tanh = np.nonzero(trace.ops.name == trace.sid("aten::tanh"))[0]
    assert len(tanh) > 0
    assert {trace.lines[i].line for i in links.op_line[tanh]} == {
        line_of(os.path.join(SCRIPTS, "infer_loop.py"), "tanh")
    }


def test_a_time_window_sized_by_a_slow_set_up_still_closes_near_the_event_budget(tmp_path):
    """The first time window sees a trickle of calls, so by event rate alone the next would run to the 2 s cap
    in the flood that follows (on the H200: 212 k events, a 1.8 s stall); counting torch calls closes it."""
    out = str(tmp_path / "b.brrr")
    proc = run_brrrtui(
        "record", "-o", out, "--duty", "1", "--min-gap", "0.5", os.path.join(SCRIPTS, "bursty_infer.py"), "3"
    )
    assert proc.returncode == 0, proc.stderr
    w = load_trace(out).windows
    seconds = ((w.end_ns - w.start_ns) / 1e9).tolist()
    assert len(w) >= 2 and max(w.events.tolist()) > 5_000, (seconds, w.events.tolist())  # one saw the flood
    assert max(seconds) < 1.0 and max(w.events.tolist()) < 150_000, (seconds, w.events.tolist())


def test_steps_aside_when_the_script_profiles_itself(tmp_path):
    proc = run_brrrtui("record", "-o", str(tmp_path / "p.brrr"), os.path.join(SCRIPTS, "own_profiler.py"))
    assert proc.returncode == 0, proc.stderr
    assert "own profiler saw aten::addmm: True" in proc.stdout
    assert proc.stderr.count("stepped aside") == 1


def test_dataloader_workers_fork_and_spawn(tmp_path):
    proc = run_brrrtui(
        "record", "-o", str(tmp_path / "d.brrr"), os.path.join(SCRIPTS, "dataloader_workers.py")
    )
    assert proc.returncode == 0, proc.stderr
    assert "fork 2016.0" in proc.stdout and "spawn 2016.0" in proc.stdout


def test_a_line_that_calls_no_torch_is_sampled_and_charged_with_the_idle_it_causes(tmp_path):
    import json as _json

    script = os.path.join(SCRIPTS, "sleepy.py")
    out = str(tmp_path / "s.brrr")
    proc = run_brrrtui("record", "-o", out, "--window-steps", "2", "--min-gap", "0", "--duty", "1", script)
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    sampled = [trace.lines[i].line for i in trace.line_samples.line.tolist()]
    sleep_line = line_of(script, "sleep")
    assert len(sampled) > 20 and sampled.count(sleep_line) / len(sampled) > 0.8  # 30 ms of each ~31 ms step
    # the main thread's CPU clock, read with each sample, stands still in the sleep
    cpu, t = trace.line_samples.cpu_ns, trace.line_samples.t_ns
    if hasattr(time, "pthread_getcpuclockid"):
        assert (cpu >= 0).all() and (cpu[-1] - cpu[0]) < 0.3 * (t[-1] - t[0])
    report = _json.loads(run_brrrtui("report", "--json", out).stdout)
    top = report["lines"][0]
    assert (os.path.basename(top["file"]), top["line"]) == ("sleepy.py", sleep_line)
    assert (
        top["idle_ns"] == 0 and top["host_ns"] == top["sampled_ns"] > 0 and top["kernels"] == 0
    )  # no GPU: no idle


def test_without_a_gpu_the_report_gives_cpu_time_per_line_and_no_gpu_advice(tmp_path):
    """examples/known_regimes.py on the CPU: its time.sleep and tiny-op loop lines are listed with the time the
    main thread spent on them, and nothing speaks of GPU idle, CUDA graphs or --peaks."""
    import json as _json

    script = os.path.join(os.path.dirname(os.path.dirname(SCRIPTS)), "examples", "known_regimes.py")
    out = str(tmp_path / "k.brrr")
    args = ("--device", "cpu", "--scale", "0.01", "--steps", "20", "--sleep-ms", "20")
    proc = run_brrrtui("record", "-o", out, "--duty", "1", "--min-gap", "0", script, *args)
    assert proc.returncode == 0, proc.stderr
    text = run_brrrtui("report", out).stdout
    assert "CPU time per line" in text and "no GPU verdicts or advice" in text
    for gpu_talk in ("CUDA graphs", "--peaks", "GPU waits", "reduce-overhead"):
        assert gpu_talk not in text
    doc = _json.loads(run_brrrtui("report", "--json", out).stdout)
    assert doc["findings"] == []
    sampled = {ln["line"]: ln["sampled_ns"] for ln in doc["lines"]}
    with open(script) as f:
        sleep_line = next(n for n, text in enumerate(f, 1) if "time.sleep(" in text)
    assert sampled.get(sleep_line, 0) > 0  # a line that calls no torch


def test_a_script_that_looks_torch_up_before_importing_it_is_still_recorded(tmp_path):
    """transformers calls importlib.util.find_spec("torch") on import: the import watcher answered that probe,
    left sys.meta_path, and missed the real `import torch` (an HF script that imports transformers first
    recorded no step and no window)."""
    from fixtures.recording import record

    proc, out = record(tmp_path, "probe_torch_first.py")
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    assert len(trace.steps) == 200 and len(trace.windows) >= 1 and len(trace.ops) > 0

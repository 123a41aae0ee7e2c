"""A distributed run end to end on the CPU: torchrun, gloo, two ranks, the command a user types. Every worker
rank is traced into its own recording, the launcher is not, and the windows of both ranks cover the same
steps. Rank 1 sleeps 30 ms more per step (tests/scripts/ddp_train.py)."""

import dataclasses
import json
import os
import sqlite3

import pytest
from conftest import ROOT, SCRIPTS, line_of, run_brrrtui

from analyzers.comm.clocks import clock_offsets
from brrrtui.contract.model import Table
from brrrtui.recording.load import load_trace

DDP = os.path.join(SCRIPTS, "ddp_train.py")
STEPS = 150


def meta(path: str) -> dict:
    db = sqlite3.connect(path)
    try:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "run.brrr"
    proc = run_brrrtui(
        "record", "-o", str(out), "--duty", "0.5", "--min-gap", "0",
        "-m", "torch.distributed.run", "--nproc_per_node=2", DDP, str(STEPS), "1", "0.03",
        timeout=300,
    )  # fmt: skip
    return out, proc


def test_every_rank_is_traced_into_its_own_recording(ddp_run):
    out, proc = ddp_run
    assert proc.returncode == 0, proc.stderr
    for r in (0, 1):  # the script ran as torchrun runs it: its own argv, every rank to the end
        assert f"rank {r} of 2 done" in proc.stdout and f"argv ['{STEPS}', '1', '0.03']" in proc.stdout
    run = meta(str(out))
    assert run["status"] == "finished" and run["exit_code"] == 0
    ranks = run["dist"]["ranks"]
    assert [e["rank"] for e in ranks] == [0, 1] and run["dist"]["world_size"] == 2
    assert [e["file"] for e in ranks] == ["run.rank0.brrr", "run.rank1.brrr"]
    assert "2 ranks recorded: run.rank0.brrr" in proc.stderr
    progress = [line for line in proc.stderr.splitlines() if "brrrtui: rank" in line]
    assert progress and all(line.count("brrrtui:") == 1 for line in progress)  # two ranks' lines never mix
    for r in (0, 1):
        path = out.parent / f"run.rank{r}.brrr"
        m = meta(str(path))
        assert m["dist"]["rank"] == r and m["dist"]["world_size"] == 2 and m["dist"]["run"] == "run.brrr"
        assert m["status"] == "finished" and m["exit_code"] == 0
        assert m["pid"] != run["pid"]  # the worker, not the launcher
    # the launcher itself is not traced: its recording holds no window and no step
    db = sqlite3.connect(str(out))
    assert db.execute("SELECT COUNT(*) FROM windows").fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM steps").fetchone() == (0,)
    db.close()


def test_both_ranks_record_every_step_and_their_step_windows_cover_the_same_steps(ddp_run):
    out, _ = ddp_run
    traces = [load_trace(str(out.parent / f"run.rank{r}.brrr")) for r in (0, 1)]
    spans = []
    for trace in traces:
        assert trace.steps.step.tolist() == list(range(STEPS))
        w = trace.windows
        step_windows = w.mode == 0
        spans.append(
            list(zip(w.first_step[step_windows].tolist(), w.last_step[step_windows].tolist(), strict=True))
        )
    assert len(spans[0]) >= 2, spans
    assert spans[0] == spans[1]
    # each window holds the all-reduce of the steps it covers, on both ranks
    for trace in traces:
        names = {trace.strings[i] for i in trace.ops.name}
        assert "c10d::allreduce_" in names


def test_opening_the_run_gives_rank_0_and_the_set(ddp_run):
    out, _ = ddp_run
    trace = load_trace(str(out))  # what `view run.brrr` and `report run.brrr` open
    assert trace.meta["dist"]["rank"] == 0 and len(trace.windows) >= 2
    rank_set = trace.meta["rank_set"]
    assert rank_set["shown"] == 0 and sorted(rank_set["files"]) == [0, 1]
    assert any("a run of 2 ranks: rank 0 is shown" in n for n in trace.meta["load_notes"])
    one = load_trace(str(out.parent / "run.rank1.brrr"))  # a rank file opens as itself, with the set
    assert one.meta["rank_set"]["shown"] == 1 and one.meta["rank_set"]["files"] == rank_set["files"]


def test_the_report_names_the_slowed_rank_and_its_line(ddp_run):
    out, _ = ddp_run
    text = run_brrrtui("report", str(out))
    assert text.returncode == 0, text.stderr
    assert "Ranks: 2 (" in text.stdout and "windows on the same steps on every rank" in text.stdout
    slow_line = line_of(DDP, "slow")
    assert "Straggler: rank 1, late by " in text.stdout
    assert f"its line: ddp_train.py:{slow_line} (<module>)" in text.stdout
    doc = json.loads(run_brrrtui("report", "--json", str(out)).stdout)
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1] and ranks["unaligned_windows"] == 0
    s = ranks["straggler"]
    assert s["rank"] == 1 and s["basis"] == "communication" and s["line"]["line"] == slow_line
    # rank 1 sleeps 30 ms more per step; the CPU is shared with other jobs, so allow a wide band
    assert 15e6 < s["late_ns"] < 45e6
    waits = [r["comm_ns_per_step"] for r in ranks["ranks"]]
    assert waits[0] > waits[1] + 15e6  # rank 0 waits in the all-reduce for rank 1


def test_brrrtui_torchrun_and_a_rank_killed_mid_run(tmp_path):
    """`brrrtui torchrun ARGS` (default output named after the training script); rank 1 SIGKILLs itself at
    step 150: its committed windows stay readable, rank 0 dies of the broken all-reduce, and brrrtui exits
    with the launcher's exit code. torchrun checks its workers every 2 s here (0.1 s by default): its SIGTERM
    to rank 0 must not beat gloo's error, or rank 0 too ends without saying goodbye."""
    proc = run_brrrtui(
        "--duty", "0.5", "--min-gap", "0", "torchrun", "--nproc_per_node=2", "--monitor-interval=2", DDP,
        "200", "1", "0",
        cwd=str(tmp_path), env={"DDP_FAIL_AT": "150:kill"}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "Signal 9 (SIGKILL) received" in proc.stderr  # torchrun's own summary, untouched
    runs = [p.name for p in tmp_path.glob("ddp_train-*.brrr") if ".rank" not in p.name]
    assert len(runs) == 1, sorted(p.name for p in tmp_path.iterdir())
    run = tmp_path / runs[0]
    stem = run.name.removesuffix(".brrr")
    ranks = {e["rank"]: e for e in meta(str(run))["dist"]["ranks"]}
    assert ranks[1]["status"].startswith("ended without saying goodbye")
    assert ranks[0]["status"] == "raised an exception"  # gloo's error on the peer's closed connection
    assert meta(str(tmp_path / f"{stem}.rank0.brrr"))["exit_code"] == 1
    killed = load_trace(str(tmp_path / f"{stem}.rank1.brrr"))
    # steps are sent every half second: those of its last half second (about 40 here) die with it
    assert 100 <= len(killed.steps) <= 150 and (killed.windows.first_step >= 0).sum() >= 1
    report = run_brrrtui("report", str(run))
    assert report.returncode == 0 and "Ranks: 2" in report.stdout, report.stderr


def test_ranks_that_die_after_their_goodbye_are_told_apart_from_a_failed_script(tmp_path):
    """Both ranks finish the script, say goodbye, then abort as their interpreters exit (an atexit handler,
    as torch's gloo teardown sometimes does): their recordings say finished, and the launcher's exit code 1
    comes with a note that says where it came from."""
    out = tmp_path / "run.brrr"
    proc = run_brrrtui(
        "record", "-o", str(out), "torchrun", "--nproc_per_node=2", "--monitor-interval=2",
        os.path.join(SCRIPTS, "ddp_exit_abort.py"), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "exitcode  : -6" in proc.stderr  # torchrun's own summary: the rank aborted
    run = meta(str(out))
    assert run["exit_code"] == 1 and [e["status"] for e in run["dist"]["ranks"]] == ["finished", "finished"]
    for r in (0, 1):
        rank = meta(str(tmp_path / f"run.rank{r}.brrr"))
        assert rank["status"] == "finished" and rank["exit_code"] == 0
    note = "every rank's script finished (each said goodbye with exit code 0), yet the job exited with code 1"
    assert note in proc.stderr and any(n.startswith(note) for n in run["notes"])
    # opening the job (rank 0 shown) or one rank's file: the job's notes come along
    for opened in (out, tmp_path / "run.rank1.brrr"):
        assert any(n.startswith(f"the job: {note}") for n in load_trace(str(opened)).meta["load_notes"])
    assert f"note: the job: {note}" in run_brrrtui("report", str(out)).stdout


def shifted(trace, offset_ns: int):
    """The same trace read on a clock `offset_ns` ahead: every time column moved."""

    def move(table: Table, *cols: str) -> Table:
        return Table({k: (v + offset_ns if k in cols else v) for k, v in table.columns.items()})

    return dataclasses.replace(
        trace,
        ops=move(trace.ops, "start_ns"),
        gpu=move(trace.gpu, "start_ns"),
        windows=move(trace.windows, "start_ns", "end_ns"),
        steps=move(trace.steps, "t_ns"),
    )


def test_a_rank_clock_shifted_by_seconds_is_recovered_from_the_all_reduces(ddp_run):
    """Two simulated nodes from the real run: rank 1 read on a clock 3.21 s ahead. gloo's all-reduce ends on
    a shared 2-core CPU agree only to about a millisecond (NCCL kernel ends: microseconds, tests/test_clocks.py);
    `spread_ns` says so."""
    out, _ = ddp_run
    traces = {r: load_trace(str(out.parent / f"run.rank{r}.brrr")) for r in (0, 1)}
    traces[1] = shifted(traces[1], 3_210_000_000)
    found = clock_offsets(traces)[1]
    assert found.matched >= 4
    assert abs(found.offset_ns - 3_210_000_000) < 5_000_000, found


def test_spawned_data_loader_workers_are_not_ranks_and_the_user_sitecustomize_still_runs(tmp_path):
    out = tmp_path / "loader.brrr"
    user_site = os.path.join(SCRIPTS, "user_site")
    pythonpath = f"{ROOT}{os.pathsep}{user_site}"  # brrrtui itself, then a folder with a sitecustomize
    proc = run_brrrtui(
        "record", "-o", str(out), "torchrun", "--nproc_per_node=2", os.path.join(SCRIPTS, "ddp_loader.py"),
        env={"PYTHONPATH": pythonpath}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ranks = meta(str(out))["dist"]["ranks"]
    assert [e["rank"] for e in ranks] == [0, 1] and all(e["steps"] == 16 for e in ranks)
    # the user's sitecustomize ran in the launcher, both ranks and both loader workers (each rank's only
    # other Python processes are the loader worker and multiprocessing's resource tracker)
    ran = [line for line in proc.stderr.splitlines() if line.startswith("user sitecustomize: pid")]
    assert sum(line.endswith("rank None") for line in ran) >= 1
    assert (
        sum(line.endswith("rank 0") for line in ran) >= 2
        and sum(line.endswith("rank 1") for line in ran) >= 2
    ), [line for line in proc.stderr.splitlines() if "sitecustomize" in line]
    # the script sees its own environment: PYTHONPATH as given, none of brrrtui's variables but the claim
    for r in (0, 1):
        assert f"rank {r} PYTHONPATH={pythonpath} brrrtui env ['BRRRTUI_RANK_PID']" in proc.stdout


def test_bad_input_is_one_line_and_nothing_runs(tmp_path):
    long_tmp = tmp_path / ("t" * 110)  # a Unix socket path holds ~107 bytes
    long_tmp.mkdir()
    out = tmp_path / "run.brrr"
    proc = run_brrrtui(
        "record", "-o", str(out), "torchrun", "--nproc_per_node=2", DDP, env={"TMPDIR": str(long_tmp)}
    )
    assert proc.returncode == 2 and proc.stderr.startswith("brrrtui: error: cannot listen for the ranks")
    assert "set TMPDIR to a short path" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not out.exists() and not list(long_tmp.iterdir())
    proc = run_brrrtui(
        "record", "-o", str(tmp_path / "no" / "run.brrr"), "torchrun", "--nproc_per_node=2", DDP
    )
    assert proc.returncode == 2 and proc.stderr.startswith("brrrtui: error: cannot write")


def test_a_job_whose_workers_are_not_python_says_nothing_was_traced(tmp_path):
    out = tmp_path / "run.brrr"
    proc = run_brrrtui("record", "-o", str(out), "torchrun", "--nproc_per_node=1", "--no-python", "true")
    assert proc.returncode == 0, proc.stderr
    assert "no worker rank connected: nothing was traced" in proc.stderr
    assert meta(str(out))["dist"]["ranks"] == [] and meta(str(out))["status"] == "finished"

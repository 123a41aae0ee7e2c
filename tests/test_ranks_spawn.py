"""A script that starts its own ranks, end to end on the CPU: `brrrtui spawn train.py` with
torch.multiprocessing.spawn (2 processes, gloo), and multiprocessing.Process with fork. Each process that
joins the process group is traced into its own recording with its rank, windows on the same steps; the
script's first process (the launcher) is not traced. Rank 1 sleeps 30 ms more per step
(tests/scripts/spawn_train.py)."""

import json
import os
import sqlite3

import pytest
from conftest import SCRIPTS, line_of, run_brrrtui

from brrrtui.recording.load import load_trace

SPAWN = os.path.join(SCRIPTS, "spawn_train.py")
STEPS = 150


def meta(path) -> dict:
    db = sqlite3.connect(str(path))
    try:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()


@pytest.fixture(scope="module")
def spawn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("spawn") / "run.brrr"
    proc = run_brrrtui(
        "record", "-o", str(out), "--duty", "0.5", "--min-gap", "0", "spawn", SPAWN, str(STEPS), "1", "0.03",
        timeout=300,
    )  # fmt: skip
    return out, proc


def test_every_spawned_rank_is_traced_into_its_own_recording(spawn_run):
    out, proc = spawn_run
    assert proc.returncode == 0, proc.stderr
    assert "rank 0 of 2 done" in proc.stdout and "rank 1 of 2 done" in proc.stdout
    assert "launcher done" in proc.stdout  # the script's own first process ran to its end
    run = meta(out)
    assert run["status"] == "finished" and run["exit_code"] == 0
    assert run["dist"]["launcher"] == "spawn" and run["dist"]["world_size"] == 2
    assert [(e["rank"], e["file"], e["steps"]) for e in run["dist"]["ranks"]] == [
        (0, "run.rank0.brrr", STEPS),
        (1, "run.rank1.brrr", STEPS),
    ]
    pids = set()
    for r in (0, 1):
        m = meta(out.parent / f"run.rank{r}.brrr")
        assert m["dist"]["rank"] == r and m["dist"]["world_size"] == 2 and m["status"] == "finished"
        pids.add(m["pid"])
    assert len(pids) == 2 and run["pid"] not in pids  # two rank processes, neither the launcher
    db = sqlite3.connect(str(out))
    assert db.execute("SELECT COUNT(*) FROM windows").fetchone() == (0,)  # the launcher is not traced
    db.close()


def test_spawned_ranks_open_their_windows_on_the_same_steps(spawn_run):
    out, _ = spawn_run
    spans = []
    for r in (0, 1):
        w = load_trace(str(out.parent / f"run.rank{r}.brrr")).windows
        steps = w.mode == 0
        spans.append(list(zip(w.first_step[steps].tolist(), w.last_step[steps].tolist(), strict=True)))
    assert len(spans[0]) >= 2 and spans[0] == spans[1], spans


def test_the_report_names_the_slowed_rank_and_sizes_the_all_reduce(spawn_run):
    out, _ = spawn_run
    doc = json.loads(run_brrrtui("report", "--json", str(out)).stdout)
    s = doc["ranks"]["straggler"]
    assert s is not None and s["rank"] == 1, doc["ranks"]
    assert s["line"]["line"] == line_of(SPAWN, "slow") and s["line"]["function"] == "train", s
    assert 15e6 < s["late_ns"] < 45e6, s  # 30 ms slept; a shared CPU
    by_kind = {c["kind"]: c for c in doc["communication"]["collectives"]}
    ar = by_kind["all_reduce"]  # beside it maybe DDP's set-up (broadcast, all_gather) or the closing barrier
    # gloo's op carries the bucket: the model's 32*64 + 64 + 64 + 1 = 2177 float parameters, once per step
    assert (ar["kind"], ar["side"], ar["exposed_ns"]) == ("all_reduce", "cpu", None)
    assert ar["bytes"] == 2177 * 4 * ar["sized_calls"] and ar["sized_calls"] == ar["calls"] > 0
    assert doc["communication"]["ranks"] == 2 and doc["breakdown_ns"] is None  # no GPU: no breakdown


def test_forked_multiprocessing_ranks_are_traced_too(tmp_path):
    # As many steps as the spawn run: rank 0 announces a window ~1 s (LEAD_S) of steps ahead, so a 60-step run
    # (0.6 s) ends before any announced window opens and is traced by a set-up time window at most.
    out = tmp_path / "fork.brrr"
    proc = run_brrrtui(
        "record", "-o", str(out), "--duty", "0.5", "--min-gap", "0", "spawn", SPAWN, str(STEPS), "-1", "0",
        "process", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ranks = meta(out)["dist"]["ranks"]
    assert [(e["rank"], e["steps"]) for e in ranks] == [(0, STEPS), (1, STEPS)], ranks
    assert all(e["windows"] for e in ranks), ranks


def test_the_spawn_target(tmp_path, monkeypatch):
    from brrrtui.record.ranks import (
        SPAWN as MARK,
        is_distributed,
        launcher_argv,
        naming_target,
        torchrun_target,
    )

    target = torchrun_target(["spawn", "train.py", "--lr", "3"])
    assert target == [MARK, "train.py", "--lr", "3"] and is_distributed(target)
    assert launcher_argv(target) == ["train.py", "--lr", "3"] and naming_target(target)[0] == "train.py"
    assert not is_distributed(["train.py"]) and torchrun_target(["spawn"]) == [
        "spawn"
    ]  # a script named spawn
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spawn").write_text("print('a script named spawn')\n")
    assert torchrun_target(["spawn", "x"]) == ["spawn", "x"]

"""Two simulated hosts on the CPU: one `brrrtui record ... torchrun --nnodes=2 --node_rank=N` per "node"
(static rendezvous on localhost, one gloo rank each), so each recorder sees only its own rank and the
window plan must cross through the job's TCPStore (brrrtui.capture.plan_store). `brrrtui merge` then opens
both hosts' ranks as one run; rank 1 sleeps 30 ms more per step."""

import json
import os
import socket
import subprocess
import sys

from conftest import ROOT, SCRIPTS, line_of, run_brrrtui

from brrrtui.recording.load import load_trace

DDP = os.path.join(SCRIPTS, "ddp_train.py")
STEPS = 120
TEARDOWN_ABORT = "every rank's script finished (each said goodbye with exit code 0), yet the job exited with code 1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_hosts_windows_on_the_same_steps_then_merged_into_one_run(tmp_path):
    port = free_port()
    env = dict(os.environ, PYTHONPATH=ROOT, BRRRTUI_CALIBRATE="0")
    procs = []
    for node in (0, 1):
        folder = tmp_path / f"node{node}"
        folder.mkdir()
        cmd = [sys.executable, "-m", "brrrtui", "record", "-o", str(folder / "run.brrr"), "--duty", "0.5",
               "--min-gap", "0", "torchrun", "--nnodes=2", f"--node_rank={node}", "--nproc_per_node=1",
               "--master_addr=127.0.0.1", f"--master_port={port}", DDP, str(STEPS), "1", "0.03"]  # fmt: skip
        procs.append(subprocess.Popen(cmd, cwd=str(folder), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        # torch's gloo teardown can abort a rank after its script finished and said goodbye; brrrtui then says
        # so and the recording is complete (tests/test_ranks_e2e.py): any other exit is a failure
        assert p.returncode == 0 or (p.returncode == 1 and TEARDOWN_ABORT in err), err
    spans = []
    for node in (0, 1):
        trace = load_trace(str(tmp_path / f"node{node}" / f"run.rank{node}.brrr"))
        w = trace.windows
        steps = (w.mode == 0) & (w.first_step >= 0)  # (a window opened after the last step covers none)
        spans.append(list(zip(w.first_step[steps].tolist(), w.last_step[steps].tolist(), strict=True)))
    assert len(spans[0]) >= 2 and spans[1] == spans[0]  # node 1 followed rank 0's plan through the store

    merged = tmp_path / "all.brrr"
    m = run_brrrtui(
        "merge", "-o", str(merged), str(tmp_path / "node0" / "run.brrr"), str(tmp_path / "node1" / "run.brrr")
    )
    assert m.returncode == 0 and "2 ranks of 2 run files" in m.stderr, m.stderr
    doc = json.loads(run_brrrtui("report", "--json", str(merged)).stdout)
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1]
    assert [list(w) for w in spans[0]] == ranks["common_windows"]
    assert ranks["straggler"]["rank"] == 1 and ranks["straggler"]["line"]["line"] == line_of(DDP, "slow")
    assert (
        abs(ranks["clock_offsets"][1]["offset_ns"]) < 10_000_000
    )  # one machine: one clock, within the noise
    # a rank in two run files is refused in one line
    again = run_brrrtui(
        "merge",
        "-o",
        str(tmp_path / "x.brrr"),
        str(tmp_path / "node0" / "run.brrr"),
        str(tmp_path / "node0" / "run.brrr"),
    )
    assert again.returncode == 2 and again.stderr.startswith("brrrtui: error: rank 0 is in both"), (
        again.stderr
    )

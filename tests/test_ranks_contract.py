"""What the recorder and the ranks of a torchrun job agree on (brrrtui.contract.ranks), and how a command line
names a distributed target (brrrtui.record.ranks)."""

import os

import pytest

from brrrtui.contract.errors import InputError
from brrrtui.contract.ranks import Handshake, parse_plan, rank_of, rank_path, read_plan, write_plan
from brrrtui.record.ranks import is_distributed, naming_target, torchrun_target
from brrrtui.recording.load import load_trace
from brrrtui.recording.store import RecordingWriter


def test_handshake_round_trips_and_anything_else_is_refused():
    r, w = os.pipe()
    hello = Handshake(rank=5, local_rank=1, world_size=16, restart=2, pid=4242)
    os.write(w, hello.pack())
    assert Handshake.read(r) == hello
    os.write(w, b"not a handshake, just 32 bytes..")
    assert Handshake.read(r) is None
    os.close(w)
    assert Handshake.read(r) is None  # closed before a whole handshake
    os.close(r)


def test_a_rank_comes_from_torchrun_variables_only():
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RESTART_COUNT": "1"}
    got = rank_of(env)
    assert (got.rank, got.local_rank, got.world_size, got.restart) == (3, 1, 8, 1)
    assert rank_of({"RANK": "3", "WORLD_SIZE": "8"}) is None  # no LOCAL_RANK: not torchrun's worker
    assert rank_of({"RANK": "x", "LOCAL_RANK": "0", "WORLD_SIZE": "8"}) is None


def test_rank_files_sit_beside_the_run_file():
    assert rank_path("out/run.brrr", 3) == "out/run.rank3.brrr"
    assert rank_path("run.brrr", 0, restart=2) == "run.rank0.r2.brrr"
    assert rank_path("run", 1) == "run.rank1.brrr"


def test_the_plan_file_is_replaced_whole(tmp_path):
    assert read_plan(str(tmp_path)) is None
    write_plan(str(tmp_path), [(40, 2), (90, 1)])
    assert read_plan(str(tmp_path)) == [(40, 2), (90, 1)]
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]  # no temporary file left
    assert parse_plan("{not json") is None and parse_plan('[["a", 1]]') is None


def test_distributed_targets_and_their_default_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = torchrun_target(["torchrun", "--nproc_per_node=2", "train.py", "--lr", "3e-4"])
    assert target == ["-m", "torch.distributed.run", "--nproc_per_node=2", "train.py", "--lr", "3e-4"]
    assert is_distributed(target) and is_distributed(["-m", "torch.distributed.launch", "x.py"])
    assert not is_distributed(["train.py"]) and not is_distributed(["-m", "pkg.train"])
    assert naming_target(target) == ["train.py"]  # the default output: train-<time>.brrr
    assert naming_target(["-m", "torch.distributed.run", "--no-python", "true"]) == [
        "-m", "torch.distributed.run", "--no-python", "true",
    ]  # fmt: skip
    (tmp_path / "torchrun").write_text("print('a script named torchrun')\n")
    assert torchrun_target(["torchrun", "x"]) == ["torchrun", "x"]  # a script of that name is run as one


@pytest.mark.parametrize(
    "dist",
    [
        {"ranks": 5},
        {"ranks": [{"rank": "0", "file": 3}, None, {"rank": 0, "file": "a\x00b"}]},
        {"ranks": [{"rank": 0, "file": "."}, {"rank": 1, "file": "../../../../etc"}]},
        {"run": "a\x00b", "rank": 0},
        {"run": 7, "rank": "x"},
        {"run": ".", "rank": 0},
        "not a dict",
    ],
)
def test_a_run_file_with_a_made_up_rank_list_is_one_error_line_or_itself(tmp_path, dist):
    path = str(tmp_path / "run.brrr")
    writer = RecordingWriter(path)
    writer.set_meta(status="finished", dist=dist)
    writer.close()
    try:
        trace = load_trace(path)
    except InputError as e:
        assert "\n" not in str(e)
    else:
        assert "rank_set" not in trace.meta or trace.meta["rank_set"]["files"]


def test_merge_takes_run_files_only(tmp_path):
    from brrrtui.recording.ranks import merge_runs

    plain = str(tmp_path / "single.brrr")
    writer = RecordingWriter(plain)
    writer.set_meta(status="finished")
    writer.close()
    with pytest.raises(
        InputError, match=r"not the run file of a distributed recording \(brrrtui -o run.brrr"
    ):
        merge_runs(str(tmp_path / "all.brrr"), [plain])
    assert not (tmp_path / "all.brrr").exists()

"""A big plain Chrome trace read in two processes (brrrtui.recording.chrome.split) reads as one reader would."""

from __future__ import annotations

import pytest
from test_chrome_fast import assert_same, events, write

from brrrtui.contract.errors import InputError
from brrrtui.recording.chrome import bulk as chrome_fast, split as chrome_split
from brrrtui.recording.chrome.load import load_chrome


@pytest.fixture(autouse=True)
def split_every_file(monkeypatch):
    monkeypatch.setattr(chrome_split, "MIN_BYTES", 1)
    monkeypatch.setattr(chrome_fast, "BLOCK", 4096)  # this process's half in many runs; the other's in one


def lanes_and_files(n: int) -> list[dict]:
    """Events whose string lanes, source files and names appear first in either half."""
    evs = events(n)
    for i, ev in enumerate(evs[1:-1]):
        half = "late" if i > len(evs) // 2 else "early"
        if ev.get("cat") == "cuda_runtime":
            ev["tid"] = f"lane {half} {i % 3}"  # a string thread id: a lane numbered in order of appearance
        elif ev.get("cat") == "python_function":
            ev["name"] = f"/tmp/{half}.py({10 + i % 4}): step"
        elif ev.get("cat") == "kernel":
            ev["name"] = f"kernel_{half}_{i % 5}"
    return evs


def test_both_halves_read_as_one_reader_reads_the_whole_file(tmp_path):
    path = write(str(tmp_path / "t.json"), lanes_and_files(400))
    assert chrome_split.read_events(path) is not None  # the second half came from the other process
    split, one = load_chrome(path), load_chrome(path, fast=False)
    assert_same(one, split)  # lanes compared as numbers: numbered as one reader numbers them
    assert {line.file for line in split.lines} == {"/tmp/early.py", "/tmp/late.py"}
    assert len(split.gpu) == 400 and len(split.steps) == 1 and (split.runtime.tid < -1).sum() == 400


def test_a_damaged_event_in_the_second_half_reads_as_one_reader_reads_it(tmp_path):
    evs = events(200)
    evs[-50]["args"] = [1, 2]  # the other process reads that run with json
    evs[-30]["dur"] = -3.0  # skipped and counted
    path = write(str(tmp_path / "t.json"), evs)
    assert_same(load_chrome(path, fast=False), load_chrome(path))
    assert load_chrome(path).meta["skipped_events"] == 1


def test_a_cut_inside_a_name_falls_back_to_one_process(tmp_path, monkeypatch):
    evs = events(200)
    for ev in evs[1:-1]:
        ev["name"] = 'odd},{"ph":"X","cat":"kernel"},{name'
    path = write(str(tmp_path / "t.json"), evs)
    data = open(path, "rb").read()
    inside = data.index(b"odd},{", len(data) // 2) + 4  # the comma of a `},{` inside a name
    monkeypatch.setattr(chrome_split, "_cut_after", lambda path, offset: inside)
    assert chrome_split.read_events(path) is None
    assert_same(load_chrome(path, fast=False), load_chrome(path))


def test_a_truncated_file_is_worded_by_the_json_reader(tmp_path):
    path = write(str(tmp_path / "t.json"), events(200))
    with open(path, "r+b") as f:
        f.truncate(f.seek(0, 2) - 40)
    assert chrome_split.read_events(path) is None  # the other process cannot finish the document
    with pytest.raises(InputError, match="not a readable JSON trace"):
        load_chrome(path)


def test_gzip_and_small_files_are_read_in_one_process(tmp_path, monkeypatch):
    assert chrome_split.read_events(write(str(tmp_path / "t.json.gz"), events(50))) is None
    monkeypatch.setattr(chrome_split, "MIN_BYTES", 1 << 30)
    assert chrome_split.read_events(write(str(tmp_path / "t.json"), events(50))) is None


def test_one_cpu_reads_in_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_split, "_cpus", lambda: 1)
    assert chrome_split.read_events(write(str(tmp_path / "t.json"), events(50))) is None


def test_the_second_reader_stops_once_the_first_is_gone():
    blocks = chrome_split._while_alive(iter([b"[{}", b"]"]), parent=-1)  # no process has that parent id
    with pytest.raises(SystemExit):
        next(blocks)


def test_no_second_process_to_start_reads_in_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_split.sys, "executable", str(tmp_path / "no-python"))
    path = write(str(tmp_path / "t.json"), events(50))
    assert chrome_split.read_events(path) is None
    assert len(load_chrome(path).gpu) == 50

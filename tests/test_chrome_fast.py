"""The bulk Chrome trace reader (msgspec, chrome_fast) reads exactly what the event-by-event `json` reader
reads: the same rows, names, lines, steps and skipped count, on the H200 ResNet-50 traces and on hand-made
traces with what it must hand over to the `json` reader (a run of damaged fields, NaN, `},{` inside a name,
a base time after the events), with blocks small enough to cut the trace into many runs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from brrrtui.contract.model import Trace
from brrrtui.recording.chrome import bulk as chrome_fast
from brrrtui.recording.chrome.load import load_chrome

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
STRING_COLUMNS = {"name", "grid", "block", "shapes", "dtypes"}


def as_text(trace: Trace, table: str, column: str) -> list[str | None]:
    return [trace.strings[i] if i >= 0 else None for i in getattr(trace, table)[column].tolist()]


def assert_same(a: Trace, b: Trace) -> None:
    """Equal tables; string columns compared as the strings they name (ids follow the order of interning)."""
    assert a.lines == b.lines and a.device == b.device and a.meta == b.meta
    for table in ("gpu", "runtime", "ops", "spans", "windows", "steps"):
        ta, tb = getattr(a, table), getattr(b, table)
        assert len(ta) == len(tb), table
        for col in ta.columns:
            if col in STRING_COLUMNS and table != "windows":
                assert as_text(a, table, col) == as_text(b, table, col), (table, col)
            else:
                assert ta[col].dtype == tb[col].dtype
                np.testing.assert_array_equal(ta[col], tb[col], err_msg=f"{table}.{col}")


def kernel(i: int, name: str = "sm90_gemm", **args) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": 100.0 + 10 * i,
        "dur": 5.5,
        "args": {
            "device": 0,
            "stream": 7,
            "correlation": i,
            "grid": [128, 1, 1],
            "block": [256, 1, 1],
            "External id": i,
            **args,
        },
    }


def op(i: int, name: str = "aten::mm", **args) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": 1,
        "ts": 98.0 + 10 * i,
        "dur": 1.25,
        "args": {
            "Input Dims": [[64, 64], [64, 64]],
            "Input type": ["float", "float"],
            "Sequence number": i,
            "Record function id": 0,
            **args,
        },
    }


def events(n: int) -> list[dict]:
    out: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    for i in range(n):
        out += [
            op(i),
            kernel(i),
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 99.0 + 10 * i,
                "dur": 0.5,
                "args": {"correlation": i, "cbid": 211},
            },
            {
                "ph": "X",
                "cat": "python_function",
                "name": f"/tmp/train.py({10 + i % 3}): step",
                "pid": 1,
                "tid": 1,
                "ts": 97.0 + 10 * i,
                "dur": 3.0,
                "args": {"Python id": i},
            },
            {"ph": "s", "id": i, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 99.0 + 10 * i},
        ]
    out.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "Optimizer.step#SGD.step",
            "pid": 1,
            "tid": 1,
            "ts": 10.0 * n + 100,
            "dur": 2.0,
        }
    )
    return out


def write(path: str, evs: list[dict], base_first: bool = True, **top) -> str:
    doc = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200", "numSms": 132}]}
    if base_first:
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    doc["traceEvents"] = evs
    if not base_first:
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    doc |= {"traceName": "t.json", **top}
    text = json.dumps(doc, separators=(",", ":"))
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as f:
        f.write(text)
    return path


def both(path: str) -> tuple[Trace, Trace]:
    return load_chrome(path, fast=False), load_chrome(path)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(chrome_fast, "BLOCK", 700)  # a few events per run: many cuts, many runs


@pytest.mark.parametrize("name", ["resnet50_h200_step", "resnet50_h200_tui"])
def test_the_h200_traces_read_the_same(name):
    json_path, fast_path = both(os.path.join(FIXTURES, f"{name}.json.gz"))
    assert len(fast_path.gpu) == 961 and len(fast_path.spans) > 0
    assert_same(json_path, fast_path)


@pytest.mark.parametrize("block", [700, 16 << 20])
def test_a_clean_trace_is_read_in_bulk_and_the_same(tmp_path, monkeypatch, block):
    monkeypatch.setattr(chrome_fast, "BLOCK", block)  # many runs, or the whole trace in one block
    path = write(str(tmp_path / "t.json.gz"), events(40))
    bulk = []
    real_add = chrome_fast._Columns.add
    monkeypatch.setattr(
        chrome_fast._Columns, "add", lambda self, evs: (bulk.append(len(evs)), real_add(self, evs))
    )
    a, b = both(path)
    assert sum(bulk) == len(events(40)) - 1  # in bulk, not by the json reader, but for the last event
    assert len(bulk) > 10 if block == 700 else len(bulk) == 1
    assert_same(a, b)
    assert len(b.gpu) == 40 and len(b.spans) == 40 and len(b.steps) == 1 and len(b.lines) == 3
    assert b.gpu.grid[0] >= 0 and b.strings[int(b.gpu.grid[0])] == "128,1,1"
    assert b.strings[int(b.ops.shapes[0])] == "[[64,64],[64,64]]" and b.meta["skipped_events"] == 0


def test_runs_with_damaged_fields_and_nan_go_through_the_json_reader(tmp_path):
    evs = events(30)
    # event 1 + 5 i is op i, 2 + 5 i kernel i, 3 + 5 i its launch, 4 + 5 i a Python frame, 5 + 5 i a flow
    evs[7]["args"]["device"] = "gpu0"  # a string where an int belongs
    evs[42]["args"]["correlation"] = 2**70  # does not fit int64
    evs[61]["ts"] = float("nan")  # json writes NaN; msgspec does not read it
    evs[83]["args"] = [1, 2]
    evs[92]["dur"] = -3.0  # skipped and counted
    evs[102]["cat"] = "kernel,memory"  # a list of categories: the first
    a, b = both(write(str(tmp_path / "t.json"), evs))
    assert_same(a, b)
    assert b.meta["skipped_events"] == 2


def test_a_cut_inside_a_name_and_a_base_time_after_the_events(tmp_path):
    evs = events(20)
    for i in range(2, 60, 5):
        evs[i]["name"] = 'odd},{"ph":"X","cat":"kernel"},{name \x1b[2J'
    a, b = both(write(str(tmp_path / "t.json"), evs))
    assert_same(a, b)
    assert any(s.startswith("odd},{") and "\\x1b" in s for s in b.strings)
    late = write(str(tmp_path / "late.json"), events(5), base_first=False)
    assert chrome_fast.read_events(late) is None  # the base comes after the events: the json reader's job
    assert_same(*both(late))


def test_what_the_bulk_reader_cannot_follow_is_worded_by_the_json_reader(tmp_path):
    path = str(tmp_path / "t.json")
    write(path, events(10))
    with open(path, "rb") as f:
        text = f.read()
    with open(path, "wb") as f:
        f.write(text[: len(text) // 2])  # truncated
    assert chrome_fast.read_events(path) is None
    with pytest.raises(Exception, match="not a readable JSON trace"):
        load_chrome(path)
    with open(path, "w") as f:
        f.write('{"traceName": "x", "events": []}')
    with pytest.raises(Exception, match="no traceEvents list"):
        load_chrome(path)


def test_without_msgspec_the_json_reader_reads_the_trace():
    """A machine without msgspec (the GPU box's environment): chrome imports, and reads with json."""
    code = (
        "import sys; sys.modules['msgspec'] = None\n"
        "from brrrtui.recording.chrome import load\n"
        "assert load.bulk is None\n"
        f"t = load.load_chrome({os.path.join(FIXTURES, 'resnet50_h200_step.json.gz')!r})\n"
        "print(len(t.gpu))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "961", proc.stderr

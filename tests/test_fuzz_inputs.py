"""Damaged but parseable input: `brrrtui report` prints a report (exit 0) or one `brrrtui: error:` line
(exit 2), never a traceback. Named cases first, then a bounded property-based fuzz over a small valid
recording (meta values, table cells) and a small valid Chrome trace (field types and values)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import sqlite3
import tempfile
import zlib

import numpy as np
import pytest
from conftest import run_brrrtui
from hypothesis import HealthCheck, given, settings, strategies as st

from brrrtui.cli import main
from brrrtui.recording import codec
from brrrtui.recording.store import RecordingWriter

T0 = 1_700_000_000_000_000_000
NAN = float("nan")
META = {
    "argv": ["train.py"],
    "cwd": "/tmp",
    "status": "finished",
    "exit_code": 0,
    "started_at_ns": T0 - 10**9,
    "ended_at_ns": T0 + 10**9,
    "device": {"name": "NVIDIA H200", "num_sms": 132, "compute_capability": "9.0", "l2_bytes": 60 * 2**20},
    "peaks": {
        "tensor_flops_per_s": 7.5e14,
        "fp32_flops_per_s": 5e13,
        "bytes_per_s": 4e12,
        "source": "measured",
    },
    "notes": ["a note"],
}
STRINGS = [
    "aten::mm",
    "sm90_gemm_kernel",
    "cudaLaunchKernel",
    "[[64,64],[64,64]]",
    '["float","float"]',
    "128,1,1",
]
ROWS = {
    "lines": [(0, "/tmp/train.py", 10, "main")],
    "windows": [(0, 0, T0, T0 + 1_000_000, 0, 1, 1000, 10)],
    "steps": [(0, T0 + 400_000), (1, T0 + 900_000)],
    "gpu": [(0, 0, 1, T0 + 100_000, 50_000, 0, 7, 1, 5, 5, -1), (0, 0, 1, T0 + 500_000, 50_000, 0, 7, 2, 5, 5, -1)],
    "runtime": [(0, 2, T0 + 50_000, 5_000, 1, 1), (0, 2, T0 + 450_000, 5_000, 1, 2)],
    "ops": [(0, 0, T0 + 40_000, 30_000, 1, 3, -1, 3, 4, NAN), (0, 0, T0 + 440_000, 30_000, 1, 4, -1, 3, 4, 5e5)],
    "spans": [(0, 0, T0 + 30_000, 60_000, 1, -1, -1), (0, 0, T0 + 430_000, 60_000, 1, -1, -1)],
    "telemetry": [(T0, 50.0, 1e9, 300.0, 1980.0)],
    "capture_costs": [(0, 1000, 2000)],
    "line_samples": [(0, 0, T0 + 50_000)],
    "stream": [(0, 0, 1, T0 + 2_000_000, 50_000, 0, 7, 3, 5, 5, -1)],
}  # fmt: off


def make_recording(path: str) -> None:
    w = RecordingWriter(path)
    w.set_meta(**META)
    w.append({"strings": list(enumerate(STRINGS)), **ROWS})
    w.close()


def make_chrome(path: str, mutate=None) -> None:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0, "dur": 30.0, "tid": 1, "pid": 1,
         "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"], "Sequence number": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12.0, "dur": 5.0, "tid": 1,
         "pid": 1, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "sm90_gemm_kernel", "ts": 40.0, "dur": 50.0, "tid": 7, "pid": 0,
         "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [128, 1, 1], "block": [256, 1, 1]}},
        {"ph": "X", "cat": "python_function", "name": "/tmp/train.py(10): main", "ts": 5.0, "dur": 100.0,
         "tid": 1, "pid": 1},
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": 95.0, "dur": 5.0,
         "tid": 1, "pid": 1},
    ]  # fmt: off
    data = {
        "traceEvents": ev,
        "baseTimeNanoseconds": T0,
        "deviceProperties": [{"name": "NVIDIA H200", "numSms": 132, "computeMajor": 9, "computeMinor": 0}],
        "traceName": "t.json",
    }
    if mutate:
        mutate(data)
    with open(path, "w") as f:
        json.dump(data, f)


def report(path: str, *extra: str) -> tuple[int, str, str]:
    """`brrrtui report` in this process (any exception fails the test: that would be a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", *extra, path])
    return code, out.getvalue(), err.getvalue()


def assert_report_or_one_line(code: int, out: str, err: str) -> None:
    if code == 0:
        assert out.strip(), "exit 0 without a report"
    else:
        assert code == 2, (code, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("brrrtui: error: "), err


def set_meta(path: str, key: str, text: str) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, text))
    db.close()


RECORDING_CASES = {
    "format_version 2.0": ("format_version", '"2.0"'),
    "meta not JSON": ("status", "{not json"),
    "device a list": ("device", "[1, 2]"),
    "peaks with an unknown key": ("peaks", json.dumps({**META["peaks"], "hbm_flavour": "sweet"})),
    "num_sms a string": ("device", json.dumps({**META["device"], "num_sms": "many"})),
    "a value nested 600 deep": ("notes", "[" * 600 + "]" * 600),
}


@pytest.mark.parametrize("case", sorted(RECORDING_CASES))
def test_damaged_recording_meta(tmp_path, case):
    path = str(tmp_path / "r.brrr")
    make_recording(path)
    set_meta(path, *RECORDING_CASES[case])
    code, out, err = report(path)
    assert_report_or_one_line(code, out, err)
    if case in ("peaks with an unknown key", "num_sms a string"):  # a newer writer's field breaks nothing
        assert code == 0, err


def test_a_meta_value_nested_deeper_than_any_recording_writes_is_named(tmp_path):
    path = str(tmp_path / "r.brrr")
    make_recording(path)
    set_meta(path, "notes", "[" * 600 + "]" * 600)  # json reads it; walking it recursively would not
    code, _, err = report(path)
    assert code == 2 and "meta value 'notes' nests deeper than 64" in err, err
    set_meta(path, "notes", "[" * 60 + "]" * 60)
    assert report(path)[0] == 0


def test_a_gzip_damaged_inside_its_deflate_stream_is_one_error_line(tmp_path):
    plain = tmp_path / "r.brrr"
    make_recording(str(plain))
    good = gzip.compress(plain.read_bytes(), mtime=0)
    for at in range(
        len(good) // 2, len(good) - 8
    ):  # a flipped byte that zlib itself refuses (not a CRC error)
        bad = bytearray(good)
        bad[at] ^= 0xFF
        try:
            gzip.decompress(bytes(bad))
        except zlib.error:
            break
        except (OSError, EOFError):
            continue
    path = tmp_path / "r.brrr.gz"
    path.write_bytes(bytes(bad))
    code, _, err = report(str(path))
    assert code == 2 and "is a damaged gzip file" in err, err


def test_out_of_range_string_id(tmp_path):
    path = str(tmp_path / "r.brrr")
    make_recording(path)
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE gpu SET name = ?", (codec.encode(np.full(2, 999)),))  # the batch's 2 names
    db.close()
    code, out, err = report(path)
    assert code == 2 and "gpu.name names string 999" in err, err


CHROME_CASES = {
    "args.device gpu0": lambda d: d["traceEvents"][2]["args"].update(device="gpu0"),
    "args a list": lambda d: [e.update(args=[1, 2]) for e in d["traceEvents"]],
    "baseTimeNanoseconds abc": lambda d: d.update(baseTimeNanoseconds="abc"),
    "deviceProperties a string": lambda d: d.update(deviceProperties="NVIDIA H200"),
    "Sequence number x": lambda d: d["traceEvents"][0]["args"].update({"Sequence number": "x"}),
    "ts 1e300": lambda d: d["traceEvents"][2].update(ts=1e300),
}


@pytest.mark.parametrize("case", sorted(CHROME_CASES))
def test_damaged_chrome_trace(tmp_path, case):
    path = str(tmp_path / "t.json")
    make_chrome(path, CHROME_CASES[case])
    code, out, err = report(path)
    assert_report_or_one_line(code, out, err)


def test_real_exit_codes_in_a_fresh_process(tmp_path):
    path = str(tmp_path / "r.brrr")
    make_recording(path)
    proc = run_brrrtui("report", path)
    assert proc.returncode == 0 and "brrrtui report" in proc.stdout, proc.stderr
    set_meta(path, "device", "[1, 2]")
    proc = run_brrrtui("report", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("brrrtui: error: ") and len(proc.stderr.strip().splitlines()) == 1
    bad = str(tmp_path / "t.json")
    make_chrome(bad, CHROME_CASES["args a list"])
    proc = run_brrrtui("report", "--json", bad)
    assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------- the fuzz
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_value = st.recursive(json_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=6)  # fmt: skip
sql_cell = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=6),
    st.binary(max_size=4),
)
TABLE_COLUMNS = {t: len(rows[0]) for t, rows in ROWS.items()} | {"strings": 2}
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _meta_text(key: str, value: object, raw: str | None) -> tuple[str, str]:
    if raw is not None:
        return key, raw
    if key in ("device", "peaks") and isinstance(value, dict):  # also mutate one field of a known object
        return key, json.dumps({**META[key], **value})
    return key, json.dumps(value)


@FUZZ
@given(
    meta=st.lists(
        st.tuples(st.sampled_from([*META, "format_version", "format", "newer_key"]), json_value,
                  st.one_of(st.none(), st.text(max_size=6))), max_size=2),
    cells=st.lists(st.tuples(st.sampled_from(sorted(TABLE_COLUMNS)), st.integers(0, 10), sql_cell), max_size=3),
    json_out=st.booleans(),
)  # fmt: skip
def test_fuzz_recordings(meta, cells, json_out):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.brrr")
        shutil.copy(_base_recording(), path)
        for key, value, raw in meta:
            set_meta(path, *_meta_text(key, value, raw))
        db = sqlite3.connect(path)
        with db:
            for table, col, value in cells:
                names = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
                with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL, a duplicate id: no such file
                    db.execute(f"UPDATE {table} SET {names[col % len(names)]} = ? WHERE rowid = 1", (value,))
        db.close()
        assert_report_or_one_line(*report(path, *(["--json"] if json_out else [])))


_BASE: list[str] = []


def _base_recording() -> str:
    if not _BASE:
        path = os.path.join(tempfile.mkdtemp(prefix="brrrtui-fuzz-"), "base.brrr")
        make_recording(path)
        _BASE.append(path)
    return _BASE[0]


EVENT_FIELDS = ["ph", "cat", "name", "ts", "dur", "tid", "args"]
ARG_FIELDS = ["device", "stream", "correlation", "grid", "block", "bytes", "Input Dims", "Input type",
              "Sequence number", "Fwd thread id", "flops"]  # fmt: skip
TOP_FIELDS = ["traceEvents", "baseTimeNanoseconds", "deviceProperties", "traceName", "cuda_runtime_version"]


@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(["top", "event", "arg", "device"]), st.integers(0, 4),
                  st.integers(0, 20), json_value), min_size=1, max_size=3),
    json_out=st.booleans(),
)  # fmt: skip
def test_fuzz_chrome_traces(edits, json_out):
    def mutate(d: dict) -> None:
        for where, i, field, value in edits:
            events = d["traceEvents"] if isinstance(d.get("traceEvents"), list) else []
            if where == "top":
                d[TOP_FIELDS[field % len(TOP_FIELDS)]] = value
            elif where == "event" and i < len(events) and isinstance(events[i], dict):
                events[i][EVENT_FIELDS[field % len(EVENT_FIELDS)]] = value
            elif where == "arg" and i < len(events) and isinstance(events[i], dict):
                args = events[i].setdefault("args", {})
                if isinstance(args, dict):
                    args[ARG_FIELDS[field % len(ARG_FIELDS)]] = value
            elif where == "device" and isinstance(d.get("deviceProperties"), list) and d["deviceProperties"]:
                props = d["deviceProperties"][0]
                if isinstance(props, dict):
                    props[["name", "numSms", "computeMajor", "computeMinor", "totalGlobalMem"][field % 5]] = (
                        value
                    )

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        make_chrome(path, mutate)
        assert_report_or_one_line(*report(path, *(["--json"] if json_out else [])))


def test_the_base_inputs_report_cleanly(tmp_path):
    rec, tr = str(tmp_path / "r.brrr"), str(tmp_path / "t.json")
    make_recording(rec)
    make_chrome(tr)
    for path in (rec, tr):
        code, out, err = report(path)
        assert code == 0 and "brrrtui report" in out, err

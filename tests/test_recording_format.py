"""The recording's on-disk format: format 2 stores each batch's columns as typed arrays; format 1 files (one
SQL row per record, what the committed H200 fixtures are) still load, and load the same tables once rewritten
in format 2. Damaged blobs end in one RecordingError line; the stream's newest rows are read across batch
boundaries, by a load and by a live StreamReader."""

from __future__ import annotations

import json
import os
import sqlite3

import numpy as np
import pytest
from tui_fakes import h200_recording

from brrrtui.contract.model import Trace
from brrrtui.contract.schema import SPAN_SCHEMA, STREAM_SCHEMA
from brrrtui.recording import codec
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.columns import KEY_COLUMNS
from brrrtui.recording.load import load_trace
from brrrtui.recording.store import (
    FORMAT_VERSION,
    TABLES,
    RecordingWriter,
    load_recording,
    write_trace,
)
from brrrtui.recording.stream_reader import StreamReader

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
RECORDINGS = sorted(f.removesuffix(".brrr.gz") for f in os.listdir(FIXTURES) if f.endswith(".brrr.gz"))
T0 = 1_700_000_000_000_000_000


def meta_of(path: str) -> dict:
    db = sqlite3.connect(path)
    try:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()


def assert_same_trace(a: Trace, b: Trace) -> None:
    assert a.strings == b.strings and a.lines == b.lines
    assert a.device == b.device and a.peaks == b.peaks and a.stream_total == b.stream_total
    for name, schema in TABLES.items():
        ta, tb = getattr(a, name), getattr(b, name)
        assert len(ta) == len(tb), name
        for col, dtype in schema.items():
            if col in KEY_COLUMNS.get(name, ()):  # a whole load holds them narrowed (recording.columns)
                assert ta[col].dtype.kind == "i" and ta[col].itemsize <= np.dtype(dtype).itemsize, (name, col)
            else:
                assert ta[col].dtype == np.dtype(dtype), (name, col)
            np.testing.assert_array_equal(ta[col], tb[col], err_msg=f"{name}.{col}")


def test_the_format_1_fixtures_still_load(tmp_path):
    old = 0
    for name in RECORDINGS:
        path = h200_recording(name, tmp_path)
        if meta_of(path)["format_version"] != 1:
            continue
        old += 1
        trace = load_trace(os.path.join(FIXTURES, f"{name}.brrr.gz"))  # the .gz, as a user opens it
        assert len(trace.gpu) > 100 and len(trace.ops) > len(trace.gpu) and len(trace.windows) >= 1, name
        db = sqlite3.connect(path)
        span_columns = {r[1] for r in db.execute("PRAGMA table_info(spans)")}
        db.close()
        if "module" not in span_columns:  # spans.module and spans.lib_line came later: unknown, not missing
            assert (
                len(trace.spans) and (trace.spans.module == -1).all() and (trace.spans.lib_line == -1).all()
            )
    assert old >= 5


@pytest.mark.parametrize("name", ["h200_gpt_stream", "h200_known_regimes"])
def test_format_1_rewritten_as_format_2_loads_the_same_tables(tmp_path, name):
    old = load_recording(h200_recording(name, tmp_path))
    new_path = str(tmp_path / "new.brrr")
    write_trace(old, new_path, batch_rows=1000)  # many batches per table
    assert meta_of(new_path)["format_version"] == FORMAT_VERSION == 2
    new = load_recording(new_path)
    assert_same_trace(old, new)
    assert new.meta["argv"] == old.meta["argv"]


def test_a_writer_appending_to_a_format_1_file_upgrades_it_first(tmp_path):
    path = h200_recording("h200_gpt_small", tmp_path)
    before = load_recording(path)
    row = (0, 0, int(before.gpu.name[0]), T0, 1000, 0, 7, 99, -1, -1, -1)
    w = RecordingWriter(path)
    w.append({"stream": [row]})
    w.close()
    assert meta_of(path)["format_version"] == 2
    after = load_recording(path)
    assert after.stream_total == before.stream_total + 1
    assert after.stream.correlation[-1] == 99 and after.stream.start_ns[-1] == T0
    for name in ("gpu", "ops", "spans", "windows", "steps"):
        for col in TABLES[name]:
            np.testing.assert_array_equal(getattr(after, name)[col], getattr(before, name)[col])


def make_v2(path: str, stream_batches: tuple[int, ...] = (3, 5, 4)) -> list[tuple]:
    """A small format 2 recording: one window, two kernels, and stream rows in batches of the given sizes
    (row i has correlation i + 1). Returns the stream rows."""
    w = RecordingWriter(path)
    w.set_meta(status="finished")
    w.append(
        {
            "strings": [(0, "k"), (1, "aten::mm")],
            "lines": [(0, "/tmp/t.py", 3, "f")],
            "windows": [(0, 0, T0, T0 + 10**6, 0, 0, 0, 5)],
            "gpu": [
                (0, 0, 0, T0 + 100, 50, 0, 7, 1, -1, -1, -1),
                (0, 0, 0, T0 + 300, 50, 0, 7, 2, -1, -1, -1),
            ],
            "ops": [(0, 1, T0 + 10, 80, 1, -1, -1, -1, -1, float("nan"))],
            "spans": [(0, 0, T0, 500, 1, -1, -1)],
        }
    )
    rows, i = [], 0
    for n in stream_batches:
        batch = [(0, 0, 0, T0 + 10**7 + 1000 * (i + j), 100, 0, 7, i + j + 1, -1, -1, -1) for j in range(n)]
        w.append({"stream": np.array(batch, dtype=np.int64)})  # the recorder's decoded 2-D array
        rows += batch
        i += n
    w.close()
    return rows


def test_stream_tail_and_stream_reader_cut_across_batches(tmp_path):
    path = str(tmp_path / "s.brrr")
    rows = make_v2(path)
    for tail in (0, 2, 4, 7, 12, 50):
        t = load_recording(path, stream_tail=tail)
        assert t.stream_total == 12
        assert t.stream.correlation.tolist() == [r[7] for r in rows][12 - min(tail, 12) :], tail
    reader = StreamReader(path, after_rowid=2)
    got, strings = reader.poll()
    assert got.correlation.tolist() == list(range(3, 13)) and strings == [(0, "k"), (1, "aten::mm")]
    assert len(reader.poll()[0]) == 0
    w = RecordingWriter(path)
    w.append({"stream": [(0, 0, 0, T0 + 10**8, 100, 0, 7, 13, -1, -1, -1)], "strings": [(2, "new")]})
    w.close()
    got, strings = reader.poll(limit=5)
    assert got.correlation.tolist() == [13] and strings == [(2, "new")]
    assert StreamReader(path).poll(limit=6)[0].correlation.tolist() == list(range(8, 14))


def test_a_column_the_file_lacks_or_a_null_blob_reads_unknown(tmp_path):
    path = str(tmp_path / "c.brrr")
    make_v2(path)
    db = sqlite3.connect(path)
    with db:  # spans as a writer without module/lib_line made it; the ops batch without flops
        db.execute("ALTER TABLE spans DROP COLUMN module")
        db.execute("UPDATE spans SET lib_line = NULL")
        db.execute("UPDATE ops SET flops = NULL")
    db.close()
    t = load_recording(path)
    assert t.spans.module.tolist() == [-1] and t.spans.lib_line.tolist() == [-1]
    assert t.spans.module.dtype.kind == "i" and np.isnan(t.ops.flops).all()  # narrowed: KEY_COLUMNS
    assert t.spans.line.tolist() == [0] and t.gpu.start_ns.tolist() == [T0 + 100, T0 + 300]


def test_values_a_column_cannot_hold_are_stored_as_unknown(tmp_path):
    path = str(tmp_path / "v.brrr")
    w = RecordingWriter(path)
    w.append({"strings": [(0, "k")], "stream": [(None, 0, 0, T0, 10, 2**40, "x", 1, -1, -1, 2.5)]})
    w.close()
    s = load_recording(path).stream
    assert (s.after_window[0], s.device[0], s.stream[0], s.bytes[0], s.start_ns[0]) == (-1, -1, -1, 2, T0)
    assert s.device.dtype == STREAM_SCHEMA["device"]


def blob(*values: float) -> bytes:
    return codec.encode(np.array(values))


DAMAGE = {
    "a blob one byte short": (
        "UPDATE gpu SET start_ns = substr(start_ns, 1, length(start_ns) - 1)",
        (),
        "gpu.start_ns holds 10 bytes of code 1, not the 2 values of its batch",
    ),
    "a number where a blob belongs": ("UPDATE gpu SET dur_ns = 7", (), "gpu.dur_ns holds 7, not a column"),
    "a text row count": (
        "UPDATE stream SET batch_rows = 'x' WHERE rowid = 2",
        (),
        "a batch of stream holds 'x' rows",
    ),
    "a row count that does not match": ("UPDATE gpu SET batch_rows = 3", (), "not the 3 values of its batch"),
    "a row count no memory holds": (  # constant blobs store no values: only the count says how many
        "UPDATE gpu SET batch_rows = ?",
        (2**39,),
        "its gpu table claims 549,755,813,888 rows",
    ),
    "a count of rows no column holds": (  # a one-row batch: every column constant
        "UPDATE ops SET batch_rows = 300000000",
        (),
        "a batch of ops claims 300,000,000 rows but holds none of them",
    ),
    "a code that does not exist": ("UPDATE gpu SET device = X'07'", (), "gpu.device holds 1 bytes of code 7"),
    "an int where floats belong": (
        "UPDATE ops SET flops = ?",
        (blob(5),),
        "ops.flops holds 9 bytes of code 5",
    ),
    "a kind code that does not exist": (
        "UPDATE gpu SET kind = ?",
        (blob(7, 9),),
        "gpu.kind holds the unknown code 7",
    ),
    "a name id out of range": ("UPDATE gpu SET name = ?", (blob(9, 9),), "gpu.name names string 9"),
    "a value its column cannot hold": (
        "UPDATE gpu SET name = ?",
        (blob(2**40, 0),),
        "gpu.name holds 1099511627776",
    ),
    "values that pass int64": (  # a base near 2**63 plus an offset: read as one, it would wrap
        "UPDATE gpu SET start_ns = ?",
        (b"\x01" + np.array([2**63 - 2], dtype="<i8").tobytes() + bytes([0, 5]),),
        f"gpu.start_ns holds {2**63 + 3}",
    ),
    "values that pass int64 in an id column": (  # no time check follows: only the decoder can refuse it
        "UPDATE gpu SET correlation = ?",
        (b"\x01" + np.array([2**63 - 2], dtype="<i8").tobytes() + bytes([0, 5]),),
        f"gpu.correlation holds {2**63 + 3}",
    ),
    "plain values above a base": (
        "UPDATE gpu SET start_ns = ?",
        (b"\x04" + np.int64(1000).tobytes() + np.array([T0, T0 + 9], "<i8").tobytes(),),
        "gpu.start_ns holds plain values above a base",
    ),
    "a count of rows in a batch of NULL columns": (  # only the stream's folded batches are all NULL
        "UPDATE spans SET batch_rows = 300000000, " + ", ".join(f'"{c}" = NULL' for c in SPAN_SCHEMA),
        (),
        "a batch of spans claims 300,000,000 rows but holds none of them",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_blob_is_one_error_line(tmp_path, case):
    path = str(tmp_path / "d.brrr")
    make_v2(path)
    sql, params, message = DAMAGE[case]
    db = sqlite3.connect(path)
    with db:
        db.execute(sql, params)
    db.close()
    with pytest.raises(RecordingError) as e:
        load_recording(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_batch_of_identical_rows_reads_back_whole(tmp_path):
    """Every column one value: the writer splits what the reader would take for a damaged row count."""
    path = str(tmp_path / "same.brrr")
    w = RecordingWriter(path)
    w.append({"capture_costs": np.tile([0, 1000, 2000], (2500, 1))})
    w.append({"capture_costs": np.tile([1, 1000, 2000], (2048, 1))})
    w.close()
    costs = load_recording(path).capture_costs
    assert len(costs) == 4548 and (costs.window == 0).sum() == 2500
    assert costs.columns["window"][-1] == 1


def test_small_batches_decoded_together_read_as_one_by_one():
    """codec.decode_many (a table's batches of up to columns.SMALL_BATCH rows, a column at a time) fills the
    same values and finds the same (min, max) as decode_into on each blob: every code, batches out of order and
    interleaved codes (rows that are not one stretch), an empty batch."""
    rng = np.random.default_rng(7)
    batches = [
        rng.integers(0, 200, 5),  # code 1
        np.full(3, 41),  # code 5
        rng.integers(-(2**40), 2**40, 4),  # code 4
        rng.integers(10**12, 10**12 + 60_000, 6),  # code 2
        np.zeros(0, dtype=np.int64),
        rng.integers(0, 2**31, 2) + 10**15,  # code 3
        rng.integers(0, 250, 7),  # code 1 again
    ]
    blobs = [codec.encode(b) if len(b) else b"\x05" + bytes(8) for b in batches]
    sizes = [len(b) for b in batches][::-1]  # the last batch first in the column
    at = (np.cumsum([0, *sizes])[:-1])[::-1]
    total = sum(len(b) for b in batches)
    one, many = np.zeros(total, dtype=np.int64), np.zeros(total, dtype=np.int64)
    bounds = []
    for b, blob_, a in zip(batches, blobs, at.tolist(), strict=True):
        more = codec.decode_into(one[a : a + len(b)], blob_, len(b), 0, False, "t.c")
        bounds += [more] if more else []
    got = codec.decode_many(
        many, [(bl, a, len(b)) for b, bl, a in zip(batches, blobs, at.tolist(), strict=True)], False, "t.c"
    )
    assert (one == many).all() and (one == np.concatenate(batches[::-1])).all()
    assert got == (min(lo for lo, _ in bounds), max(hi for _, hi in bounds))
    floats = [np.array([1.5, np.nan]), np.full(4, 2.25), np.arange(3.0)]
    f_one, f_many = np.zeros(9), np.zeros(9)
    parts = [(codec.encode(v), a, len(v)) for v, a in zip(floats, (0, 2, 6), strict=True)]
    for bl, a, n in parts:
        codec.decode_into(f_one[a : a + n], bl, n, 0, True, "t.f")
    assert codec.decode_many(f_many, parts, True, "t.f") is None
    np.testing.assert_array_equal(f_one, f_many)
    # the blobs' codes and lengths are checked for the column at once: the one that is wrong is named
    damaged = [parts[0], (parts[1][0] + b"\x00", 2, 4), parts[2]]
    with pytest.raises(
        RecordingError, match=r"^t\.f holds 10 bytes of code 6, not the 4 values of its batch$"
    ):
        codec.decode_many(np.zeros(9), damaged, True, "t.f")
    with pytest.raises(RecordingError, match=r"^t\.f holds 'x', not a column$"):
        codec.decode_many(np.zeros(9), [parts[0], ("x", 2, 4)], True, "t.f")


def test_each_column_takes_the_narrowest_code_that_holds_its_batch():
    assert blob(-1, -1, -1) == b"\x05" + np.int64(-1).tobytes()  # a constant: one value for the batch
    assert len(blob(T0, T0 + 200)) == 9 + 2 and len(blob(0, 70_000)) == 9 + 2 * 4
    assert len(blob(0, 2**40)) == 9 + 2 * 8 and len(blob(1.5, float("nan"))) == 1 + 2 * 8
    assert blob(float("nan"), float("nan"))[0] == 6
    for values in ([T0, T0 + 200, T0 + 3], [-(2**63), 2**63 - 1], [-5, 300, 70_000], [1.5, float("nan")]):
        a = np.array(values)
        got = codec.decode(codec.encode(a), len(a), 1, len(a) - 1, a.dtype.kind == "f", "t.c")
        np.testing.assert_array_equal(got, a[1:])


def test_format_1_cells_are_still_checked(tmp_path):
    """A hand-made format 1 file (rows, as brrrtui wrote before): read, and its damage still named."""
    path = str(tmp_path / "v1.brrr")
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE strings(id INTEGER PRIMARY KEY, s TEXT NOT NULL)")
        db.execute("CREATE TABLE lines(id INTEGER PRIMARY KEY, file TEXT, line INTEGER, function TEXT)")
        db.execute(
            "CREATE TABLE gpu(window, kind, name, start_ns, dur_ns, device, stream, correlation, grid,"
            " block, bytes)"
        )
        db.execute(
            "CREATE TABLE windows(window, mode, start_ns, end_ns, first_step, last_step, stall_ns, events)"
        )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)", [("format", '"brrrtui-recording"'), ("format_version", "1")]
        )
        db.execute("INSERT INTO strings VALUES (0, 'k')")
        db.execute("INSERT INTO windows VALUES (0, 0, ?, ?, -1, -1, 0, 2)", (T0, T0 + 10**6))
        db.execute("INSERT INTO gpu VALUES (0, 0, 0, ?, 50, 0, 7, 1, NULL, -1, -1)", (T0 + 100,))
    db.close()
    t = load_recording(path)
    assert t.gpu.start_ns.tolist() == [T0 + 100] and t.gpu.grid.tolist() == [-1] and len(t.ops) == 0
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE gpu SET name = 999")
    db.close()
    with pytest.raises(RecordingError, match="gpu.name names string 999"):
        load_recording(path)


def test_rows_shorter_than_their_schema_leave_the_trailing_columns_unknown(tmp_path):
    """A producer that predates a column added at the end (ops.concrete): the column reads as unknown."""
    path = str(tmp_path / "short.brrr")
    n_ops = len(TABLES["ops"])
    w = RecordingWriter(path)
    w.append({"strings": [(0, "aten::mm")], "ops": [(0, 0, T0, 10, 1, -1, -1, -1, -1, 2.0)]})
    w.append({"ops": np.array([[0, 0, T0 + 20, 10, 1, 5, -1, -1, -1]])})  # a 2-D array, also short
    w.close()
    ops = load_recording(path).ops
    assert n_ops > 10 and ops.concrete.tolist() == [-1, -1] and ops.start_ns.tolist() == [T0, T0 + 20]
    assert ops.flops[0] == 2.0 and np.isnan(ops.flops[1]) and ops.seq.tolist() == [-1, 5]


def test_a_stream_reader_reads_a_format_1_stream(tmp_path):
    path = h200_recording("h200_gpt_stream", tmp_path)
    whole = load_recording(path)
    rows, strings = StreamReader(path, after_rowid=whole.stream_total - 100).poll()
    assert whole.stream_total > 100 and meta_of(path)["format_version"] == 1
    np.testing.assert_array_equal(rows.start_ns, whole.stream.start_ns[-100:])
    assert [s for _, s in strings] == whole.strings

"""A whole load holds the columns the analysis only compares, sorts and indexes with (ids of windows, names,
lines and threads; sequence numbers) in the narrowest integer type their values fit, and the analysis of a
recording so loaded is that of the schema's dtypes."""

from __future__ import annotations

import json
import os
import sqlite3
import tracemalloc

import numpy as np
import pytest

from analyzers.analyze import analyze
from brrrtui.contract.model import Table
from brrrtui.present.report import to_json
from brrrtui.recording import codec, columns
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.columns import KEY_COLUMNS, narrowed
from brrrtui.recording.load import load_trace
from brrrtui.recording.store import TABLES

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def test_each_key_column_takes_the_narrowest_type_its_values_fit():
    big = 2**31
    table = Table(
        {
            "a": np.array([-1, 0, 127], dtype=np.int64),
            "b": np.array([-1, 0, 128], dtype=np.int64),
            "c": np.array([-40_000, 0, 7], dtype=np.int64),
            "d": np.array([-1, 0, big], dtype=np.int64),
            "e": np.array([-1, 0, 5], dtype=np.int64),  # not named: as it was
            "f": np.array([0.5, 1.0, 2.0]),
        }
    )
    out = narrowed(table, ("a", "b", "c", "d", "f"))
    want = {"a": np.int8, "b": np.int16, "c": np.int32, "d": np.int64, "e": np.int64, "f": np.float64}
    for name, dtype in want.items():
        assert out.columns[name].dtype == dtype, name
        assert out.columns[name].tolist() == table.columns[name].tolist(), name
    empty = narrowed(Table({"tid": np.zeros(0, dtype=np.int64)}), ("tid",)).columns["tid"]
    assert empty.dtype == np.int64 and not len(empty)


def test_a_one_value_column_stays_one_value_repeated():
    """A column every batch stores as one value loads without memory (np.broadcast_to): so it stays."""
    one = np.broadcast_to(np.array(3, dtype=np.int64), 1000)
    out = narrowed(Table({"tid": one}), ("tid",)).columns["tid"]
    assert out.dtype == np.int8 and out.strides == (0,) and len(out) == 1000 and (out == 3).all()


@pytest.mark.parametrize(
    "name", ["h200_hf_gpt2_steady.brrr.gz", "h200_gpt2_compiled.brrr.gz", "h200_resnet50_modules.brrr.gz"]
)
def test_the_analysis_of_narrowed_keys_is_that_of_the_schemas_dtypes(name, monkeypatch):
    path = os.path.join(FIXTURES, name)
    trace = load_trace(path)
    monkeypatch.setattr(columns, "KEY_COLUMNS", {})
    wide = load_trace(path)
    for t, names in KEY_COLUMNS.items():
        for c in names:
            narrow, schema = getattr(trace, t).columns[c], getattr(wide, t).columns[c]
            assert narrow.itemsize < schema.itemsize and schema.dtype == TABLES[t][c], f"{t}.{c}"
            assert np.array_equal(narrow, schema), f"{t}.{c}"
    assert json.dumps(to_json(analyze(trace))) == json.dumps(to_json(analyze(wide)))


def _table_of(batches: list[dict[str, np.ndarray]], schema: dict[str, type]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute(columns.create_sql("t", schema))
    for batch in batches:
        columns.insert(db, "t", schema, batch)
    return db


SCHEMA = {"window": np.int32, "name": np.int32, "seq": np.int64, "tid": np.int64, "start_ns": np.int64}


def test_a_load_decodes_key_columns_narrow_as_it_goes_and_ends_as_narrowing_after():
    """Key columns are held narrow while batches arrive, widened when a batch needs it (the rows decoded
    so far copied over): the same dtypes and values as a load at the schema's types narrowed afterwards,
    through every path a batch takes — decoded big batches whose range grows int8 -> int16 -> int32 -> int64,
    small batches decoded together at the end (read from their heads first), one-value batches, a column one
    value throughout and a column no batch holds."""
    rng = np.random.default_rng(3)
    big = columns.SMALL_BATCH + 1
    ranges = [(0, 100), (0, 300), (-5, 70_000), (0, 2**33)]  # seq: int8, then int16, int32, int64
    batches = []
    for i, (lo, hi) in enumerate(ranges):
        n = big if i % 2 == 0 else 9  # small batches wait for the end, and widen the column there
        batches.append(
            {
                "window": np.full(n, i),
                "name": rng.integers(0, 120 if i < 3 else 30_000, n),
                "seq": rng.integers(lo, hi, n),
                "tid": np.full(n, 7),
                "start_ns": rng.integers(0, 10**12, n),
            }
        )
    db = _table_of(batches, SCHEMA)
    names = ("window", "name", "seq", "tid")
    held = columns.read_table(
        db, "x.brrr", "t", {**SCHEMA, "lib_line": np.int32}, narrow=(*names, "lib_line")
    )
    after = narrowed(
        columns.read_table(db, "x.brrr", "t", {**SCHEMA, "lib_line": np.int32}), (*names, "lib_line")
    )
    want = {"window": np.int8, "name": np.int16, "seq": np.int64, "tid": np.int8, "lib_line": np.int8}
    for c, dtype in want.items():
        assert held.columns[c].dtype == after.columns[c].dtype == dtype, c
        assert np.array_equal(held.columns[c], after.columns[c]), c
    assert np.array_equal(held.columns["seq"], np.concatenate([b["seq"] for b in batches]))
    assert held.columns["tid"].strides == (0,) and held.columns["lib_line"].strides == (0,)
    assert held.columns["start_ns"].dtype == np.int64


def test_a_load_never_holds_a_key_column_at_the_schemas_width():
    """A million small ids of an int64 column: the load's memory peak stays under the 8 MB the column takes
    at the schema's width (it ends as 1 MB of int8), where decoding wide and narrowing after peaks at 9 MB."""
    n, per = 1_000_000, 50_000
    ids = np.arange(n) % 100
    db = _table_of([{"seq": ids[i : i + per]} for i in range(0, n, per)], {"seq": np.int64})
    tracemalloc.start()
    try:
        got = columns.read_table(db, "x.brrr", "t", {"seq": np.int64}, narrow=("seq",))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.columns["seq"].dtype == np.int8 and np.array_equal(got.columns["seq"], ids)
    assert peak < 4 * n, f"peak {peak / 1e6:.1f} MB"


def test_a_batch_past_the_schemas_type_is_refused_when_the_column_is_held_narrow():
    """The narrow column widens to the schema's type at most: a value that type cannot hold is the same
    damaged-recording error as a load at the schema's types gives."""
    db = _table_of([{"window": np.arange(10)}], {"window": np.int64})
    bad = codec.encode(np.array([0, 2**40]))
    db.execute("INSERT INTO t(batch_rows, window) VALUES (2, ?)", (bad,))
    for narrow in ((), ("window",)):
        with pytest.raises(RecordingError, match=r"^x\.brrr is damaged: t\.window holds 1099511627776$"):
            columns.read_table(db, "x.brrr", "t", {"window": np.int32}, narrow=narrow)

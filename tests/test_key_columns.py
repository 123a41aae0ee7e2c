"""A whole load holds the columns the analysis only compares, sorts and indexes with (ids of windows, names,
lines and threads; sequence numbers) in the narrowest integer type their values fit, and the analysis of a
recording so loaded is that of the schema's dtypes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from analyzers.analyze import analyze
from analyzers.model import Table
from brrrtui.present.report import to_json
from brrrtui.recording import columns
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

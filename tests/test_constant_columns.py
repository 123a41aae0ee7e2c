"""A column that every batch stores as one value loads as that value repeated without memory (read-only,
np.broadcast_to); any other column reads as before, batch by batch, whatever mix of one-value and decoded
batches it has. The analysis of a recording so loaded is that of the same columns held whole."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import replace

import numpy as np
import pytest

from analyzers.analyze import analyze
from brrrtui.contract.model import Table
from brrrtui.contract.schema import GPU_SCHEMA
from brrrtui.present.report import to_json
from brrrtui.recording import codec, columns
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.store import RecordingWriter, load_recording, write_trace

T0 = 1_700_000_000_000_000_000
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def _kernels(n: int, first: int, stream: int, device: np.ndarray | int = 0) -> np.ndarray:
    """n gpu rows (the recorder's 2-D array): correlation first.., the given stream, device and -1 grid."""
    rows = np.zeros((n, 11), dtype=np.int64)
    rows[:, 3] = T0 + 1000 * (first + np.arange(n))  # start_ns
    rows[:, 4] = 500
    rows[:, 5] = device
    rows[:, 6] = stream
    rows[:, 7] = first + np.arange(n) + 1  # correlation
    rows[:, 8:] = -1  # grid, block, bytes
    return rows


def _write(path: str, batches: list[np.ndarray]) -> None:
    w = RecordingWriter(path)
    w.append({"strings": [(0, "k")], "windows": [(0, 0, T0, T0 + 10**9, 0, 0, 0, 5)]})
    for b in batches:
        w.append({"gpu": b})
    w.close()


# one big batch (decoded on its own) and small ones (decoded a column at a time) in each recording
BIG = columns.SMALL_BATCH + 10


def test_a_column_of_one_value_in_every_batch_is_one_value_repeated(tmp_path):
    path = str(tmp_path / "one.brrr")
    _write(path, [_kernels(BIG, 0, 7), _kernels(3, BIG, 7), _kernels(5, BIG + 3, 7)])
    gpu = load_recording(path).gpu
    n = BIG + 8
    for name, value in [("stream", 7), ("device", 0), ("grid", -1), ("kind", 0), ("window", 0)]:
        col = gpu.columns[name]
        assert col.strides == (0,) and not col.flags.writeable, name
        want = np.int8 if name in columns.KEY_COLUMNS["gpu"] else GPU_SCHEMA[name]  # ids load narrowed
        assert len(col) == n and (col == value).all() and col.dtype == want, name
    assert gpu.start_ns.strides != (0,) and gpu.start_ns.flags.writeable
    assert gpu.correlation.tolist() == list(range(1, n + 1))
    with pytest.raises(ValueError, match="read-only"):
        gpu.stream[0] = 3


@pytest.mark.parametrize(
    "streams",
    [
        (7, 9, 7),  # one value a batch, not the same one: written out
        (7, None, 7),  # one batch decodes its values: the others' single values go around them
    ],
)
def test_other_columns_read_batch_by_batch(tmp_path, streams):
    path = str(tmp_path / "mix.brrr")
    sizes = [BIG, 3, 5]
    batches, want, first = [], [], 0
    for n, s in zip(sizes, streams, strict=True):
        varying = np.arange(n) % 4 + 20
        batches.append(_kernels(n, first, varying if s is None else s))  # type: ignore[arg-type]
        want += varying.tolist() if s is None else [s] * n
        first += n
    _write(path, batches)
    stream = load_recording(path).gpu.stream
    assert stream.strides != (0,) and stream.tolist() == want
    small_first = [_kernels(3, 0, 5), _kernels(4, 3, 5, device=np.arange(4))]  # small batches only
    _write(str(tmp_path / "small.brrr"), small_first)
    gpu = load_recording(str(tmp_path / "small.brrr")).gpu
    assert gpu.stream.strides == (0,) and gpu.device.tolist() == [0, 0, 0, 0, 1, 2, 3]


def test_a_stream_tail_cut_from_one_value_batches(tmp_path):
    """The folded stream's newest rows (read_table from a row inside a batch): one value repeated too."""
    path = str(tmp_path / "tail.brrr")
    w = RecordingWriter(path)
    w.append({"strings": [(0, "k")]})
    for first in (0, BIG):
        rows = _kernels(BIG, first, 7)
        w.append({"stream": rows})  # the gpu layout with after_window (0) for window
    w.close()
    tail = load_recording(path, stream_tail=BIG + 5).stream
    assert len(tail) == BIG + 5 and tail.stream.strides == (0,) and (tail.stream == 7).all()
    assert tail.correlation[0] == BIG - 4 and tail.correlation[-1] == 2 * BIG


def _whole(table: Table) -> Table:
    return Table({k: np.array(v) for k, v in table.columns.items()})


@pytest.mark.parametrize("name", ["h200_hf_gpt2_steady", "h200_resnet50_modules"])
def test_the_analysis_of_repeated_values_is_that_of_whole_columns(tmp_path, name):
    """An H200 recording rewritten in today's format (batches of 1,000 rows, as a recorder commits them)."""
    old = str(tmp_path / "old.brrr")
    with gzip.open(os.path.join(FIXTURES, f"{name}.brrr.gz")) as src, open(old, "wb") as dst:
        shutil.copyfileobj(src, dst)
    path = str(tmp_path / "new.brrr")
    write_trace(load_recording(old), path, batch_rows=1000)
    trace = load_recording(path)
    tables = ("gpu", "runtime", "ops", "spans")
    repeated = {f"{t}.{c}" for t in tables for c, v in getattr(trace, t).columns.items() if v.strides == (0,)}
    assert {"gpu.device", "ops.concrete"} <= repeated, repeated  # one GPU; no Concrete Inputs recorded
    whole = replace(trace, **{t: _whole(getattr(trace, t)) for t in tables})
    assert json.dumps(to_json(analyze(trace))) == json.dumps(to_json(analyze(whole)))


def test_one_value_batches_are_checked_as_decoded_ones():
    """codec.constant_many takes the batches' one value only once every blob reads as its batch's: a blob
    whose length does not match its count is the same one-line error decode_many gives."""
    five = codec.encode(np.full(3, 7))
    assert five[0] == 5 and codec.constant_many([(five, 0, 3), (five, 3, 3)], False, "t.c", np.int32) == 7
    assert (
        codec.constant_many([(five, 0, 3), (codec.encode(np.full(2, 8)), 3, 2)], False, "t.c", np.int32)
        is None
    )
    assert (
        codec.constant_many([(five, 0, 3), (codec.encode(np.arange(3)), 3, 3)], False, "t.c", np.int32)
        is None
    )
    with pytest.raises(
        RecordingError, match=r"^t\.c holds 10 bytes of code 5, not the 3 values of its batch$"
    ):
        codec.constant_many([(five, 0, 3), (five + b"\x00", 3, 3)], False, "t.c", np.int32)
    with pytest.raises(RecordingError, match=r"^t\.c holds 300$"):
        codec.constant_many([(codec.encode(np.full(3, 300)), 0, 3)], False, "t.c", np.int8)

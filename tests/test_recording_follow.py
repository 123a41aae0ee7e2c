"""Following a recording while it is written (brrrtui.recording.follow): after every committed batch a poll
returns what load_recording returns, having read only the rows committed since the last poll."""

from __future__ import annotations

import numpy as np
import pytest
from test_recording_format import T0, assert_same_trace, make_v2
from tui_fakes import h200_recording

from brrrtui.recording import columns
from brrrtui.recording.checks import RecordingError
from brrrtui.recording.follow import Follower
from brrrtui.recording.store import TABLES, RecordingWriter, load_recording


def window_batches(trace, window: int) -> dict:
    """The rows of one window of `trace`, as the recorder appends them (one batch per window)."""
    batch = {}
    for name in ("gpu", "runtime", "ops", "spans", "line_samples", "windows", "capture_costs"):
        table = getattr(trace, name)
        rows = np.nonzero(table.window == window)[0]
        batch[name] = table.take(rows)
    return batch


def test_a_poll_after_each_window_is_the_whole_recording_and_reads_only_the_new_rows(tmp_path, monkeypatch):
    source = load_recording(h200_recording("h200_hf_gpt2_steady", tmp_path))
    path = str(tmp_path / "live.brrr")
    w = RecordingWriter(path)
    w.set_meta(status="running", device={"name": "NVIDIA H200", "num_sms": 132})
    w.append(
        {
            "strings": list(enumerate(source.strings)),
            "lines": [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(source.lines)],
        }
    )
    read = []
    real_fill = columns._Reader.fill
    monkeypatch.setattr(
        columns._Reader,
        "fill",
        lambda self, blobs, at, n, skip, take: (read.append(take), real_fill(self, blobs, at, n, skip, take)),
    )
    follower = Follower(path)
    windows = sorted(set(source.windows.window.tolist()))
    assert len(windows) >= 2
    for k, window in enumerate(windows):
        batch = window_batches(source, window)
        steps = np.array_split(np.arange(len(source.steps)), len(windows))[k]
        w.append(batch | {"steps": source.steps.take(steps)})
        read.clear()
        got = follower.poll()
        new_rows = sum(len(t) for t in batch.values()) + len(steps)
        assert sum(read) == new_rows  # this window's rows, not the recording's
        read.clear()
        assert_same_trace(load_recording(path), got)
    w.close()
    assert len(got.gpu) == len(source.gpu) and len(got.ops) == len(source.ops)
    assert len(follower.poll().windows) == len(windows)  # nothing new: the same trace again


def test_the_stream_keeps_its_newest_rows_across_polls(tmp_path):
    path = str(tmp_path / "s.brrr")
    make_v2(path, stream_batches=(3,))
    follower = Follower(path, stream_tail=5)
    assert follower.poll().stream.correlation.tolist() == [1, 2, 3]
    w = RecordingWriter(path)
    for first in (4, 6, 9):
        n = {4: 2, 6: 3, 9: 4}[first]
        w.append(
            {
                "stream": [
                    (0, 0, 0, T0 + 10**7 + 1000 * i, 100, 0, 7, i, -1, -1, -1)
                    for i in range(first, first + n)
                ]
            }
        )
        got = follower.poll()
        assert got.stream.correlation.tolist() == list(range(max(1, first + n - 5), first + n))
        assert_same_trace(load_recording(path, stream_tail=5), got)
    w.close()
    assert got.stream_total == 12


def test_a_string_committed_before_a_lower_id_reads_empty_until_that_id_comes(tmp_path):
    path = str(tmp_path / "n.brrr")
    make_v2(path, stream_batches=())
    follower = Follower(path)
    assert follower.poll().strings == ["k", "aten::mm"]
    w = RecordingWriter(path)
    w.append({"strings": [(4, "late")]})
    assert follower.poll().strings == ["k", "aten::mm", "", "", "late"]
    w.append({"strings": [(2, "two"), (3, "three")]})
    assert (
        follower.poll().strings == ["k", "aten::mm", "two", "three", "late"] == load_recording(path).strings
    )
    w.close()
    assert set(TABLES) >= {"gpu", "stream"}


def test_stream_rows_the_recorder_folds_leave_the_followed_stream_as_they_leave_a_load(tmp_path):
    """The recorder folds the oldest stream batches into stream_agg (their columns become NULL, their row count
    stays): a follower drops the rows it held from them and reads the aggregates it had not seen."""
    from brrrtui.contract.schema import STREAM_AGG_SCHEMA, STREAM_SCHEMA

    path = str(tmp_path / "f.brrr")
    make_v2(path, stream_batches=(3, 5, 4))
    follower = Follower(path, stream_tail=10)
    assert follower.poll().stream.correlation.tolist() == list(range(3, 13))
    w = RecordingWriter(path)
    agg = {c: np.full(1, 0 if c in ("kind", "name") else 7, dtype=d) for c, d in STREAM_AGG_SCHEMA.items()}
    nulls = ", ".join(f"{columns.quoted(c)} = NULL" for c in STREAM_SCHEMA)
    with w.db:
        w.db.execute("BEGIN")
        columns.insert(w.db, "stream_agg", STREAM_AGG_SCHEMA, agg)
        w.db.execute(f"UPDATE stream SET {nulls} WHERE rowid BETWEEN 1 AND 2")  # the first 8 rows
    got = follower.poll()
    assert got.stream.correlation.tolist() == [9, 10, 11, 12] and got.stream_total == 12
    assert_same_trace(load_recording(path, stream_tail=10), got)
    w.append({"stream": [(0, 0, 0, T0 + 10**8, 100, 0, 7, 13, -1, -1, -1)]})
    got = follower.poll()
    assert got.stream.correlation.tolist() == [9, 10, 11, 12, 13] and len(got.stream_agg) == 1
    assert_same_trace(load_recording(path, stream_tail=10), got)
    fresh = Follower(path, stream_tail=10).poll()  # one that starts after the fold never reads the NULLs
    assert_same_trace(load_recording(path, stream_tail=10), fresh)
    w.close()


def test_a_format_1_recording_is_followed_as_it_loads(tmp_path):
    """Format 1 files (rows, not batches) are counted whole: the same trace, poll after poll."""
    for name in ("h200_bert", "h200_gpt_stream"):
        path = h200_recording(name, tmp_path)
        follower = Follower(path)
        assert_same_trace(load_recording(path), follower.poll())
        assert_same_trace(load_recording(path), follower.poll())


def test_a_poll_reads_the_batch_list_from_the_last_batch_read_on(tmp_path, monkeypatch):
    path = str(tmp_path / "b.brrr")
    make_v2(path, stream_batches=(3, 5, 4))
    follower = Follower(path)
    follower.poll()
    asked = []
    real = columns.batch_sizes
    monkeypatch.setattr(
        columns, "batch_sizes", lambda db, p, t, after=0: asked.append((t, after)) or real(db, p, t, after)
    )
    w = RecordingWriter(path)
    w.append({"stream": [(0, 0, 0, T0 + 10**8, 100, 0, 7, 13, -1, -1, -1)]})
    got = follower.poll()
    assert dict(asked)["stream"] == 3 and dict(asked)["gpu"] == 1  # past the batches read before, not from 0
    assert got.stream.correlation.tolist()[-1] == 13
    assert_same_trace(load_recording(path), got)
    w.close()


def _writer_with_one_kernel(path: str) -> RecordingWriter:
    w = RecordingWriter(path)
    w.set_meta(status="running")
    w.append({"strings": [(0, "k0")], "gpu": [(0, 0, 0, T0, 1_000, 0, 7, 1, -1, -1, -1)]})
    return w


def _commit_a_kernel_named_anew(w: RecordingWriter, k: int) -> None:
    w.append({"strings": [(k, f"k{k}")], "gpu": [(0, 0, k, T0 + k * 10_000, 1_000, 0, 7, k + 1, -1, -1, -1)]})


def test_a_batch_committed_while_the_tables_are_read_is_named(tmp_path, monkeypatch):
    """The rows are read before the names: a batch the writer commits in between adds names its rows need
    (it was refused as damaged, "gpu.name names string 1, but it holds 1 strings")."""
    from brrrtui.recording import follow, store

    path = str(tmp_path / "live.brrr")
    w = _writer_with_one_kernel(path)
    f = Follower(path)
    f.poll()
    real_load, real_follow = store._read_tables, follow.Follower._read_tables
    monkeypatch.setattr(
        store, "_read_tables", lambda *a: (_commit_a_kernel_named_anew(w, 1), real_load(*a))[1]
    )
    monkeypatch.setattr(
        follow.Follower,
        "_read_tables",
        lambda self, src: (_commit_a_kernel_named_anew(w, 2), real_follow(self, src))[1],
    )
    trace = load_recording(path)
    assert [trace.strings[i] for i in trace.gpu.name] == ["k0", "k1"]
    followed = f.poll()
    assert [followed.strings[i] for i in followed.gpu.name] == ["k0", "k1", "k2"]
    w.close()


def test_a_poll_that_refuses_its_rows_keeps_none_of_them(tmp_path):
    path = str(tmp_path / "live.brrr")
    w = _writer_with_one_kernel(path)
    f = Follower(path)
    f.poll()
    w.append({"gpu": [(0, 0, 999, T0 + 10_000, 1_000, 0, 7, 2, -1, -1, -1)]})  # names no string
    for _ in range(2):  # the second poll refuses them again: the first kept nothing of them
        with pytest.raises(RecordingError, match="names string 999"):
            f.poll()
    w.close()

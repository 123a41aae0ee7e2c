"""Live readers (the Follower, the stream pages' StreamReader) against the recorder's folds: a fold that commits
between a reader's statements, or folds rows the reader has not read yet. The fold is run at that point
(deterministically) from the recorder's own path (tests/stream_fold_fixture.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from stream_fold_fixture import record

from analyzers.analyze import analyze
from analyzers.stream.lines import stream_figures
from brrrtui import session as live
from brrrtui.present.snapshot import build_snapshot
from brrrtui.record.fold import StreamFolder
from brrrtui.recording import store
from brrrtui.recording.follow import Follower
from brrrtui.recording.store import load_recording
from brrrtui.recording.stream_reader import StreamReader


def record_with(tmp_path, at_fold: Callable[[StreamFolder, Any, Callable[[], None]], None]) -> str:
    """The fixture recorded folding (keep 3,000, chunk 2,000); at the first fold due, at_fold(folder, writer,
    fold) runs instead of the fold and may fold (once) whenever it likes."""
    folder = StreamFolder(keep_rows=3_000, chunk_rows=2_000)
    real_fold, done = folder.fold, []

    def fold(writer: Any) -> None:
        if done or folder._chunk()[1] < folder.chunk_rows:
            return real_fold(writer)
        done.append(True)
        fired: list[bool] = []
        at_fold(folder, writer, lambda: fired or fired.append(True) or real_fold(writer))
        assert fired and folder.folds == 1

    folder.fold = fold  # type: ignore[method-assign]
    path = str(tmp_path / "live.brrr")
    record(path, "h200_known_regimes", tmp_path, folder)
    assert done
    return path


@pytest.mark.parametrize("where", ["_folded", "_read"])
def test_a_follower_poll_that_a_fold_commits_in_the_middle_of_sees_it_whole(tmp_path, monkeypatch, where):
    """Rows folded between the poll's statements were in neither the raw stream nor the aggregates it read
    (the fold before `_folded`), or an emptied batch read as damaged (before the stream's `_read`)."""
    polls = []

    def at_fold(folder: StreamFolder, writer: Any, fold: Callable[[], None]) -> None:
        real = getattr(Follower, where)

        def hook(self: Follower, *a: Any) -> Any:
            if where == "_folded" or a[1] == "stream":  # `_read`: the stream's, the last of the poll's reads
                fold()
            return real(self, *a)

        with monkeypatch.context() as m:
            m.setattr(Follower, where, hook)
            polls.append(Follower(writer.path).poll())
        polls.append(load_recording(writer.path))

    record_with(tmp_path, at_fold)
    got, loaded = polls
    assert got.stream_total == loaded.stream_total > 0 and int(loaded.stream_agg["count"].sum()) > 0
    assert len(got.stream) + int(got.stream_agg["count"].sum()) == got.stream_total
    assert got.stream.correlation.tolist() == loaded.stream.correlation.tolist()
    assert got.stream_agg["count"].tolist() == loaded.stream_agg["count"].tolist()


def test_a_stream_reader_poll_that_a_fold_commits_in_the_middle_of_reads_on_past_it(tmp_path, monkeypatch):
    """The reader is where the folds reach now; the fold lands between its row count and its read."""
    out = []

    def at_fold(folder: StreamFolder, writer: Any, fold: Callable[[], None]) -> None:
        reader = StreamReader(writer.path, folder.first_raw)
        real = store.Tables.read
        with monkeypatch.context() as m:
            m.setattr(
                store.Tables, "read", lambda self, t, *a: (t == "stream" and fold(), real(self, t, *a))[1]
            )
            rows, _ = reader.poll()
        out.append((rows, reader.reload, load_recording(writer.path)))

    record_with(tmp_path, at_fold)
    rows, reload, loaded = out[0]
    assert rows.correlation.tolist() == loaded.stream.correlation.tolist()
    assert (
        reload is not None and reload["stream_agg"]["count"].tolist() == loaded.stream_agg["count"].tolist()
    )


def _behind_a_fold(tmp_path) -> tuple[str, Any]:
    """A recording, and the load of it right after its first fold: a page's snapshot that the recorder folds
    past (its polls held back by a long analysis)."""
    loads = []

    def at_fold(folder: StreamFolder, writer: Any, fold: Callable[[], None]) -> None:
        fold()
        loads.append(load_recording(writer.path))

    path = record_with(tmp_path, at_fold)
    folded = int(load_recording(path).stream_agg["count"].sum())
    assert folded > loads[0].stream_total  # folded past the snapshot's rows
    return path, loads[0]


def test_a_stream_reader_behind_a_fold_reads_past_it_and_asks_for_a_reload(tmp_path):
    """It read the folded batches (NULL columns: "damaged"), poll after poll."""
    path, snapshot = _behind_a_fold(tmp_path)
    reader = StreamReader(path, snapshot.stream_total, len(snapshot.strings) - 1)
    rows, _ = reader.poll()
    now = load_recording(path)
    assert rows.correlation.tolist() == now.stream.correlation.tolist()  # from the first row not folded
    assert reader.reload is not None and reader.rowid == now.stream_total
    assert {t: len(v) for t, v in reader.reload.items()} == {t: len(getattr(now, t)) for t in reader.reload}
    assert np.array_equal(reader.reload["stream_agg"]["count"], now.stream_agg["count"])
    rows, _ = reader.poll()
    assert not len(rows) and reader.reload is None


def test_a_stream_page_behind_a_fold_takes_the_aggregates_again(tmp_path):
    """Every row once, raw or folded: the page drops the raw rows it held and reads the aggregates again."""
    path, snapshot = _behind_a_fold(tmp_path)
    snap = build_snapshot(analyze(snapshot), None, 0)
    got = live.follow_stream(snap, live.stream_reader(path, snap))
    now = load_recording(path)
    assert got is not None and got.stream is not None
    figures = stream_figures(got.stream)
    assert figures.records == figures.analysed == now.stream_total
    assert figures.folded == int(now.stream_agg["count"].sum())
    assert figures.gpu_ns == int(now.stream.dur_ns.sum()) + int(now.stream_agg.dur_ns.sum())

"""The recorder's side of the folded kernel stream: an hour of every kernel in a bounded file.

The stream is appended raw, batch by batch, as before (a live view follows it, a killed recorder loses
nothing). Once more than `keep_rows + chunk_rows` rows are raw, the oldest whole batches (at least
`chunk_rows` rows, leaving at least `keep_rows`) are folded, in one transaction:

    read their rows back -> align each segment to its window's template, measure the idle before each row
    -> stream_agg (brrrtui.contract.stream_fold) + stream_folds (where each segment's alignment and idle continue)
       + stream_busy (their time profile, for the timeline)
    -> the folded batches keep their row count and lose their values (NULL columns), so row numbers stay
       put for readers following the file; SQLite reuses the freed pages

Each window's template (the kernels of its last step, in launch order) is stored in stream_templates as soon
as the window and its last step's time have arrived. A segment is folded once its template is final: the
window it came after has arrived (rows before the first window wait for the first window with kernels, up to
`defer_rows` raw rows, and are folded unmatched after that). What the recorder holds: the templates (a few
thousand ids each), each segment's state, a list of the raw batches' sizes, and one chunk while folding.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from brrrtui.contract.messages import WindowBatch
from brrrtui.contract.model import NONE
from brrrtui.contract.schema import (
    GPU_SCHEMA,
    RUNTIME_SCHEMA,
    STREAM_AGG_SCHEMA,
    STREAM_BUSY_SCHEMA,
    STREAM_FOLD_SCHEMA,
    STREAM_SCHEMA,
    STREAM_TEMPLATE_SCHEMA,
    WINDOW_SCHEMA,
)
from brrrtui.contract.stream_align import TemplateNames, launch_times, segment_template, template_order
from brrrtui.contract.stream_fold import BUCKET_NS, FoldState, fold
from brrrtui.recording import columns
from brrrtui.recording.store import RecordingWriter

KEEP_ROWS = 150_000  # the newest stream rows kept raw (~7 s of GPT-2 small on an H200)
CHUNK_ROWS = 200_000  # the least a fold takes: raw rows stay under KEEP_ROWS + CHUNK_ROWS + a batch, which a
# load holds whole (recording.store.STREAM_TAIL), so the analysis sees every row, raw or folded
DEFER_ROWS = 1_000_000  # raw rows waiting for a template before they are folded unmatched
STEPS_KEPT = 20_000  # step end times remembered for windows whose batch comes after their steps'


def _env_limits() -> tuple[int, int, int] | None:
    """BRRRTUI_STREAM_FOLD="keep,chunk,defer" (rows): what a small run needs to fold, for tests."""
    try:
        keep, chunk, defer = (int(v) for v in os.environ.get("BRRRTUI_STREAM_FOLD", "").split(","))
    except ValueError:
        return None
    return keep, chunk, defer


@dataclass
class _Pending:
    """A window whose template waits for its last step's time."""

    correlation: np.ndarray
    names: np.ndarray
    launch_ns: np.ndarray
    first_step: int
    last_step: int


class StreamFolder:
    def __init__(
        self,
        keep_rows: int = KEEP_ROWS,
        chunk_rows: int = CHUNK_ROWS,
        bucket_ns: int = BUCKET_NS,
        defer_rows: int = DEFER_ROWS,
    ):
        limits = _env_limits()
        if limits is not None:
            keep_rows, chunk_rows, defer_rows = limits
        self.keep_rows, self.chunk_rows, self.bucket_ns = keep_rows, chunk_rows, bucket_ns
        self.defer_rows = defer_rows
        self.pending: dict[int, _Pending] = {}
        self.templates: dict[int, TemplateNames] = {}
        self.correlations: dict[int, np.ndarray] = {}  # of the templates not yet written
        self.unwritten: list[int] = []  # templates not yet in the recording
        self.seen: set[int] = set()  # windows whose batch arrived
        self.steps: dict[int, int] = {}
        self.states: dict[int, FoldState] = {}
        self.batches: deque[tuple[int, frozenset[int]]] = deque()  # raw batches: (rows, segments)
        self.raw_rows = 0  # rows of those batches
        self.first_raw = 0  # row number of the first raw row (the rows before it are folded)
        self.last_rowid = 0  # SQLite rowid of the last folded batch
        self.folds = 0
        self.agg_rows = 0
        self.fold_ms_max = 0.0
        self.fold_ms_total = 0.0  # the writer thread's time in folds (the reader keeps draining the pipe)
        self.broken = ""  # why folding stopped, if it did

    # ------------------------------------------------------------------ what arrives
    def on_window(self, msg: WindowBatch) -> None:
        w = dict(zip(WINDOW_SCHEMA, msg.window, strict=True))
        win = int(w["window"])
        self.seen.add(win)
        if not msg.gpu:
            return
        g = columns.columns_of(msg.gpu, GPU_SCHEMA)
        rt = columns.columns_of(msg.runtime, RUNTIME_SCHEMA) if msg.runtime else None
        corr = g["correlation"].astype(np.int64)
        launch = (
            launch_times(corr, rt["correlation"].astype(np.int64), rt["start_ns"].astype(np.int64))
            if rt is not None
            else np.full(len(corr), NONE, dtype=np.int64)
        )
        names = g["name"].astype(np.int64)
        self.pending[win] = _Pending(corr, names, launch, int(w["first_step"]), int(w["last_step"]))
        self._resolve(force=False)

    def on_steps(self, steps: list[tuple[int, int]]) -> None:
        for step, t_ns in steps:
            self.steps[int(step)] = int(t_ns)
        if len(self.steps) > STEPS_KEPT:
            for s in sorted(self.steps)[: len(self.steps) - STEPS_KEPT]:
                del self.steps[s]
        if self.pending:
            self._resolve(force=False)

    def on_stream(self, rows: np.ndarray) -> bool:
        """One raw batch appended (STREAM_SCHEMA rows); whether a fold is due."""
        if len(rows):
            self.batches.append((len(rows), frozenset(np.unique(rows[:, 0]).tolist())))
            self.raw_rows += len(rows)
        return not self.broken and self.raw_rows >= self.keep_rows + self.chunk_rows

    def _resolve(self, force: bool, upto: int | None = None) -> None:
        """Templates of pending windows whose last step's time is known (`force`: all, up to window `upto`,
        the ones without it from all their rows)."""
        for win in sorted(self.pending):
            p = self.pending[win]
            steps = p.first_step >= 0 and p.last_step >= 0
            t_last = self.steps.get(p.last_step) if steps else None
            if steps and t_last is None and not (force and (upto is None or win <= upto)):
                continue
            t_prev = self.steps.get(p.last_step - 1) if t_last is not None else None
            order = template_order(p.correlation, p.launch_ns, t_last, t_prev)
            names = p.names[order]
            self.templates[win] = TemplateNames.of(win, names)
            self.correlations[win] = p.correlation[order]
            self.unwritten.append(win)
            del self.pending[win]

    def template_rows(self) -> dict[str, np.ndarray] | None:
        """The templates not yet written, as stream_templates columns (None: none); marks them written."""
        if not self.unwritten:
            return None
        parts = []
        for win in self.unwritten:
            t = self.templates[win]
            n = len(t.names)
            parts.append((np.full(n, win), np.arange(n), t.names, self._correlations(win)))
        self.unwritten = []
        cols = [np.concatenate(c).astype(np.int64) for c in zip(*parts, strict=True)]
        return dict(zip(STREAM_TEMPLATE_SCHEMA, cols, strict=True))

    def _correlations(self, win: int) -> np.ndarray:
        return self.correlations.pop(win)

    # ------------------------------------------------------------------ folding
    def _foldable(self, segs: frozenset[int]) -> bool:
        for after in segs:
            if after in self.states:
                continue
            if after >= 0 and after not in self.seen and self.raw_rows < self.defer_rows:
                return False
            self._resolve(force=True, upto=after if after >= 0 else min(self.pending, default=NONE))
            if segment_template(after, sorted(self.templates)) == NONE and self.raw_rows < self.defer_rows:
                return False
        return True

    def _chunk(self) -> tuple[int, int]:
        """(batches, rows) of the oldest raw batches to fold now."""
        take = rows = 0
        for n, segs in self.batches:
            if self.raw_rows - rows - n < self.keep_rows or not self._foldable(segs):
                break
            take, rows = take + 1, rows + n
        return take, rows

    def fold(self, writer: RecordingWriter) -> None:
        """Fold the oldest raw batches, if enough are foldable, in one transaction."""
        t0 = time.perf_counter()
        take, n = self._chunk()
        if n < self.chunk_rows:
            return
        db = writer.db
        ids = db.execute(
            "SELECT rowid, batch_rows FROM stream WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (self.last_rowid, take),
        ).fetchall()
        if len(ids) != take or sum(r[1] for r in ids) != n:
            self.broken = "the raw stream batches are not the ones the recorder wrote"
            return
        rows = columns.read_table(
            db, writer.path, "stream", STREAM_SCHEMA, self.first_raw, self.first_raw + n
        )
        saved = copy.deepcopy(self.states), list(self.unwritten), dict(self.correlations)
        counts = self.first_raw, self.folds, self.agg_rows
        try:
            order = sorted(self.templates)
            template_for = {a: segment_template(a, order) for a in np.unique(rows.after_window).tolist()}
            folded = fold(rows, self.templates, template_for, self.states, self.bucket_ns)
            # what the meta written with the fold says: the fold included
            self.first_raw, self.folds = self.first_raw + n, self.folds + 1
            self.agg_rows += len(folded.agg["count"])
            self._commit(db, folded.agg, folded.folds, folded.busy, ids[0][0], ids[-1][0])
        except BaseException:
            self.states, self.unwritten, self.correlations = saved
            self.first_raw, self.folds, self.agg_rows = counts
            raise
        for _ in range(take):
            self.batches.popleft()
        self.raw_rows -= n
        self.last_rowid = ids[-1][0]
        ms = (time.perf_counter() - t0) * 1e3
        self.fold_ms_max, self.fold_ms_total = max(self.fold_ms_max, ms), self.fold_ms_total + ms

    def _commit(
        self,
        db: sqlite3.Connection,
        agg: dict[str, np.ndarray],
        folds: dict[str, np.ndarray],
        busy: dict[str, np.ndarray],
        lo: int,
        hi: int,
    ) -> None:
        nulls = ", ".join(f"{columns.quoted(c)} = NULL" for c in STREAM_SCHEMA)
        with db:
            db.execute("BEGIN")
            templates = self.template_rows()
            if templates is not None:
                columns.insert(db, "stream_templates", STREAM_TEMPLATE_SCHEMA, templates)
            columns.insert(db, "stream_agg", STREAM_AGG_SCHEMA, agg)
            columns.insert(db, "stream_folds", STREAM_FOLD_SCHEMA, folds)
            columns.insert(db, "stream_busy", STREAM_BUSY_SCHEMA, busy)
            db.execute(f"UPDATE stream SET {nulls} WHERE rowid BETWEEN ? AND ?", (lo, hi))
            db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('stream_fold', ?)",
                (json.dumps(self.meta()),),
            )
            db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_batch_ns', ?)", (str(time.time_ns()),)
            )

    def finish(self, append: Callable[[dict[str, object]], None]) -> None:
        """At the end of the run: every template still pending, from what is known."""
        self._resolve(force=True)
        templates = self.template_rows()
        if templates is not None:
            append({"stream_templates": templates})

    def meta(self) -> dict[str, object]:
        return {
            "keep_rows": self.keep_rows,
            "chunk_rows": self.chunk_rows,
            "bucket_ns": self.bucket_ns,
            "folded_rows": self.first_raw,
            "folds": self.folds,
            "agg_rows": self.agg_rows,
            "fold_ms_max": round(self.fold_ms_max, 1),
            "fold_ms_total": round(self.fold_ms_total, 1),
            "error": self.broken,
        }

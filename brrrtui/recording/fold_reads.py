"""Reading a recording the recorder is folding (brrrtui.record.fold): each fold empties old stream batches
and appends to the aggregate tables in one transaction, which may commit between a reader's statements.
Read so, the stream and the aggregates disagree: rows in neither, or an emptied batch read as damaged. A
reader does not hold one read transaction over its statements instead: in the rollback journal the writer
keeps, that holds the recorder's commits back for as long as the read takes. It counts the folds before and
after, and reads again when one came between."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from brrrtui.recording.checks import RecordingError

if TYPE_CHECKING:
    from brrrtui.recording.store import Tables

T = TypeVar("T")
FOLD_RETRIES = 5
FOLDED_TABLES = ("stream_agg", "stream_folds", "stream_busy", "stream_templates")
"""What a fold appends to (the stream's aggregates)."""


def fold_count(tables: Tables) -> int:
    """How many folds the recorder has committed: each appends one stream_folds batch, never removed."""
    if not tables.columnar or "stream_folds" not in tables.names:
        return 0
    return int(tables.db.execute("SELECT max(rowid) FROM stream_folds").fetchone()[0] or 0)


def read_whole_folds(tables: Tables, read: Callable[[bool], T], folds: int | None = None) -> T:
    """read(again), once more (again=True) while a fold committed during it; an error it raised stands only
    if none did. `folds`: the fold count when the caller's reads began (default: now)."""
    folds = fold_count(tables) if folds is None else folds
    for attempt in range(FOLD_RETRIES):
        try:
            out, error = read(attempt > 0), None
        except RecordingError as e:  # damage, or a batch a fold emptied after its extent was read
            error = e
        now = fold_count(tables)
        if now == folds:  # no fold came between: what was read is whole
            if error is not None:
                raise error
            return out
        folds = now
    raise RecordingError(f"{tables.path}: its stream was folded {FOLD_RETRIES} times while it was read")

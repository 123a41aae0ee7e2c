"""The messages the app's thread workers post back to the UI thread."""

from __future__ import annotations

from textual.message import Message

from brrrtui.contract.model import Trace
from brrrtui.present.snapshot import Snapshot


class SnapshotReady(Message):
    """An analysis: `trace` the whole recording it came from; `picked` it answers the phase key."""

    def __init__(self, snapshot: Snapshot, trace: Trace, picked: bool = False) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.trace = trace
        self.picked = picked


class StreamReady(Message):
    """A stream update: `snapshot` None when nothing new arrived (or reading failed: `error`)."""

    def __init__(self, snapshot: Snapshot | None, generation: int, error: str | None = None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.generation = generation
        self.error = error


class AnalysisFailed(Message):
    """`unreadable`: the file itself could not be read (brrrtui.contract.errors.InputError)."""

    def __init__(self, error: str, unreadable: bool = False) -> None:
        super().__init__()
        self.error = error
        self.unreadable = unreadable

"""What the recorder tells the live UI while a script runs (UI-free; the TUI drains it from a worker).

The recording file is the source of truth: a `WindowAdded` means "the recording now holds window N", and the
UI re-reads and re-analyses the recording off the UI thread. Everything else is small and goes in the event.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class WindowAdded:
    window: int
    kernels: int
    ops: int


@dataclass(frozen=True)
class StepsAdded:
    last_step: int
    count: int


@dataclass(frozen=True)
class StreamAdded:
    """The recording's kernel stream gained `count` rows (read them with brrrtui.recording.store.StreamReader)."""

    count: int
    total: int
    last_end_ns: int


@dataclass(frozen=True)
class TelemetrySample:
    t_ns: int
    gpu_util_pct: float | None
    mem_used_bytes: float | None
    power_w: float | None
    sm_clock_mhz: float | None


@dataclass(frozen=True)
class LogLine:
    """A line printed (`text`), or a block of the script's output read from its pipe at once: its last
    `lines`, in order, after `dropped` lines only counted (`text` is then ""). A flood of output is a few
    events a poll, not one per line."""

    stream: str  # "stdout" | "stderr" | "brrrtui"
    text: str
    lines: list[str] | None = None
    dropped: int = 0


@dataclass(frozen=True)
class Exited:
    exit_code: int  # the script's exit code; negative: killed by that signal
    summary: str = ""  # when it failed: its last stderr line (a traceback's exception), else ""


def last_error(output: Iterable[tuple[str, str]]) -> str:
    """The last non-blank stderr line of (stream, text) lines: a traceback's exception; '' when none."""
    for stream, text in reversed(list(output)):
        if stream == "stderr" and text.strip():
            return text.strip()
    return ""


FeedEvent = WindowAdded | StepsAdded | StreamAdded | TelemetrySample | LogLine | Exited


class Feed:
    """A thread-safe, unbounded queue of FeedEvents with a non-blocking drain."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue[FeedEvent] = queue.SimpleQueue()

    def put(self, event: FeedEvent) -> None:
        self._q.put(event)

    def drain(self, limit: int = 10_000) -> list[FeedEvent]:
        out: list[FeedEvent] = []
        while len(out) < limit:
            try:
                out.append(self._q.get_nowait())
            except queue.Empty:
                break
        return out

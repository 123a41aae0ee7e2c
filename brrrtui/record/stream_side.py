"""The recorder's handling of the kernel stream, on its writer thread: decode each batch of raw CUPTI
buffers into rows, append them, fold the older rows (brrrtui.record.fold), and count what arrived."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from brrrtui.contract.cupti_records import Scanned, rows_from_scan
from brrrtui.contract.messages import StreamBatch, StreamStats, WindowBatch
from brrrtui.record.feed import Feed, StreamAdded
from brrrtui.record.fold import StreamFolder
from brrrtui.record.latency import StreamLatency
from brrrtui.record.sink import Sink


class StreamSide:
    def __init__(
        self,
        sink: Sink,
        folder: StreamFolder | None,
        progress: Callable[[str], None],
        feed: Feed | None,
    ):
        self.sink, self.folder, self.progress, self.feed = sink, folder, progress, feed
        self.latency = StreamLatency()

    def on_window(self, msg: WindowBatch) -> None:
        """A window arrived: its template, once its last step's time is known, goes to the recording."""
        if self.folder is not None:
            self.folder.on_window(msg)
            self._write_templates()

    def on_steps(self, steps: list[Any]) -> None:
        if self.folder is not None and steps:
            self.folder.on_steps([(int(r[0]), int(r[1])) for r in steps])
            self._write_templates()

    def _write_templates(self) -> None:
        assert self.folder is not None
        rows = self.folder.template_rows()
        if rows is not None:
            self.sink.append({"stream_templates": rows})

    def on_batch(self, msg: StreamBatch) -> None:
        """The kernel stream's raw CUPTI buffers -> STREAM_SCHEMA rows (decoded here, off the script's GIL)."""
        found = Scanned(msg.offsets, msg.names, msg.shapes)
        rows, dropped = rows_from_scan(msg.buffers, msg.parts, found)
        self.latency.dropped += dropped
        self.append_rows(rows, msg.strings, msg.sent_ns)

    def append_rows(self, rows: np.ndarray, strings: list[Any], sent_ns: int | None = None) -> None:
        """One batch of decoded rows (an int64 array in STREAM_SCHEMA order) and the strings they name."""
        self.sink.append({"strings": strings, "stream": rows})  # the writer stores the array as it is
        if not len(rows):
            return
        if not self.latency.records:
            self.progress("kernel stream on: every kernel between windows is recorded (lines inferred)")
        last_end = self.latency.add(rows, time.time_ns(), sent_ns)
        if self.feed:
            self.feed.put(StreamAdded(len(rows), self.latency.records, last_end))
        if self.folder is not None and self.folder.on_stream(rows):
            self.sink.transact(self.folder.fold)

    def meta(self, msg: StreamStats, write_ns_max: int, inbox_max: int) -> dict[str, Any]:
        return self.latency.meta(msg, write_ns_max, inbox_max)

    def finish(self) -> None:
        """The run ended: every window's template is written, and what folding did goes to meta."""
        if self.folder is not None and (self.folder.templates or self.folder.pending):
            self.folder.finish(self.sink.append)
            self.sink.set_meta(stream_fold=self.folder.meta())

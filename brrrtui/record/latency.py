"""How late streamed kernels reach the recording."""

from __future__ import annotations

from typing import Any

import numpy as np

from brrrtui.contract.messages import StreamStats


class StreamLatency:
    """How late streamed kernels reach the recording: (committed - kernel end) in 1 ms bins, flat memory;
    and the part of it spent before the script's process sent them (CUPTI's buffering and the flush thread),
    so a slow p99 says which side to mend."""

    BINS = 60_000  # 60 s; later lands in the last bin

    def __init__(self) -> None:
        self.hist = np.zeros(self.BINS, dtype=np.int64)
        self.hist_sent = np.zeros(self.BINS, dtype=np.int64)
        self.records = 0
        self.batches = 0
        self.dropped = 0  # records of kernels still running when a forced flush returned them

    def add(self, rows: np.ndarray, now_ns: int, sent_ns: int | None = None) -> int:
        """Count one batch of STREAM_SCHEMA rows (an int64 array) committed at now_ns and sent by the script's
        process at sent_ns; returns its last kernel end."""
        ends = rows[:, 3] + rows[:, 4]
        self.hist += self._bins(now_ns - ends)
        if sent_ns is not None:
            self.hist_sent += self._bins(sent_ns - ends)
        self.records += len(rows)
        self.batches += 1
        return int(ends.max())

    def _bins(self, late_ns: np.ndarray) -> np.ndarray:
        return np.bincount(np.clip(late_ns // 1_000_000, 0, self.BINS - 1), minlength=self.BINS)

    def percentile(self, q: float, hist: np.ndarray | None = None) -> float:
        """ms; the upper edge of the bin holding the q-th percentile."""
        hist = self.hist if hist is None else hist
        total = int(hist.sum())
        if not total:
            return float("nan")
        k = int(np.searchsorted(np.cumsum(hist), q / 100 * total))
        return float(min(k, self.BINS - 1) + 1)

    def meta(self, stats: StreamStats, write_ns_max: int, inbox_max: int) -> dict[str, Any]:
        """The recording's `stream` meta value: these figures, the child's counters and the recorder's."""
        return {
            **self.summary(),
            "child_flush_ms_max": stats.flush_ns_max / 1e6,
            "child_decode_ms": stats.decode_ns / 1e6,
            "bytes": stats.buffer_bytes,
            "child_queue_ms_max": stats.queue_ns_max / 1e6,
            "child_write_ms_max": stats.write_ns_max / 1e6,
            "recorder_write_ms_max": write_ns_max / 1e6,
            "recorder_queue_max": inbox_max,
            "incomplete_dropped": self.dropped,
            "forced_flushes": stats.forced_flushes,
            "late_buffers_dropped": stats.late_buffers,
            "error": stats.error,
            "cupti_api": stats.cupti_api_version,
        }

    def summary(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "batches": self.batches,
            "latency_p50_ms": self.percentile(50),
            "latency_p99_ms": self.percentile(99),
            "until_sent_p50_ms": self.percentile(50, self.hist_sent),
            "until_sent_p99_ms": self.percentile(99, self.hist_sent),
        }

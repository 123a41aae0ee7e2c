"""The agent's control of the CUPTI kernel stream (brrrtui.capture.stream): start it once the script has
initialised CUDA, hand CUPTI to the profiler around each window, and send its batches. A mixin of
brrrtui.capture.agent.Agent, whose state (`stream`, `stream_lock`, `want_stream`, `window_open`) it uses."""

from __future__ import annotations

import time
from typing import Any

from brrrtui.contract.cupti_records import Scanned
from brrrtui.contract.messages import StreamBatch


class StreamControl:
    channel: Any
    strings: Any
    torch: Any
    stream: Any
    stream_lock: Any
    want_stream: bool
    window_open: bool
    window_id: int
    stepped_aside: bool
    note: Any  # Agent.note(key, text)

    def _start_stream(self) -> None:
        """Start streaming kernels once the script has initialised CUDA (never initialise it for the script)."""
        if not self.torch.cuda.is_initialized():
            return
        with self.stream_lock:
            if self.stream is not None or not self.want_stream or self.stepped_aside:
                return
            from brrrtui.capture import cupti_ffi
            from brrrtui.capture.stream import KernelStream

            cupti, why = cupti_ffi.load()
            if cupti is None:
                self.want_stream = False
                self.note("stream", f"profiler windows only: {why}")
                return
            stream = KernelStream(cupti, self._send_stream, self.strings, self.strings.lock)
            stream.after_window = self.window_id
            if not self.window_open:
                try:
                    stream.start()
                except Exception as e:  # noqa: BLE001 - an unsupported driver or CUDA: windows only
                    self.want_stream = False
                    self.note(
                        "stream", f"profiler windows only: the CUPTI kernel stream failed to start ({e})"
                    )
                    return
            self.stream = stream

    def _send_stream(self, data: bytes, parts: list[tuple[int, int, int]], found: Scanned) -> None:
        self.channel.send(
            StreamBatch(
                sent_ns=time.time_ns(),
                strings=self.strings.take_new(),
                buffers=data,
                parts=parts,
                offsets=found.offsets,
                names=found.names,
                shapes=found.shapes,
            )
        )

    def _pause_stream(self) -> None:
        with self.stream_lock:
            self.window_open = True
            if self.stream is not None:
                self.stream.pause()

    def _resume_stream(self) -> None:
        with self.stream_lock:
            self.window_open = False
            if self.stream is not None and not self.stepped_aside:
                try:
                    self.stream.resume(self.window_id)
                except Exception as e:  # noqa: BLE001
                    self.stream.stop()
                    self.note(
                        "stream", f"kernel stream stopped: CUPTI refused to resume it after a window ({e})"
                    )

"""Runs a script with a stand-in for libcupti, so `brrrtui record --stream` works end to end on a CPU:
usage `fake_cupti.py SCRIPT [ARGS...]`. Its own thread hands over the real H200 buffer of
tests/fixtures/cupti_buffer_h200.json.gz while the activity kinds are enabled, about FAKE_CUPTI_RATE
records a second (default 20000), with every record's start and end rewritten to the moment of hand-over,
as CUPTI's worker thread would."""

import gzip
import json
import os
import runpy
import sys
import threading
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from brrrtui.capture import cupti_ffi  # noqa: E402
from brrrtui.contract import cupti_records as records  # noqa: E402
from brrrtui.capture import stream as stream_module  # noqa: E402

with gzip.open(os.path.join(ROOT, "tests", "fixtures", "cupti_buffer_h200.json.gz")) as f:
    FIXTURE = json.load(f)
BUFFER = bytearray(gzip.decompress(bytes.fromhex(FIXTURE["buffers"][0]["hex_gz"])) * 8)
SIZES = {int(k): v for k, v in FIXTURE["sizes"].items()}
NAMES = {int(k): v for k, v in FIXTURE["names"].items()}  # name pointers of the H200 process -> names
OFFSETS = np.concatenate(list(records.walk(bytes(BUFFER), SIZES).values()))


class FakeCupti:
    api_version = 0

    def __init__(self) -> None:
        self.on_buffer = None
        self.kinds: set[int] = set()
        self.handed_over = 0
        self.lock = threading.Lock()  # as in CUPTI, no buffer is handed over once disable() has returned
        threading.Thread(target=self._worker, daemon=True).start()

    def register(self) -> None:
        pass

    def enable(self, kind: int) -> None:
        self.kinds.add(kind)

    def disable(self, kind: int) -> None:
        with self.lock:
            self.kinds.discard(kind)

    def flush_all(self, forced: bool = True) -> None:
        pass

    def timestamp(self) -> int:
        return time.time_ns()

    def record_sizes(self, data: bytes) -> dict[int, int]:
        return dict(SIZES)

    def _worker(self) -> None:
        period = len(OFFSETS) / float(os.environ.get("FAKE_CUPTI_RATE", "20000"))
        words = np.frombuffer(BUFFER, dtype=np.uint64)
        while True:
            time.sleep(period)
            with self.lock:
                if not self.kinds or self.on_buffer is None:
                    continue
                now = time.time_ns()
                words[(OFFSETS + 16) // 8] = now - 2_000  # start
                words[(OFFSETS + 24) // 8] = now - 1_000  # end
                self.on_buffer(bytes(BUFFER))
                self.handed_over += 1


cupti_ffi.load = lambda: (FakeCupti(), "")
stream_module.c_string = lambda pointer: NAMES.get(pointer, "?")  # never follow the H200's pointers here
torch.cuda.is_initialized = lambda: True  # the stream starts once "CUDA" is up
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")

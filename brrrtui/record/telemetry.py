"""GPU telemetry from NVML (nvidia-ml-py's `pynvml`), sampled in the recorder process at ~10 Hz.

Rows are (t_ns, gpu_util_pct, mem_used_bytes, power_w, sm_clock_mhz); a reading NVML refuses is None.
The GPU is the first one the script can see (CUDA_VISIBLE_DEVICES), which is where torch puts tensors
unless told otherwise.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

SAMPLE_PERIOD_S = 0.1
FLUSH_PERIOD_S = 1.0


def _read(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - NVML raises NVMLError_NotSupported and friends per metric
        return None


class TelemetrySampler:
    def __init__(self, sink: Callable[[list[tuple]], None]):
        self.sink = sink
        self.available = False
        self.reason = ""
        self.driver: str | None = None
        self.device_name: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = self._visible_handle(pynvml)
            self.driver = _read(pynvml.nvmlSystemGetDriverVersion)
            self.device_name = _read(lambda: pynvml.nvmlDeviceGetName(self.handle))
            self.available = True
        except Exception as e:  # noqa: BLE001 - no driver, no GPU, no library: telemetry is optional
            self.reason = f"{e.__class__.__name__}: {e}".strip(": ") or "NVML not available"

    @staticmethod
    def _visible_handle(pynvml: Any) -> Any:
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
        if first.isdigit():
            return pynvml.nvmlDeviceGetHandleByIndex(int(first))
        return pynvml.nvmlDeviceGetHandleByUUID(first)

    def sample(self) -> tuple:
        nv, h = self.nvml, self.handle
        util = _read(lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu)
        mem = _read(lambda: nv.nvmlDeviceGetMemoryInfo(h).used)
        power_mw = _read(lambda: nv.nvmlDeviceGetPowerUsage(h))
        clock = _read(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        return (time.time_ns(), util, mem, power_mw / 1000.0 if power_mw is not None else None, clock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="brrrtui-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        rows: list[tuple] = []
        last_flush = time.monotonic()
        while not self._stop.wait(SAMPLE_PERIOD_S):
            rows.append(self.sample())
            if time.monotonic() - last_flush >= FLUSH_PERIOD_S:
                self.sink(rows)
                rows, last_flush = [], time.monotonic()
        if rows:
            self.sink(rows)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)

"""Run a script with CUPTI's kernel activity on and its buffers thrown away: the floor of the kernel stream's
cost (what CUPTI itself and the flush thread cost, with no decoding, sending or recording). A subject wrapper
for bench_stream.py's "cupti" variant; no brrrtui recorder, no windows.

    python -m benchmarks.cupti_only SCRIPT [ARGS...]
"""

from __future__ import annotations

import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    import torch  # noqa: F401 - loads the libcupti torch ships, which brrrtui.capture.cupti_ffi finds

    from brrrtui.capture import cupti_ffi
    from brrrtui.capture.stream import KernelStream

    cupti, why = cupti_ffi.load()
    if cupti is None:
        sys.exit(f"cupti_only: {why}")
    stream = KernelStream(cupti, send=lambda rows: None, intern=lambda s: -1, intern_lock=None)  # type: ignore[arg-type]
    cupti.on_buffer = lambda data: None  # drop every buffer CUPTI hands back: nothing decoded or sent
    stream.start()
    sys.argv = sys.argv[1:]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        stream.stop()


if __name__ == "__main__":
    main()

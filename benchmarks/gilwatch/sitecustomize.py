"""A GIL watchdog for diagnosis (benchmarks/stream_phases.py --gil-watch puts this folder on PYTHONPATH, so every
Python process of the run imports it at start-up: brrrtui's recorder and the script). A thread sleeps 10 ms at a
time; when it wakes over 100 ms late, another thread held the GIL (or the process was stopped) that long, and it
writes every thread's stack, taken with the GIL held (safe, unlike faulthandler's dumps), to
$GIL_WATCH_DIR/gil_<pid>.jsonl. The thread that just let go of the GIL is the one that held it."""

import json
import os
import sys
import threading
import time
import traceback

_dir = os.environ.get("GIL_WATCH_DIR")


def _watch(path: str) -> None:
    with open(path, "w", buffering=1) as f:
        while True:
            t0 = time.perf_counter()
            time.sleep(0.01)
            late_ms = (time.perf_counter() - t0 - 0.01) * 1e3
            if late_ms > 100:
                names = {t.ident: t.name for t in threading.enumerate()}
                stacks = {names.get(i, str(i)): [ln.strip() for ln in traceback.format_stack(fr)[-8:]]
                          for i, fr in sys._current_frames().items() if i != threading.get_ident()}  # fmt: skip
                f.write(json.dumps({"t_ns": time.time_ns(), "late_ms": round(late_ms, 1), "argv": sys.argv[:3],
                                    "threads": stacks}) + "\n")  # fmt: skip


if _dir:
    os.makedirs(_dir, exist_ok=True)
    threading.Thread(target=_watch, args=(os.path.join(_dir, f"gil_{os.getpid()}.jsonl"),), name="gilwatch",
                     daemon=True).start()  # fmt: skip

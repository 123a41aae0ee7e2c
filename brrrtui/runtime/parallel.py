"""Run independent analysis passes at the same time, on threads.

numpy lets go of the GIL inside its sorts, searches, gathers and ufunc loops over large arrays, which is where
a big recording's passes spend their time: two passes over a 1 M-kernel trace on two threads overlap (two
whole analyses in two threads take ~1.1-1.4x the wall time of one on a 2-core machine). Python code between
the numpy calls still runs one thread at a time, so the passes given here must share no mutable state.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from typing import Any

# One core: threads only add switching. One also turns threading off (tests, profiling with cProfile).
THREADS = min(os.cpu_count() or 1, 4)


def concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order, from at most THREADS threads (this one and THREADS - 1 more), each taking
    the next call not yet started when it is free: more threads than cores hold more passes' temporaries at
    once and run them no faster (a 1 M-kernel report on two cores: peak 779 -> 747 MiB, wall x1.00). The first
    exception (in the calls' order) is raised here once every call started has ended; none starts after a
    failure."""
    if THREADS <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)
    turns = itertools.count()  # its next() is atomic under the GIL: no call is taken twice
    failed = threading.Event()  # no call starts once one has failed (or Ctrl-C came): as one by one

    def run() -> None:
        for k in turns:
            if k >= len(calls) or failed.is_set():
                return
            try:
                results[k] = calls[k]()
            except BaseException as e:  # re-raised on the calling thread
                errors[k] = e
                failed.set()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(min(THREADS, len(calls)) - 1)]
    for t in threads:
        t.start()
    run()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results

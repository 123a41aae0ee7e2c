"""The memory allocator's settings for a process that analyses a big trace.

An analysis allocates and frees arrays of tens of MB many times over. With glibc's defaults each one is a fresh
`mmap` (its pages faulted in and zeroed again), and numpy asks for transparent huge pages on every array of
4 MB or more, which makes the kernel compact memory inside the page fault where THP is `madvise` (the common
default). On the 2-core CPU machine a 1 M-kernel `report --json` spent 0.9-1.9 s of system time that way
(median 1.4 s), against 0.5-0.7 s with the settings below (docs/performance.md).

Only the analysing processes (report, view, the live UI) call this; the user's script and the recorder keep
the defaults. One arena holds only for threads that first allocate after the call: a thread that allocated
before keeps an arena of its own, and glibc hands later threads those arenas in turn, so `view` calls it
before its UI starts any thread (brrrtui.tui.app.make_app).
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from types import ModuleType

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters
_MMAP_THRESHOLD = 32 << 20  # glibc's upper limit: blocks below it come from the heap, reused once freed
_TRIM_THRESHOLD = 1 << 30  # free memory at the heap's top kept for the next pass, up to 1 GiB

_done = False


def tune_for_analysis() -> None:
    """One malloc arena for every thread (numpy's temporaries freed in one are then reused by the others:
    with an arena per thread the threaded 1 M-kernel report peaked ~100 MB higher); big blocks from the heap
    and kept there, not mapped and unmapped each time; no huge-page advice from numpy. Idempotent."""
    global _done
    if _done:
        return
    _done = True
    switch = getattr(_numpy_multiarray(), "_set_madvise_hugepage", None)  # private, in numpy since 1.20
    if switch is not None:
        switch(False)
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return
    mallopt(_M_ARENA_MAX, 1)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def _numpy_multiarray() -> ModuleType | None:
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None

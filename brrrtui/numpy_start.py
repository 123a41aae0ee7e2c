"""numpy for brrrtui's own processes, loaded without OpenBLAS's pool of threads.

numpy loads OpenBLAS as it is imported, and OpenBLAS starts a thread for every other core, which spins before
it sleeps: on the 2-core CPU machine `import numpy` took 0.17-0.23 s of CPU that way against 0.10-0.13 s with
one thread (`perf stat`), the spinning thread taking a core from whatever ran beside it. brrrtui multiplies no
matrices with numpy, so its processes ask for one thread. OpenBLAS reads the variable once, as numpy loads,
and it is then put back as it was: the user's script, started from this process, keeps the user's setting.
"""

from __future__ import annotations

import os

BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def import_numpy() -> None:
    """Import numpy with one OpenBLAS thread (nothing changes if numpy is already loaded)."""
    saved = os.environ.get(BLAS_THREADS)
    os.environ[BLAS_THREADS] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if saved is None:
            os.environ.pop(BLAS_THREADS, None)
        else:
            os.environ[BLAS_THREADS] = saved

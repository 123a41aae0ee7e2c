"""brrrtui.numpy_start: brrrtui's processes load numpy with one OpenBLAS thread and give the user's script
the environment it had."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import os
from brrrtui.numpy_start import BLAS_THREADS, import_numpy
import_numpy()
print(len(os.listdir("/proc/self/task")), os.environ.get(BLAS_THREADS, "unset"))
"""


def run_probe(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_numpy_loads_with_no_blas_thread_and_the_variable_is_put_back():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert run_probe(env) == ["1", "unset"]  # the main thread only; the user's script sees no variable
    assert run_probe({**env, "OPENBLAS_NUM_THREADS": "3"})[1] == "3"  # the user's own setting stays


def test_a_plain_numpy_import_starts_a_blas_thread_per_other_core():
    """What import_numpy avoids, on a machine with two cores or more (numpy's OpenBLAS build)."""
    limits = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k not in limits}
    code = "import os, numpy; print(len(os.listdir('/proc/self/task')))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    threads = int(out.stdout)
    assert threads > 1 if len(os.sched_getaffinity(0)) > 1 else threads == 1

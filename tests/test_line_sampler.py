"""The line sampler (brrrtui/capture/lines.py) on this machine's CPU: which line the main thread is on, and
whether it is on the CPU (its thread CPU clock), sample by sample."""

from __future__ import annotations

import sys
import time

import pytest

from brrrtui.capture.lines import LineSampler, LineTable, UserFrames

pytestmark = pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="no per-thread CPU clock")


def _sleep() -> None:
    time.sleep(0.15)


def _spin() -> None:
    end = time.perf_counter() + 0.15
    while time.perf_counter() < end:
        pass


def _off_cpu_share(samples: list[tuple[int, int, int]], function: str, lines: LineTable) -> float:
    """Of the wall time between consecutive samples both taken in `function`, the share not on the CPU."""
    names = {i: key[2] for key, i in lines.ids.items()}
    wall = cpu = 0
    for (la, ta, ca), (lb, tb, cb) in zip(samples, samples[1:], strict=False):
        if names[la] == names[lb] == function:
            wall, cpu = wall + tb - ta, cpu + cb - ca
    assert wall > 50_000_000, f"too few samples in {function}"
    return 1 - cpu / wall


def test_the_thread_cpu_clock_stands_still_in_a_sleep_and_runs_in_a_python_loop():
    lines = LineTable()
    sampler = LineSampler(lines, UserFrames(lambda f: f == __file__))
    assert sampler.cpu_clock is not None
    sampler.start()
    _sleep()
    _spin()
    samples = sampler.stop()
    assert all(cpu >= 0 for _, _, cpu in samples)
    # the loop shares the GIL with the sampler and, on a loaded machine, the CPU with other processes (57 %
    # off the CPU was seen with four busy processes on two cores)
    sleeping, spinning = (1 - _off_cpu_share(samples, f, lines) for f in ("_sleep", "_spin"))
    assert sleeping < 0.1 and spinning > 0.15 and spinning > 10 * sleeping


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

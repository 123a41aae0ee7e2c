"""The script's stdout and stderr under the live UI, as lines.

A script can print hundreds of thousands of short lines a second. Read a line at a time, each line cost the
reader thread Python work under the GIL (decode, a feed event), and the UI thread waited for the GIL; with
the machine busy, a key took up to 0.5 s (benchmarks/bench_log_flood.py). So the pipe is read a block at a
time: the block's lines are counted, only its last few decoded (nothing shows more of them), and after each
block the reader pauses `GATHER_S` while the pipe gathers the next: a few wake-ups a second, each holding the
GIL briefly. The pipe is grown to `BLOCK` bytes where Linux allows (F_SETPIPE_SZ, up to
/proc/sys/fs/pipe-max-size, 1 MiB by default), so the script's writes do not wait while the reader pauses
(1 MiB per 10 ms: 100 MB/s).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

BLOCK = 1 << 20  # bytes read at a time: a full pipe
GATHER_S = 0.01  # the reader's pause after each block: at most 100 blocks a second a stream


@dataclass
class Waiting:
    """Since when a pipe's reader has waited for data (None while it handles what it read). Once the script
    has exited, a reader that waits on and on reads a pipe that a process the script started holds open."""

    since: float | None = None

    def idle_s(self) -> float:
        since = self.since
        return 0.0 if since is None else time.monotonic() - since


def read_lines(
    stream: IO[bytes],
    on_lines: Callable[[list[str], int], None],
    keep: int,
    gather_s: float = GATHER_S,
    waiting: Waiting | None = None,
) -> None:
    """Until the script closes `stream`: its lines, in order, a block at a time (the last one even without
    a newline), as `on_lines(last, dropped)`: the block's last `keep` lines, decoded, and how many lines came
    before them (counted, never decoded). A line split across blocks, or a UTF-8 character, arrives whole."""
    fd, rest = stream.fileno(), b""
    grow_pipe(fd)
    waiting = waiting or Waiting()
    while True:
        waiting.since = time.monotonic()
        block = os.read(fd, BLOCK)
        waiting.since = None
        if not block:
            break
        end = block.rfind(b"\n")
        if end < 0:
            rest += block  # a line still being written
        else:
            data, rest = rest + block[:end], block[end + 1 :]
            start = len(data)
            for _ in range(keep):  # the newline before the last `keep` lines, or -1: every line is kept
                start = data.rfind(b"\n", 0, start)
                if start < 0:
                    break
            dropped = data.count(b"\n", 0, start) + 1 if start >= 0 else 0
            on_lines(data[start + 1 :].decode("utf-8", "replace").split("\n"), dropped)
        time.sleep(gather_s)
    if rest:
        on_lines([rest.decode("utf-8", "replace")], 0)


def grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), BLOCK)
    except (ImportError, OSError):
        pass  # not Linux, or above the system's limit: the pipe stays as it is

"""What the recorder and the worker ranks of a distributed run (torchrun) agree on.

The recorder listens on a Unix socket in a private folder (`BRRRTUI_DIST_DIR`) and puts a folder holding a
`sitecustomize.py` first on the launcher's PYTHONPATH. Every Python process the launcher starts runs it; a
process with `RANK`, `LOCAL_RANK` and `WORLD_SIZE` in its environment is a worker: it connects to the socket,
sends one `Handshake` (its rank), and from then on the same frames a single-process child sends on its pipe.
The recorder writes each rank's frames to a recording of its own, `run.rank<N>.brrr` beside `run.brrr`.

Window plan: rank 0 runs the single-process rules (steady state, duty cycle) and announces each window as a
step number, ahead of time, in the file `plan` of that folder; every rank opens its windows on the announced
steps (brrrtui.capture.lockstep). No rank talks to another through the script's process group.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass

DIR_ENV = "BRRRTUI_DIST_DIR"  # the recorder's folder: the socket and the window plan
PYTHONPATH_ENV = "BRRRTUI_DIST_PYTHONPATH"  # PYTHONPATH as it was before brrrtui prepended its hook folder
CLAIMED_ENV = "BRRRTUI_RANK_PID"  # set by a traced rank: its own subprocesses (data loaders) are not ranks
SPAWN_ENV = "BRRRTUI_SPAWN"  # "1": the script starts its own ranks (mp.spawn): a rank is a process that calls
#                              torch.distributed.init_process_group
SOCKET_NAME = "s"
PLAN_NAME = "plan"
RANK_ENVS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")

_HANDSHAKE = struct.Struct("<8siiiiq")
_MAGIC = b"brrrrank"


@dataclass(frozen=True)
class Handshake:
    """The first bytes a worker sends on its connection, before any frame."""

    rank: int
    local_rank: int
    world_size: int
    restart: int  # TORCHELASTIC_RESTART_COUNT: a restarted worker group reuses the ranks
    pid: int

    def pack(self) -> bytes:
        return _HANDSHAKE.pack(_MAGIC, self.rank, self.local_rank, self.world_size, self.restart, self.pid)

    @staticmethod
    def read(fd: int) -> Handshake | None:
        """Read one handshake from a connection; None if it closed first or sent something else."""
        data = b""
        while len(data) < _HANDSHAKE.size:
            chunk = os.read(fd, _HANDSHAKE.size - len(data))
            if not chunk:
                return None
            data += chunk
        magic, rank, local_rank, world_size, restart, pid = _HANDSHAKE.unpack(data)
        if magic != _MAGIC:
            return None
        return Handshake(rank, local_rank, world_size, restart, pid)


def rank_of(env: dict[str, str] | os._Environ[str]) -> Handshake | None:
    """This process's rank from the standard variables torchrun sets; None when it is no worker rank."""
    try:
        rank, local_rank, world_size = (int(env[k]) for k in RANK_ENVS)
        restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except (KeyError, ValueError):
        return None
    return Handshake(rank, local_rank, world_size, restart, os.getpid())


def rank_path(out_path: str, rank: int, restart: int = 0) -> str:
    """`run.brrr` -> `run.rank1.brrr` (a restarted group: `run.rank1.r2.brrr`)."""
    stem, ext = os.path.splitext(out_path)
    tail = f".r{restart}" if restart else ""
    return f"{stem}.rank{rank}{tail}{ext or '.brrr'}"


# ------------------------------------------------------------------------------- the window plan
Window = tuple[int, int]  # (opens after this many steps have ended, steps it spans)


def dump_plan(windows: list[Window]) -> str:
    return json.dumps(windows)


def parse_plan(text: str) -> list[Window] | None:
    """The announced windows from their text; None when it is not a plan."""
    try:
        return [(int(a), int(b)) for a, b in json.loads(text)]
    except (ValueError, TypeError):
        return None


def write_plan(folder: str, windows: list[Window]) -> None:
    """Rank 0: every window announced so far, replaced whole (readers never see a partial file)."""
    path = os.path.join(folder, PLAN_NAME)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(dump_plan(windows))
    os.replace(tmp, path)


def read_plan(folder: str) -> list[Window] | None:
    """The announced windows; None when there is no plan yet or it cannot be read."""
    try:
        with open(os.path.join(folder, PLAN_NAME)) as f:
            return parse_plan(f.read())
    except OSError:
        return None


def plan_version(folder: str) -> tuple[int, int, int] | None:
    """Changes whenever rank 0 replaces the plan (a new file each time: a new inode)."""
    try:
        st = os.stat(os.path.join(folder, PLAN_NAME))
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size

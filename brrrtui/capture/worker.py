"""A worker rank of a distributed run (torchrun), traced: the counterpart of bootstrap.py for processes that
brrrtui does not start itself.

torchrun starts each worker as `python -u train.py ARGS`; brrrtui's `sitecustomize` (rank_hook/), first on
the launcher's PYTHONPATH, calls `start()` in every Python process the launcher starts. A process that has
the rank variables (RANK, LOCAL_RANK, WORLD_SIZE) connects to the recorder's socket, says which rank it is,
and installs the same capture agent a single-process child runs, with its windows on rank 0's plan
(capture.lockstep). The script itself then runs exactly as torchrun started it: its argv, exit code and
traceback are Python's own. Its own subprocesses (DataLoader workers) inherit the rank variables but not
brrrtui's: they are not traced again.

A script that starts its own ranks (`torch.multiprocessing.spawn`, `multiprocessing.Process`; `brrrtui spawn
train.py`) is the launcher itself: its processes have no rank variables when they start, and learn their rank
only when they join the process group. There (`SPAWN_ENV`) the hook watches for the import of
torch.distributed's c10d module and wraps its `init_process_group`: the process that calls it becomes a traced
rank once the group is up, its rank and world size the group's. Spawned processes re-run the hook at start;
forked ones inherit the wrapped function. The environment keeps brrrtui's variables, so that every process the
script starts, however deep, can become a rank; a process that never joins a group (a DataLoader worker) only
carries the watcher.
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from brrrtui.contract.ranks import (
    CLAIMED_ENV,
    DIR_ENV,
    PYTHONPATH_ENV,
    SOCKET_NAME,
    SPAWN_ENV,
    Handshake,
    rank_of,
)

LEAD_S = 1.0  # rank 0 announces a window this long before it opens (other ranks read the plan every 0.1 s)


def _restore_environment(env: os._Environ[str]) -> None:
    """Leave the script the environment torchrun gave it, less brrrtui's own variables."""
    for key in ("BRRRTUI_CONFIG", "BRRRTUI_CALIBRATE", DIR_ENV):
        env.pop(key, None)
    before = env.pop(PYTHONPATH_ENV, None)
    if before is None or before == "":
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = before
    env[CLAIMED_ENV] = str(os.getpid())


def _connect(folder: str, hello: Handshake) -> int | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.path.join(folder, SOCKET_NAME))
        sock.sendall(hello.pack())
    except OSError:
        sock.close()
        return None
    fd = sock.detach()
    os.set_inheritable(fd, False)
    return fd


def start() -> None:
    """Called from sitecustomize at interpreter start: trace this process if it is a worker rank (or, for a
    script that starts its own ranks, once it joins a process group)."""
    env = os.environ
    folder = env.get(DIR_ENV)
    if folder and env.get(SPAWN_ENV) == "1":
        watch_init_process_group()
        return
    rank = rank_of(env)
    if not folder or rank is None or env.get(CLAIMED_ENV):
        return
    config_text, calibrate = env.get("BRRRTUI_CONFIG"), env.get("BRRRTUI_CALIBRATE", "1") == "1"
    _restore_environment(env)
    trace(folder, rank, config_text, calibrate)


def trace(folder: str, rank: Handshake, config_text: str | None, calibrate: bool) -> None:
    """Connect to the recorder as `rank` and install the capture agent, its windows on rank 0's plan."""
    env = os.environ
    fd = _connect(folder, rank)
    if fd is None:
        print(f"brrrtui: rank {rank.rank} is not traced: the recorder's socket is gone", file=sys.stderr)
        return
    from brrrtui.capture.agent import Agent
    from brrrtui.capture.channel import WatchedChannel
    from brrrtui.capture.lockstep import Lockstep
    from brrrtui.capture.plan_store import StorePlan
    from brrrtui.contract import userfiles
    from brrrtui.contract.config import WindowConfig
    from brrrtui.contract.messages import Bye, Hello

    def lost(how: str) -> None:  # the script closed its descriptors (os.closerange): said, not silent
        agent.sched.disabled = True
        text = (
            f"brrrtui: rank {rank.rank}: the script {how} brrrtui's capture channel: nothing more is recorded"
        )
        print(text, file=sys.stderr)

    channel = WatchedChannel(fd, lost)
    agent = Agent(channel, WindowConfig.from_json(config_text), userfiles.is_user_file, calibrate=calibrate)
    agent.sched.lockstep = plan = Lockstep(folder, leader=rank.rank == 0, lead_s=LEAD_S)
    plan.remote = StorePlan.from_env(env)  # ranks on several hosts: rank 0's plan through the job's store
    agent.install()
    if "torch" in sys.modules:  # a rank found when it joined its group: torch is imported already
        from brrrtui.capture.torch_hooks import TorchImportWatcher

        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TorchImportWatcher)]
        agent._guard(agent.on_torch_imported)(sys.modules["torch"])  # what the import watcher would call
    # No SIGTERM handler, unlike bootstrap.py: torchrun stops the other ranks with SIGTERM when one fails,
    # and a Python handler runs only once the main thread is back in Python, which a rank blocked in a hung
    # collective (a CUDA sync behind an NCCL kernel) never is: the launcher would wait 30 s and SIGKILL it.
    # Dying at once costs the step times of the last half second (STEP_FLUSH_S) at most.
    channel.send(Hello(pid=os.getpid(), python_version=sys.version.split()[0]))

    def finish() -> None:  # at interpreter exit, after the script's traceback (if any) is printed
        agent.finish()
        failed = getattr(sys, "last_value", None) is not None  # an uncaught exception ended the script
        channel.send(Bye(exit_code=1 if failed else 0))

    # At shutdown, before the atexit handlers: torch's own (registered after this one, so run before it)
    # would otherwise tear CUDA down ahead of the last window's conversion and the calibration.
    getattr(threading, "_register_atexit", atexit.register)(finish)


C10D = "torch.distributed.distributed_c10d"
_traced_pid = 0  # the process traced as a rank by its init_process_group (a fork child has another pid)


class _InitWatcher(importlib.abc.MetaPathFinder):
    """Wraps `init_process_group` as torch.distributed's c10d module is first imported, before
    torch.distributed re-exports it (`from .distributed_c10d import *`)."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib's protocol
        if fullname != C10D:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            loader_exec(module)
            module.init_process_group = _joined(module.init_process_group, module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def watch_init_process_group() -> None:
    c10d = sys.modules.get(C10D)
    if c10d is not None:  # imported already (not at interpreter start): too late to be re-exported
        return
    sys.meta_path.insert(0, _InitWatcher())


def _joined(init: Callable[..., Any], c10d: Any) -> Callable[..., Any]:
    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        out = init(*args, **kwargs)
        global _traced_pid
        if _traced_pid != os.getpid():
            _traced_pid = os.getpid()
            try:
                rank, world = int(c10d.get_rank()), int(c10d.get_world_size())
                local = int(os.environ.get("LOCAL_RANK", rank))
                env = os.environ
                calibrate = env.get("BRRRTUI_CALIBRATE", "1") == "1"
                folder = env.get(DIR_ENV, "")
                env[CLAIMED_ENV] = str(os.getpid())
                trace(
                    folder,
                    Handshake(rank, local, world, 0, os.getpid()),
                    env.get("BRRRTUI_CONFIG"),
                    calibrate,
                )
            except Exception as e:  # noqa: BLE001 - the script must run even if brrrtui cannot trace it
                print(f"brrrtui: this rank is not traced: {e.__class__.__name__}: {e}", file=sys.stderr)
        return out

    return init_process_group

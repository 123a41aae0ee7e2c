"""A worker rank of a distributed run (torchrun), traced: the counterpart of bootstrap.py for processes that
brrrtui does not start itself.

torchrun starts each worker as `python -u train.py ARGS`; brrrtui's `sitecustomize` (rank_hook/), first on
the launcher's PYTHONPATH, calls `start()` in every Python process the launcher starts. A process that has
the rank variables (RANK, LOCAL_RANK, WORLD_SIZE) connects to the recorder's socket, says which rank it is,
and installs the same capture agent a single-process child runs, with its windows on rank 0's plan
(capture.lockstep). The script itself then runs exactly as torchrun started it: its argv, exit code and
traceback are Python's own. Its own subprocesses (DataLoader workers) inherit the rank variables but not
brrrtui's: they are not traced again.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading

from brrrtui.contract.ranks import CLAIMED_ENV, DIR_ENV, PYTHONPATH_ENV, SOCKET_NAME, Handshake, rank_of

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
    """Called from sitecustomize at interpreter start: trace this process if it is a worker rank."""
    env = os.environ
    folder = env.get(DIR_ENV)
    rank = rank_of(env)
    if not folder or rank is None or env.get(CLAIMED_ENV):
        return
    config_text, calibrate = env.get("BRRRTUI_CONFIG"), env.get("BRRRTUI_CALIBRATE", "1") == "1"
    _restore_environment(env)
    fd = _connect(folder, rank)
    if fd is None:
        print(f"brrrtui: rank {rank.rank} is not traced: the recorder's socket is gone", file=sys.stderr)
        return
    from brrrtui.capture.agent import Agent
    from brrrtui.capture.lockstep import Lockstep
    from brrrtui.capture.plan_store import StorePlan
    from brrrtui.contract import userfiles
    from brrrtui.contract.config import WindowConfig
    from brrrtui.contract.messages import Bye, Hello
    from brrrtui.contract.protocol import Channel

    channel = Channel(fd)
    agent = Agent(channel, WindowConfig.from_json(config_text), userfiles.is_user_file, calibrate=calibrate)
    agent.sched.lockstep = plan = Lockstep(folder, leader=rank.rank == 0, lead_s=LEAD_S)
    plan.remote = StorePlan.from_env(env)  # ranks on several hosts: rank 0's plan through the job's store
    agent.install()
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

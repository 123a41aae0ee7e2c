"""Recording a distributed run: `brrrtui torchrun ARGS` / `brrrtui record -o run.brrr -m torch.distributed.run
ARGS`, or `brrrtui spawn train.py ARGS` for a script that starts its own ranks (torch.multiprocessing.spawn,
multiprocessing.Process). The launcher (torchrun, or the script's own first process) runs untraced; every
worker rank is traced and gets a recording of its own.

    brrrtui (this process)                              torchrun launcher (untraced, PYTHONPATH += rank_hook)
      DistRecorder: run.brrr (the run: argv, status,        │ starts  python -u train.py  per rank
        exit code, the list of rank files)                  ▼
      accept thread <── Unix socket (one connection ── worker rank N: sitecustomize -> capture.worker
        per rank, the Handshake first)                      agent, windows on rank 0's plan
      RankRecorder N: the single-process recorder's reader and writer threads -> run.rankN.brrr

Why per-rank files and connections: each worker is one more single-process child as far as the recorder is
concerned (the same frames, the same writer, the same crash-safety: a killed rank keeps every committed
window and the others go on), the recording format does not change, and no frame from two ranks ever
interleaves on one pipe.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from brrrtui.contract.errors import InputError
from brrrtui.contract.protocol import read_frames
from brrrtui.contract.ranks import DIR_ENV, PYTHONPATH_ENV, SOCKET_NAME, SPAWN_ENV, Handshake, rank_path
from brrrtui.record.feed import Feed
from brrrtui.record.recorder import Recorder, RunSpec
from brrrtui.record.targets import check_target
from brrrtui.record.telemetry import TelemetrySampler

LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")
SPAWN = ":spawn"  # target[0] of `brrrtui spawn SCRIPT ARGS`: the script is the launcher of its own ranks
RANK_HOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "capture", "rank_hook")
JOIN_S = 30.0  # how long a rank's connection may stay open after the launcher exited


def is_distributed(target: list[str]) -> bool:
    return len(target) >= 2 and ((target[0] == "-m" and target[1] in LAUNCHERS) or target[0] == SPAWN)


def launcher_argv(target: list[str]) -> list[str]:
    """What the launcher process runs: the target, less the spawn mark."""
    return target[1:] if target[:1] == [SPAWN] else target


def torchrun_target(target: list[str]) -> list[str]:
    """`torchrun ARGS` as a target is `-m torch.distributed.run ARGS` (what the torchrun command runs), unless
    a script file named `torchrun` is there; `spawn SCRIPT ARGS` (no file named `spawn` there) is the script
    as the launcher of its own ranks."""
    if target and target[0] == "torchrun" and not os.path.isfile("torchrun"):
        return ["-m", "torch.distributed.run", *target[1:]]
    if len(target) >= 2 and target[0] == "spawn" and not os.path.isfile("spawn"):
        return [SPAWN, *target[1:]]
    return target


def naming_target(target: list[str]) -> list[str]:
    """What names the default output: a launcher's training script (its first `.py`), else the target."""
    if target[:1] == [SPAWN]:
        return target[1:]
    scripts = [a for a in target[2:] if a.endswith(".py")] if is_distributed(target) else []
    return scripts[:1] or target


def make_recorder(
    spec: RunSpec, feed: Feed | None = None, progress: Callable[[str], None] | None = None
) -> Recorder:
    if is_distributed(spec.target):
        return DistRecorder(spec, progress=progress)
    return Recorder(spec, feed=feed, progress=progress)


class RankRecorder(Recorder):
    """One worker rank: its connection's frames into its own recording, handled as the single-process
    recorder handles a child's pipe."""

    def __init__(self, spec: RunSpec, hello: Handshake, run_file: str, progress: Callable[[str], None]):
        super().__init__(spec, progress=lambda text: progress(f"rank {hello.rank}: {text}"))
        self.hello = hello
        self.run_file = run_file

    def record(self, fd: int) -> None:
        """On the connection's thread: until the rank closes its connection (exit, crash or kill)."""
        h = self.hello
        self._open_writer()
        self._say_where()
        self._write_meta(
            pid=h.pid,
            dist={
                "rank": h.rank,
                "local_rank": h.local_rank,
                "world_size": h.world_size,
                "restart": h.restart,
                "run": os.path.basename(self.run_file),
            },
        )
        self._thread(self._write_frames, name=f"brrrtui-writer-rank{h.rank}")
        self._read_frames(fd)
        for t in self.threads:
            t.join()
        if self.script_exit is None:
            status = "ended without saying goodbye (killed, or ended by os._exit)"
        else:
            status = "finished" if self.script_exit == 0 else "raised an exception"
        self._write_meta(status=status, exit_code=self.script_exit, ended_at_ns=time.time_ns())
        self.sink.close()


class DistRecorder(Recorder):
    """The launcher's recording (`run.brrr`: argv, status, exit code, the rank files) and one RankRecorder
    per worker that connects."""

    def __init__(self, spec: RunSpec, progress: Callable[[str], None] | None = None):
        super().__init__(spec, progress=progress)
        self.folder = ""
        self.listener: socket.socket | None = None
        self.ranks: list[RankRecorder] = []
        self.rank_threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.say_lock = threading.Lock()
        self.stopping = threading.Event()
        self.world_size: int | None = None

    def start(self) -> None:
        argv = launcher_argv(self.spec.target)
        check_target(argv)
        self.folder = tempfile.mkdtemp(prefix="brrrtui-dist-")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.listener.bind(os.path.join(self.folder, SOCKET_NAME))
        except OSError as e:  # a Unix socket path is limited to ~107 bytes
            self._cleanup()
            raise InputError(
                f"cannot listen for the ranks in {self.folder} ({e}); set TMPDIR to a short path"
            ) from None
        self.listener.listen(256)
        self.listener.settimeout(0.2)
        try:
            self._open_writer()
        except InputError:
            self._cleanup()
            raise
        try:
            self.child = subprocess.Popen([self.spec.python, *argv], env=self._launcher_env())
        except OSError as e:
            self._cleanup()
            self.sink.abort()
            raise InputError(f"cannot start {self.spec.python}: {e.strerror}") from None
        self._write_meta(pid=self.child.pid, dist={"launcher": self._launcher(), "ranks": []})
        self._say_where()
        threading.Thread(target=self._accept, name="brrrtui-accept", daemon=True).start()
        self.sampler = TelemetrySampler(self._on_telemetry)
        if self.sampler.available:
            self._write_meta(driver=self.sampler.driver, nvml_device=self.sampler.device_name)
            self.sampler.start()
        else:
            self._write_meta(telemetry=f"unavailable: {self.sampler.reason}")

    def _launcher(self) -> str:
        """`torch.distributed.run`, or `spawn` (the script starts its own ranks)."""
        return "spawn" if self.spec.target[0] == SPAWN else self.spec.target[1]

    def _launcher_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env[DIR_ENV] = self.folder
        if self.spec.target[0] == SPAWN:
            env[SPAWN_ENV] = "1"
        env["BRRRTUI_CONFIG"] = json.dumps(dataclasses.asdict(self.spec.window))
        env["BRRRTUI_CALIBRATE"] = "1" if self.spec.calibrate else "0"
        before = env.get("PYTHONPATH", "")
        env[PYTHONPATH_ENV] = before
        env["PYTHONPATH"] = RANK_HOOK + (os.pathsep + before if before else "")
        env.setdefault("TEARDOWN_CUPTI", "1")  # as bootstrap.py sets them for a single-process child
        env.setdefault("KINETO_LOG_LEVEL", "6")
        return env

    def _accept(self) -> None:
        assert self.listener is not None
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setblocking(True)
            t = threading.Thread(target=self._serve, args=(conn.detach(),), name="brrrtui-rank", daemon=True)
            t.start()
            with self.lock:
                self.rank_threads.append(t)

    def _serve(self, fd: int) -> None:
        hello = Handshake.read(fd)
        if hello is None:
            os.close(fd)
            return
        with self.lock:
            taken = {r.spec.out_path for r in self.ranks}
            path, n = rank_path(self.spec.out_path, hello.rank, hello.restart), 1
            while path in taken:
                path, n = rank_path(self.spec.out_path, hello.rank, hello.restart + n), n + 1
            rank = RankRecorder(
                dataclasses.replace(self.spec, out_path=path), hello, self.spec.out_path, self._say
            )
            self.ranks.append(rank)
            self.world_size = hello.world_size
        try:
            rank.record(fd)
        except InputError as e:  # its file cannot be written: say so, keep its connection drained
            self._note(f"rank {hello.rank} is not recorded: {e}")
            for _ in read_frames(fd):
                pass

    def _say(self, text: str) -> None:
        """A rank's progress line: one at a time, so two ranks' lines never run into one another."""
        with self.say_lock:
            self.progress(text)

    def wait(self) -> int:
        assert self.child is not None
        while True:
            try:
                self.child.wait()
                break
            except KeyboardInterrupt:
                self.interrupt()
        self.stopping.set()
        deadline = time.monotonic() + JOIN_S
        with self.lock:
            threads = list(self.rank_threads)
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._summarise()
        self._cleanup()
        return super().wait()

    def _summarise(self) -> None:
        with self.lock:
            ranks = sorted(self.ranks, key=lambda r: (r.hello.rank, r.hello.restart))
        entries: list[dict[str, Any]] = []
        for r in ranks:
            entries.append(
                {
                    "rank": r.hello.rank,
                    "restart": r.hello.restart,
                    "file": os.path.basename(r.sink.final_path),
                    "windows": r.windows,
                    "steps": r.steps,
                    "status": r.sink.meta.get("status"),
                }
            )
            self.windows += r.windows
            self.steps += r.steps
            self.kernels += r.kernels
        self._write_meta(dist={"launcher": self._launcher(), "world_size": self.world_size, "ranks": entries})
        if not entries:
            self._note(
                "no worker rank connected: nothing was traced (is the script run by the launcher Python?)"
            )
            return
        parts = ", ".join(
            f"{e['file']} ({e['windows']} window{'' if e['windows'] == 1 else 's'}, {e['steps']} steps)"
            for e in entries
        )
        self.progress(f"{len(entries)} rank{'' if len(entries) == 1 else 's'} recorded: {parts}")
        code = self.child.returncode if self.child is not None else None
        if code and all(e["status"] == "finished" for e in entries):
            self._note(
                f"every rank's script finished (each said goodbye with exit code 0), yet the job exited with "
                f"code {code}: a rank died as its interpreter shut down, its recording already complete "
                "(torch's gloo teardown can abort so: docs/guide.md, Multi-GPU)"
            )

    def _cleanup(self) -> None:
        if self.listener is not None:
            self.listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)

"""Rank 0's window plan for ranks on other hosts, through the job's own TCPStore.

On one host the plan is a file beside the recorder's socket (capture.lockstep). Ranks on several hosts share
no folder, but they share the rendezvous store torchrun's agents host at MASTER_ADDR:MASTER_PORT: each rank's
timer thread opens a client connection of its own (never the script's process group, never on the training
thread) and rank 0 sets one key, which the others read every 0.1 s. A store that cannot be reached is tried
again every few seconds; until then that host's ranks open no step window (never an unaligned one).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from typing import Any

RETRY_S = 5.0
CONNECT_TIMEOUT_S = 2.0


class StorePlan:
    def __init__(self, host: str, port: int, key: str):
        self.host, self.port, self.key = host, port, key
        self.store: Any = None
        self.next_try = 0.0
        self.error: str | None = None

    @staticmethod
    def from_env(env: Mapping[str, str]) -> StorePlan | None:
        """A StorePlan when this job's ranks span more than this host (WORLD_SIZE > LOCAL_WORLD_SIZE)."""
        try:
            world = int(env["WORLD_SIZE"])
            local = int(env.get("LOCAL_WORLD_SIZE", world))
            host, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
            restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
        except (KeyError, ValueError):
            return None
        if world <= local:
            return None
        return StorePlan(host, port, f"brrrtui/window_plan/{restart}")  # a restarted group plans afresh

    def _connected(self) -> bool:
        if self.store is not None:
            return True
        now = time.monotonic()
        if now < self.next_try:
            return False
        self.next_try = now + RETRY_S
        import torch.distributed as dist  # the script imported torch already: the timer only asks after that

        try:
            self.store = dist.TCPStore(
                self.host,
                self.port,
                is_master=False,
                timeout=datetime.timedelta(seconds=CONNECT_TIMEOUT_S),
                wait_for_workers=False,
            )
        except Exception as e:  # noqa: BLE001 - not up yet, or not reachable: try again later
            self.error = f"{e.__class__.__name__}: {e}"
            return False
        return True

    def publish(self, text: str) -> None:
        if self._connected():
            self.store.set(self.key, text)

    def fetch(self) -> str | None:
        if not self._connected() or not self.store.check([self.key]):
            return None
        value: bytes = self.store.get(self.key)
        return value.decode()

"""The capture channel as the traced child writes it: checked before each write (agent.py, bootstrap.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from brrrtui.contract.messages import Message
from brrrtui.contract.protocol import Channel


class WatchedChannel(Channel):
    """The channel to the recorder, checked before each write. A script may close every descriptor it did not
    open (`os.closerange(3, ...)`), and the files it opens next take the lowest free numbers, the channel's
    among them: each write first checks that the descriptor is still the pipe it was (fstat's device and
    inode), so nothing is ever written into a file of the script. The first write that finds it gone marks the
    channel broken and calls `on_lost` once, with "closed" or "reused by another file"; nothing is sent
    after that. (A recorder that died shows as a failed write instead, quietly, as before.)"""

    def __init__(self, fd: int, on_lost: Callable[[str], None] | None = None) -> None:
        super().__init__(fd)
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)
        self.on_lost = on_lost
        self.lost: str | None = None
        self._lost_lock = threading.Lock()

    def send(self, message: Message, wait_s: float = -1) -> bool:
        if not self.broken and os.getpid() == self.owner_pid and not self._intact():
            return False
        return super().send(message, wait_s)

    def _intact(self) -> bool:
        try:
            st = os.fstat(self.fd)
            if (st.st_dev, st.st_ino) == self.identity:
                return True
            how = "reused by another file"
        except OSError:
            how = "closed"
        with self._lost_lock:
            first = self.lost is None
            self.broken, self.lost = True, self.lost or how
        if first and self.on_lost is not None:
            self.on_lost(how)
        return False

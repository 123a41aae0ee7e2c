"""Dense ids for the names the child sends (strings, source lines), shared by the threads that send them."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")


class IdTable(Generic[K]):
    """key -> id (0, 1, 2, ... in first-seen order), safe to call from several threads; remembers the keys
    that are new since the last `take_new()`, so each reaches the recording once."""

    def __init__(self) -> None:
        self.ids: dict[K, int] = {}
        self._new: list[tuple[int, K]] = []
        self._assign = threading.Lock()

    def id_of(self, key: K) -> int:
        i = self.ids.get(key)
        if i is None:
            with self._assign:
                i = self.ids.get(key)
                if i is None:
                    i = self.ids[key] = len(self.ids)
                    self._new.append((i, key))
        return i

    def take_new(self) -> list[tuple[int, K]]:
        with self._assign:
            new, self._new = self._new, []
        return new

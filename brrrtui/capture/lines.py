"""Exact source lines for every torch call, operators included (`x @ w`, `0.5 * y`).

A Chrome trace's Python frames stop at the function's `def` line, and the profiler's PyCCall events miss
operators (DESIGN.md). A TorchFunctionMode sees every torch call; walking the Python stack past library files
finds the user's line. Each call is then wrapped in a cheap profiler scope named `brrr:<line id>`, so the
ops (and through them the kernels) it issues nest inside a span that names the line:

    brrr:17  |=====================================|      <- train.py:41  `h = self.fc(x)`
    aten::linear |==========================|
                   aten::addmm |=========|  -> kernels

The mode is active only inside profiler windows; inside its handler torch disables it, so a call made by
torch's own Python code is not tagged again (nn.Module calls resolve to the line that called the module).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

SPAN_PREFIX = "brrr:"

try:  # a C++ scope with no Python bookkeeping; ~1 us. Older torch: the public record_function.
    from torch._C._profiler import _RecordFunctionFast as _Scope
except ImportError:  # pragma: no cover - torch < 2.2
    from torch.profiler import record_function as _Scope  # type: ignore[assignment]


class LineTable:
    """Interns (file, line, function) -> id; remembers which ids are new since the last `take_new()`."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, int, str], int] = {}
        self.new: list[tuple[int, str, int, str]] = []

    def intern(self, file: str, line: int, function: str) -> int:
        key = (file, line, function)
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.ids)
            self.new.append((i, file, line, function))
        return i

    def take_new(self) -> list[tuple[int, str, int, str]]:
        new, self.new = self.new, []
        return new


class LineTagger(TorchFunctionMode):
    def __init__(self, lines: LineTable, is_user_file: Callable[[str], bool]):
        super().__init__()
        self.lines = lines
        self.is_user_file = is_user_file
        self._user_file: dict[str, bool] = {}
        self._names: dict[tuple[Any, int], str] = {}  # (code object, line) -> "brrr:<id>"

    def _scope_name(self) -> str | None:
        frame = sys._getframe(2)  # skip this method and __torch_function__
        cache = self._user_file
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            user = cache.get(filename)
            if user is None:
                user = cache[filename] = self.is_user_file(filename)
            if user:
                key = (code, frame.f_lineno)
                name = self._names.get(key)
                if name is None:
                    lid = self.lines.intern(filename, frame.f_lineno, code.co_name)
                    name = self._names[key] = f"{SPAN_PREFIX}{lid}"
                return name
            frame = frame.f_back
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = self._scope_name()
        if name is None:
            return func(*args, **kwargs)
        with _Scope(name):
            return func(*args, **kwargs)


def torch_function_mode_available() -> bool:
    return hasattr(torch.overrides, "TorchFunctionMode")

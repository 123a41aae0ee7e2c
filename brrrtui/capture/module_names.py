"""Names of the nn.Modules on the stack: `transformer.h.3.attn` for the module a torch call ran in.

A global forward hook would cost every module call of every step; the tagger instead reads the modules off
the stack it already walks (the `self` of each `Module._call_impl` frame), inside windows only. Names come
from the outermost module's `named_modules()`, indexed once per root and again when a module appears that it
did not name (a submodule added later).
"""

from __future__ import annotations

import weakref
from typing import Any

from torch.nn import Module

from brrrtui.contract.modules import encode

CALL_IMPL = Module._call_impl.__code__  # one frame of it per module call, with the module as `self`


class ModuleNames:
    def __init__(self) -> None:
        # id(module) -> (weak reference, qualified name); the reference detects a reused id
        self._names: dict[int, tuple[Any, str]] = {}

    def _name(self, module: Any) -> str | None:
        entry = self._names.get(id(module))
        if entry is None or entry[0]() is not module:
            return None
        return entry[1]

    def _index(self, root: Any) -> None:
        for name, m in root.named_modules(remove_duplicate=False):
            if self._name(m) is None:
                try:
                    self._names[id(m)] = (weakref.ref(m), name)
                except TypeError:  # a module class with __slots__ and no __weakref__
                    continue

    def chain(self, modules: list[Any]) -> str:
        """Modules on the stack, innermost first -> contract.modules' encoded chain."""
        root = modules[-1]
        if any(self._name(m) is None for m in modules):
            self._index(root)
        pairs = [(_or_unknown(self._name(m)), type(m).__name__) for m in reversed(modules)]
        return encode(pairs)


def _or_unknown(name: str | None) -> str:
    return "?" if name is None else name


def module_of(frame: Any) -> Any:
    """The module whose `_call_impl` frame this is (None if its `self` is not one)."""
    m = frame.f_locals.get("self")
    return m if isinstance(m, Module) else None

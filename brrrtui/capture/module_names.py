"""Names of the nn.Modules on the stack: `transformer.h.3.attn` for the module a torch call ran in.

A global forward hook would cost every module call of every step; the tagger instead reads the modules off
the stack it already walks (the `self` of each `Module._call_impl` frame), inside windows only. Names come
from the outermost module's `named_modules()`, indexed at most once per window per root (so a submodule added
later is found in the next window). A module its root does not hold (a loss module built inside `forward` on
every call, as Hugging Face models do) is named after its class under its caller: `(CrossEntropyLoss)`.
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
        self._indexed: set[int] = set()  # roots indexed in this window

    def new_window(self) -> None:
        self._indexed.clear()

    def _name(self, module: Any) -> str | None:
        entry = self._names.get(id(module))
        if entry is None or entry[0]() is not module:
            return None
        return entry[1]

    def _index(self, root: Any) -> None:
        if id(root) in self._indexed:
            return
        self._indexed.add(id(root))
        for name, m in root.named_modules(remove_duplicate=False):
            if self._name(m) is None:
                try:
                    self._names[id(m)] = (weakref.ref(m), name)
                except TypeError:  # a module class with __slots__ and no __weakref__
                    continue

    def chain(self, modules: list[Any]) -> str:
        """Modules on the stack, innermost first -> contract.modules' encoded chain."""
        outermost_first = modules[::-1]
        if any(self._name(m) is None for m in outermost_first):
            self._index(outermost_first[0])
        pairs: list[tuple[str, str]] = []
        for m in outermost_first:
            kind = type(m).__name__
            name = self._name(m)
            if name is None:  # not among its root's modules: named by its class under its caller
                parent = pairs[-1][0] if pairs else ""
                name = f"{parent}.({kind})" if parent else f"({kind})"
            pairs.append((name, kind))
        return encode(pairs)


def module_of(frame: Any) -> Any:
    """The module whose `_call_impl` frame this is (None if its `self` is not one)."""
    m = frame.f_locals.get("self")
    return m if isinstance(m, Module) else None

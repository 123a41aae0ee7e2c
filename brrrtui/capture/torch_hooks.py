"""Where the agent meets torch without touching the script's code: the hook that sees `import torch`, the hook
that sees the script start torch.profiler itself, and the device's facts."""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from brrrtui.contract.messages import DeviceFacts


class TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Calls `callback(torch)` right after the script's own `import torch` finishes (brrrtui never imports
    torch first: CUDA_VISIBLE_DEVICES set inside the script must still work)."""

    def __init__(self, callback: Callable[[Any], None]):
        self.callback = callback
        self._finding = False

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib's protocol
        """torch's spec with a loader that calls back once torch has run. The watcher stays until then: a
        library may only look torch up first (transformers checks `importlib.util.find_spec("torch")` on
        import), and that spec is thrown away."""
        if fullname != "torch" or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec("torch")  # the finders after this one
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module
        watcher = self

        def exec_module(module: Any) -> None:
            if watcher in sys.meta_path:
                sys.meta_path.remove(watcher)
            loader_exec(module)
            watcher.callback(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def on_user_profiler_start(callback: Callable[[], None]) -> None:
    """Call `callback()` whenever the script starts a profiler of its own. torch.profiler.profile and the
    legacy torch.autograd.profiler.profile both prepare their Kineto session in
    `torch.autograd.profiler.profile._prepare_trace`; brrrtui's own windows never call it."""
    legacy = importlib.import_module("torch.autograd.profiler").profile
    prepare = legacy._prepare_trace

    def _prepare_trace(*args: Any, **kwargs: Any) -> Any:
        callback()
        return prepare(*args, **kwargs)

    _prepare_trace.__wrapped__ = prepare  # type: ignore[attr-defined]
    legacy._prepare_trace = _prepare_trace


def on_compile(torch: Any, callback: Callable[[], None], wrap: Callable[[Any], Any]) -> None:
    """Call `callback()` whenever the script calls `torch.compile` (also through `nn.Module.compile`, which
    looks it up on the torch module), before it compiles anything, and return what it compiled through
    `wrap` (a compiled module: its forward). `torch.compile(mode=...)` used as a decorator factory: the
    decorated function is wrapped."""
    compile_ = torch.compile

    @functools.wraps(compile_)
    def compile(*args: Any, **kwargs: Any) -> Any:
        callback()
        model = args[0] if args else kwargs.get("model")
        if model is None:  # @torch.compile(...) : a decorator that compiles what it is given
            rest = {k: v for k, v in kwargs.items() if k != "model"}
            return lambda fn: compile(fn, *args[1:], **rest)
        compiled = compile_(*args, **kwargs)
        if compiled is model:  # disable=True and the like: nothing was compiled
            return compiled
        if isinstance(compiled, torch.nn.Module):
            compiled.forward = wrap(compiled.forward)
            return compiled
        return wrap(compiled) if callable(compiled) else compiled

    torch.compile = compile


def device_facts(torch: Any) -> DeviceFacts:
    idx = torch.cuda.current_device()
    p = torch.cuda.get_device_properties(idx)
    return DeviceFacts(
        name=p.name,
        num_sms=p.multi_processor_count,
        compute_capability=f"{p.major}.{p.minor}",
        total_memory_bytes=p.total_memory,
        l2_bytes=getattr(p, "L2_cache_size", None),
        cuda_version=torch.version.cuda,
        torch_version=str(torch.__version__),  # a TorchVersion would make the recorder import torch
    )

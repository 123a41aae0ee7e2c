"""Source lines of the kernels torch.compile generates, from Inductor's own provenance tracking.

Under torch.compile the line tagger stays off (lines.py says why), and a profiler window sees Triton kernels
launched from generated code. Inductor knows better: with `config.trace.provenance_tracking_level = 1` it
keeps, for every kernel it emits (Triton, and extern calls such as cuBLAS matmuls), the stack traces of the FX
nodes fused into it::

    {"triton_poi_fused_add_mul_tanh_3:7": ['  File "train.py", line 57, in forward\\n    x = ...\\n', ...]}

Every compiled graph carries that JSON (`CompiledFxGraph.inductor_provenance_stack_traces_str`), also one
loaded from Inductor's cache, and `post_compile` runs for both; a wrapper there reads it. The tracking changes
neither the graph nor the kernel names (it adds comments to the generated code), but it is part of Inductor's
cache key, and a graph loaded from a cache may have been compiled without it: under brrrtui the graphs are
generated afresh (`_skip_graph_caches`).

A kernel's share of each line is the fraction of its stack traces whose innermost user frame is that line;
the same kernel name in two graphs (forward and backward) pools its traces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from brrrtui.capture.lines import LineTable, UserFrames
from brrrtui.contract.schema import NONE

# one frame of an FX node's stack_trace, as Dynamo formats it (traceback.format_list)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_HANDLE = re.compile(r":\d+$")

SourceRow = tuple[str, int, int, float]  # (kernel name, user line id, library line id or -1, share)


def kernel_name(key: str) -> str:
    """Provenance key -> the name the profiler records for the kernel's launch.

    `triton_poi_fused_add_0:3` -> `triton_poi_fused_add_0`; `extern_kernels.addmm:6` -> `aten::addmm`;
    `torch.ops.aten._scaled_dot_product_cudnn_attention.default:7` -> `aten::_scaled_dot_product_cudnn_attention`.
    """
    name = _HANDLE.sub("", key)
    if name.startswith("extern_kernels."):
        return "aten::" + name.removeprefix("extern_kernels.")
    if name.startswith("torch.ops."):
        parts = name.split(".")  # torch, ops, namespace, op, overload
        if len(parts) >= 4:
            return f"{parts[2]}::{parts[3]}"
    return name


def source_rows(
    provenance: str,
    lines: LineTable,
    user_frames: UserFrames,
    is_library_file: Callable[[str], bool],
) -> list[SourceRow]:
    """One graph's provenance JSON -> (kernel, line, library line, share) rows; [] when it cannot be read."""
    try:
        kernels = json.loads(provenance)
    except (TypeError, ValueError):
        return []
    if not isinstance(kernels, dict):
        return []
    rows: list[SourceRow] = []
    for key, traces in kernels.items():
        if not isinstance(key, str) or not isinstance(traces, list):
            continue
        places: dict[tuple[int, int], int] = {}
        for trace in traces:
            place = _place(trace, lines, user_frames, is_library_file) if isinstance(trace, str) else None
            if place is not None:
                places[place] = places.get(place, 0) + 1
        total = sum(places.values())
        name = kernel_name(key)
        rows += [(name, line, lib, n / total) for (line, lib), n in places.items()]
    return rows


def _place(
    trace: str, lines: LineTable, user_frames: UserFrames, is_library_file: Callable[[str], bool]
) -> tuple[int, int] | None:
    """The innermost user frame of one stack trace (outermost frame first) and the innermost model-library
    frame below it, as line ids; with no user frame (a library model compiled whole: its graph traces only the
    library's code), NONE and the innermost model-library frame."""
    frames = [(m["file"], int(m["line"]), m["function"]) for m in _FRAME.finditer(trace)]
    user = lib = None
    for frame in reversed(frames):
        if user_frames.is_user(frame[0]):
            user = frame
            break
        if lib is None and is_library_file(frame[0]):
            lib = frame
    if user is None:
        return (NONE, lines.intern(*lib)) if lib else None
    return lines.intern(*user), lines.intern(*lib) if lib else NONE


def _skip_graph_caches(inductor_config: Any) -> None:
    """A graph loaded from AOTAutograd's or Inductor's graph cache carries provenance only if it was compiled
    with it, and neither cache key holds the setting on every torch (on the H200's torch 2.11, a run after the
    same script's plain run loaded its graphs and gave no compiled kernel a line). So under brrrtui the graphs
    are generated afresh; Triton's own cache of compiled kernels still applies. What is compiled does not
    change, only the compile time of the first step."""
    if hasattr(inductor_config, "fx_graph_cache"):
        inductor_config.fx_graph_cache = False
    try:
        import torch._functorch.config as functorch_config
    except ImportError:
        return
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False


def watch_compiled_graphs(on_graph: Callable[[str], None]) -> bool:
    """Turn on Inductor's provenance tracking (unless the script chose a level) and call `on_graph(json)` for
    every compiled graph that runs. False when this torch has no such hook (the lines then stay unknown)."""
    try:
        import torch._inductor.config as inductor_config
        from torch._inductor.output_code import CompiledFxGraph
    except ImportError:
        return False
    trace_config: Any = getattr(inductor_config, "trace", None)
    post_compile = getattr(CompiledFxGraph, "post_compile", None)
    if trace_config is None or post_compile is None or not hasattr(trace_config, "provenance_tracking_level"):
        return False
    if getattr(post_compile, "__brrrtui__", False):
        return True
    if not trace_config.provenance_tracking_level:
        trace_config.provenance_tracking_level = 1
        _skip_graph_caches(inductor_config)

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        provenance = getattr(self, "inductor_provenance_stack_traces_str", None)
        if provenance:
            on_graph(provenance)
        return post_compile(self, *args, **kwargs)

    wrapped.__brrrtui__ = True  # type: ignore[attr-defined]
    CompiledFxGraph.post_compile = wrapped  # type: ignore[method-assign]
    return True

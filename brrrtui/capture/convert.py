"""Turning a finished profiler window into rows for the recording (brrrtui.contract.schema's column order).

Runs on a background thread after the window closed; only cheap accessors of Kineto's events are used
(prof.events() costs 70-150 us per event, these a few, measured on the H200 host).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from brrrtui.capture.ids import IdTable
from brrrtui.contract.collectives import DTYPE_KEY, NELEMS_KEY, message_bytes
from brrrtui.contract.schema import GpuKind


class Interner(IdTable[str]):
    """Child-side string interning: ids are the recording's `strings` ids. Two threads send rows (window
    conversion, the kernel stream). Interning is thread-safe by itself; each thread interns all of a batch's
    strings first, then holds `lock` from take_new() to the send of that batch. So a string another thread
    took is sent before this batch, and every id reaches the recording in or before the batch that uses it,
    while a long window conversion never holds up the stream (it interns outside `lock`)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def __call__(self, s: str | None) -> int:
        return -1 if s is None else self.id_of(s)


# Plain ints: rows cross the pipe, whose reader refuses every class outside builtins and numpy.
_GPU_KINDS = {
    "kernel": int(GpuKind.KERNEL),
    "gpu_memcpy": int(GpuKind.MEMCPY),
    "gpu_memset": int(GpuKind.MEMSET),
}
_RUNTIME_KINDS = {"cuda_runtime", "cuda_driver"}
_NAN = float("nan")


def activity_kind(e: Any) -> str:
    """Kineto's activity type. torch >= 2.12 exposes it; older builds only give the device, so tell kinds
    apart by name: CUDA API calls are `cuda*` / `cu[A-Z]*`, GPU copies and fills `Memcpy*` / `Memset*`."""
    try:
        return e.activity_type()
    except AttributeError:
        pass
    name = e.name()
    if e.is_user_annotation():
        return "gpu_user_annotation" if e.device_type().name == "CUDA" else "user_annotation"
    if e.device_type().name == "CUDA":
        return (
            "gpu_memcpy"
            if name.startswith("Memcpy")
            else "gpu_memset"
            if name.startswith("Memset")
            else "kernel"
        )
    if name.startswith("cuda") or (name.startswith("cu") and name[2:3].isupper()):
        return "cuda_runtime"
    return "cpu_op"


def collective_bytes(e: Any) -> int:
    """An NCCL kernel's message size, "In msg nelems" x dtype, from the collective metadata Kineto attaches to
    it (extra_meta, else the activity's metadata JSON); -1 when this torch gives none. Only the collectives'
    kernels are asked (a few per step)."""
    meta: dict[str, Any] = {}
    for read in (lambda: e.extra_meta(), lambda: _metadata(e.metadata_json())):
        try:
            meta = dict(read() or {})
        except (AttributeError, RuntimeError, TypeError, ValueError):
            continue
        if NELEMS_KEY in meta:
            break
    return message_bytes(meta.get(NELEMS_KEY), meta.get(DTYPE_KEY))


def _metadata(text: str) -> Any:
    """Kineto's activity metadata: JSON members, with or without the enclosing braces."""
    text = text.strip()
    return json.loads(text if text.startswith("{") else "{" + text + "}") if text else {}


def _as_json(value: list[Any]) -> str | None:
    """Shapes and dtype names as JSON text. repr() of these lists is JSON but for the quotes, and ~10x
    cheaper than json.dumps (which was half the conversion time at 58 k events)."""
    return str(value).replace("'", '"') if value else None


def _concrete(e: Any) -> str | None:
    """An attention op's scalar arguments (`is_causal` …) as JSON; None where this torch records none."""
    try:
        values = e.concrete_inputs()
    except (AttributeError, RuntimeError):
        return None
    return json.dumps(values, default=repr) if values else None


def parse_span_name(tag: str) -> tuple[int, int, str | None]:
    """`<line>` or `<line>:<lib line>:<module chain>` (lines.LineTagger writes it) -> (line, lib line, chain)."""
    line, _, rest = tag.partition(":")
    lib, _, module = rest.partition(":")
    return int(line), int(lib) if lib else -1, module or None


def _span_row(e: Any, tag: str, window: int, strings: Interner) -> tuple:
    line, lib_line, module = parse_span_name(tag)
    return (window, line, e.start_ns(), e.duration_ns(), e.start_thread_id(), strings(module), lib_line)


def _op_row(e: Any, name: str, window: int, strings: Interner) -> tuple:
    seq = e.sequence_nr()
    return (
        window,
        strings(name),
        e.start_ns(),
        e.duration_ns(),
        e.start_thread_id(),
        seq,
        (e.fwd_thread_id() or -1) if seq >= 0 else -1,
        strings(_as_json(e.shapes())),
        strings(_as_json(e.dtypes())),
        _NAN,
        strings(_concrete(e)) if "attention" in name else -1,
    )


def convert_events(events: Any, window: int, strings: Interner, span_prefix: str) -> dict[str, list[tuple]]:
    """kineto_results.events() -> rows in schema order (cheap accessors only: prof.events() costs 70-150 us
    per event, these a few, measured on the H200 host)."""
    gpu: list[tuple] = []
    runtime: list[tuple] = []
    ops: list[tuple] = []
    spans: list[tuple] = []
    plen = len(span_prefix)
    for e in events:
        kind = activity_kind(e)
        name = e.name()
        if kind in _GPU_KINDS:
            nbytes = (
                e.nbytes() if kind != "kernel" else collective_bytes(e) if name.startswith("nccl") else -1
            )
            gpu.append(
                (
                    window,
                    _GPU_KINDS[kind],
                    strings(name),
                    e.start_ns(),
                    e.duration_ns(),
                    e.device_index(),
                    e.device_resource_id(),
                    e.correlation_id(),
                    -1,
                    -1,
                    nbytes if nbytes and nbytes > 0 else -1,
                )
            )
        elif kind in _RUNTIME_KINDS:
            runtime.append(
                (
                    window,
                    strings(name),
                    e.start_ns(),
                    e.duration_ns(),
                    e.start_thread_id(),
                    e.correlation_id(),
                )
            )
        elif kind in ("cpu_op", "user_annotation"):
            if name.startswith(span_prefix):
                spans.append(_span_row(e, name[plen:], window, strings))
                continue
            ops.append(_op_row(e, name, window, strings))
    return {"gpu": gpu, "runtime": runtime, "ops": ops, "spans": spans}

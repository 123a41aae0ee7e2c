"""Decoding CUPTI activity buffers (kernel, memcpy and memset records) with numpy, no CUPTI needed.

A buffer CUPTI hands back is a run of packed records, each starting with its kind (uint32) and 8-byte
aligned. Per-record Python objects cost ~30-40 us each on the H200 host (cupti-python's decoded records,
measured: a tiny-op loop ran 10x slower), so brrrtui copies the bytes, walks the records by their sizes
and reads each kind's fields as numpy columns. Field offsets are those of CUDA 13's CUPTI structs
(CUpti_ActivityKernel10, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, checked against cupti-python's
dtypes on the H200); record sizes are learnt from the first buffer with cuptiActivityGetNextRecord.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# CUpti_ActivityKind
MEMCPY_KIND, MEMSET_KIND, CONCURRENT_KERNEL_KIND = 1, 2, 10
KINDS = (CONCURRENT_KERNEL_KIND, MEMCPY_KIND, MEMSET_KIND)
GPU_KIND = {CONCURRENT_KERNEL_KIND: 0, MEMCPY_KIND: 1, MEMSET_KIND: 2}  # -> analyzers.model.GpuKind

u8, u16, u32, i32, u64 = np.uint8, np.uint16, np.uint32, np.int32, np.uint64
FIELDS: dict[int, dict[str, tuple[int, type]]] = {
    CONCURRENT_KERNEL_KIND: {  # CUpti_ActivityKernel10
        "start": (16, u64), "end": (24, u64), "device": (40, u32), "stream": (48, u32),
        "grid_x": (52, i32), "grid_y": (56, i32), "grid_z": (60, i32),
        "block_x": (64, i32), "block_y": (68, i32), "block_z": (72, i32),
        "correlation": (92, u32), "name": (104, u64),
    },
    MEMCPY_KIND: {  # CUpti_ActivityMemcpy6
        "copy_kind": (4, u8), "src_kind": (5, u8), "dst_kind": (6, u8), "bytes": (8, u64),
        "start": (16, u64), "end": (24, u64), "device": (32, u32), "stream": (40, u32),
        "correlation": (44, u32),
    },
    MEMSET_KIND: {  # CUpti_ActivityMemset4
        "bytes": (8, u64), "start": (16, u64), "end": (24, u64), "device": (32, u32), "stream": (40, u32),
        "correlation": (44, u32), "memory_kind": (50, u16),
    },
}  # fmt: skip

_MEMCPY = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
           10: "PtoP"}  # fmt: skip
_MEMORY = {1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed", 6: "Device Static",
           7: "Managed Static"}  # fmt: skip


def memcpy_name(copy_kind: int, src: int, dst: int) -> str:
    """Kineto's name for a copy, so streamed copies match the windows' ones."""
    return f"Memcpy {_MEMCPY.get(copy_kind, 'Unknown')} ({_MEMORY.get(src, 'Unknown')} -> {_MEMORY.get(dst, 'Unknown')})"


def memset_name(memory_kind: int) -> str:
    return f"Memset ({_MEMORY.get(memory_kind, 'Unknown')})"


def walk(data: bytes, sizes: dict[int, int]) -> dict[int, np.ndarray] | None:
    """Record offsets by kind, or None when a record of unknown size is met (learn sizes first)."""
    kinds = np.frombuffer(data, dtype=np.uint32, count=len(data) // 4)
    out: dict[int, list[int]] = {}
    off, n = 0, len(data)
    while off < n:
        kind = int(kinds[off >> 2])
        size = sizes.get(kind)
        if not size:
            return None
        out.setdefault(kind, []).append(off)
        off += size
    if off != n:
        return None
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def columns(data: bytes, offsets: np.ndarray, kind: int) -> dict[str, np.ndarray]:
    raw = np.frombuffer(data, dtype=np.uint8)
    out = {}
    for name, (at, dtype) in FIELDS[kind].items():
        width = np.dtype(dtype).itemsize
        idx = offsets[:, None] + (at + np.arange(width))
        out[name] = raw[idx].copy().view(dtype).ravel()
    return out


@dataclass
class Decoded:
    """Columns of the records of one or more buffers, kernels, copies and fills together, CUPTI clock."""

    kind: np.ndarray  # analyzers.model.GpuKind
    name: list[str]
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    grid: list[str | None]
    block: list[str | None]
    bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)


def decode(data: bytes, offsets: dict[int, np.ndarray], name_of: Callable[[int], str]) -> Decoded:
    """The records at `offsets` (from walk) as columns. `name_of(pointer)`: a kernel's name from its pointer."""
    parts: list[Decoded] = []
    for kind, offs in offsets.items():
        if kind not in FIELDS or not len(offs):
            continue
        c = columns(data, offs, kind)
        n = len(offs)
        if kind == CONCURRENT_KERNEL_KIND:
            names = [name_of(p) for p in c["name"].tolist()]
            grid = [f"{x},{y},{z}" for x, y, z in zip(c["grid_x"].tolist(), c["grid_y"].tolist(),
                                                     c["grid_z"].tolist(), strict=True)]  # fmt: skip
            block = [f"{x},{y},{z}" for x, y, z in zip(c["block_x"].tolist(), c["block_y"].tolist(),
                                                      c["block_z"].tolist(), strict=True)]  # fmt: skip
            nbytes = np.full(n, -1, dtype=np.int64)
        elif kind == MEMCPY_KIND:
            names = [memcpy_name(*t) for t in zip(c["copy_kind"].tolist(), c["src_kind"].tolist(),
                                                  c["dst_kind"].tolist(), strict=True)]  # fmt: skip
            grid = block = [None] * n
            nbytes = c["bytes"].astype(np.int64)
        else:
            names = [memset_name(k) for k in c["memory_kind"].tolist()]
            grid = block = [None] * n
            nbytes = c["bytes"].astype(np.int64)
        parts.append(Decoded(np.full(n, GPU_KIND[kind], dtype=np.int8), names, c["start"].astype(np.int64),
                             c["end"].astype(np.int64), c["device"].astype(np.int32), c["stream"].astype(np.int32),
                             c["correlation"].astype(np.int64), grid, block, nbytes))  # fmt: skip
    return concat(parts)


def complete(d: Decoded) -> np.ndarray:
    """Records whose activity had ended when CUPTI handed them over (a forced flush also returns running
    kernels, with no end timestamp; a layout CUPTI changed would fail here too)."""
    dur = d.end - d.start
    return (d.start > 0) & (d.end > 0) & (dur >= 0) & (dur < 3_600_000_000_000) & (d.correlation >= 0)


def malformed(d: Decoded) -> np.ndarray:
    """Records no CUPTI writes (both timestamps set, end before start or an hour later): a layout mismatch."""
    dur = d.end - d.start
    both = (d.start > 0) & (d.end > 0)
    return both & ((dur < 0) | (dur >= 3_600_000_000_000)) | (d.correlation < 0)


def take(d: Decoded, mask: np.ndarray) -> Decoded:
    if mask.all():
        return d
    idx = np.nonzero(mask)[0].tolist()
    return Decoded(d.kind[mask], [d.name[i] for i in idx], d.start[mask], d.end[mask], d.device[mask],
                   d.stream[mask], d.correlation[mask], [d.grid[i] for i in idx], [d.block[i] for i in idx],
                   d.bytes[mask])  # fmt: skip


def concat(parts: list[Decoded]) -> Decoded:
    if not parts:
        e = np.empty(0, dtype=np.int64)
        return Decoded(e.astype(np.int8), [], e, e, e.astype(np.int32), e.astype(np.int32), e, [], [], e)
    if len(parts) == 1:
        return parts[0]
    return Decoded(
        np.concatenate([p.kind for p in parts]), [s for p in parts for s in p.name],
        np.concatenate([p.start for p in parts]), np.concatenate([p.end for p in parts]),
        np.concatenate([p.device for p in parts]), np.concatenate([p.stream for p in parts]),
        np.concatenate([p.correlation for p in parts]), [s for p in parts for s in p.grid],
        [s for p in parts for s in p.block], np.concatenate([p.bytes for p in parts]),
    )  # fmt: skip


def to_rows(
    d: Decoded, after_window: int, offset_ns: int, intern: Callable[[str | None], int]
) -> list[tuple]:
    """Decoded records -> analyzers.model.STREAM_SCHEMA rows on the recording's clock."""
    return list(zip(
        [after_window] * len(d), d.kind.tolist(), [intern(s) for s in d.name], (d.start + offset_ns).tolist(),
        (d.end - d.start).tolist(), d.device.tolist(), d.stream.tolist(), d.correlation.tolist(),
        [intern(s) for s in d.grid], [intern(s) for s in d.block], d.bytes.tolist(), strict=True,
    ))  # fmt: skip

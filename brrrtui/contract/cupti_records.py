"""Decoding CUPTI activity buffers (kernel, memcpy and memset records), no CUPTI needed.

A buffer CUPTI hands back is a run of packed records, each starting with its kind (uint32) and 8-byte
aligned. Per-record Python objects cost ~30-40 us each on the H200 host (cupti-python's decoded records,
measured: a tiny-op loop ran 10x slower), so brrrtui copies the bytes; the script's process scans them once
for offsets and string ids (`scan`) and the recorder reads each kind's fields as numpy columns
(`rows_from_scan`); `walk` + `malformed` check the first buffer's layout. Field offsets are those of CUDA
13's CUPTI structs
(CUpti_ActivityKernel10, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, checked against cupti-python's
dtypes on the H200); record sizes are learnt from the first buffer with cuptiActivityGetNextRecord.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from brrrtui.contract.schema import STREAM_SCHEMA, GpuKind

# CUpti_ActivityKind
MEMCPY_KIND, MEMSET_KIND, CONCURRENT_KERNEL_KIND = 1, 2, 10
KINDS = (CONCURRENT_KERNEL_KIND, MEMCPY_KIND, MEMSET_KIND)
GPU_KIND = {CONCURRENT_KERNEL_KIND: GpuKind.KERNEL, MEMCPY_KIND: GpuKind.MEMCPY, MEMSET_KIND: GpuKind.MEMSET}

u8, u16, u32, i32, u64 = np.uint8, np.uint16, np.uint32, np.int32, np.uint64
# CUpti_ActivityMemcpy6 and CUpti_ActivityMemset4 share the layout of these fields
_TRANSFER: dict[str, tuple[int, type]] = {
    "bytes": (8, u64), "start": (16, u64), "end": (24, u64), "device": (32, u32), "stream": (40, u32),
    "correlation": (44, u32),
}
FIELDS: dict[int, dict[str, tuple[int, type]]] = {
    CONCURRENT_KERNEL_KIND: {  # CUpti_ActivityKernel10
        "start": (16, u64), "end": (24, u64), "device": (40, u32), "stream": (48, u32),
        "grid_x": (52, i32), "grid_y": (56, i32), "grid_z": (60, i32),
        "block_x": (64, i32), "block_y": (68, i32), "block_z": (72, i32),
        "correlation": (92, u32), "name": (104, u64),
    },
    MEMCPY_KIND: {"copy_kind": (4, u8), "src_kind": (5, u8), "dst_kind": (6, u8)} | _TRANSFER,
    MEMSET_KIND: _TRANSFER | {"memory_kind": (50, u16)},
}

# CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind, from 1
_MEMCPY = dict(enumerate("HtoD DtoH HtoA AtoH AtoA AtoD DtoA DtoD HtoH PtoP".split(), start=1))
_MEMORY = dict(
    enumerate(
        ("Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"), start=1
    )
)


def memcpy_name(copy_kind: int, src: int, dst: int) -> str:
    """Kineto's name for a copy, so streamed copies match the windows' ones."""
    return f"Memcpy {_MEMCPY.get(copy_kind, 'Unknown')} ({_MEMORY.get(src, 'Unknown')} -> {_MEMORY.get(dst, 'Unknown')})"


def memset_name(memory_kind: int) -> str:
    return f"Memset ({_MEMORY.get(memory_kind, 'Unknown')})"


def walk(data: bytes, sizes: dict[int, int]) -> dict[int, np.ndarray] | None:
    """Record offsets by kind, or None when a record of unknown size is met (learn sizes first).

    Record i+1 starts where record i ends, so the walk is sequential: a bare Python loop over a memoryview
    (~0.1-0.2 us a record; numpy scalar reads cost more, and copies and fills interleave with kernels too
    often in real steps, runs of ~3 in GPT-2, for strided numpy reads of runs to pay off)."""
    n = len(data) & ~3
    peek = memoryview(data)[:n].cast("I")
    size_of = [0] * 256
    for kind, size in sizes.items():
        if 0 <= kind < 256 and size % 8 == 0:
            size_of[kind] = size
    found: list[int] = []
    add = found.append
    off = 0
    try:
        while off < n:
            size = size_of[peek[off >> 2]]
            if not size:
                return None
            add(off)
            off += size
    except IndexError:  # not a kind at all
        return None
    if off != len(data):
        return None
    offsets = np.asarray(found, dtype=np.int64)
    kinds = np.frombuffer(data, dtype=np.uint32, count=n // 4)[offsets >> 2]
    return {k: offsets[kinds == k] for k in np.unique(kinds).tolist()}


def columns(data: bytes, offsets: np.ndarray, kind: int) -> dict[str, np.ndarray]:
    """Each field as a column: CUPTI's structs keep fields naturally aligned and records 8-byte aligned, so
    a field is one gather from a view of the buffer as the field's type."""
    out = {}
    for name, (at, dtype) in FIELDS[kind].items():
        width = np.dtype(dtype).itemsize
        view: np.ndarray = np.frombuffer(data, dtype=dtype, count=len(data) // width)
        out[name] = view[(offsets + at) // width]
    return out


def fields(data: bytes, offsets: np.ndarray) -> dict[str, np.ndarray]:
    """The numeric fields of the records at `offsets` (any mix of kinds, in any order) as int64 columns:
    kind (brrrtui.contract.schema.GpuKind; -1 for a kind brrrtui did not enable), start, end, device, stream,
    correlation, bytes (-1 where a kind has no such field: a kernel's bytes)."""
    n = len(offsets)
    kinds = np.frombuffer(data, dtype=np.uint32, count=len(data) // 4)[offsets >> 2]
    cols = {
        name: np.full(n, -1, dtype=np.int64)
        for name in ("kind", "start", "end", "device", "stream", "correlation", "bytes")
    }
    for kind in KINDS:
        at = np.flatnonzero(kinds == kind)
        if len(at):
            cols["kind"][at] = GPU_KIND[kind]
            for name, column in columns(data, offsets[at], kind).items():
                if name in cols:
                    cols[name][at] = column
    return cols


def malformed(data: bytes, offsets: np.ndarray) -> np.ndarray:
    """Per record of an enabled kind: one no CUPTI writes (both timestamps set, end before start or an hour
    later), the sign of a layout that is not CUDA 13's."""
    c = fields(data, offsets)
    c = {k: v[c["kind"] >= 0] for k, v in c.items()}
    dur = c["end"] - c["start"]
    both = (c["start"] > 0) & (c["end"] > 0)
    bad: np.ndarray = both & ((dur < 0) | (dur >= _HOUR_NS)) | (c["correlation"] < 0)
    return bad


# ---------------------------------------------------------------------------------------------- the scan
# In the script's process the stream shares the GIL with the training loop, so it does as little per record as
# it can, and few numpy calls (each one on a buffer-sized array releases the GIL, and retaking it beside a busy
# main thread can wait out the 5 ms switch interval): one plain-Python pass per buffer notes each record's
# offset and the string ids of its name and launch shape (from caches keyed by the raw bytes), and the bytes
# go to the recorder as they are; the recorder, a process of its own, reads the numeric fields with numpy
# (rows_from_scan). Measured on the H200: 0.7-0.8 us of the script's wall time per record on GPT-2, against
# 1.0 us for a numpy decode per buffer in the script.

_NAME_AT = FIELDS[CONCURRENT_KERNEL_KIND]["name"][0]
_GRID_AT = FIELDS[CONCURRENT_KERNEL_KIND]["grid_x"][0]
_SHAPE_END = FIELDS[CONCURRENT_KERNEL_KIND]["block_z"][0] + 4  # grid and block: six adjacent int32
_COPY_AT = FIELDS[MEMCPY_KIND]["copy_kind"][0]
_FILL_AT = FIELDS[MEMSET_KIND]["memory_kind"][0]


class ScanIds:
    """String ids by the raw bytes they come from: kernel name pointers (valid for one CUPTI session: clear
    `names` when CUPTI is re-initialised), launch shapes, copy and fill kinds. `intern` gives the recording's
    id of a string; `name_of` a kernel's name from its pointer."""

    def __init__(self, intern: Callable[[str | None], int], name_of: Callable[[int], str]):
        self.intern = intern
        self.name_of = name_of
        self.names: dict[int, int] = {}
        self.shapes: dict[bytes, int] = {}
        self.copies: dict[bytes, int] = {}
        self.fills: dict[int, int] = {}

    def name(self, pointer: int) -> int:
        i = self.names[pointer] = self.intern(self.name_of(pointer))
        return i

    def shape(self, raw: bytes) -> int:
        """grid and block -> grid id << 32 | block id."""
        gx, gy, gz, bx, by, bz = np.frombuffer(raw, dtype=np.int32).tolist()
        i = self.shapes[raw] = self.intern(f"{gx},{gy},{gz}") << 32 | self.intern(f"{bx},{by},{bz}")
        return i

    def copy(self, raw: bytes) -> int:
        i = self.copies[raw] = self.intern(memcpy_name(raw[0], raw[1], raw[2]))
        return i

    def fill(self, memory_kind: int) -> int:
        i = self.fills[memory_kind] = self.intern(memset_name(memory_kind))
        return i


@dataclass
class Scanned:
    """What scans of one or more buffers found, record by record, in buffer order; offsets are into the
    buffers joined in scan order."""

    offsets: list[int]
    names: list[int]  # string ids
    shapes: list[int]  # grid id << 32 | block id; -1: none (copies, fills)

    @classmethod
    def empty(cls) -> Scanned:
        return cls([], [], [])

    def __len__(self) -> int:
        return len(self.offsets)

    def truncate(self, n: int) -> None:
        for column in (self.offsets, self.names, self.shapes):
            del column[n:]


def scan(data: bytes, sizes: dict[int, int], base: int, out: Scanned, ids: ScanIds) -> bool:
    """Append each record of `data` to `out` (offset + base, name and launch-shape ids); False (with part of
    the buffer appended: truncate) when a record of unknown size is met or the buffer does not end on one."""
    n = len(data)
    if n & 7:
        return False
    view = memoryview(data)
    u16, u32, u64 = view.cast("H"), view.cast("I"), view.cast("Q")
    size_of = [0] * 256
    for kind, size in sizes.items():
        if 0 <= kind < 256 and size % 8 == 0:
            size_of[kind] = size
    offsets, names, shapes = out.offsets, out.names, out.shapes
    name_ids, shape_ids, copy_ids, fill_ids = ids.names, ids.shapes, ids.copies, ids.fills
    off = 0
    try:
        while off < n:
            kind = u32[off >> 2]
            size = size_of[kind]
            if not size:
                return False
            if kind == CONCURRENT_KERNEL_KIND:
                key = u64[(off + _NAME_AT) >> 3]
                i = name_ids.get(key)
                names.append(ids.name(key) if i is None else i)
                raw = data[off + _GRID_AT : off + _SHAPE_END]
                i = shape_ids.get(raw)
                shapes.append(ids.shape(raw) if i is None else i)
            else:
                if kind == MEMCPY_KIND:
                    raw = data[off + _COPY_AT : off + _COPY_AT + 3]
                    i = copy_ids.get(raw)
                    names.append(ids.copy(raw) if i is None else i)
                elif kind == MEMSET_KIND:
                    key = u16[(off + _FILL_AT) >> 1]
                    i = fill_ids.get(key)
                    names.append(ids.fill(key) if i is None else i)
                else:  # a kind brrrtui did not enable: dropped by rows_from_scan
                    names.append(-1)
                shapes.append(-1)
            offsets.append(base + off)
            off += size
    except IndexError:  # a kind >= 256: not a record
        return False
    return off == n


def rows_from_scan(data: bytes, parts: list[tuple[int, int, int]], found: Scanned) -> tuple[np.ndarray, int]:
    """(STREAM_SCHEMA rows as an int64 array on the recording's clock, records dropped as
    incomplete or of another kind). `data`: the scanned buffers joined; `parts`: (after_window, offset_ns,
    record count) per buffer, in scan order."""
    offsets = np.asarray(found.offsets, dtype=np.int64)
    n = len(offsets)
    cols = fields(data, offsets)
    counts = [p[2] for p in parts]
    start, end = cols["start"], cols["end"]
    shapes = np.asarray(found.shapes, dtype=np.int64)
    grids = np.where(shapes < 0, -1, shapes >> 32)
    blocks = np.where(shapes < 0, -1, shapes & 0xFFFFFFFF)
    rows = np.column_stack(
        [
            np.repeat(np.asarray([p[0] for p in parts], dtype=np.int64), counts),
            cols["kind"],
            np.asarray(found.names, dtype=np.int64),
            start + np.repeat(np.asarray([p[1] for p in parts], dtype=np.int64), counts),
            end - start,
            cols["device"],
            cols["stream"],
            cols["correlation"],
            grids,
            blocks,
            cols["bytes"],
        ]
    ).reshape(n, ROW_WIDTH)
    keep = (cols["kind"] >= 0) & (start > 0) & (end > 0) & (end >= start) & (end - start < _HOUR_NS)
    return rows[keep], int(n - keep.sum())


ROW_WIDTH = len(STREAM_SCHEMA)  # one row per record, in STREAM_SCHEMA's column order
_HOUR_NS = 3_600_000_000_000

"""How one column of one batch is stored: a typed little-endian array behind a one-byte code.

    code 0  plain float64: 8 bytes per value
    code 1  int, offset:   8-byte int64 base, then value - base as uint8  (1 byte per value)
    code 2  int, offset:   8-byte int64 base, then value - base as uint16 (2 bytes per value)
    code 3  int, offset:   8-byte int64 base, then value - base as uint32 (4 bytes per value)
    code 4  int, plain:    8-byte int64 base (0), then int64 values      (8 bytes per value)
    code 5  int, constant: 8-byte int64, the batch's one value           (no bytes per value)
    code 6  float, constant: 8-byte float64, the batch's one value (NaN too)

Each integer column takes the narrowest of these that holds its batch's range: a window id, a device, a
kind or an unknown `bytes` is one value per batch, names and shapes 1-2 bytes, a start time within a
batch (< 4.3 s) 4 bytes. The kernel stream (21 k kernels/s on GPT-2) then takes ~22 bytes a kernel instead
of the 57 of its int64/int32 columns (benchmarks/bench_analyze.py prints file sizes). Decoding is numpy's
`frombuffer` + a cast + an add: no Python object per value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from brrrtui.recording.checks import RecordingError

_OFFSETS: dict[int, np.dtype[Any]] = {
    1: np.dtype("<u1"),
    2: np.dtype("<u2"),
    3: np.dtype("<u4"),
    4: np.dtype("<i8"),
}
_F8 = np.dtype("<f8")
HEAD = 9
"""Bytes before the values: the code and, for every code but 0, an 8-byte base or constant."""


def encode(values: np.ndarray) -> bytes:
    """A batch's column (ints of any width, or floats) as a blob."""
    if values.dtype.kind == "f":
        first = values[:1].astype(_F8)
        same = (values == first) | (np.isnan(values) & np.isnan(first))
        if same.all():
            return b"\x06" + first.tobytes()
        return b"\x00" + values.astype(_F8).tobytes()
    wide = values.astype(np.int64)
    lo, hi = int(wide.min()), int(wide.max())
    base = np.array([lo], dtype="<i8").tobytes()
    if lo == hi:
        return b"\x05" + base
    for code in (1, 2, 3):
        if hi - lo < 2 ** (8 * _OFFSETS[code].itemsize):
            return bytes([code]) + base + bytes((wide - lo).astype(_OFFSETS[code]).tobytes())
    return b"\x04" + bytes(8) + wide.astype("<i8").tobytes()


# by code: bytes per value (-1: no such code), bytes before the values, whether it is a float column's
_SIZE = np.full(256, -1, dtype=np.int64)
_SIZE[[0, *_OFFSETS, 5, 6]] = [8, *(d.itemsize for d in _OFFSETS.values()), 0, 0]
_HEADS = np.where(np.arange(256) == 0, 1, HEAD)
_FLOAT_CODES = np.isin(np.arange(256), (0, 6))


def _checked_code(blob: object, n: int, floats: bool, where: str) -> tuple[int, int, int]:
    """(code, bytes per value, bytes before the values) of a blob that holds `n` values."""
    if not isinstance(blob, bytes) or not blob:
        raise RecordingError(f"{where} holds {blob!r:.40}, not a column")
    code = blob[0]
    size, head = int(_SIZE[code]), int(_HEADS[code])
    if size < 0 or bool(_FLOAT_CODES[code]) != floats or len(blob) != head + n * size:
        raise RecordingError(
            f"{where} holds {len(blob)} bytes of code {code}, not the {n} values of its batch"
        )
    if code == 4 and blob[1:HEAD] != _ZERO_BASE:
        raise RecordingError(f"{where} holds plain values above a base, which no writer stores")
    return code, size, head


_ZERO_BASE = bytes(8)
"""Code 4's base: its values are whole int64s, so a base could only make them wrap."""


def _checked_codes(parts: list[tuple[Any, int, int]], floats: bool, where: str) -> np.ndarray:
    """Each (blob, at, n)'s code, checked as _checked_code checks one blob, in a few passes over them all
    (a step table written every half second of an hour has tens of thousands)."""
    blobs = [blob for blob, _, _ in parts]
    if not all(type(blob) is bytes and blob for blob in blobs):
        for blob, _, n in parts:  # raises, naming the blob that is not a column
            _checked_code(blob, n, floats, where)
    codes = np.frombuffer(b"".join([blob[:1] for blob in blobs]), np.uint8)
    lengths = np.fromiter(map(len, blobs), np.int64, len(blobs))
    ns = np.fromiter((n for _, _, n in parts), np.int64, len(parts))
    size = _SIZE[codes]
    ok = (size >= 0) & (_FLOAT_CODES[codes] == floats) & (lengths == _HEADS[codes] + ns * size)
    for i in np.flatnonzero(codes == 4).tolist():
        ok[i] &= blobs[i][1:HEAD] == _ZERO_BASE
    if not ok.all():
        blob, _, n = parts[int(np.argmin(ok))]
        _checked_code(blob, n, floats, where)
    return codes


def int_bounds(blob: object, n: int, skip: int, take: int, where: str) -> tuple[int, int] | None:
    """The (min, max) of values [skip, skip + take) of an integer blob that holds `n` (None: no values),
    checked as decode_into checks the blob: what a reader needs to pick the column's type before decoding."""
    code, size, head = _checked_code(blob, n, False, where)
    assert isinstance(blob, bytes)
    if not take:
        return None
    base = int(np.frombuffer(blob, "<i8", 1, 1)[0])
    if code == 5:
        return base, base
    raw = np.frombuffer(blob, _OFFSETS[code], take, head + skip * size)
    lo, hi = base + int(raw.min()), base + int(raw.max())
    _check_int64(lo, hi, where)
    return lo, hi


def decode_into(
    out: np.ndarray,
    blob: object,
    n: int,
    skip: int,
    floats: bool,
    where: str,
    bounds: tuple[int, int] | None = None,
) -> tuple[int, int] | None:
    """decode(blob, n, skip, len(out), floats, where) written straight into `out` (an integer or float column
    slice), without an int64 copy of the batch; returns the values' (min, max) for integers (None for floats
    or no values). An integer value `out`'s dtype cannot hold ends in one RecordingError line, as does a
    blob that does not read as one. `bounds`: int_bounds of the same values, where the caller has them."""
    code, size, head = _checked_code(blob, n, floats, where)
    assert isinstance(blob, bytes)
    take = len(out)
    if not take:
        return None
    if code == 6:
        out.fill(np.frombuffer(blob, _F8, 1, 1)[0])
        return None
    if code == 0:
        out[:] = np.frombuffer(blob, _F8, take, head + skip * 8)
        return None
    bounds = bounds or int_bounds(blob, n, skip, take, where)
    assert bounds is not None  # take > 0: there are values
    lo, hi = bounds
    _check_fits(out, lo, hi, where)
    base = int(np.frombuffer(blob, "<i8", 1, 1)[0])
    raw = np.frombuffer(blob, _OFFSETS[code], take, head + skip * size) if code != 5 else None
    if raw is None:
        out.fill(base)
    elif code == 4:
        out[:] = raw
    else:  # in int64, then to out's type: every value fits it (checked above)
        np.add(raw, np.int64(base), out=out, casting="unsafe")
    return lo, hi


def constant(blob: object, n: int, floats: bool, where: str, dtype: Any) -> int | float | None:
    """The one value of a blob that stores its batch as one value (codes 5 and 6), checked as decode_into
    checks it against `dtype`; None, unchecked, for anything else (decode_into checks that, once)."""
    if type(blob) is not bytes or not blob or blob[0] not in (5, 6):
        return None
    code, _, _ = _checked_code(blob, n, floats, where)
    if code == 6:
        return float(np.frombuffer(blob, _F8, 1, 1)[0])
    base = int(np.frombuffer(blob, "<i8", 1, 1)[0])
    _check_fits(np.empty(0, dtype), base, base, where)
    return base


def constant_many(
    parts: list[tuple[Any, int, int]], floats: bool, where: str, dtype: Any
) -> int | float | None:
    """The one value of whole batches (blob, at, n) that all store the same single value, every blob checked
    as decode_many checks them; None otherwise (without a check: decode_many makes them)."""
    heads = {blob[:HEAD] if type(blob) is bytes else None for blob, _, _ in parts}
    if len(heads) != 1:
        return None
    (head,) = heads
    if not head or head[0] not in (5, 6):
        return None
    _checked_codes(parts, floats, where)
    blob, _, n = parts[0]
    return constant(blob, n, floats, where, dtype)


def _check_int64(lo: int, hi: int, where: str) -> None:
    """Base + offset past int64 (only a damaged blob): a value no column holds, refused rather than wrapped."""
    if hi >= 2**63 or lo < -(2**63):
        raise RecordingError(f"{where} holds {hi if hi >= 2**63 else lo}")


def _check_fits(out: np.ndarray, lo: int, hi: int, where: str) -> None:
    """Values from lo to hi fit `out`'s integer type, else one RecordingError line."""
    info = np.iinfo(out.dtype)
    if lo < info.min or hi > info.max:
        raise RecordingError(f"{where} holds {lo if lo < info.min else hi}")


def _bounds(values: np.ndarray) -> tuple[int, int]:
    return int(values.min()), int(values.max())


def decode(blob: object, n: int, skip: int, take: int, floats: bool, where: str) -> np.ndarray:
    """Values [skip, skip + take) of a blob that holds `n`: int64 (or float64 where `floats`). A blob that
    does not read as one ends in one RecordingError line naming `where` (table.column)."""
    code, size, head = _checked_code(blob, n, floats, where)
    assert isinstance(blob, bytes)
    if code == 6:
        return np.full(take, np.frombuffer(blob, _F8, 1, 1)[0])
    if code == 0:
        return np.frombuffer(blob, _F8, take, head + skip * 8).astype(np.float64)
    base = int(np.frombuffer(blob, "<i8", 1, 1)[0])
    if code == 5:
        return np.full(take, base, dtype=np.int64)
    values: np.ndarray = np.frombuffer(blob, _OFFSETS[code], take, head + skip * size).astype(np.int64)
    if base and take:
        _check_int64(base + int(values.min()), base + int(values.max()), where)
        values += base
    return values


def decode_many(
    out: np.ndarray, parts: list[tuple[Any, int, int]], floats: bool, where: str
) -> tuple[int, int] | None:
    """Whole batches of one column at once: each (blob, at, n) fills out[at:at + n]; returns the values' (min,
    max) for integers, as decode_into does, with its checks and errors. decode_into pays numpy's per-call cost
    several times a blob, which a table of many small batches (a step table written every half second of an
    hour) pays tens of thousands of times; here the blobs of each code are joined and decoded in one pass."""
    groups: dict[int, list[tuple[bytes, int, int]]] = {}
    for code, part in zip(_checked_codes(parts, floats, where).tolist(), parts, strict=True):
        if part[2]:
            groups.setdefault(code, []).append(part)
    bounds: tuple[int, int] | None = None
    for code, group in groups.items():
        ns = np.fromiter((n for _, _, n in group), np.int64, len(group))
        ats = np.fromiter((at for _, at, _ in group), np.int64, len(group))
        first = np.cumsum(ns) - ns  # each batch's first value among the group's
        rows: slice | np.ndarray = slice(int(ats[0]), int(ats[0] + ns.sum()))  # one stretch: a plain copy
        if (ats != ats[0] + first).any():
            rows = np.repeat(ats - first, ns) + np.arange(int(ns.sum()))
        if code in (0, 6):
            if code == 0:
                out[rows] = np.frombuffer(b"".join([b[1:] for b, _, _ in group]), _F8)
            else:
                out[rows] = np.repeat(np.frombuffer(b"".join([b[1:HEAD] for b, _, _ in group]), _F8), ns)
            continue
        bases = np.frombuffer(b"".join([b[1:HEAD] for b, _, _ in group]), "<i8")
        raw = None if code == 5 else np.frombuffer(b"".join([b[HEAD:] for b, _, _ in group]), _OFFSETS[code])
        lo = int(bases.min()) + (0 if raw is None else int(raw.min()))
        hi = int(bases.max()) + (0 if raw is None else int(raw.max()))
        if hi >= 2**63 or lo < -(2**63):  # one of them may wrap in int64: decode_into says which
            for blob, at, n in group:
                bounds = union_bounds(bounds, decode_into(out[at : at + n], blob, n, 0, False, where))
            continue
        values = np.repeat(bases, ns)
        if raw is not None:
            values += raw  # in place: no int64 copy of the offsets
        lo, hi = _bounds(values)
        _check_fits(out, lo, hi, where)
        out[rows] = values
        bounds = union_bounds(bounds, (lo, hi))
    return bounds


_WIDEST = (-(2**63), 2**63 - 1)
_SPAN = np.zeros(256, dtype=np.int64)  # by code: the most its offsets add to the base
_SPAN[[1, 2, 3]] = [2**8 - 1, 2**16 - 1, 2**32 - 1]


def head_bounds(parts: list[tuple[Any, int, int]]) -> tuple[int, int] | None:
    """A range holding every value of whole integer batches (blob, at, n), read from their heads alone: each
    base, up to the most its offsets can add (None: no values). Unchecked (decode_many checks the blobs); a
    blob that stores plain int64s, or does not read as a column, gives int64's whole range."""
    parts = [p for p in parts if p[2]]
    if not parts:
        return None
    blobs = [blob for blob, _, _ in parts]
    if not all(type(blob) is bytes and len(blob) >= HEAD for blob in blobs):
        return _WIDEST
    codes = np.frombuffer(b"".join([blob[:1] for blob in blobs]), np.uint8)
    if not np.isin(codes, (1, 2, 3, 5)).all():
        return _WIDEST
    bases = np.frombuffer(b"".join([blob[1:HEAD] for blob in blobs]), "<i8")
    tops = bases.astype(object) + _SPAN[codes].astype(object)  # in Python ints: a base near int64's top
    return int(bases.min()), int(max(tops))


def union_bounds(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    """The (min, max) of two sets of values' (min, max), either of them None (no values)."""
    return b if a is None else a if b is None else (min(a[0], b[0]), max(a[1], b[1]))

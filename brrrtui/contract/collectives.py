"""A collective's message size from what torch's profiler attaches to an NCCL kernel (and to
`record_param_comms`): "In msg nelems" elements of "dtype", c10's ScalarType name ("Float", "BFloat16").
The capture (brrrtui.capture.convert) and the Chrome trace readers (brrrtui.recording.chrome.events, .bulk)
put it in the GPU row's `bytes` column, which is otherwise NONE for a kernel."""

from __future__ import annotations

from typing import Any

NELEMS_KEY, DTYPE_KEY = "In msg nelems", "dtype"

# bytes per element by c10's ScalarType names
SCALAR_BYTES = {
    **dict.fromkeys(("Byte", "Char", "Bool", "Float8_e4m3fn", "Float8_e5m2", "Float8_e4m3fnuz"), 1),
    **dict.fromkeys(("Short", "Half", "BFloat16"), 2),
    **dict.fromkeys(("Int", "Float", "UInt32"), 4),
    **dict.fromkeys(("Long", "Double", "UInt64", "ComplexFloat"), 8),
}


def message_bytes(nelems: Any, dtype: Any) -> int:
    """nelems x the dtype's width; -1 when either is missing or not understood."""
    if isinstance(nelems, bool) or not isinstance(dtype, str) or dtype not in SCALAR_BYTES:
        return -1
    try:
        n = int(nelems)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float (1e999 in JSON)
        return -1
    return n * SCALAR_BYTES[dtype] if 0 <= n < 2**50 else -1

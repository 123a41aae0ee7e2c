"""FLOPs and bytes of a kernel torch.compile generated, from its launch's arguments.

Inductor launches each Triton kernel inside a profiler scope named after it, whose recorded inputs are the
kernel's arguments: its buffers (`in_ptr0`, `out_ptr0`, `in_out_ptr0` …) and sizes (`xnumel`, as scalars).
Each buffer is read or written once by a pointwise or reduction kernel, so bytes = the buffers' sizes summed
(an in-out buffer, read and written, is counted once: a lower bound). FLOPs, roughly: one per word of the
fused ops' names (`triton_poi_fused_add_mul_tanh_3` fuses add, mul and tanh: 3) per element of the largest
buffer; such kernels sit far below any ridge, so the regime does not hinge on it. Templates (`triton_tem_…`: matmuls and
convolutions Inductor wrote itself) get no estimate: their arguments do not say M, N and K.
"""

from __future__ import annotations

import re

from analyzers.cost.tensor_args import TensorArg

_KIND = re.compile(r"^triton_(poi|red|per|for)_(?:fused_)?(.*?)(?:_\d+)?$")


def is_inductor_kernel(name: str) -> bool:
    return name.startswith("triton_")


def triton_cost(name: str, tensors: list[TensorArg]) -> tuple[float, float] | None:
    """(FLOPs, bytes) of one launch, or None when its kind or buffers are unknown."""
    m = _KIND.match(name)
    if m is None or not tensors:
        return None
    ops = [t for t in m.group(2).split("_") if t and not t.isdigit()]
    largest = max(t.numel for t in tensors)
    return float(max(1, len(ops)) * largest), float(sum(t.nbytes for t in tensors))

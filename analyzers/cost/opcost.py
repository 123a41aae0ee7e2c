"""FLOPs and bytes of one recorded operator, from the input shapes and dtypes torch.profiler records.

Pure Python (never torch): the formulas for matmuls, convolutions and attention re-implement
`torch.utils.flop_counter` (2·m·n·k per matmul; convolution 2·N·C_out·C_in/groups·prod(kernel)·prod(out spatial);
attention in cost/attention_cost.py), so offline numbers match FlopCounterMode's. Differences, all deliberate:

- attention ops that take (batch, seq, heads, dim) are permuted to (batch, heads, seq, dim) first, and the
  backends' inner ops (`_cudnn_attention_*`, `_flash_attention_*`, `_efficient_attention_*`, `flash_attn::*`)
  are costed like the SDPA op above them (flop_counter never sees them: they run beneath it).
- convolution_backward's grad-weight FLOPs equal the forward FLOPs with the weight's per-group C_in, which keeps
  grouped convolutions right.

The FLOPs are the useful work. A dense (ungrouped) convolution with 16-bit or 8-bit operands whose C_in is not a
multiple of the tensor cores' 16-byte operand width (8 channels in bf16) makes its tensor cores do more: cuDNN
pads the channels first (its `nhwcAddPaddingKernel`) and multiplies the zeros too. `OpCost.padding` is that
ratio (C_in rounded up / C_in; 8/3 for a 3-channel image stem in bf16), and the roofline judges the kernel's
intensity on the padded work (cost/roofline.py): counted without it, the stem looked memory-bound at a tenth of
its roof while Nsight Compute measured its tensor pipe at 65 %.

Bytes are inputs + outputs (shape x dtype size), each read or written once: the DRAM traffic of a kernel that
streams its tensors once. It overstates traffic when tensors fit in L2. Layers whose kernels read a tensor twice
or touch only part of one (norms, nll_loss, embedding backward, gather) have their own formulas in
cost/layer_costs.py. Outputs are inferred:

    matmul family      from the operand shapes (mm [m,k]x[k,n] -> [m,n], linear, bmm, broadcasting matmul)
    convolution        from a hint (the consumer op's input, see cost/kernel_costs.py), else the input's spatial size
    attention          the query's shape with the value's head dim
    in-place (`add_`)  self is read and written; `fill_`/`zero_` only write; `copy_` reads src, writes self
    reductions         output counted as 0 bytes (its size needs the reduced dims, which are not recorded)
    pointwise, other   the broadcast of the tensor inputs, in the widest input dtype

TensorList ops (`_foreach_*`, fused optimizers `_fused_adam(w)_`/`_fused_sgd_`, `cat`, `stack`) are unknown here:
torch.profiler records a TensorList argument as dims `[]` and type "TensorList", without its tensors' sizes.
Optimizer ops then get their bytes from the parameters the backward before them accumulated
(cost/optimizer_cost.py, applied per op in cost/kernel_costs.py).

Pointwise and reduction FLOPs are per-element estimates (1 for add/mul, ~4 for transcendental, ~5 for softmax);
they only need to be small next to the bytes, which they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from math import prod

from analyzers.cost.attention_cost import attention, attention_backward
from analyzers.cost.layer_costs import layer_cost
from analyzers.cost.op_families import (
    ATTENTION_BACKWARD_BSHD,
    ATTENTION_BSHD,
    CONV_TRANSPOSE,
    Family,
    base_name,
    family_of,
    name_set,
)
from analyzers.cost.tensor_args import (
    DTYPE_BYTES as DTYPE_BYTES,
    LOW_PRECISION as LOW_PRECISION,
    Args as Args,
    TensorArg as TensorArg,
    Traffic,
)
from analyzers.cost.triton_cost import is_inductor_kernel, triton_cost

_SOFTMAX = name_set(
    "softmax _softmax log_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data "
    "_safe_softmax"
)
_TRANSCENDENTAL = name_set(
    "exp exp2 expm1 log log1p log2 log10 sqrt rsqrt sin cos tan tanh sigmoid erf erfc erfinv pow "
    "reciprocal softplus elu selu celu atan asin acos sinh cosh tanh_backward sigmoid_backward"
)
_GELU_LIKE = name_set("gelu gelu_backward silu silu_backward mish mish_backward hardswish")
_WRITE_ONLY_INPLACE = name_set(
    "fill_ zero_ normal_ uniform_ random_ bernoulli_ exponential_ geometric_ cauchy_ log_normal_"
)


@dataclass(frozen=True)
class OpCost:
    family: Family
    flops: float | None  # None: unknown
    bytes: float | None  # None: unknown (e.g. a TensorList input whose shapes were not recorded)
    inputs: tuple[TensorArg | None, ...]
    output: TensorArg | None
    low_precision: bool | None  # bf16/fp16/fp8 operands (tensor-core eligible); None without dtypes
    tensor_list: bool = False  # some input was a TensorList (foreach ops, cat)
    padding: float = 1.0  # the tensor cores' work per FLOP counted: a convolution's channels padded (module doc)


def parse_args(shapes_json: str | None, dtypes_json: str | None) -> Args | None:
    """Recorded `Input Dims` / `Input type` JSON -> one TensorArg (or None) per argument; None if unrecorded."""
    if not shapes_json or not dtypes_json:
        return None
    try:
        shapes = json.loads(shapes_json)
        dtypes = json.loads(dtypes_json)
    except (TypeError, ValueError):
        return None
    if not isinstance(shapes, list) or not isinstance(dtypes, list):
        return None
    args: Args = []
    for i, dtype in enumerate(dtypes):
        shape = shapes[i] if i < len(shapes) else None
        if (
            isinstance(dtype, str)
            and dtype in DTYPE_BYTES
            and isinstance(shape, list)
            and all(isinstance(d, int) for d in shape)
        ):
            args.append(TensorArg(tuple(shape), dtype))
        else:
            args.append(None)
    return args


def broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """Numpy broadcasting of shapes, or None when they do not broadcast."""
    if not shapes:
        return None
    ndim = max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        dims = {s[len(s) - ndim + k] for s in shapes if len(s) - ndim + k >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


TENSOR_CORE_OPERAND_BYTES = 16  # the channels of a tensor-core convolution come in multiples of 16 bytes


def conv_flops(x: tuple[int, ...], w: tuple[int, ...], out_spatial: tuple[int, ...]) -> float:
    """2 · N · C_out · (C_in/groups) · prod(kernel) · prod(output spatial); `w` is [C_out, C_in/groups, *k]."""
    return 2.0 * x[0] * w[0] * w[1] * prod(w[2:]) * prod(out_spatial)


def channel_padding(family: Family, b: str, ts: list[TensorArg]) -> float:
    """Tensor-core work / FLOPs of a convolution (module doc): C_in rounded up to the operand width over C_in
    for a dense one with low-precision operands, else 1."""
    if family == Family.CONV and len(ts) >= 2 and b not in CONV_TRANSPOSE:
        x, w = ts[0], ts[1]
    elif family == Family.CONV_BACKWARD and len(ts) >= 3:
        x, w = ts[1], ts[2]
    else:
        return 1.0
    if len(x.shape) < 2 or len(w.shape) < 2 or x.shape[1] != w.shape[1] or x.dtype not in LOW_PRECISION:
        return 1.0
    c = w.shape[1]
    step = max(1, TENSOR_CORE_OPERAND_BYTES // DTYPE_BYTES.get(x.dtype, 2))
    return float(-(-c // step) * step) / c if c > 0 else 1.0


def _widest(tensors: list[TensorArg]) -> str:
    """Result dtype by size, as type promotion does: zero-dim tensors (Python scalars wrapped as `double`
    tensors, as in `x * 1.5`) do not widen a dimensioned tensor's dtype."""
    dimensioned = [t for t in tensors if t.shape] or tensors
    return max(dimensioned, key=lambda t: DTYPE_BYTES[t.dtype]).dtype


def _matmul(b: str, ts: list[TensorArg]) -> tuple[float | None, TensorArg | None]:
    """FLOPs and output of the matmul family (ts: tensor args in order)."""
    try:
        if b in ("mm", "_scaled_mm"):
            (m, k), (_, n) = ts[0].shape, ts[1].shape
            return 2.0 * m * n * k, TensorArg((m, n), ts[0].dtype)
        if b in ("addmm", "_addmm_activation"):
            (m, k), (_, n) = ts[1].shape, ts[2].shape
            return 2.0 * m * n * k, TensorArg((m, n), ts[1].dtype)
        if b == "bmm":
            (bb, m, k), (_, _, n) = ts[0].shape, ts[1].shape
            return 2.0 * bb * m * n * k, TensorArg((bb, m, n), ts[0].dtype)
        if b in ("baddbmm", "addbmm"):
            (bb, m, k), (_, _, n) = ts[1].shape, ts[2].shape
            out = (bb, m, n) if b == "baddbmm" else (m, n)
            return 2.0 * bb * m * n * k, TensorArg(out, ts[1].dtype)
        if b == "linear":
            x, w = ts[0].shape, ts[1].shape
            return 2.0 * prod(x[:-1]) * x[-1] * w[0], TensorArg((*x[:-1], w[0]), ts[0].dtype)
        if b in ("mv", "addmv"):
            mat = ts[0] if b == "mv" else ts[1]
            m, n = mat.shape
            return 2.0 * m * n, TensorArg((m,), mat.dtype)
        if b in ("dot", "vdot"):
            return 2.0 * ts[0].numel, TensorArg((), ts[0].dtype)
        if b in ("addr", "outer", "ger"):
            u, v = (ts[-2], ts[-1])
            return float(u.numel * v.numel), TensorArg((u.numel, v.numel), u.dtype)
        if b == "matmul":
            a, c = ts[0].shape, ts[1].shape
            if len(a) == 1 and len(c) == 1:
                return 2.0 * a[0], TensorArg((), ts[0].dtype)
            a2 = (1, *a) if len(a) == 1 else a
            c2 = (*c, 1) if len(c) == 1 else c
            batch = broadcast([a2[:-2], c2[:-2]])
            if batch is None:
                return None, None
            m, k, n = a2[-2], a2[-1], c2[-1]
            out = (*batch, *((m,) if len(a) > 1 else ()), *((n,) if len(c) > 1 else ()))
            return 2.0 * prod(batch) * m * k * n, TensorArg(out, ts[0].dtype)
    except (IndexError, ValueError, AttributeError):
        return None, None
    return None, None


def _elementwise_flops_per_element(b: str, family: Family) -> float:
    if family in (Family.COPY, Family.FILL, Family.VIEW):
        return 0.0
    if family == Family.NORM:
        return 8.0
    if b in _SOFTMAX:
        return 5.0
    if family == Family.REDUCTION:
        return 1.0
    stem = b.rstrip("_")
    if stem in _GELU_LIKE:
        return 8.0
    if stem in _TRANSCENDENTAL:
        return 4.0
    if stem in ("addcmul", "addcdiv", "lerp", "dropout", "native_dropout", "fused_dropout"):
        return 2.0
    return 1.0


def _conv(b: str, ts: list[TensorArg], in_bytes: float, out_spatial_hint: tuple[int, ...] | None) -> Traffic:
    xs, ws = ts[0].shape, ts[1].shape
    out_sp = out_spatial_hint or xs[2:]
    if b in CONV_TRANSPOSE:  # flop_counter: a transposed conv iterates the *input* spatial positions
        return conv_flops(xs, ws, xs[2:]), TensorArg((xs[0], ws[1], *out_sp), ts[0].dtype), in_bytes, 0.0
    return conv_flops(xs, ws, out_sp), TensorArg((xs[0], ws[0], *out_sp), ts[0].dtype), in_bytes, 0.0


def _conv_backward(ts: list[TensorArg], mask: tuple[bool, bool]) -> Traffic:
    """Reads grad_out, input and weight; writes the gradients `mask` asks for (input's, weight's)."""
    go, x, w = ts[0], ts[1], ts[2]
    grads = int(mask[0]) + int(mask[1])
    flops = grads * conv_flops(go.shape, w.shape, go.shape[2:])
    in_bytes = float(go.nbytes + x.nbytes + w.nbytes)
    return flops, None, in_bytes, float(x.nbytes * mask[0] + w.nbytes * mask[1])


def _matmul_family(
    family: Family,
    b: str,
    ts: list[TensorArg],
    out_spatial_hint: tuple[int, ...] | None,
    conv_backward_mask: tuple[bool, bool],
    causal: bool = False,
) -> Traffic | None:
    """The traffic of a matmul-family op; None when it is not one or lacks the tensors its formula needs (it
    is then costed element-wise)."""
    in_bytes = float(sum(t.nbytes for t in ts))
    if family == Family.MATMUL:
        flops, out = _matmul(b, ts)
        return flops, out, in_bytes, 0.0
    if family == Family.CONV and len(ts) >= 2 and len(ts[0].shape) >= 3:
        return _conv(b, ts, in_bytes, out_spatial_hint)
    if family == Family.CONV_BACKWARD and len(ts) >= 3 and len(ts[0].shape) >= 3:
        return _conv_backward(ts, conv_backward_mask)
    if family == Family.ATTENTION and len(ts) >= 3:
        return attention(ts, b in ATTENTION_BSHD, in_bytes, causal)
    if family == Family.ATTENTION_BACKWARD and len(ts) >= 4:
        return attention_backward(ts, b in ATTENTION_BACKWARD_BSHD, in_bytes, causal)
    return None


def op_cost(
    name: str,
    args: Args | None,
    out_spatial_hint: tuple[int, ...] | None = None,
    conv_backward_mask: tuple[bool, bool] = (True, True),
    causal: bool = False,
) -> OpCost:
    """Cost of one op. `args` from `parse_args`; hints come from the op's context (see cost/roofline.py)."""
    family = family_of(name)
    b = base_name(name)
    if args is None:
        return OpCost(family, None, None, (), None, None)
    ts = [a for a in args if a is not None]
    low = any(t.dtype in LOW_PRECISION for t in ts) if ts else None
    inductor = triton_cost(name, ts) if is_inductor_kernel(name) else None
    if inductor is not None:  # a compiled kernel (Family.OTHER: never advised to be fused again)
        return OpCost(family, inductor[0], inductor[1], tuple(args), None, low)
    if family == Family.FOREACH or b in ("cat", "stack", "_cat"):
        # TensorList args are recorded with dims [] and type "TensorList"
        return OpCost(family, None, None, tuple(args), None, low, tensor_list=True)
    if not ts:
        return OpCost(family, None, None, tuple(args), None, low)
    layer = layer_cost(b, ts)
    if layer is not None:
        return OpCost(family, layer[0], layer[2], tuple(args), layer[1], low)
    traffic = _matmul_family(family, b, ts, out_spatial_hint, conv_backward_mask, causal)
    if traffic is None:
        return _elementwise(name, b, family, args, ts, low)
    flops, out, in_bytes, extra_out_bytes = traffic
    total = None if flops is None and out is None and extra_out_bytes == 0 else in_bytes + extra_out_bytes
    if total is not None and out is not None:
        total += out.nbytes
    return OpCost(family, flops, total, tuple(args), out, low, padding=channel_padding(family, b, ts))


def _elementwise(
    name: str, b: str, family: Family, args: Args, ts: list[TensorArg], low: bool | None
) -> OpCost:
    in_bytes = float(sum(t.nbytes for t in ts))
    out: TensorArg | None
    inplace = b.endswith("_") and not b.endswith("__")
    if b in _WRITE_ONLY_INPLACE:
        out = ts[0]
        total = float(ts[0].nbytes)
    elif b == "embedding" and len(ts) >= 2 and len(ts[0].shape) == 2:
        out = TensorArg((*ts[1].shape, ts[0].shape[1]), ts[0].dtype)
        total = float(2 * out.nbytes + ts[1].nbytes)  # gathers rows: reads only the rows it writes
    elif b == "copy_" or b == "_copy_from":
        out = ts[0]
        total = in_bytes  # writes dst, reads src
    elif inplace:
        out = ts[0]
        total = in_bytes + ts[0].nbytes  # self read, modified, written
    elif family == Family.REDUCTION:
        out = None  # output size depends on the reduced dims (not recorded): counted as 0 bytes
        total = in_bytes
    elif family == Family.NORM or b in _SOFTMAX or family == Family.COPY or b.endswith("_backward"):
        out = TensorArg(ts[0].shape, ts[0].dtype)
        total = in_bytes + out.nbytes
    elif family == Family.VIEW:
        return OpCost(family, 0.0, 0.0, tuple(args), ts[0], low)
    elif family == Family.FILL:
        out = ts[0]
        total = float(ts[0].nbytes)
    else:
        shape = broadcast([t.shape for t in ts])
        out = TensorArg(shape if shape is not None else ts[0].shape, _widest(ts))
        total = in_bytes + out.nbytes
    per_el = _elementwise_flops_per_element(b, family)
    elements = max(t.numel for t in ts) if family == Family.REDUCTION else (out.numel if out else 0)
    return OpCost(family, per_el * elements, total, tuple(args), out, low)

"""Why a matmul or convolution kernel runs below its roof, read from its op's shapes and dtypes and from the
kernel's name and launch. One `Diagnosis` per kernel; findings/efficiency.py groups them into findings.

Causes, strongest first (a kernel gets the first that applies)::

    align     a GEMM dimension (M, N or K; a convolution's C_in or C_out) not a multiple of 16 bytes of its
              dtype (8 for bf16/fp16, 4 for fp32, 16 for fp8). Strides are not recorded, so any of M, N, K
              may be a leading dimension (a transposed view's); cuBLAS then runs a slower unaligned kernel
              (cutlass `align1` / `align2`), on Hopper often a pre-Hopper one (`cutlass_75_`, `cutlass_80_`).
    tiny      M or N under TINY_DIM: one tile row or column, too little work per tile.
    grid      fewer blocks than SMs (only when the launch's grid was recorded).
    split_k   the kernel name says split-K (cuBLAS splits a long K over blocks for a small M x N).
    tile      a dimension of TILE..TILE_RANGE not a multiple of TILE, its last tile >= TILE_WASTE empty.
    transposed  on Hopper, a TF32 (fp32 operands on tensor cores) or fp8 GEMM whose kernel name says an
              operand is not K-major (`gemm_layout`: any layout but `tn`). Hopper's wgmma reads an operand
              from shared memory MN-major only for 16-bit types: CUTLASS's sm90 builder
              (cutlass/gemm/collective/builders/sm90_common.inl: `gmma_ss_tag_to_major_A` "MN major mode is
              only valid for non-TF32, non-int"; `is_use_rmem_A` = not 2-byte inputs and not both K-major)
              runs such a GEMM with A staged through registers and transposed there, or with A and B
              swapped, and cuBLAS may pick a pre-Hopper kernel for it. 16-bit GEMMs read either layout at
              full rate, so their layout is no cause.
    fallback  a pre-Hopper kernel on an sm90 GPU with none of the above: the library had no Hopper kernel
              for this shape or layout (contiguity, a leading dimension the shapes do not show).
    narrow    none of the above, yet the kernel's name says it loads its operands under 16 bytes at a time
              (`_align2`: narrow_load_bytes) though the shapes are aligned: a stride or a start that is not,
              from a view (a slice, a narrow()/chunk() of a wider tensor, a transposed non-contiguous operand).

Before all of these, a GEMM kernel of a library recurrent op (`_cudnn_rnn`, `_cudnn_rnn_backward`, MIOpen's)
is `recurrent`: the op runs one GEMM per time step and layer on the previous step's hidden state, M = batch,
whatever the kernel. Its shapes come from the op's recorded tensors (`recurrence`), not from its first two.

With none of them, the finding says "cause unknown" and what was checked (findings/efficiency.py).

`gemm_layout` reads the operand layout the library was called with from the kernel's name: cuBLAS's
`nvjet_..._TNT` (the first two letters) and `sm80_xmma_gemm_..._tn_n_`, CUTLASS's `..._tn_align4` and
`cutlass3x_..._tnn_align8`, in BLAS terms: `t` on the first operand and `n` on the second mean both are
K-major. PyTorch calls the column-major library with its operands swapped (C^T = B^T A^T), so the library's
first operand is the matmul's second (mat2: `n` = stored (K, N), N-major, as `x @ w` with `w` contiguous) and
the library's second is the matmul's first (mat1: `t` = a transposed view, M-major, as `x.t() @ w`). nn.Linear's
forward is `tn`; its backward GEMMs are `nn` (grad_input = grad @ W) and `nt` (grad_weight = grad^T @ x), as the
recordings' nvjet names show (tests/fixtures: h200_gpt_small's addmm `_TNN`, mm `_NNN` and `_NTT`).

`narrow_load_bytes` reads a CUTLASS tensor-core GEMM's name for its operand alignment (`_align2`: two
elements): under 16 bytes, every global load is a narrow one and the kernel is limited by the L1/shared-memory
load path, not by the tensor cores nor by DRAM. Nsight Compute agrees on the H200: such kernels (GPT-2's and
BERT's unpadded vocabulary GEMMs) show 69-97 % memory throughput (L1/shared), 19-42 % tensor pipe and
0.2-0.8 TB/s of DRAM (docs/validation.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Protocol

from analyzers.cost.op_families import RNN, Family, base_name

ALIGN_BYTES = 16  # tensor-core operands want 16-byte aligned leading dimensions
TILE = 64  # a dimension that is a multiple of this fills whole tiles (128 and 256 tiles are multiples)
TILE_RANGE = 2048  # above this a partial last tile wastes little
TILE_WASTE = 0.10
TINY_DIM = 64

_FALLBACK = re.compile(r"cutlass_7\d_|cutlass_80_|cutlass_86_|sm7\d_xmma|sm80_xmma|sm86_xmma|ampere_|turing_")
_SPLIT_K = re.compile(r"splitk", re.I)
# the library's operand layout in a GEMM kernel's name (module doc): nvjet's `_TNT` at the end, xmma's
# `_tn_n_tilesize`, CUTLASS 2's `_tn_align4`, CUTLASS 3's `_tnn_align8`
_LAYOUT_NAMES = (
    re.compile(r"^nvjet_\w*_([NT])([NT])[NT]$"),
    re.compile(r"xmma_gemm_\w*?_([nt])([nt])_[nt]_tilesize"),
    re.compile(r"gemm\w*?_([nt])([nt])[nt]?_align\d+"),
)
K_MAJOR = "tn"  # both operands K-major: the layout tensor-core GEMMs read natively
_TENSOROP_GEMM_ALIGN = re.compile(r"tensorop_(\w*?)gemm\w*?_align(\d+)\b")
_ONE_BYTE = re.compile(r"e4m3|e5m2|_s8|i8")
_TWO_BYTES = re.compile(r"bf16|f16|h1688|h16816|h884")
_ADD_FIRST = {"addmm", "baddbmm", "addbmm", "_addmm_activation", "addmv"}


def narrow_load_bytes(kernel_name: str) -> int | None:
    """Bytes per operand load of a CUTLASS tensor-core GEMM whose name says its operands are aligned to fewer
    than ALIGN_BYTES (`..._bf16_128x128_tn_align1` -> 2); None for any other kernel."""
    m = _TENSOROP_GEMM_ALIGN.search(kernel_name)
    if m is None:
        return None
    kind = kernel_name[: m.end()]
    elem = 1 if _ONE_BYTE.search(kind) else 2 if _TWO_BYTES.search(kind) else 4
    loaded = int(m.group(2)) * elem
    return loaded if loaded < ALIGN_BYTES else None


def gemm_layout(kernel_name: str) -> str | None:
    """The library's operand layout a GEMM kernel's name says, as two lower-case BLAS letters ("tn": both
    operands K-major; module doc); None when the name says none."""
    for pattern in _LAYOUT_NAMES:
        m = pattern.search(kernel_name)
        if m is not None:
            return (m.group(1) + m.group(2)).lower()
    return None


def mn_major_operands(layout: str) -> tuple[int, ...]:
    """The matmul's operands (1: mat1, 2: mat2) that a library layout has MN-major (module doc): the library's
    second operand is mat1 (`t`: a transposed view), its first is mat2 (`n`: stored (K, N))."""
    return tuple(i for i, bad in ((1, layout[1] == "t"), (2, layout[0] == "n")) if bad)


class TensorArg(Protocol):
    """What is read of an op's recorded tensor argument (opcost's TensorArg has it)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def numel(self) -> int: ...


Inputs = Sequence["TensorArg | None"]


@dataclass(frozen=True)
class Recurrence:
    """A library recurrent op's layer stack, read from its recorded tensors (`recurrence`).

    Each time step of each layer (and direction) runs one GEMM of the previous step's hidden state [batch,
    proj] by the recurrent weights [gates x hidden, proj]: M = batch, N = gates x hidden, K = proj (the hidden
    size without a projection). The backward pass runs the transposed one per step: M = batch, N = proj,
    K = gates x hidden. The input projection of a whole layer is one big GEMM over all the steps at once.
    """

    batch: int
    steps: int  # time steps; 0 when the input is a packed sequence (its lengths are not recorded)
    layers: int
    directions: int
    gates: int  # 4 LSTM, 3 GRU, 1 plain RNN; 0 when the recording does not say
    hidden: int
    proj: int  # the hidden state's width (the hidden size unless an LSTM has proj_size)
    backward: bool

    @property
    def shape(self) -> str:
        """ "M=64 N=4096 K=1024" of the per-step GEMM; without N when the gates are unknown."""
        n = self.gates * self.hidden
        if self.backward:
            return f"M={self.batch} N={self.proj} K={n}" if n else f"M={self.batch} N={self.proj}"
        return f"M={self.batch} N={n} K={self.proj}" if n else f"M={self.batch} K={self.proj}"


@dataclass(frozen=True)
class Diagnosis:
    cause: str  # recurrent, align, tiny, grid, split_k, tile, transposed, fallback, narrow
    # the offending values: dimensions; (blocks, SMs) for grid; (batch,) for recurrent; for transposed the
    # MN-major operands (1: mat1, 2: mat2, mn_major_operands)
    dims: tuple[int, ...]
    shape: str  # "M=8192 N=50257 K=768" or "C_in=3 C_out=64"; "" when the recorded shapes do not say
    align: int = 8  # elements per 16 bytes of the operands' dtype
    fallback: bool = False  # also a pre-Hopper kernel on a Hopper GPU
    recurrence: Recurrence | None = None  # the recurrent op's layer stack (cause "recurrent")
    layout: str = ""  # the library's operand layout from the kernel's name ("nt"), "" when it says none


# where hx sits in a recurrent op's recorded arguments (cx follows it): after input, weight[],
# weight_stride0 and, but for miopen_rnn, the flat weight buffer
_HX_AT = {"_cudnn_rnn": 4, "_cudnn_rnn_backward": 4, "miopen_rnn": 3, "miopen_rnn_backward": 4}
_WEIGHT_BUF_AT = {"_cudnn_rnn": 3, "_cudnn_rnn_backward": 3, "miopen_rnn_backward": 3}


def _directions(weights: int, gates: int, inp: int, hidden: int, stacked: int) -> tuple[int, int] | None:
    """(gates, directions) whose layer stack holds exactly `weights` elements (with or without biases), for
    `gates` (0: try GRU's 3 and a plain RNN's 1); None when none does. `stacked`: layers x directions."""
    for g in (gates,) if gates else (3, 1):
        for d in (1, 2):
            if stacked % d:
                continue
            layers = stacked // d
            for bias in (2 * g * hidden, 0):
                first = g * hidden * (inp + hidden) + bias
                rest = g * hidden * (d * hidden + hidden) + bias
                if d * (first + (layers - 1) * rest) == weights:
                    return g, d
    return None


def recurrence(op_name: str, inputs: Inputs) -> Recurrence | None:
    """The layer stack of a library recurrent op (op_families.RNN) from its recorded tensors: hx [layers x
    directions, batch, proj] gives the batch, the layers and the hidden state's width; cx (an LSTM's, the same
    layout with the hidden size) the gates; without cx, the flat weight buffer's size tells a GRU (3 gates)
    from a plain RNN (1). The input is [batch, steps, features] or [steps, batch, features] (batch_first is
    not recorded: the dimension that is not the batch is the steps). None for any other op, or when hx is
    missing."""
    b = base_name(op_name)
    if b not in RNN or not inputs or inputs[0] is None:
        return None
    x = inputs[0].shape
    at = _HX_AT.get(b, 3)
    hx = inputs[at] if at < len(inputs) else None
    if hx is None or len(hx.shape) != 3 or len(x) < 2:
        return None
    stacked, batch, proj = hx.shape
    cx = inputs[at + 1] if at + 1 < len(inputs) else None
    lstm = cx is not None and len(cx.shape) == 3 and cx.shape[:2] == hx.shape[:2]
    hidden = cx.shape[2] if cx is not None and lstm else proj
    steps = 0
    if len(x) == 3:
        steps = x[1] if x[0] == batch else x[0]
    buf_at = _WEIGHT_BUF_AT.get(b)
    buf = inputs[buf_at] if buf_at is not None and buf_at < len(inputs) else None
    found = None
    if buf is not None and len(buf.shape) == 1 and proj == hidden:
        found = _directions(buf.numel, 4 if lstm else 0, x[-1], hidden, stacked)
    gates, directions = found if found else (4 if lstm else 0, 1)
    return Recurrence(batch, steps, stacked // directions, directions, gates, hidden, proj, "backward" in b)


def gemm_dims(op_name: str, inputs: Inputs) -> tuple[int, int, int] | None:
    """(M, N, K) of a matmul-family op from its recorded operand shapes; None when they do not say."""
    b = base_name(op_name)
    ts = [t for t in inputs if t is not None]
    if b in _ADD_FIRST:
        ts = ts[1:]
    if len(ts) < 2:
        return None
    a, w = ts[0].shape, ts[1].shape
    if len(a) < 2 or len(w) < 1:
        return None
    if b == "linear":  # weight [out, in]
        return prod(a[:-1]), w[0], a[-1]
    if len(w) < 2:
        return None
    m = prod(a[:-1]) if len(w) == 2 else a[-2]
    return m, w[-1], a[-1]


def conv_channels(family: int, inputs: Inputs) -> tuple[int, int] | None:
    """(C_in per group, C_out) of a convolution (forward: input, weight; backward: grad_out, input, weight)."""
    ts = [t for t in inputs if t is not None]
    w = ts[1] if family == Family.CONV and len(ts) >= 2 else ts[2] if len(ts) >= 3 else None
    if w is None or len(w.shape) < 3:
        return None
    return w.shape[1], w.shape[0]


def _align_elems(inputs: Inputs) -> int:
    t = next((t for t in inputs if t is not None and t.numel > 0), None)
    size = t.nbytes // t.numel if t is not None else 2
    return max(1, ALIGN_BYTES // size)


def _tile_waste(d: int) -> float:
    return (-(-d // TILE) * TILE) / d - 1.0


def diagnose(
    op_name: str,
    family: int,
    inputs: Inputs,
    kernel: str,
    blocks: int | None,
    sms: int | None,
    hopper: bool,
) -> Diagnosis | None:
    """The cause of a slow matmul/conv kernel (module doc), or None when the recording shows none."""
    fallback = hopper and bool(_FALLBACK.search(kernel))
    align = _align_elems(inputs)
    rec = recurrence(op_name, inputs)
    if rec is not None:
        return Diagnosis("recurrent", (rec.batch,), rec.shape, align, fallback, rec)
    if family in (Family.CONV, Family.CONV_BACKWARD):
        ch = conv_channels(family, inputs)
        if ch is None:
            return Diagnosis("fallback", (), "", align, True) if fallback else None
        shape = f"C_in={ch[0]} C_out={ch[1]}"
        bad = tuple(sorted({c for c in ch if c % align}))
        if bad:
            return Diagnosis("align", bad, shape, align, fallback)
        dims: tuple[int, ...] = ch
        mnk = None
    else:
        mnk = gemm_dims(op_name, inputs)
        if mnk is None:
            return Diagnosis("fallback", (), "", align, True) if fallback else None
        shape = "M={} N={} K={}".format(*mnk)
        bad = tuple(sorted({d for d in mnk if d % align}))
        if bad:
            return Diagnosis("align", bad, shape, align, fallback)
        dims = mnk
    if mnk is not None and min(mnk[0], mnk[1]) < TINY_DIM:
        return Diagnosis("tiny", (min(mnk[0], mnk[1]),), shape, align, fallback)
    if blocks is not None and sms and blocks < sms:
        return Diagnosis("grid", (blocks, sms), shape, align, fallback)
    if _SPLIT_K.search(kernel):
        return Diagnosis("split_k", (dims[-1],), shape, align, fallback)
    wasted = tuple(sorted({d for d in dims if TILE <= d < TILE_RANGE and _tile_waste(d) >= TILE_WASTE}))
    if wasted:
        return Diagnosis("tile", wasted, shape, align, fallback)
    layout = gemm_layout(kernel)
    if hopper and align in (4, 16) and layout is not None and layout != K_MAJOR:  # TF32 or fp8
        return Diagnosis("transposed", mn_major_operands(layout), shape, align, fallback, layout=layout)
    if fallback:
        return Diagnosis("fallback", (), shape, align, True)
    narrow = narrow_load_bytes(kernel)
    if narrow is not None:
        return Diagnosis("narrow", (narrow,), shape, align)
    return None


def shape_text(op_name: str, family: int, inputs: Inputs) -> str:
    """ "M=8192 N=50257 K=768" or "C_in=3 C_out=64" (a recurrent op's: its per-step GEMM's); "" when the
    recorded shapes do not say."""
    rec = recurrence(op_name, inputs)
    if rec is not None:
        return rec.shape
    if family in (Family.CONV, Family.CONV_BACKWARD):
        ch = conv_channels(family, inputs)
        return "" if ch is None else f"C_in={ch[0]} C_out={ch[1]}"
    mnk = gemm_dims(op_name, inputs)
    return "" if mnk is None else "M={} N={} K={}".format(*mnk)


def blocks_of(grid: str) -> int | None:
    """Blocks of a recorded "x,y,z" grid; None when unknown."""
    try:
        parts = [int(p) for p in grid.split(",") if p.strip()]
    except ValueError:
        return None
    return prod(parts) if parts and all(p > 0 for p in parts) else None


def round_up(d: int, to: int = TILE) -> int:
    return -(-d // to) * to


def pad_to(d: Diagnosis, conv: bool) -> int:
    """The multiple the action pads to: 8 for a convolution's channels, else 64."""
    return 8 if conv and d.cause == "align" else TILE


def padded_work(d: Diagnosis | None, conv: bool) -> float:
    """Work after the action's padding / work now (1 for causes fixed without padding): the padded
    dimensions' ratio, so padding 3 channels to 8 costs 8/3 of the FLOPs."""
    if d is None or d.cause not in ("align", "tile"):
        return 1.0
    to = pad_to(d, conv)
    return float(prod(round_up(v, to) / v for v in d.dims))

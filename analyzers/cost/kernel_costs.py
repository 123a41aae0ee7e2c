"""Which op's cost each GPU row takes, and the cost of those ops.

A kernel takes the cost of the nearest op at or above its launching op that has one (so the bias `add_` inside
`linear` costs its own bytes, not the matmul's)::

    op   aten::conv2d                 (profiler-recorded flops, when `with_flops`)
    op     aten::cudnn_convolution    <- nearest op with a cost: shapes + dtypes -> FLOPs, bytes (cost/opcost.py)
    launch   cudaLaunchKernel ...
    GPU            [init_workspace][ sm90_xmma_fprop .............. ]   <- the op's cost split by duration

Layout conversions cuDNN runs inside a convolution (`nchwToNhwcKernel`, `nhwcToNchwKernel`) move bytes and do
no math: the op's FLOPs and its own bytes are split among its other kernels, and the conversions share
LAYOUT_TRAFFIC x the op's bytes (each of the op's tensors read and written once more in the other layout; on an
H200, ResNet-50's conversions ran at 2.0-2.6 TB/s by that count).

Each distinct (name, shapes, dtypes) is costed once. Three costs need the op's context and are redone per op:
a forward convolution's output size (read from the op that consumes the output), a `cat`'s or `stack`'s output
(its TensorList of inputs is recorded without shapes: read from the op that consumes it, as the convolution's)
and which gradients a convolution_backward computed (read from the names of the kernels it launched).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

import numpy as np

from analyzers.arrays import dense_ids, lexsort, per_owner_sums
from analyzers.cost.attention_cost import is_causal
from analyzers.cost.op_families import RNN, Family, base_name
from analyzers.cost.opcost import OpCost, op_cost, parse_args
from analyzers.cost.optimizer_cost import optimizer_bytes
from analyzers.link.links import Calls
from brrrtui.contract.model import NONE, GpuKind, Trace, flag_of

MAX_DEPTH = 12  # op nesting levels searched above a kernel's launching op

GEMM_NAME = re.compile(
    r"gemm|xmma|nvjet|cutlass|wgmma|conv|fprop|dgrad|wgrad|implicit|fmha|flash|attention|attn|cudnn", re.I
)
LAYOUT_NAME = re.compile(r"nchwtonhwc|nhwctonchw", re.I)
LAYOUT_TRAFFIC = 2.0  # bytes a layout conversion moves, per byte of its op's inputs + outputs
# cuDNN's SDPA backward runs two pointwise helpers beside its main kernel, each moving a share of the op's bytes
# (read grad_out, q, k, v, out; write dq, dk, dv: 8 tensors of one size in multi-head attention):
# compute_dot_do_o reads grad_out and out (2 of 8), convert_dq_to_16bits reads dq in fp32 and writes it in
# 16 bits (3 of 8). They do no matrix math: the op's FLOPs go to its main kernel.
SDPA_HELPERS = (
    (re.compile(r"compute_dot_do_o", re.I), 2 / 8),
    (re.compile(r"convert_dq_to_16bits", re.I), 3 / 8),
)
# cuDNN pads a convolution's channels to the tensor cores' width before it (opcost.conv_flops): the padding
# kernel moves bytes (its share of the op's, by duration, as the other kernels) and does none of the FLOPs
PAD_NAME = re.compile(r"addpadding", re.I)
# a recurrent op (op_families.RNN) launches a GEMM per step and layer and elementwise kernels between them (the
# gates' activations, dropout): its FLOPs are the GEMMs', split among them alone when it launched any
RNN_GEMM_NAME = re.compile(r"gemm|xmma|wgmma|nvjet|hmma|tensorop", re.I)
# a GEMM's or convolution's helper kernels, which do none of its product: split-K reductions (cuBLAS's
# splitKreduce_kernel, CUTLASS's reduction::kernel::ReduceSplitK), workspace fills, channel padding, layout and
# dtype conversions
HELPER_NAME = re.compile(
    r"splitkreduce|reducesplitk|init_device_workspace|addpadding|memset|nchwtonhwc|nhwctonchw|convert", re.I
)


@dataclass(frozen=True)
class OpCosts:
    """Per op row: an index into `costs` (NONE for ops never costed) and the unique costs themselves."""

    index: np.ndarray
    costs: list[OpCost]

    def of(self, op: int) -> OpCost | None:
        i = int(self.index[op]) if op >= 0 else NONE
        return self.costs[i] if i >= 0 else None


def _ancestors(links: Calls, start: np.ndarray) -> np.ndarray:
    """(depth, n) op rows: the op itself, its parent, ... up to MAX_DEPTH levels above it (NONE past the root);
    the levels stop at the first one where every row is past its root."""
    levels = []
    cur = start.astype(links.op_parent.dtype)  # int32 when the ops fit it: the levels are (depth, n) of them
    for _ in range(MAX_DEPTH + 1):
        ok = cur >= 0
        if not ok.any():
            break
        levels.append(cur)
        cur = np.where(ok, links.op_parent[np.maximum(cur, 0)], NONE) if len(links.op_parent) else cur
    if not levels:
        return np.full((1, len(start)), NONE, dtype=np.int64)
    return np.stack(levels)


def _unique_keys(rows: np.ndarray, *cols: np.ndarray) -> np.ndarray:
    """Dense ids (0..k-1, in the order of the sorted tuples) of the distinct tuples of non-negative-or-NONE int
    columns at `rows`. A column is gathered when its turn comes, and let go of before the ids are ranked: at
    3 M ops every int64 column held at once is 24 MB more."""
    key = np.zeros(len(rows), dtype=np.int64)
    for col in cols:
        c = col[rows].astype(np.int64)
        c += 1  # NONE -> 0 (in place, as below)
        width = int(c.max()) + 1 if len(c) else 1
        key *= width  # key < k distinct tuples so far: the product stays small
        key += c
        del c
        key = dense_ids(key)
    return key


def _next_shaped_ops(trace: Trace, rows: np.ndarray, look: int = 8) -> dict[int, list[int]]:
    """For each op of `rows`, the next `look` aten ops on its thread that start after it ends and have
    recorded shapes, the nearest first (autograd nodes and record_function scopes are passed over: their
    shapes are not an op's tensors)."""
    ops = trace.ops
    order = lexsort((ops.start_ns, ops.tid))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    out: dict[int, list[int]] = {}
    for r in rows.tolist():
        end, tid = int(ops.start_ns[r] + ops.dur_ns[r]), int(ops.tid[r])
        found: list[int] = []
        p = int(pos[r]) + 1
        while p < len(order) and len(found) < look:
            o = int(order[p])
            p += 1
            if int(ops.tid[o]) != tid:
                break
            name = trace.name(int(ops.name[o]))
            if int(ops.start_ns[o]) >= end and base_name(name) != name and trace.name(int(ops.shapes[o])):
                found.append(o)
        out[r] = found
    return out


CAT_OPS = ("cat", "_cat", "stack")


def _recost_cats(trace: Trace, cand: np.ndarray, index: np.ndarray, costs: list[OpCost]) -> None:
    """`cat`/`stack` ops, whose TensorList inputs have no recorded shapes: their output is the first tensor of
    the next op on the thread that takes a tensor (the op that consumes the result, as in
    `torch.cat(...)` then `* sin`, `norm(...)`, `conv(...)`); the kernel reads its inputs (the output's size)
    and writes the output: 2 x its bytes, no FLOPs. One cost per distinct output (appended, index updated)."""
    ops = trace.ops
    unknown = np.array([c.bytes is None and c.tensor_list for c in costs], dtype=bool)
    if not unknown.any():
        return
    rows = cand[(index[cand] >= 0) & unknown[np.maximum(index[cand], 0)]]
    rows = rows[[base_name(trace.name(int(ops.name[r]))) in CAT_OPS for r in rows.tolist()]]
    variants: dict[tuple[int, tuple[int, ...], str], int] = {}
    for r, after in _next_shaped_ops(trace, rows, look=1).items():
        if not after:
            continue
        o = after[0]
        args = parse_args(trace.name(int(ops.shapes[o])), trace.name(int(ops.dtypes[o])))
        first = next((a for a in (args or []) if a is not None and a.shape), None)
        if first is None:
            continue
        key = (int(index[r]), first.shape, first.dtype)
        if key not in variants:
            c = costs[index[r]]
            costs.append(replace(c, flops=0.0, bytes=2.0 * first.nbytes, output=first))
            variants[key] = len(costs) - 1
        index[r] = variants[key]


def conv_output_hints(trace: Trace, rows: np.ndarray, costs: dict[int, OpCost]) -> dict[int, tuple[int, ...]]:
    """Output spatial size of forward convolutions, read from the op that consumes the output.

    Stride and padding are not recorded (no `Concrete Inputs` in the model), but the next op on the same
    thread (batch_norm, relu, add) usually takes the output as its first tensor: [N, C_out, *spatial].
    """
    ops = trace.ops
    if not len(rows):
        return {}
    order = lexsort((ops.start_ns, ops.tid))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    hints: dict[int, tuple[int, ...]] = {}
    for r in rows.tolist():
        cost = costs[r]
        ts = [a for a in cost.inputs if a is not None]
        if len(ts) < 2 or len(ts[0].shape) < 3:
            continue
        n, c_out, rank = ts[0].shape[0], ts[1].shape[0], len(ts[0].shape)
        end = int(ops.start_ns[r] + ops.dur_ns[r])
        tid = int(ops.tid[r])
        p = int(pos[r]) + 1
        seen = 0
        while p < len(order) and seen < 8:
            o = int(order[p])
            p += 1
            if int(ops.tid[o]) != tid:
                break
            if int(ops.start_ns[o]) < end:
                continue
            seen += 1
            args = parse_args(trace.name(int(ops.shapes[o])), trace.name(int(ops.dtypes[o])))
            first = next((a for a in (args or []) if a is not None), None)
            if first is not None and len(first.shape) == rank and first.shape[:2] == (n, c_out):
                hints[r] = tuple(first.shape[2:])
                break
    return hints


def conv_backward_mask(names: list[str]) -> tuple[bool, bool]:
    """Which gradients a convolution_backward computed, from the names of the kernels it launched.

    cuDNN names them (`dgrad`: grad input, `wgrad`: grad weight); GEMM-lowered 1x1 convolutions do not. Without
    tags, two or more GEMM kernels mean both gradients; one means only the weight's (the first layer, whose
    input needs no gradient).
    """
    low = [n.lower() for n in names]
    d = sum("dgrad" in n for n in low)
    w = sum("wgrad" in n for n in low)
    g = sum(
        1
        for n in low
        if GEMM_NAME.search(n) and not HELPER_NAME.search(n) and "dgrad" not in n and "wgrad" not in n
    )
    if d or w:
        return (bool(d) or (bool(w) and g > 0), bool(w) or (bool(d) and g > 0))
    return (g >= 2, True)


def _cost_distinct_ops(trace: Trace, cand: np.ndarray, index: np.ndarray) -> list[OpCost]:
    """Cost each distinct (name, shapes, dtypes) of the candidate ops once; index[cand] points at its cost."""
    ops = trace.ops
    keys = _unique_keys(cand, ops.name, ops.shapes, ops.dtypes)
    first = np.empty(int(keys.max()) + 1 if len(keys) else 0, dtype=np.int64)
    first[keys] = cand  # one op per key: every op of a key has the same name, shapes and dtypes
    costs: list[OpCost] = []
    for r in first.tolist():
        name = trace.name(int(ops.name[r]))
        args = parse_args(trace.name(int(ops.shapes[r])), trace.name(int(ops.dtypes[r])))
        costs.append(op_cost(name, args))
    index[cand] = keys
    return costs


def _recost_forward_convs(trace: Trace, cand: np.ndarray, index: np.ndarray, costs: list[OpCost]) -> None:
    """Forward convolutions: cost again with the output size read from the consumer op (appended to `costs`,
    index updated; one cost per distinct (cost, output size))."""
    ops = trace.ops
    key_family = np.array([int(c.family) for c in costs], dtype=np.int8)
    if not (key_family == Family.CONV).any():
        return
    conv_rows = cand[key_family[index[cand]] == Family.CONV]
    by_row = {r: costs[index[r]] for r in conv_rows.tolist()}
    hints = conv_output_hints(trace, conv_rows, by_row)
    variants: dict[tuple[int, tuple[int, ...]], int] = {}
    for r, hint in hints.items():
        key = (int(index[r]), hint)
        if key not in variants:
            c = by_row[r]
            name = trace.name(int(ops.name[r]))
            costs.append(op_cost(name, list(c.inputs), out_spatial_hint=hint))
            variants[key] = len(costs) - 1
        index[r] = variants[key]


def _recost_causal(trace: Trace, cand: np.ndarray, index: np.ndarray, costs: list[OpCost]) -> None:
    """Attention ops whose recorded `Concrete Inputs` (an ops column `concrete`, JSON, where the recording has
    it) say is_causal: cost again with the causal share of the FLOPs (cost/attention_cost.py)."""
    ops = trace.ops
    if "concrete" not in ops.columns or not len(cand):
        return
    fam = np.array([int(c.family) for c in costs], dtype=np.int8)
    if not np.isin(fam, [Family.ATTENTION, Family.ATTENTION_BACKWARD]).any():
        return
    attention = np.isin(fam[index[cand]], [Family.ATTENTION, Family.ATTENTION_BACKWARD])
    attn = cand[attention & (ops.concrete[cand] >= 0)]
    # decided once per distinct (name, Concrete Inputs): a real run repeats a few over tens of thousands of ops
    pair = ops.name[attn].astype(np.int64) << 32 | ops.concrete[attn].astype(np.int64)
    _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    causal = np.array([_says_causal(trace, int(r)) for r in attn[first].tolist()], dtype=bool)
    rows = attn[causal[inverse]]
    # each cost a causal op had gets a causal copy, appended in the order the rows first name it
    old, at = np.unique(index[rows], return_index=True)
    new_ids = np.empty(len(old), dtype=index.dtype)
    for k in np.argsort(at, kind="stable").tolist():
        costs.append(op_cost(trace.name(int(ops.name[rows[at[k]]])), list(costs[old[k]].inputs), causal=True))
        new_ids[k] = len(costs) - 1
    index[rows] = new_ids[np.searchsorted(old, index[rows])]


def _says_causal(trace: Trace, op: int) -> bool:
    """An attention op's recorded `Concrete Inputs` say is_causal (attention_cost.is_causal)."""
    name, text = trace.name(int(trace.ops.name[op])), trace.name(int(trace.ops.concrete[op]))
    try:
        concrete = json.loads(text)
    except ValueError:
        return False
    return isinstance(concrete, list) and bool(is_causal(base_name(name), concrete))


def _recost_optimizers(
    trace: Trace, links: Calls, cand: np.ndarray, index: np.ndarray, costs: list[OpCost]
) -> None:
    """Fused and foreach optimizer ops: their bytes from the parameters the backward before them accumulated
    (cost/optimizer_cost.py); one cost per op (appended to `costs`, index updated)."""
    fam = np.array([int(c.family) for c in costs], dtype=np.int8)
    if not (fam == Family.FOREACH).any():
        return
    rows = cand[(fam[index[cand]] == Family.FOREACH) & (index[cand] >= 0)]
    for r, nbytes in optimizer_bytes(trace, links, rows).items():
        costs.append(replace(costs[index[r]], bytes=nbytes))
        index[r] = len(costs) - 1


def _nearest_costed(
    chain: np.ndarray, index: np.ndarray, known: np.ndarray, recorded: np.ndarray | None
) -> np.ndarray:
    """Per gpu row, the nearest op of its ancestor chain whose cost is `known` (or, given `recorded`, that
    has a profiler-recorded value); NONE when none has. Op rows as the chain's (int32 when the ops fit it)."""
    chosen = np.full(chain.shape[1], NONE, dtype=chain.dtype)
    rows = np.arange(chain.shape[1])  # the rows still looking
    for d in range(chain.shape[0]):
        op = chain[d][rows]
        rows, op = rows[op >= 0], op[op >= 0]
        if not len(rows):
            break
        ci = index[op]
        hit = (ci >= 0) & known[ci]
        if recorded is not None:
            hit |= recorded[op]
        chosen[rows[hit]] = op[hit]
        rows = rows[~hit]
    return chosen


def _recost_conv_backward(
    trace: Trace, cand: np.ndarray, index: np.ndarray, costs: list[OpCost], flops_op: np.ndarray
) -> None:
    """convolution_backward ops: cost again for the gradients their kernels' names say they computed."""
    gpu, ops = trace.gpu, trace.ops
    cost_family = np.array([int(c.family) for c in costs], dtype=np.int8)
    if not (cost_family == Family.CONV_BACKWARD).any():
        return
    fam = np.full(len(ops), -1, dtype=np.int8)
    fam[cand] = cost_family[index[cand]]
    bwd_kernels = np.nonzero((flops_op >= 0) & (fam[np.maximum(flops_op, 0)] == Family.CONV_BACKWARD))[0]
    if not len(bwd_kernels):
        return
    names: dict[int, list[str]] = {}
    for k, o in zip(bwd_kernels.tolist(), flops_op[bwd_kernels].tolist(), strict=True):
        names.setdefault(o, []).append(trace.name(int(gpu.name[k])))
    masked: dict[tuple[int, tuple[bool, bool]], int] = {}
    for o, kernel_names in names.items():
        mask = conv_backward_mask(kernel_names)
        if mask == (True, True):
            continue
        key = (int(index[o]), mask)
        if key not in masked:
            c = costs[index[o]]
            costs.append(op_cost(trace.name(int(ops.name[o])), list(c.inputs), conv_backward_mask=mask))
            masked[key] = len(costs) - 1
        index[o] = masked[key]


def cost_ops(trace: Trace, links: Calls) -> tuple[OpCosts, np.ndarray, np.ndarray]:
    """Cost the ops that launch kernels (or enclose ops that do); choose, per gpu row, the op whose cost it
    takes. Returns (op costs, flops op per row, bytes op per row)."""
    gpu, ops = trace.gpu, trace.ops
    index = np.full(len(ops), NONE, dtype=np.int32)  # ids of distinct costs: fewer than the ops
    n = len(gpu)
    if not len(ops) or not n:
        return OpCosts(index, []), np.full(n, NONE, np.int64), np.full(n, NONE, np.int64)

    is_kernel = gpu.kind == GpuKind.KERNEL
    chain = _ancestors(links, np.where(is_kernel, links.kernel_op, NONE))
    mark = np.zeros(len(ops), dtype=bool)
    mark[chain[chain >= 0]] = True
    cand = np.nonzero(mark)[0]
    costs = _cost_distinct_ops(trace, cand, index)
    _recost_forward_convs(trace, cand, index, costs)
    _recost_optimizers(trace, links, cand, index, costs)
    _recost_causal(trace, cand, index, costs)
    _recost_cats(trace, cand, index, costs)

    flops_known = np.array([c.flops is not None for c in costs] + [False], dtype=bool)
    bytes_known = np.array([c.bytes is not None for c in costs] + [False], dtype=bool)
    flops_op = _nearest_costed(chain, index, flops_known, np.isfinite(ops.flops))
    bytes_op = _nearest_costed(chain, index, bytes_known, None)
    _recost_conv_backward(trace, cand, index, costs, flops_op)
    return OpCosts(index, costs), flops_op, bytes_op


def recorded_flops(trace: Trace, links: Calls, op: np.ndarray, fam: np.ndarray) -> np.ndarray:
    """Profiler-recorded FLOPs of `op` or of its nearest ancestor of the same family (NaN when none)."""
    flops = trace.ops.flops
    out = np.full(len(op), np.nan)
    if not np.isfinite(flops).any():  # the profiler recorded none (with_flops off): no walk up the ops
        return out
    rows = np.nonzero(op >= 0)[0]  # the rows still looking, and the op each looks at now
    cur, own = op[rows], fam[op[rows]]
    for level in range(4):
        if not len(rows):
            break
        rec = flops[cur]
        take = np.isfinite(rec) & ((fam[cur] == own) | (level == 0))  # its own op's count, any family
        out[rows[take]] = rec[take]
        rows, cur, own = rows[~take], links.op_parent[cur[~take]], own[~take]
        up = cur >= 0
        rows, cur, own = rows[up], cur[up], own[up]
    return out


def duration_shares(owner: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows with an owner, each one's share of its owner's summed duration (equal shares where that sum is
    0)); None when no row has an owner."""
    ok = owner >= 0
    if not ok.any():
        return None
    o = owner[ok]
    d = dur[ok].astype(np.float64)
    tot = per_owner_sums(o, d)
    if (tot > 0).all():
        return ok, d / tot
    cnt = per_owner_sums(o, np.ones(len(o)))
    return ok, np.where(tot > 0, d / np.where(tot > 0, tot, 1.0), 1.0 / cnt)


def split_by_duration(
    value: np.ndarray,
    owner: np.ndarray,
    dur: np.ndarray,
    shares: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Share value[owner] among rows with the same owner, in proportion to duration (equally if all are 0).
    `shares`: duration_shares(owner, dur) when the caller has it."""
    out = np.full(len(owner), np.nan)
    split = duration_shares(owner, dur) if shares is None else shares
    if split is None:
        return out
    ok, share = split
    out[ok] = value[ok] * share
    return out


def _rnn_elementwise(trace: Trace, kernel: np.ndarray, flops_op: np.ndarray) -> np.ndarray:
    """Per gpu row: a kernel of a recurrent op that launched GEMMs, not itself one (split_costs)."""
    ops = trace.ops
    out = np.zeros(len(kernel), dtype=bool)
    if not len(ops):
        return out
    rnn_op = flag_of(trace.string_flags(lambda s: base_name(s) in RNN), ops.name)
    mine = kernel & (flops_op >= 0)
    mine[mine] = rnn_op[flops_op[mine]]
    if not mine.any():
        return out
    gemm = mine & flag_of(trace.string_flags(RNN_GEMM_NAME.search), trace.gpu.name)
    has_gemm = np.zeros(len(ops), dtype=bool)
    has_gemm[flops_op[gemm]] = True
    out[mine] = ~gemm[mine] & has_gemm[flops_op[mine]]
    return out


def split_costs(
    trace: Trace, op_flops: np.ndarray, op_bytes: np.ndarray, flops_op: np.ndarray, bytes_op: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per gpu row, its share of its op's FLOPs and bytes (`op_flops`/`op_bytes`: the op's whole cost per row).

    Shares go by duration among the op's kernels; channel padding (PAD_NAME) and a recurrent op's elementwise
    kernels (beside its GEMMs, RNN_GEMM_NAME) take their share of the bytes and none of the FLOPs; layout conversions take no FLOPs, and share LAYOUT_TRAFFIC x the op's bytes among
    themselves; cuDNN's SDPA helpers take no FLOPs and their SDPA_HELPERS share of the
    op's bytes. Memcpy/memset rows take no share (their own counts replace it).
    """
    gpu = trace.gpu
    kernel = gpu.kind == GpuKind.KERNEL
    layout = kernel & flag_of(trace.string_flags(LAYOUT_NAME.search), gpu.name)
    helpers = [(kernel & flag_of(trace.string_flags(p.search), gpu.name), share) for p, share in SDPA_HELPERS]
    compute = kernel & ~layout
    for h, _ in helpers:
        compute &= ~h
    pad = kernel & flag_of(trace.string_flags(PAD_NAME.search), gpu.name)
    pad |= _rnn_elementwise(trace, kernel, flops_op)
    flops_owner = np.where(compute & ~pad, flops_op, NONE)
    shares = duration_shares(flops_owner, gpu.dur_ns)
    flops = split_by_duration(op_flops, flops_owner, gpu.dur_ns, shares)
    flops[~(compute & ~pad) & kernel & (flops_op >= 0)] = 0.0
    bytes_owner = np.where(compute, bytes_op, NONE)
    same = np.array_equal(bytes_owner, flops_owner)  # mostly one op gives a kernel both
    nbytes = split_by_duration(op_bytes, bytes_owner, gpu.dur_ns, shares if same else None)
    for rows, share in [(layout, LAYOUT_TRAFFIC), *helpers]:  # few rows: split among them alone
        r = np.nonzero(rows)[0]
        nbytes[r] = split_by_duration(share * op_bytes[r], bytes_op[r], gpu.dur_ns[r])
    return flops, nbytes

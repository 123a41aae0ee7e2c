"""Bytes of fused and foreach optimizer ops, whose TensorList sizes the profiler does not record.

torch.profiler records a TensorList argument as dims `[]` and type "TensorList". The lists an optimizer step
walks are the parameters (and same-sized state), and the backward pass before it names every parameter: each
gets one `torch::autograd::AccumulateGrad` op whose recorded input is the gradient, the parameter's shape and
dtype. So per optimizer step (the optimizer ops after a backward pass, until the next backward):

    P = bytes of the parameters that backward accumulated (the multiset of shapes divided by its greatest common
        multiplicity: k micro-batches accumulate every parameter k times)

and an op moves `accesses x P`, shared among the ops of one name in that step in proportion to their kernels'
GPU time (two param groups: two `_fused_adamw_` calls over disjoint halves). Accesses per parameter element
(state tensors have the parameter's dtype):

    _fused_adam_, _fused_adamw_   7   param r+w, grad r, exp_avg r+w, exp_avg_sq r+w (amsgrad's max not counted)
    _fused_sgd_                   5   param r+w, grad r, momentum buffer r+w
    _fused_adagrad_               5   param r+w, grad r, state sum r+w
    _foreach_<op>_ (in place)     lists + 1   every list read, the first written
    _foreach_<op> (out of place)  lists + 1   every list read, a new list written (norm/max: scalars, + 0)

A foreach op can walk other lists (a fused optimizer's `_foreach_add_(state_steps, 1)` walks one-element step
counters): a cost that would put its kernels above MAX_PLAUSIBLE_BW is left unknown. Without an
AccumulateGrad before it in its window (no backward recorded) an optimizer op stays unknown.
"""

from __future__ import annotations

import json

import numpy as np

from analyzers.arrays import lexsort, unique_rows
from analyzers.cost.op_families import base_name
from analyzers.cost.opcost import parse_args
from analyzers.link.links import Calls
from brrrtui.contract.model import Trace

ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
MAX_PLAUSIBLE_BW = 10e12  # bytes/s: above any GPU's memory (H200 4.8 TB/s)
_FUSED_ACCESSES = {"_fused_adam_": 7, "_fused_adamw_": 7, "_fused_sgd_": 5, "_fused_adagrad_": 5}
_SCALAR_RESULT = {"_foreach_norm", "_foreach_max"}


def list_accesses(name: str, dtypes_json: str | None) -> int | None:
    """Passes over the parameter-sized lists one call of `name` makes (see the module doc); None if not an
    optimizer-style TensorList op."""
    b = base_name(name)
    if b in _FUSED_ACCESSES:
        return _FUSED_ACCESSES[b]
    if not b.startswith("_foreach_"):
        return None
    try:
        types = json.loads(dtypes_json or "")
    except ValueError:
        return None
    lists = sum(1 for t in types if t == "TensorList") if isinstance(types, list) else 0
    if not lists:
        return None
    return lists + (0 if b in _SCALAR_RESULT else 1)


def _steps(trace: Trace, rows: np.ndarray) -> dict[int, tuple[int, float]]:
    """Optimizer op row -> (its optimizer step's number, P: the parameter bytes of the backward before it).

    AccumulateGrad ops and the optimizer ops, in time order within each window, form alternating runs: an
    optimizer run takes P from the backward run just before it in its window (none: P unknown), and each such
    run is one optimizer step."""
    ops = trace.ops
    acc_id = trace.sid(ACCUMULATE_GRAD)
    acc = np.nonzero(ops.name == acc_id)[0] if acc_id >= 0 else np.zeros(0, dtype=np.int64)
    if not len(acc):
        return {}  # no backward recorded: P unknown
    r = np.concatenate([acc, rows]).astype(np.int64)
    kind = np.concatenate([np.zeros(len(acc), np.int8), np.ones(len(rows), np.int8)])
    order = lexsort((r, kind, ops.start_ns[r], ops.window[r]))
    r, kind, window = r[order], kind[order], ops.window[r[order]]
    run_start = np.ones(len(r), dtype=bool)
    run_start[1:] = (kind[1:] != kind[:-1]) | (window[1:] != window[:-1])
    bounds = np.append(np.nonzero(run_start)[0], len(r)).tolist()
    key, nbytes = _gradient_keys(trace, r, kind == 0)
    out: dict[int, tuple[int, float]] = {}
    step, p, backward_window = 0, None, None
    for s, e in zip(bounds[:-1], bounds[1:], strict=True):
        if kind[s] == 0:
            counts = np.bincount(key[s:e][key[s:e] >= 0], minlength=len(nbytes))
            p = _param_bytes(counts, nbytes) if counts.any() else None
            backward_window = window[s]
        elif p is not None and window[s] == backward_window:
            step += 1
            out.update((row, (step, p)) for row in r[s:e].tolist())
            p = None
    return out


def _gradient_keys(trace: Trace, rows: np.ndarray, gradient: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each AccumulateGrad row (where `gradient`), the index of its gradient's (shape, dtype) among the
    distinct ones (-1 unrecorded, and for the other rows), and each distinct one's bytes. The recorded JSON is
    parsed once per distinct (shapes, dtypes) string pair."""
    ops = trace.ops
    grads = rows[gradient]
    # unique_rows, not np.unique(axis=0), which sorts the rows as opaque records
    first, inverse = unique_rows((ops.shapes[grads], ops.dtypes[grads]))
    distinct = np.stack([ops.shapes[grads[first]], ops.dtypes[grads[first]]], axis=1)
    index: dict[tuple[tuple[int, ...], str], int] = {}
    sizes: list[float] = []
    of_pair = np.full(len(distinct), -1, dtype=np.int64)
    for i, (shapes, dtypes) in enumerate(distinct.tolist()):
        args = parse_args(trace.name(shapes), trace.name(dtypes))
        t = next((a for a in (args or []) if a is not None), None)
        if t is not None:
            if (t.shape, t.dtype) not in index:
                index[(t.shape, t.dtype)] = len(sizes)
                sizes.append(float(t.nbytes))
            of_pair[i] = index[(t.shape, t.dtype)]
    key = np.full(len(rows), -1, dtype=np.int64)
    key[gradient] = of_pair[inverse.reshape(-1)]
    nbytes = np.array(sizes, dtype=np.float64)
    return key, nbytes


def _param_bytes(counts: np.ndarray, nbytes: np.ndarray) -> float:
    """Bytes of one copy of the parameters: each (shape, dtype) counted once per backward pass (its count over
    the greatest common divisor of the counts: k micro-batches accumulate every parameter k times)."""
    seen = counts > 0
    k = int(np.gcd.reduce(counts[seen]))
    return float(((counts[seen] // k) * nbytes[seen]).sum())


def _kernel_ns(kernel_op: np.ndarray, dur_ns: np.ndarray, rows: np.ndarray) -> dict[int, float]:
    """The summed duration of the kernels each op of `rows` launched itself (a table over every op would be
    41 MB at 5 M ops; the sums add the same kernels in the same order)."""
    ops = np.sort(rows)
    mine = np.flatnonzero(np.isin(kernel_op, ops))
    ns = np.bincount(np.searchsorted(ops, kernel_op[mine]), weights=dur_ns[mine], minlength=len(ops))
    return dict(zip(ops.tolist(), ns.tolist(), strict=True))


def optimizer_bytes(trace: Trace, links: Calls, rows: np.ndarray) -> dict[int, float]:
    """Bytes each optimizer op of `rows` (op rows) moves, where known (module doc)."""
    ops, gpu = trace.ops, trace.gpu
    accesses = {  # by (name, dtypes) string ids: parsed once
        key: list_accesses(trace.name(key[0]), trace.name(key[1]))
        for key in set(zip(ops.name[rows].tolist(), ops.dtypes[rows].tolist(), strict=True))
    }
    acc = {int(r): accesses[(int(ops.name[r]), int(ops.dtypes[r]))] for r in rows}
    rows = np.array([r for r, a in acc.items() if a], dtype=np.int64)
    if not len(rows):
        return {}
    p_of = _steps(trace, rows)
    kernel_ns = _kernel_ns(links.kernel_op, gpu.dur_ns, rows)
    # the ops of one name in one optimizer step share it
    groups: dict[tuple[int, int], list[int]] = {}
    for r in rows.tolist():
        if r in p_of:
            groups.setdefault((p_of[r][0], int(ops.name[r])), []).append(r)
    out: dict[int, float] = {}
    for members in groups.values():
        p = p_of[members[0]][1]
        total_ns = float(sum(kernel_ns[m] for m in members))
        for m in members:
            share = kernel_ns[m] / total_ns if total_ns > 0 else 1.0 / len(members)
            nbytes = float(acc[m] or 0) * p * share
            if kernel_ns[m] > 0 and nbytes / (kernel_ns[m] * 1e-9) > MAX_PLAUSIBLE_BW:
                continue
            if kernel_ns[m] > 0:
                out[m] = nbytes
    return out

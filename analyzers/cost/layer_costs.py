"""FLOPs and bytes of the layers whose kernels do not stream each input once and write one output of the first
input's shape: normalisations, the pieces of cross-entropy, embedding backward, gather.

    op                                         bytes (x: input, go: grad_out, y/gi: output, p: small tensors)
    layer_norm, native_layer_norm, rms_norm,   x + p + y              one pass: a row stays in registers
      _fused_rms_norm
    batch norm (native, cudnn, miopen,         2x + p + y             statistics pass, then normalise pass;
      _native_batch_norm_legit, ...),                                  training is assumed (the flag is a scalar,
      group_norm, native_group_norm                                    not recorded) except for *_no_training
    every norm backward                        2(go + x) + p + gi     reduce pass (grad of the statistics and of
                                                                       weight/bias), then the grad-input pass
    nll_loss(_forward), nll_loss2d(_forward)   target + picks          reads one log-probability per target
                                                                       (picks = target elements x dtype size)
    nll_loss(2d)_backward                      target + picks          writes one gradient per target (zeroing
                                                                       grad_input is a fill kernel of its own)
    cross_entropy_loss                         2x + target + picks     log_softmax, then nll_loss
    embedding_dense_backward,                  2go + 4 indices         reads grad_out, writes at most one row per
      embedding_backward                                               index (the table's zeroing is a memset);
                                                                       sorting reads and writes the indices and
                                                                       their positions
    gather                                     index + 2 out           out has the index's shape
    _cudnn_rnn, miopen_rnn                     x + w + h0/c0 + y       every recurrent layer's weights multiply
                                                                       every token once: 2 · tokens · weights
                                                                       FLOPs (y: tokens x hidden)
    _cudnn_rnn_backward, miopen_rnn_backward   inputs + gx + gw        grad input and grad weights: twice the
                                                                       forward's FLOPs

An RNN op takes (input, the flat weight buffer, h0, c0, ...): `weights` is the buffer's element count (every
layer's and direction's matrices and biases), `tokens` the input's elements over its feature size.

FLOPs are per-element estimates (8 per element for a norm, forward or backward; one add per picked loss
element or per gradient element): they only need to be small next to the bytes, which they are.
"""

from __future__ import annotations

from analyzers.cost.op_families import name_set
from analyzers.cost.tensor_args import DTYPE_BYTES, TensorArg

# (FLOPs, output, bytes)
LayerCost = tuple[float, TensorArg | None, float]

NORM_FLOPS_PER_ELEMENT = 8.0
SOFTMAX_FLOPS_PER_ELEMENT = 5.0

_ONE_PASS_NORM = name_set(
    "layer_norm native_layer_norm rms_norm _fused_rms_norm _native_batch_norm_legit_no_training"
)
_TWO_PASS_NORM = name_set(
    "batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm miopen_batch_norm "
    "_native_batch_norm_legit _batch_norm_with_update _batch_norm_no_update group_norm native_group_norm"
)
_NORM_BACKWARD = name_set(  # (grad_out, input, ...)
    "native_batch_norm_backward batch_norm_backward native_layer_norm_backward native_group_norm_backward "
    "_fused_rms_norm_backward"
)
_NORM_BACKWARD_INPUT_FIRST = name_set(
    "cudnn_batch_norm_backward miopen_batch_norm_backward"
)  # (input, grad_out)
_NLL = name_set("nll_loss nll_loss_nd nll_loss_forward nll_loss2d nll_loss2d_forward")
_NLL_BACKWARD = name_set("nll_loss_backward nll_loss2d_backward")  # (grad_out, self, target, ...)
_EMBEDDING_BACKWARD = name_set("embedding_dense_backward embedding_backward")
RNN_FORWARD = name_set("_cudnn_rnn miopen_rnn")
RNN_BACKWARD = name_set("_cudnn_rnn_backward miopen_rnn_backward")


def _rnn(ts: list[TensorArg], backward: bool) -> LayerCost | None:
    """A recurrent layer stack (module doc); None when the second tensor is not a flat weight buffer."""
    x, w, h0 = ts[0], ts[1], ts[2]
    if len(w.shape) != 1 or len(x.shape) < 2 or not h0.shape or not x.shape[-1]:
        return None
    tokens = x.numel // x.shape[-1]
    forward = 2.0 * tokens * w.numel
    in_bytes = float(sum(t.nbytes for t in ts))
    if backward:
        return 2 * forward, None, in_bytes + x.nbytes + w.nbytes
    y = TensorArg((*x.shape[:-1], h0.shape[-1]), x.dtype)
    return forward, y, in_bytes + y.nbytes


def _norm(x: TensorArg, params: list[TensorArg], passes: int) -> LayerCost:
    small = sum(t.nbytes for t in params)
    return NORM_FLOPS_PER_ELEMENT * x.numel, x, float(passes * x.nbytes + small + x.nbytes)


def _norm_backward(go: TensorArg, x: TensorArg, params: list[TensorArg]) -> LayerCost:
    small = sum(t.nbytes for t in params)
    gi = TensorArg(x.shape, x.dtype)
    return NORM_FLOPS_PER_ELEMENT * x.numel, gi, float(2 * (go.nbytes + x.nbytes) + small + gi.nbytes)


def _picks(log_probs: TensorArg, target: TensorArg, rest: list[TensorArg]) -> float:
    """Bytes of reading the target, one log-probability (or gradient) per target element, and the class
    weight of each (a 1-D tensor as long as the class dimension, when given)."""
    classes = log_probs.shape[1] if len(log_probs.shape) >= 2 else None
    weight = next((t for t in rest if classes is not None and t.shape == (classes,)), None)
    per_pick = DTYPE_BYTES[log_probs.dtype] + (DTYPE_BYTES[weight.dtype] if weight is not None else 0)
    return float(target.nbytes + target.numel * per_pick)


def _loss(b: str, ts: list[TensorArg]) -> LayerCost | None:
    if b in _NLL and len(ts) >= 2:
        return float(ts[1].numel), None, _picks(ts[0], ts[1], ts[2:])
    if b in _NLL_BACKWARD and len(ts) >= 3:
        go, x, target = ts[0], ts[1], ts[2]
        return float(target.numel), TensorArg(x.shape, x.dtype), go.nbytes + _picks(x, target, ts[3:])
    if b == "cross_entropy_loss" and len(ts) >= 2:
        x, target = ts[0], ts[1]
        flops = SOFTMAX_FLOPS_PER_ELEMENT * x.numel + target.numel
        return flops, None, 2.0 * x.nbytes + _picks(x, target, ts[2:])
    return None


def layer_cost(b: str, ts: list[TensorArg]) -> LayerCost | None:
    """The cost of op `b` (base name) from its tensor arguments `ts` (in order, non-tensors dropped), or None
    when it has no formula here or lacks the tensors its formula needs."""
    if not ts:
        return None
    if b in _ONE_PASS_NORM or b in _TWO_PASS_NORM:
        return _norm(ts[0], ts[1:], 1 if b in _ONE_PASS_NORM else 2)
    if b in _NORM_BACKWARD and len(ts) >= 2:
        return _norm_backward(ts[0], ts[1], ts[2:])
    if b in _NORM_BACKWARD_INPUT_FIRST and len(ts) >= 2:
        return _norm_backward(ts[1], ts[0], ts[2:])
    if b in _EMBEDDING_BACKWARD and len(ts) >= 2:
        go, indices = ts[0], ts[1]
        return float(go.numel), None, float(2 * go.nbytes + 4 * indices.nbytes)
    if (b in RNN_FORWARD or b in RNN_BACKWARD) and len(ts) >= 3:
        return _rnn(ts, b in RNN_BACKWARD)
    if b == "gather" and len(ts) >= 2:
        out = TensorArg(ts[1].shape, ts[0].dtype)
        return 0.0, out, float(ts[1].nbytes + 2 * out.nbytes)
    return _loss(b, ts)

"""Which family an operator belongs to, from its name: the classes the cost formulas and the verdicts use.

Families are decided on the `aten::` name alone (record_function scopes and autograd nodes are OTHER; the
`flash_attn::` package's ops are named like aten's); an op not named in any set below is POINTWISE.
ATTENTION_BSHD and ATTENTION_BACKWARD_BSHD take their tensors as (batch, seq, heads, dim), the other attention
ops as (batch, heads, seq, dim). Every SDPA backend's inner op is named (`_cudnn_attention_forward` under
`_scaled_dot_product_cudnn_attention` launches the cuDNN kernel), so a kernel's nearest costed op is an
attention op, never a pointwise fallback.
"""

from __future__ import annotations

from enum import IntEnum


def name_set(names: str) -> set[str]:
    """The whitespace-separated operator names in `names`."""
    return set(names.split())


class Family(IntEnum):
    OTHER = 0
    MATMUL = 1
    CONV = 2
    CONV_BACKWARD = 3
    ATTENTION = 4
    ATTENTION_BACKWARD = 5
    POINTWISE = 6
    REDUCTION = 7
    NORM = 8
    COPY = 9
    FILL = 10
    VIEW = 11
    FOREACH = 12


MATMUL_FAMILIES = (
    Family.MATMUL,
    Family.CONV,
    Family.CONV_BACKWARD,
    Family.ATTENTION,
    Family.ATTENTION_BACKWARD,
)

_MATMUL = name_set(
    "mm addmm bmm baddbmm matmul linear mv addmv dot vdot _scaled_mm addbmm _addmm_activation addr outer ger"
)
# recurrent layers: a GEMM per step and layer, with small elementwise kernels between (cost/layer_costs.py)
RNN = name_set("_cudnn_rnn _cudnn_rnn_backward miopen_rnn miopen_rnn_backward")
_CONV = name_set(
    "conv1d conv2d conv3d convolution _convolution cudnn_convolution mkldnn_convolution "
    "_slow_conv2d_forward miopen_convolution convolution_overrideable thnn_conv2d _conv_depthwise2d "
    "conv_depthwise3d cudnn_convolution_relu cudnn_convolution_add_relu _nnpack_spatial_convolution "
    "slow_conv3d_forward slow_conv_dilated2d"
)
CONV_TRANSPOSE = name_set(
    "conv_transpose1d conv_transpose2d conv_transpose3d cudnn_convolution_transpose slow_conv_transpose2d "
    "slow_conv_transpose3d miopen_convolution_transpose"
)
_CONV_BWD = name_set("convolution_backward convolution_backward_overrideable cudnn_convolution_backward")
_ATTN_BHSD = name_set(
    "scaled_dot_product_attention _scaled_dot_product_flash_attention "
    "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention "
    "_scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_fused_attention_overrideable "
    "_cudnn_attention_forward _scaled_dot_product_attention_math _scaled_dot_product_attention_math_for_mps"
)
ATTENTION_BSHD = name_set("_flash_attention_forward _efficient_attention_forward _flash_attn_forward")
# flash_attn's variable-length ops take packed (total_tokens, heads, dim) tensors: attention without a FLOP count
# (it needs the per-sequence lengths, which are tensor values)
_ATTN_VARLEN = name_set("_flash_attn_varlen_forward")
_ATTN_BWD_VARLEN = name_set("_flash_attn_varlen_backward")
_ATTN_BWD_BHSD = name_set(
    "_scaled_dot_product_flash_attention_backward _scaled_dot_product_efficient_attention_backward "
    "_scaled_dot_product_cudnn_attention_backward _scaled_dot_product_flash_attention_for_cpu_backward "
    "_scaled_dot_product_fused_attention_overrideable_backward _cudnn_attention_backward"
)
ATTENTION_BACKWARD_BSHD = name_set(
    "_flash_attention_backward _efficient_attention_backward _flash_attn_backward"
)
_NORM = name_set(
    "batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm _native_batch_norm_legit "
    "_native_batch_norm_legit_no_training _batch_norm_with_update layer_norm native_layer_norm group_norm "
    "native_group_norm rms_norm _fused_rms_norm instance_norm native_batch_norm_backward "
    "cudnn_batch_norm_backward batch_norm_backward native_layer_norm_backward native_group_norm_backward "
    "_fused_rms_norm_backward miopen_batch_norm miopen_batch_norm_backward"
)
_REDUCTION = name_set(
    "sum mean amax amin max min prod var std var_mean std_mean norm linalg_vector_norm argmax argmin any "
    "all nansum logsumexp count_nonzero _linalg_vector_norm nll_loss nll_loss_forward nll_loss2d_forward "
    "cross_entropy_loss mse_loss l1_loss binary_cross_entropy _batch_norm_stats aminmax"
)
_COPY = name_set(
    "copy_ to _to_copy clone contiguous _copy_from _copy_from_and_resize index_select gather embedding "
    "index index_put_ _index_put_impl_ scatter scatter_ scatter_add_ cat stack _cat repeat tile flip roll "
    "masked_select take"
)
_FILL = name_set(
    "fill_ zero_ zeros ones full zeros_like ones_like full_like normal_ uniform_ random_ bernoulli_ "
    "exponential_ randn rand randint arange linspace"
)
_VIEW = name_set(
    "view reshape _reshape_alias transpose t permute as_strided expand squeeze unsqueeze slice select "
    "detach alias _unsafe_view flatten unflatten narrow split chunk unbind empty empty_like empty_strided "
    "new_empty new_empty_strided resize_ as_strided_ view_as expand_as lift_fresh set_ unsafe_split"
)


_NAMESPACES = ("aten::", "flash_attn::")


def base_name(name: str) -> str:
    """`aten::add_` -> `add_`, `flash_attn::_flash_attn_forward` -> `_flash_attn_forward`; record_function
    scopes and autograd nodes are returned unchanged."""
    for ns in _NAMESPACES:
        if name.startswith(ns):
            return name[len(ns) :]
    return name


def family_of(name: str) -> Family:
    b = base_name(name)
    if b == name:
        return Family.OTHER
    if b in _MATMUL or b in RNN:
        return Family.MATMUL
    if b in _CONV or b in CONV_TRANSPOSE:
        return Family.CONV
    if b in _CONV_BWD:
        return Family.CONV_BACKWARD
    if b in _ATTN_BHSD or b in ATTENTION_BSHD or b in _ATTN_VARLEN:
        return Family.ATTENTION
    if b in _ATTN_BWD_BHSD or b in ATTENTION_BACKWARD_BSHD or b in _ATTN_BWD_VARLEN:
        return Family.ATTENTION_BACKWARD
    if b.startswith("_foreach_") or b.startswith("_fused_"):
        return Family.FOREACH if b not in _NORM else Family.NORM
    if b in _NORM:
        return Family.NORM
    if b in _REDUCTION:
        return Family.REDUCTION
    if b in _FILL:
        return Family.FILL
    if b in _COPY:
        return Family.COPY
    if b in _VIEW:
        return Family.VIEW
    return Family.POINTWISE

"""Settings a model library offers that fix a finding without editing its code.

When a finding's kernels run in a library's module, the user usually cannot (or should not) edit that code,
but the library often has a switch that swaps in the fused or aligned implementation. Each rule names the
library, the finding kind and module class it applies to, and says what to set.
"""

from __future__ import annotations

from analyzers.results import FindingKind
from brrrtui.contract.model import SourceLine
from brrrtui.contract.userfiles import package_path

# transformers' activation classes that compute the tanh GELU by hand (several pointwise kernels);
# "gelu_pytorch_tanh" maps to one F.gelu(approximate="tanh") kernel with the same formula
_HF_HAND_GELU = frozenset({"NewGELUActivation", "FastGELUActivation", "GELUTanh", "QuickGELUActivation"})
_HF_GELU_KNOB = (
    'Hugging Face: set the config\'s activation to "gelu_pytorch_tanh" (GPT-2 family: '
    'GPT2Config(activation_function="gelu_pytorch_tanh"); BERT family: hidden_act="gelu_pytorch_tanh"): '
    "the same tanh approximation in one kernel"
)
_HF_ATTENTION_KNOB = (
    'Hugging Face: load the model with attn_implementation="sdpa" (or "flash_attention_2"): '
    "one fused attention kernel instead of matmul, softmax, dropout and matmul"
)
_HF_VOCAB_KNOB = (
    "Hugging Face: model.resize_token_embeddings(model.config.vocab_size, pad_to_multiple_of=64) pads the "
    "embedding and the output layer"
)
_CHANNELS_LAST_KNOB = (
    "{lib}: model = model.to(memory_format=torch.channels_last) and feed inputs converted the same way "
    "(x.to(memory_format=torch.channels_last)): the convolutions then run NHWC without layout conversions"
)


def _library(line: SourceLine | None) -> str | None:
    """The top-level package of a library file (`transformers`), or None."""
    if line is None:
        return None
    path = package_path(line.file) or line.file.replace("\\", "/")
    return path.split("/", 1)[0] if "/" in path else None


def library_knob(
    kind: FindingKind, module_path: str, module_kind: str, library_line: SourceLine | None
) -> str | None:
    lib = _library(library_line)
    if lib == "transformers":
        if kind is FindingKind.FUSION and module_kind in _HF_HAND_GELU:
            return _HF_GELU_KNOB
        if kind is FindingKind.ATTENTION:
            return _HF_ATTENTION_KNOB
        last = module_path.rsplit(".", 1)[-1]
        if kind is FindingKind.SLOW_GEMM and last in ("lm_head", "decoder", "embed_out", "output"):
            return _HF_VOCAB_KNOB
    if lib in ("torchvision", "timm") and kind is FindingKind.CONV_LAYOUT:
        return _CHANNELS_LAST_KNOB.format(lib=lib)
    return None

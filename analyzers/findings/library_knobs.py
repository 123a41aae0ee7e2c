"""Settings a model library offers that fix a finding without editing its code.

When a finding's kernels run in a library's module, the user usually cannot (or should not) edit that code,
but the library often has a switch that swaps in the fused or aligned implementation. Each rule names the
library, the finding kind and module class it applies to, and names the setting (a `Knob`; its words are
brrrtui.present.finding_words).
"""

from __future__ import annotations

from analyzers.findings.facts import Knob
from analyzers.results import FindingKind
from brrrtui.contract.model import SourceLine
from brrrtui.contract.userfiles import package_path

# transformers' activation classes that compute the tanh GELU by hand (several pointwise kernels);
# "gelu_pytorch_tanh" maps to one F.gelu(approximate="tanh") kernel with the same formula
_HF_HAND_GELU = frozenset({"NewGELUActivation", "FastGELUActivation", "GELUTanh", "QuickGELUActivation"})


def library_of(line: SourceLine | None) -> str | None:
    """The top-level package of a library file (`transformers`), or None."""
    if line is None:
        return None
    path = package_path(line.file) or line.file.replace("\\", "/")
    return path.split("/", 1)[0] if "/" in path else None


def library_knob(
    kind: FindingKind, module_path: str, module_kind: str, library_line: SourceLine | None
) -> Knob | None:
    lib = library_of(library_line)
    if lib == "transformers":
        if kind is FindingKind.FUSION and module_kind in _HF_HAND_GELU:
            return Knob.HF_GELU
        if kind is FindingKind.ATTENTION:
            return Knob.HF_ATTENTION
        last = module_path.rsplit(".", 1)[-1]
        if kind is FindingKind.SLOW_GEMM and last in ("lm_head", "decoder", "embed_out", "output"):
            return Knob.HF_VOCAB
    if lib in ("torchvision", "timm") and kind is FindingKind.CONV_LAYOUT:
        return Knob.CHANNELS_LAST
    return None

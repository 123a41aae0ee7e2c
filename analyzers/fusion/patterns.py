"""Which PyTorch function a fusion chain computes, named only when the chain's ops match that function's formula.

A fix that names a function ("use F.gelu") is given only when the chain *is* that function; anything else gets
the generic advice (torch.compile the function). What the recording lets us check, per op of the chain:

- its name and its place in the chain (the order the kernels ran);
- which operands were tensors and which scalars: `Input Dims` records `[]` for a Python number (dtype
  `double` / `long int`) and for `alpha` (dtype `Scalar`), a list for a tensor;
- the tensors' shapes (a broadcast such as `x - x.mean(-1, keepdim=True)` takes [..., D] and [..., 1]).

What it cannot check: the scalar constants themselves (0.5, 0.044715, sqrt(2/pi), eps). torch.profiler
records them only as `Concrete Inputs`, which brrrtui's recording does not keep; so `pow(x, 3)` and
`pow(x, 2)` look alike, and which tensor an op read is known by shape only. The rules therefore require the
whole formula's structure (every op of it, in order, with the right tensor/scalar operands) and nothing else
in the chain but dtype casts (`copy_`, `to`, ...)::

    gelu_tanh  0.5*x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))
               [mul_s] cube mul_s add_t mul_s tanh add_s mul_t [mul_s]     cube: pow_s | mul_t mul_t
    gelu       0.5*x * (1 + erf(x / sqrt(2)))
               [mul_s] (div_s|mul_s) erf add_s mul_t [mul_s]
    layer_norm (x - mean(x)) / sqrt(var + eps) [* w [+ b]]
               a mean (or var / var_mean) before a broadcasting sub_t, then rsqrt (or sqrt and div)
    rms_norm   x * rsqrt(mean(x**2) + eps) [* w]
               (pow_s|mul_t) mean add_s (rsqrt mul_t | sqrt div_t) [mul_t], no sub
    softmax    exp(x - max) / sum(exp(x - max))
               [amax|max sub_t] exp sum div_t
    silu       x * sigmoid(x)
               sigmoid mul_t of two same-shaped tensors

(`_s`: one tensor and scalars, `_t`: two tensors; an op whose operands were not recorded matches either.)
`tanh(h) + 0.5*h` (tanh mul_s add_t) matches none of them, nor does a loop of such lines (two tanh).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from analyzers.cost.op_families import base_name

_CASTS = frozenset({"copy_", "to", "_to_copy", "clone", "contiguous", "type_as"})


@dataclass(frozen=True)
class ChainOp:
    """One op of a chain: its name and, when recorded, its tensor operands' shapes and scalar count."""

    name: str
    tensors: tuple[tuple[int, ...], ...] | None = None  # None: shapes not recorded
    scalars: int = 0

    @staticmethod
    def parse(name: str, shapes_json: str, dtypes_json: str) -> ChainOp:
        """From the recorded `Input Dims` / `Input type` JSON (empty strings: not recorded)."""
        try:
            shapes = json.loads(shapes_json) if shapes_json else None
            dtypes = json.loads(dtypes_json) if dtypes_json else None
        except ValueError:
            return ChainOp(name)
        if not isinstance(shapes, list) or not isinstance(dtypes, list):
            return ChainOp(name)
        tensors: list[tuple[int, ...]] = []
        scalars = 0
        for i, dtype in enumerate(dtypes):
            shape = shapes[i] if i < len(shapes) else None
            if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
                tensors.append(tuple(shape))
            elif isinstance(shape, list) and isinstance(dtype, str) and dtype:
                scalars += 1  # [] with a dtype: a Python number, an alpha, or a 0-d tensor
        return ChainOp(name, tuple(tensors), scalars)

    @property
    def token(self) -> str:
        """`mul.s` (one tensor operand), `add.t` (two or more), `tanh.u` (one, no scalars), `mul.?` unknown."""
        b = base_name(self.name).rstrip("_")
        if self.tensors is None:
            return f"{b}.?"
        n = len(self.tensors)
        return f"{b}.{'t' if n >= 2 else 's' if self.scalars else 'u' if n == 1 else '?'}"


def _tok(name: str, kinds: str = "stu") -> str:
    """A regex for one op token: `name` with one of `kinds` (or unknown operands)."""
    return rf"{name}\.[{kinds}?]"


_S, _T = "s", "t"
_CUBE = rf"(?:{_tok('pow', _S)}|{_tok('mul', _T)} {_tok('mul', _T)})"
_HALF = _tok("mul", _S)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in (
        (
            "gelu_tanh",
            rf"(?:{_HALF} )?{_CUBE} {_tok('mul', _S)} {_tok('add', _T)} {_tok('mul', _S)} {_tok('tanh')}"
            rf" {_tok('add', _S)} {_tok('mul', _T)}(?: {_HALF})?",
        ),
        (
            "gelu",
            rf"(?:{_HALF} )?(?:{_tok('div', _S)}|{_tok('mul', _S)}) {_tok('erf')} {_tok('add', _S)}"
            rf" {_tok('mul', _T)}(?: {_HALF})?",
        ),
        (
            "rms_norm",
            rf"(?:{_tok('pow', _S)}|{_tok('mul', _T)}) {_tok('mean')} {_tok('add', _S)}"
            rf" (?:{_tok('rsqrt')} {_tok('mul', _T)}|{_tok('sqrt')} {_tok('div', _T)})(?: {_tok('mul', _T)})?",
        ),
        (
            "softmax",
            rf"(?:(?:{_tok('amax')}|{_tok('max')}) {_tok('sub', _T)} )?{_tok('exp')} {_tok('sum')}"
            rf" {_tok('div', _T)}",
        ),
        ("silu", rf"{_tok('sigmoid')} {_tok('mul', _T)}"),
    )
)
_LN_OPS = frozenset({"mean", "var", "var_mean", "sub", "pow", "mul", "add", "rsqrt", "sqrt", "div"})


def _broadcasts(op: ChainOp) -> bool:
    """Two tensor operands of which one is reduced (a size-1 dim where the other is larger); True unknown."""
    if op.tensors is None:
        return True
    if len(op.tensors) < 2 or len(op.tensors[0]) != len(op.tensors[1]):
        return False
    a, b = op.tensors[0], op.tensors[1]
    return a != b and all(x == y or x == 1 or y == 1 for x, y in zip(a, b, strict=True))


def _layer_norm(ops: list[ChainOp]) -> bool:
    """A mean/var reduction, then x - mean broadcast (sub of [.., D] and [.., 1]), then rsqrt or sqrt + div;
    no op outside the formula's."""
    names = [base_name(o.name).rstrip("_") for o in ops]
    if not set(names) <= _LN_OPS:
        return False
    red = next((i for i, n in enumerate(names) if n in ("mean", "var", "var_mean")), None)
    sub = next((i for i, n in enumerate(names) if n == "sub" and _broadcasts(ops[i])), None)
    root = next((i for i, n in enumerate(names) if n == "rsqrt"), None)
    if root is None and "sqrt" in names and "div" in names:
        root = names.index("div")
    return red is not None and sub is not None and root is not None and red < sub < root


def _same_shapes(ops: list[ChainOp]) -> bool:
    return all(o.tensors is None or len(set(o.tensors)) <= 1 for o in ops)


def match_pattern(ops: list[ChainOp]) -> str | None:
    """The fused function the chain computes (module doc), or None."""
    core = [o for o in ops if base_name(o.name).rstrip("_") not in _CASTS and base_name(o.name) not in _CASTS]
    if not core:
        return None
    text = " ".join(o.token for o in core)
    for name, rx in _PATTERNS:
        if rx.fullmatch(text) and (name != "silu" or _same_shapes(core)):
            return name
    return "layer_norm" if _layer_norm(core) else None


def named_pattern(op_names: list[str]) -> str | None:
    """match_pattern on names alone (operands unknown): the structure and order rules still apply."""
    return match_pattern([ChainOp(n) for n in op_names])

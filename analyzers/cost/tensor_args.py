"""One recorded tensor argument (shape and dtype name, as torch.profiler records them) and the dtype widths."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod


def _of_width(nbytes: int, names: str) -> dict[str, int]:
    """{name: nbytes} for each of the comma-separated dtype names (some hold spaces: "long int")."""
    return {name.strip(): nbytes for name in names.split(",")}


# bytes per element by the dtype names torch.profiler records ("c10::BFloat16") and torch's own ("bfloat16")
DTYPE_BYTES: dict[str, int] = {
    **_of_width(
        1,
        "signed char, unsigned char, bool, c10::Float8_e4m3fn, c10::Float8_e5m2, "
        "c10::Float8_e4m3fnuz, c10::Float8_e5m2fnuz, c10::Float8_e8m0fnu, c10::qint8, "
        "c10::quint8, int8, uint8, float8_e4m3fn, float8_e5m2",
    ),
    **_of_width(
        2,
        "c10::Half, c10::BFloat16, short int, short, unsigned short, float16, half, bfloat16, int16",
    ),
    **_of_width(4, "float, int, c10::complex<c10::Half>, c10::qint32, unsigned int, float32, int32"),
    **_of_width(8, "double, long int, long, c10::complex<float>, unsigned long, float64, int64, complex64"),
    **_of_width(16, "c10::complex<double>, complex128"),
}
# the 16-bit floats (fp16, bf16) and fp32, by both spellings: the precisions of the tensor-core and SIMT roofs
SIXTEEN_BIT_FLOAT = frozenset({"c10::Half", "c10::BFloat16", "float16", "half", "bfloat16"})
FP32 = frozenset({"float", "float32"})
LOW_PRECISION = SIXTEEN_BIT_FLOAT | {
    d for d in DTYPE_BYTES if "Float8" in d or d.startswith("float8")
}


@dataclass(frozen=True)
class TensorArg:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


Args = list[TensorArg | None]  # one entry per recorded argument; None when it is not a tensor

# (FLOPs, output, bytes read, bytes written besides the output) of an op with a dedicated formula
Traffic = tuple[float | None, TensorArg | None, float, float]

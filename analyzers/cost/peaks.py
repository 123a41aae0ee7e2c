"""The ceilings of the roofline: which peak FLOP/s and bytes/s a kernel is measured against.

Order of preference (`resolve_peaks`):

1. An override from the user (`--peaks "flops=800e12,bw=4.2e12"` or a dict): they asked for it, so it wins
   for the fields it names (to judge against the datasheet, or a partitioned / power-capped GPU).
2. `trace.peaks` when the recorder measured them (source "measured"): a calibration matmul and copy on the very
   device is the truest roof (an H200 reached ~800 of its 989 datasheet bf16 TFLOP/s, ~4.26 of 4.8 TB/s),
   as long as the datasheet agrees: a measured figure under MEASURED_MIN_SHARE of the device's datasheet
   value, or over MEASURED_MAX_SHARE of it, is a calibration gone wrong (clocks not yet up, another process
   on the GPU: two runs on one H100 measured 33.7 and 51 TFLOP/s fp32 against a datasheet 67, and an fp32
   GEMM then read 129 % of the lower one), and that field comes from the datasheet instead.
3. The datasheet table below, matched on the device name.
4. Otherwise every roof is None ("unknown"): regimes then fall back to kernel-name rules (see cost/roofline.py).

Then a floor from the run itself (`raise_to_reached`): a FLOP roof is at least the highest rate a matmul or
convolution of the analysed windows sustained on that unit (cost/roofline.py: `reached_rates` says which kernels
count). A calibration runs after the user's script, on a GPU that may by then be hot or power-capped: an H100
calibrated 667 TFLOP/s bf16 after its own 10240^3 bf16 GEMMs ran at 825-856, inside the datasheet check above,
and every tensor-core kernel's fraction read ~1.28x too high. A field the user's override names is never raised,
and neither is an unknown one (None).

The table holds DENSE peaks. Vendor pages often quote sparse figures (2:4 structured sparsity doubles them):
H100 SXM bf16 is 989 dense / 1979 sparse; a roof at 1979 would halve every matmul's roof fraction.
`tensor_flops_per_s` is bf16/fp16 with fp32 accumulation (what PyTorch uses); `fp32_flops_per_s` is the SIMT
(non-tensor) fp32 rate. TF32 matmuls run at half the bf16 rate on Ampere, Hopper and Ada (cost/roofline.py applies it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from brrrtui.contract.errors import InputError
from brrrtui.contract.model import Peaks, Trace

MiB = 1 << 20
# of the datasheet; the H200 recordings under tests/fixtures measured 0.75-0.79 of it (bf16), 0.73-0.75 (fp32)
# and 0.85-0.88 (DRAM)
MEASURED_MIN_SHARE = 0.6
MEASURED_MAX_SHARE = 1.05  # a calibration does not beat the datasheet's boost-clock figure


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    tensor_flops_per_s: float  # dense bf16/fp16, fp32 accumulate (fp16 on V100/T4, which lack bf16)
    fp32_flops_per_s: float  # SIMT fp32
    bytes_per_s: float  # DRAM
    l2_bytes: int
    l2_bytes_per_s: float | None = (
        None  # L2 read bandwidth, where the vendor publishes one (cost/roofline.py)
    )


# (substrings that must all occur in the lower-cased device name, spec). First match wins, so the more
# specific variants come first ("h100 pcie" before "h100").
DATASHEET: list[tuple[tuple[str, ...], DeviceSpec]] = [
    (("h200", "nvl"), DeviceSpec("H200 NVL", 835e12, 60e12, 4.8e12, 60 * MiB)),
    (("h200",), DeviceSpec("H200 SXM", 989e12, 67e12, 4.8e12, 60 * MiB)),
    (("h100", "pcie"), DeviceSpec("H100 PCIe", 756e12, 51e12, 2.0e12, 50 * MiB)),
    (("h100", "nvl"), DeviceSpec("H100 NVL", 835e12, 60e12, 3.9e12, 50 * MiB)),
    (("h100",), DeviceSpec("H100 SXM", 989e12, 67e12, 3.35e12, 50 * MiB)),
    (("a100", "pcie", "80gb"), DeviceSpec("A100 80GB PCIe", 312e12, 19.5e12, 1.935e12, 40 * MiB)),
    (("a100", "pcie"), DeviceSpec("A100 40GB PCIe", 312e12, 19.5e12, 1.555e12, 40 * MiB)),
    (("a100", "80gb"), DeviceSpec("A100 80GB SXM", 312e12, 19.5e12, 2.039e12, 40 * MiB)),
    (("a100",), DeviceSpec("A100 40GB SXM", 312e12, 19.5e12, 1.555e12, 40 * MiB)),
    (("l40s",), DeviceSpec("L40S", 362e12, 91.6e12, 864e9, 96 * MiB)),
    (("l40",), DeviceSpec("L40", 181e12, 90.5e12, 864e9, 96 * MiB)),
    (("l4",), DeviceSpec("L4", 121e12, 30.3e12, 300e9, 48 * MiB)),
    # NVIDIA publishes no A10G datasheet; AWS/third-party figures: 70 TFLOPS bf16 dense, 600 GB/s.
    (("a10g",), DeviceSpec("A10G", 70e12, 31.2e12, 600e9, 6 * MiB)),
    (("a10",), DeviceSpec("A10", 125e12, 31.2e12, 600e9, 6 * MiB)),
    # GeForce Ada: 165 TFLOPS with fp32 accumulate (330 is the fp16-accumulate figure).
    (("4090",), DeviceSpec("RTX 4090", 165.2e12, 82.6e12, 1008e9, 72 * MiB)),
    (("v100", "pcie"), DeviceSpec("V100 PCIe", 112e12, 14e12, 900e9, 6 * MiB)),
    (("v100",), DeviceSpec("V100 SXM2", 125e12, 15.7e12, 900e9, 6 * MiB)),
    (("t4",), DeviceSpec("T4", 65e12, 8.1e12, 320e9, 4 * MiB)),
]


def datasheet_spec(device_name: str | None) -> DeviceSpec | None:
    """The datasheet entry whose substrings all occur in `device_name` (case-insensitive), or None."""
    if not device_name:
        return None
    name = device_name.lower()
    # "L4" must not match "L40"/"L40S": compare whole tokens for the short keys.
    tokens = set(re.split(r"[^a-z0-9]+", name))
    for keys, spec in DATASHEET:
        if all((k in tokens) if len(k) <= 3 else (k in name) for k in keys):
            return spec
    return None


_OVERRIDE_KEYS = {
    "flops": "tensor_flops_per_s",
    "tensor": "tensor_flops_per_s",
    "tensor_flops_per_s": "tensor_flops_per_s",
    "fp32": "fp32_flops_per_s",
    "fp32_flops_per_s": "fp32_flops_per_s",
    "bw": "bytes_per_s",
    "bytes": "bytes_per_s",
    "bytes_per_s": "bytes_per_s",
    "l2": "l2_bytes",
    "l2_bytes": "l2_bytes",
}


class PeaksOverrideError(InputError, ValueError):
    """A --peaks value brrrtui cannot use; the message is one line for the user."""


def parse_override(override: str | dict[str, Any]) -> dict[str, float]:
    """`"flops=800e12,bw=4.2e12"` or a dict -> {Peaks field: value}. Raises PeaksOverrideError (an InputError
    and a ValueError) on anything else."""
    items: dict[str, Any]
    if isinstance(override, str):
        items = {}
        for part in filter(None, (p.strip() for p in override.split(","))):
            key, sep, value = part.partition("=")
            if not sep:
                raise PeaksOverrideError(
                    f"peaks override {part!r}: expected key=value (e.g. flops=800e12,bw=4.2e12)"
                )
            items[key.strip()] = value.strip()
    else:
        items = dict(override)
    out: dict[str, float] = {}
    for key, value in items.items():
        field = _OVERRIDE_KEYS.get(key.lower())
        if field is None:
            raise PeaksOverrideError(f"peaks override: unknown key {key!r}; use flops, fp32, bw or l2")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise PeaksOverrideError(f"peaks override: {key}={value!r} is not a number") from None
        if not number > 0:
            raise PeaksOverrideError(f"peaks override: {key} must be positive")
        out[field] = number
    return out


def resolve_peaks(trace: Trace, override: str | dict[str, Any] | None = None) -> Peaks:
    """The roofs to judge `trace` against; each field from the best source that has it (see module doc).

    `source` names the source of the bandwidth and tensor roofs: "measured", "override", "datasheet:<name>",
    or "unknown". L2 size prefers the device's own report (`trace.device.l2_bytes`).
    """
    fields = ("tensor_flops_per_s", "fp32_flops_per_s", "bytes_per_s", "l2_bytes")
    layers: list[tuple[str, dict[str, Any]]] = []
    if override:
        layers.append(("override", parse_override(override)))
    spec = datasheet_spec(trace.device.name)
    if trace.peaks is not None and trace.peaks.source == "measured":
        measured = {f: getattr(trace.peaks, f) for f in fields}
        layers.append(("measured", {f: v for f, v in measured.items() if agrees_with_datasheet(f, v, spec)}))
    if spec is not None:
        layers.append((f"datasheet:{spec.name}", {f: getattr(spec, f) for f in fields}))
    elif trace.peaks is not None and trace.peaks.source != "measured":
        layers.append((trace.peaks.source, {f: getattr(trace.peaks, f) for f in fields}))

    chosen: dict[str, Any] = {}
    source = "unknown"
    for name, values in layers:
        for f in fields:
            if chosen.get(f) is None and values.get(f) is not None:
                chosen[f] = values[f]
                if f in ("tensor_flops_per_s", "bytes_per_s") and source == "unknown":
                    source = name
    if trace.device.l2_bytes:
        chosen["l2_bytes"] = int(trace.device.l2_bytes)
    return Peaks(
        tensor_flops_per_s=_float(chosen.get("tensor_flops_per_s")),
        fp32_flops_per_s=_float(chosen.get("fp32_flops_per_s")),
        bytes_per_s=_float(chosen.get("bytes_per_s")),
        source=source,
        l2_bytes=int(chosen["l2_bytes"]) if chosen.get("l2_bytes") else None,
    )


RAISABLE = ("tensor_flops_per_s", "fp32_flops_per_s")  # the FLOP roofs a kernel's reached rate can raise


def fixed_fields(override: str | dict[str, Any] | Peaks | None) -> frozenset[str]:
    """The FLOP roofs the user set, which no reached rate raises: those an override names, every one of a
    complete Peaks (used as is)."""
    if isinstance(override, Peaks):
        return frozenset(RAISABLE)
    return frozenset(parse_override(override)) if override else frozenset()


def raise_to_reached(peaks: Peaks, reached: dict[str, float], fixed: frozenset[str] = frozenset()) -> Peaks:
    """`peaks` with each FLOP roof below the rate a kernel reached on its unit (`reached`: field -> FLOP/s)
    raised to that rate, and `raised_from` saying what it replaced; `fixed` fields and unknown (None) roofs
    stay. The same Peaks when nothing is raised."""
    changes: dict[str, Any] = {}
    for f in RAISABLE:
        current, rate = getattr(peaks, f), reached.get(f)
        if f in fixed or current is None or rate is None or not rate > current:
            continue
        changes[f] = float(rate)
    if not changes:
        return peaks
    before = dict(peaks.raised_from)  # a roof raised twice keeps the figure it was first raised from
    for f in changes:
        before.setdefault(f, float(getattr(peaks, f)))
    return replace(peaks, **changes, raised_from=tuple(before.items()))


def agrees_with_datasheet(field: str, value: Any, spec: DeviceSpec | None) -> bool:
    """A measured `field` of Peaks is within [MEASURED_MIN_SHARE, MEASURED_MAX_SHARE] of the datasheet's
    figure (True without a datasheet entry, or for a field the datasheet has no rate for: the L2 size)."""
    if spec is None or value is None or field == "l2_bytes":
        return True
    sheet = getattr(spec, field, None)
    if not sheet:
        return True
    return bool(MEASURED_MIN_SHARE * sheet <= float(value) <= MEASURED_MAX_SHARE * sheet)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)

"""Measured ceilings for the roofline, taken on the script's own GPU after the script has finished.

A few hundred milliseconds: a bf16 matmul (tensor cores), an fp32 matmul with TF32 off (SIMT), and a large
device-to-device copy counting bytes read plus written (measured on an H200: ~800 TFLOP/s and ~4.26 TB/s).
Random data, CUDA events around each timed call, the median of REPEATS calls.

Each measurement first runs its call for WARMUP_MS of GPU time: an idle GPU starts at low clocks and takes
tens of milliseconds of load to reach its boost clock, and one call of warm-up left two calibrations on one
H100 at 33.7 and 51 TFLOP/s fp32. The median then ignores the odd slow call (another process, a clock dip).
analyzers/cost/peaks.py still checks each figure against the device's datasheet.
"""

from __future__ import annotations

import statistics
from typing import Any

from brrrtui.contract.messages import MeasuredPeaks

WARMUP_MS = 100.0  # GPU time each measurement runs before it is timed
MAX_WARMUP_CALLS = 200
REPEATS = 20  # timed calls per measurement


def _time_ms(torch: Any, fn: Any, repeats: int = REPEATS) -> float:
    """The median time of `repeats` calls of `fn` in ms, after WARMUP_MS of them (at least one call)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed() -> float:
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))

    warm, calls = 0.0, 0
    while calls < 1 or (warm < WARMUP_MS and calls < MAX_WARMUP_CALLS):
        warm += timed()
        calls += 1
    torch.cuda.synchronize()
    return statistics.median(timed() for _ in range(repeats))


def _matmul_flops_per_s(torch: Any, dev: Any, n: int, dtype: Any) -> float:
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    return 2 * n**3 / (_time_ms(torch, lambda: a @ b) / 1e3)


def _copy_bytes_per_s(torch: Any, dev: Any, elems: int) -> float:
    """The better of a device copy and an elementwise kernel over the same bytes: on the H200 the copy gave
    4.09 TB/s while 1 GiB pointwise kernels reached 4.26 TB/s, and a ceiling below achieved rates is no roof."""
    src = torch.randn(elems, device=dev)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(torch, lambda: dst.copy_(src))
    kernel_ms = _time_ms(torch, lambda: torch.mul(src, 1.0, out=dst))
    return 2 * elems * src.element_size() / (min(copy_ms, kernel_ms) / 1e3)


def measure_peaks(torch: Any) -> MeasuredPeaks:
    dev = torch.device("cuda", torch.cuda.current_device())
    tensor = _matmul_flops_per_s(torch, dev, 8192, torch.bfloat16)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        fp32 = _matmul_flops_per_s(torch, dev, 4096, torch.float32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    bandwidth = _copy_bytes_per_s(torch, dev, 1 << 28)  # 1 GiB of fp32, far above any L2
    torch.cuda.empty_cache()
    return MeasuredPeaks(
        tensor_flops_per_s=tensor,
        fp32_flops_per_s=fp32,
        bytes_per_s=bandwidth,
        l2_bytes=getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", None),
    )

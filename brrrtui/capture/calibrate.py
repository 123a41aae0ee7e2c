"""Measured ceilings for the roofline, taken on the script's own GPU after the script has finished.

A few hundred milliseconds: a bf16 matmul (tensor cores), an fp32 matmul with TF32 off (SIMT), and a large
device-to-device copy counting bytes read plus written (DESIGN.md: ~800 TFLOP/s and ~4.26 TB/s on an H200).
Random data, warm-up first, CUDA events around each timed loop, median of repeats.
"""

from __future__ import annotations

import statistics
from typing import Any


def _time_ms(torch: Any, fn: Any, repeats: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_peaks(torch: Any) -> dict[str, Any]:
    dev = torch.device("cuda", torch.cuda.current_device())
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    bf16_ms = _time_ms(torch, lambda: a @ b, 10)
    del a, b
    m = 4096
    a32 = torch.randn(m, m, device=dev)
    b32 = torch.randn(m, m, device=dev)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        fp32_ms = _time_ms(torch, lambda: a32 @ b32, 5)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    del a32, b32
    elems = 1 << 28  # 1 GiB of fp32, far above any L2
    src = torch.randn(elems, device=dev)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(torch, lambda: dst.copy_(src), 10)
    del src, dst
    torch.cuda.empty_cache()
    return {
        "tensor_flops_per_s": 2 * n**3 / (bf16_ms / 1e3),
        "fp32_flops_per_s": 2 * m**3 / (fp32_ms / 1e3),
        "bytes_per_s": 2 * elems * 4 / (copy_ms / 1e3),
        "source": "measured",
        "l2_bytes": getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", None),
    }

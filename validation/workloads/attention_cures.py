"""The attention lines of slow_kernels.py, each timed as it runs there and as its slow_gemm finding's cure has it:
forward and backward of one SDPA call (one training step's worth of that line), CUDA events, interleaved.

    mask       line "mask": bf16, an explicit boolean causal mask     cure: is_causal=True, no mask
    fp32       line "fp32 attention": fp32 q, k, v, is_causal=True     cure: q, k, v cast to bf16 (the casts and
                                                                       the output's cast back timed with it)
    head_dim   line "head_dim": bf16, head_dim 200, is_causal=True     the finding's claim, that the kernel runs
                                                                       head_dim 200 in a 256-wide tile: the same
                                                                       call at head_dim 256, and the saving of
                                                                       the cure (heads x head_dim kept, in
                                                                       256-wide heads) as t(200) - t(256) x 200/256

Sizes are slow_kernels.py's defaults. Each repeat times every case's two variants back to back (`--iters`
calls each after `--warmup`), the median call of each; the saving of a repeat is the difference of the two
medians, and the output gives every repeat's saving and their median (JSON on stdout, a table on stderr).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

Call = Callable[[], None]


def _qkv(b: int, h: int, s: int, d: int, dtype: torch.dtype) -> list[torch.Tensor]:
    return [torch.randn(b, h, s, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3)]


def _step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: object) -> Call:
    grad = torch.randn_like(q[..., : v.shape[-1]])

    def run() -> None:
        out = F.scaled_dot_product_attention(q, k, v, **kw)  # type: ignore[arg-type]
        out.backward(grad)

    return run


def _bf16_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Call:
    grad = torch.randn_like(q)

    def run() -> None:
        qb, kb, vb = (t.to(torch.bfloat16) for t in (q, k, v))
        out = F.scaled_dot_product_attention(qb, kb, vb, is_causal=True).float()
        out.backward(grad)

    return run


def cases(args: argparse.Namespace) -> dict[str, tuple[Call, Call]]:
    b, h, s, d = args.batch, args.heads, args.seq, args.dim
    bf16 = torch.bfloat16
    masked = _qkv(b, h, s, d, bf16)
    mask = torch.ones(s, s, device="cuda", dtype=torch.bool).tril()
    fp32 = _qkv(args.fp32_batch, h, args.fp32_seq, d, torch.float32)
    odd = _qkv(b, h, s, args.odd_dim, bf16)
    wide = _qkv(b, h, s, 256, bf16)
    return {
        "mask": (_step(*masked, attn_mask=mask), _step(*masked, is_causal=True)),
        "fp32": (_step(*fp32, is_causal=True), _bf16_step(*fp32)),
        "head_dim": (_step(*odd, is_causal=True), _step(*wide, is_causal=True)),
    }


def median_ms(call: Call, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--odd-dim", type=int, default=200)
    p.add_argument("--fp32-batch", type=int, default=4)
    p.add_argument("--fp32-seq", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("attention_cures.py: error: needs a CUDA device", file=sys.stderr)
        return 2
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeats):
        for name, (before, after) in cases(args).items():
            t0 = median_ms(before, args.warmup, args.iters)
            t1 = median_ms(after, args.warmup, args.iters)
            saving = t0 - t1 * (args.odd_dim / 256 if name == "head_dim" else 1.0)
            runs.setdefault(name, []).append({"before_ms": t0, "after_ms": t1, "saving_ms": saving})
            torch.cuda.empty_cache()
    out = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "args": vars(args),
        "runs": runs,
        "median_saving_ms": {k: statistics.median(r["saving_ms"] for r in v) for k, v in runs.items()},
    }
    for name, rs in runs.items():
        savings = [r["saving_ms"] for r in rs]
        print(
            f"{name}: before {statistics.median(r['before_ms'] for r in rs):.3f} ms, after"
            f" {statistics.median(r['after_ms'] for r in rs):.3f} ms, saving {statistics.median(savings):.3f}"
            f" [{min(savings):.3f} … {max(savings):.3f}] ms over {len(rs)} repeats",
            file=sys.stderr,
        )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

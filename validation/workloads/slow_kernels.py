"""Matmuls and attention kernels that run under their roof, one cause to a line, in a short training loop.

    line "fp32 contiguous"  x @ w, fp32 with TF32 off, both operands contiguous     the fp32 reference
    line "fp32 transposed"  xt.t() @ w, the same GEMM with A a transposed view       fp32, transposed operand
    line "bf16 transposed"  xt.t() @ w in bf16, A a transposed view                  16-bit, transposed operand
    line "flash"            SDPA in bf16, is_causal=True                             the flash kernel
    line "mask"             the same attention with an explicit boolean causal mask  the efficient (or math) kernel
    line "fp32 attention"   SDPA in fp32, is_causal=True                             no flash: efficient or math
    line "head_dim"         SDPA in bf16, is_causal=True, head_dim 200 (`--odd-dim`) the kernel's 256-wide tile

Only the weights and the attention inputs learn (the GEMMs' activations take no gradient), so each GEMM line
has one backward GEMM (its weight's gradient) and each attention line its backward kernel. Which backend runs
is torch's choice (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp): on an H100 with a recent cuDNN it
tries cuDNN first, which takes the mask but no fp32; with torch 2.11 it ran head_dim 200 too, forward and
backward, in kernels whose names give a 256-wide head-dim tile (`..._64x64x256_...`). The sizes make every
line at least 5 % of an H100's step. `--smoke` runs tiny sizes (on the CPU too) to check the script.
`--tf32` runs the fp32 lines on TF32 tensor cores instead: there Hopper's kernels want both operands K-major
(16-bit ones read either layout), so the transposed line's layout is a cause of its own.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser, train  # noqa: E402


class SlowKernels(torch.nn.Module):
    def __init__(self, n: int, nb: int, batch: int, heads: int, seq: int, dim: int, odd_dim: int,
                 fp32_batch: int, fp32_seq: int, device: str) -> None:
        super().__init__()
        f32, bf16 = torch.float32, torch.bfloat16
        self.w32a = torch.nn.Parameter(torch.randn(n, n, device=device, dtype=f32) / n**0.5)
        self.w32b = torch.nn.Parameter(torch.randn(n, n, device=device, dtype=f32) / n**0.5)
        self.wb = torch.nn.Parameter(torch.randn(nb, nb, device=device, dtype=bf16) / nb**0.5)
        self.x32 = torch.randn(n, n, device=device, dtype=f32)  # (M, K), contiguous
        self.x32t = torch.randn(n, n, device=device, dtype=f32)  # stored (K, M): used as a transposed view
        self.xbt = torch.randn(nb, nb, device=device, dtype=bf16)  # stored (K, M): used as a transposed view

        def qkv(b: int, s: int, d: int, dtype: torch.dtype) -> torch.nn.ParameterList:
            return torch.nn.ParameterList(
                torch.nn.Parameter(torch.randn(b, heads, s, d, device=device, dtype=dtype)) for _ in range(3))

        self.flash = qkv(batch, seq, dim, bf16)
        self.masked = qkv(batch, seq, dim, bf16)
        self.fp32 = qkv(fp32_batch, fp32_seq, dim, f32)
        self.odd = qkv(batch, seq, odd_dim, bf16)
        self.causal_mask: torch.Tensor
        self.register_buffer("causal_mask", torch.ones(seq, seq, device=device, dtype=torch.bool).tril())

    def forward(self) -> list[torch.Tensor]:
        y1 = self.x32 @ self.w32a  # fp32 contiguous
        y2 = self.x32t.t() @ self.w32b  # fp32 transposed
        y3 = self.xbt.t() @ self.wb  # bf16 transposed
        (q1, k1, v1), (q2, k2, v2) = self.flash, self.masked
        (q3, k3, v3), (q4, k4, v4) = self.fp32, self.odd
        a1 = F.scaled_dot_product_attention(q1, k1, v1, is_causal=True)  # flash
        a2 = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=self.causal_mask)  # mask
        a3 = F.scaled_dot_product_attention(q3, k3, v3, is_causal=True)  # fp32 attention
        a4 = F.scaled_dot_product_attention(q4, k4, v4, is_causal=True)  # head_dim
        return [y1, y2, y3, a1, a2, a3, a4]


def main() -> None:
    p = parser(__doc__, steps=60, batch=16)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script (on the CPU too)")
    p.add_argument("--n", type=int, default=4096, help="the fp32 GEMMs' M = N = K")
    p.add_argument("--nb", type=int, default=10240, help="the bf16 GEMM's M = N = K")
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--dim", type=int, default=64, help="head_dim of every attention line but head_dim")
    p.add_argument("--odd-dim", type=int, default=200, help="head_dim of the head_dim line")
    p.add_argument("--fp32-batch", type=int, default=4)
    p.add_argument("--fp32-seq", type=int, default=2048)
    p.add_argument("--tf32", action="store_true", help="fp32 matmuls on TF32 tensor cores (default: off)")
    args = p.parse_args()
    if args.smoke:
        args.n, args.nb, args.batch, args.heads, args.seq = 64, 64, 2, 2, 32
        args.fp32_batch, args.fp32_seq, args.dim, args.odd_dim = 2, 32, 16, 24
        args.steps = min(args.steps, 3)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.set_float32_matmul_precision("high" if args.tf32 else "highest")
    model = SlowKernels(args.n, args.nb, args.batch, args.heads, args.seq, args.dim, args.odd_dim,
                        args.fp32_batch, args.fp32_seq, args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)

    def loss_of() -> torch.Tensor:
        return torch.stack([y.float().mean() for y in model()]).sum()

    train("slow_kernels", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()

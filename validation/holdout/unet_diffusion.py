"""A diffusion UNet in the style of Stable Diffusion's denoiser (residual conv blocks with GroupNorm and SiLU,
a sinusoidal timestep embedding, self-attention at the lower resolutions, skip connections), trained on the
noise-prediction loss with random latents; bf16 autocast, AdamW."""

from __future__ import annotations

import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
from common import parser, train  # noqa: E402


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device).float() / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([args.cos(), args.sin()], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_proj = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(32, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_proj(F.silu(t))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class AttnBlock(nn.Module):
    def __init__(self, ch: int, heads: int = 8):
        super().__init__()
        self.norm = nn.GroupNorm(32, ch)
        self.qkv = nn.Linear(ch, 3 * ch)
        self.proj = nn.Linear(ch, ch)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        y = self.norm(x).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(y).view(b, h * w, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, h * w, c)
        return x + self.proj(y).transpose(1, 2).reshape(b, c, h, w)


class UNet(nn.Module):
    def __init__(self, ch: int = 128, mult: tuple[int, ...] = (1, 2, 4), attn_from: int = 1):
        super().__init__()
        temb = ch * 4
        self.time_mlp = nn.Sequential(nn.Linear(ch, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
        self.down, self.down_attn, self.downsample = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        chans, c = [ch], ch
        for i, m in enumerate(mult):
            self.down.append(ResBlock(c, ch * m, temb))
            c = ch * m
            self.down_attn.append(AttnBlock(c) if i >= attn_from else nn.Identity())
            chans.append(c)
            self.downsample.append(nn.Conv2d(c, c, 3, stride=2, padding=1) if i < len(mult) - 1 else nn.Identity())
        self.mid1, self.mid_attn, self.mid2 = ResBlock(c, c, temb), AttnBlock(c), ResBlock(c, c, temb)
        self.up, self.up_attn, self.upsample = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for i, m in reversed(list(enumerate(mult))):
            self.up.append(ResBlock(c + chans.pop(), ch * m, temb))
            c = ch * m
            self.up_attn.append(AttnBlock(c) if i >= attn_from else nn.Identity())
            self.upsample.append(nn.Upsample(scale_factor=2, mode="nearest") if i > 0 else nn.Identity())
        self.norm_out = nn.GroupNorm(32, c)
        self.conv_out = nn.Conv2d(c, 4, 3, padding=1)
        self.ch = ch

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        temb = self.time_mlp(timestep_embedding(t, self.ch))
        h = self.conv_in(x)
        skips = []
        for block, attn, down in zip(self.down, self.down_attn, self.downsample, strict=True):
            h = attn(block(h, temb))
            skips.append(h)
            h = down(h)
        h = self.mid2(self.mid_attn(self.mid1(h, temb)), temb)
        for block, attn, up in zip(self.up, self.up_attn, self.upsample, strict=True):
            h = attn(block(torch.cat([h, skips.pop()], dim=1), temb))
            h = up(h)
        return self.conv_out(F.silu(self.norm_out(h)))


def main() -> None:
    p = parser(__doc__, steps=60, batch=16)
    p.add_argument("--size", type=int, default=64, help="latent height and width")
    p.add_argument("--ch", type=int, default=128)
    args = p.parse_args()
    torch.manual_seed(0)
    model = UNet(args.ch).to(args.device).train()
    x0 = torch.randn(args.batch, 4, args.size, args.size, device=args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss_of() -> torch.Tensor:
        t = torch.randint(0, 1000, (args.batch,), device=args.device)
        noise = torch.randn_like(x0)
        alpha = (1 - t.float() / 1000)[:, None, None, None]
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            pred = model(alpha.sqrt() * x0 + (1 - alpha).sqrt() * noise, t)
        return F.mse_loss(pred.float(), noise)

    train("unet_diffusion", args, model, loss_of, optimizer)


if __name__ == "__main__":
    main()

"""BERT-base masked-LM training steps (randomly initialised, nothing downloaded), for brrrtui to record.

The model of Ivanov et al. 2021 ("Data Movement Is All You Need"): BERT encoder layers (12 x hidden 768,
12 heads, FFN 3072), batch 8, sequence 512, fp32 by default. Eager attention by default, so the attention
scores, softmax, dropout and the weighted sum are separate kernels as in the paper (--attn sdpa fuses them).
The step is forward, backward and AdamW on one fixed random batch (15% of positions carry labels).

    python validation/bert_step.py --steps 12                    # GPU: fp32, B=8, T=512
    python -m brrrtui record -o bert.brrr validation/bert_step.py --steps 12
    python validation/bert_step.py --steps 12 --trace bert.json.gz   # a plain torch.profiler trace instead
    python validation/bert_step.py --smoke                       # CPU: 2 tiny layers, 3 steps

Then `python validation/op_classes.py bert.brrr` (or bert.json.gz) gives the FLOP and time shares per class.
Prints `step i loss x dt_ms y` each step and `RESULT {"steps": .., "mean_step_ms": .., ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch


def build_model(args: argparse.Namespace, device: torch.device) -> torch.nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=30522,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq),
    )
    config._attn_implementation = args.attn
    return BertForMaskedLM(config).to(device).train()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument(
        "--attn", choices=["eager", "sdpa"], default="eager", help="eager: unfused, as in the paper"
    )
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (default fp32, as in the paper)")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cpu")
    p.add_argument("--trace", help="export a torch.profiler Chrome trace of --trace-steps steps here")
    p.add_argument("--trace-steps", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="2 tiny layers, B=2, T=64, 3 steps (CPU test)")
    p.add_argument("--warmup", type=int, default=2, help="steps left out of mean/median (and before --trace)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.environ.get("OUT"), help="write bert_step_result.json here ($OUT)")
    args = p.parse_args(argv)
    if args.smoke:
        args.layers, args.hidden, args.heads, args.batch, args.seq, args.steps = 2, 128, 2, 2, 64, 3
        args.warmup = min(args.warmup, 1)
        args.trace_steps = min(args.trace_steps, 1)

    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    model = build_model(args, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    vocab = model.config.vocab_size
    input_ids = torch.randint(0, vocab, (args.batch, args.seq), device=device, generator=gen)
    masked = torch.rand(args.batch, args.seq, device=device, generator=gen) < 0.15
    labels = torch.where(masked, input_ids, torch.full_like(input_ids, -100))
    attention_mask = torch.ones_like(input_ids)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"bert_step: {n_params / 1e6:.1f}M params, layers={args.layers} B={args.batch} T={args.seq} "
        f"attn={args.attn} bf16={args.bf16} device={device}",
        flush=True,
    )

    prof = None
    trace_range = range(args.warmup, args.warmup + args.trace_steps) if args.trace else range(0)
    step_ms: list[float] = []
    for step in range(args.steps):
        if step == trace_range.start and args.trace:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
            prof = profile(activities=activities, record_shapes=True, with_flops=True)
            prof.__enter__()
        t0 = time.perf_counter()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        traced = " (traced)" if step in trace_range else ""
        print(f"step {step} loss {loss.item():.3f} dt_ms {step_ms[-1]:.2f}{traced}", flush=True)
        if prof is not None and step == trace_range.stop - 1:
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(args.trace)
            print(f"trace of steps {trace_range.start}..{step} -> {args.trace}", flush=True)
            prof = None

    timed = step_ms[args.warmup :] if len(step_ms) > args.warmup else step_ms
    result = {
        "steps": len(step_ms),
        "warmup": len(step_ms) - len(timed),
        "mean_step_ms": round(statistics.fmean(timed), 4) if timed else None,
        "median_step_ms": round(statistics.median(timed), 4) if timed else None,
        "step_ms": [round(v, 4) for v in step_ms],
        "script": "bert_step",
        "device": str(device),
        "batch": args.batch,
        "seq": args.seq,
        "layers": args.layers,
        "attn": args.attn,
        "bf16": args.bf16,
        "params": n_params,
        "traced_steps": list(trace_range),
    }
    print("RESULT " + json.dumps(result), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bert_step_result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

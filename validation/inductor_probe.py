"""What Inductor tells about the kernels it generates, on this machine's torch: provenance stack traces per
kernel (config.trace.provenance_tracking_level=1, read from CompiledFxGraph.post_compile), and what a profiler
window sees of a compiled step (the launch ops Inductor wraps in record_function, their shapes and kwargs).

    python validation/inductor_probe.py OUT.json     # a GPU machine; prints a summary, writes OUT.json
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))


def main() -> None:
    out_path = sys.argv[1]
    import torch._inductor.config as cfg
    from torch._inductor.output_code import CompiledFxGraph

    cfg.trace.provenance_tracking_level = 1
    graphs: list[str] = []
    original = CompiledFxGraph.post_compile

    def post_compile(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        graphs.append(getattr(self, "inductor_provenance_stack_traces_str", None) or "")
        return original(self, *a, **k)

    CompiledFxGraph.post_compile = post_compile
    from train_gpt import GPT  # type: ignore[import-not-found]

    model = GPT(vocab=50304, block=1024, layers=2, heads=12, dim=768).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_model = torch.compile(model)
    x = torch.randint(0, 50257, (8, 1024), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    ev = prof.profiler.kineto_results.events()
    triton_ops = []
    for e in ev:
        if e.name().startswith("triton_") and e.device_type() == torch.autograd.DeviceType.CPU:
            entry = {"name": e.name(), "shapes": e.shapes(), "dtypes": e.dtypes()}
            for attr in ("kwinputs", "concrete_inputs"):
                try:
                    entry[attr] = repr(getattr(e, attr)())[:400]
                except Exception as err:  # noqa: BLE001
                    entry[attr] = f"error {err!r}"
            triton_ops.append(entry)
    names = sorted({e.name() for e in ev})
    parsed = [json.loads(g) if g else {} for g in graphs]
    result = {
        "torch": torch.__version__,
        "compile_s": compile_s,
        "graphs": len(graphs),
        "kernels_per_graph": [len(p) for p in parsed],
        "provenance": parsed,
        "triton_cpu_ops": triton_ops[:60],
        "kineto_event_api": [a for a in dir(ev[0]) if not a.startswith("_")],
        "event_names": names[:400],
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1, default=repr)
    print(json.dumps({k: result[k] for k in ("torch", "compile_s", "graphs", "kernels_per_graph")}))
    print("sample provenance:", json.dumps(parsed[0], indent=1)[:3000] if parsed else None)
    print("sample triton ops:", json.dumps(triton_ops[:3], indent=1, default=repr))


if __name__ == "__main__":
    main()

"""What a profiler window costs, piece by piece, on a GPT-2-small training step (examples/train_gpt.py's model).

    python -m benchmarks.bench_window_cost                 # GPU, ~1 min
    python -m benchmarks.bench_window_cost --smoke         # CPU, tiny model

Baseline (named "plain"): median step time with nothing enabled, measured in the same run. Then the same steps
inside a Kineto session with CPU+CUDA activities, + record_shapes (what brrrtui records), + brrrtui's line
tagger (TorchFunctionMode + one profiler scope per torch call). For the full configuration it also times
closing the session (the stall the training thread sees) and converting its events to rows, per event.
Prints ratios against "plain".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_train_gpt():  # noqa: ANN201
    spec = importlib.util.spec_from_file_location("train_gpt", os.path.join(ROOT, "examples", "train_gpt.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8, help="steps timed per configuration")
    p.add_argument("--smoke", action="store_true", help="tiny model on the CPU")
    p.add_argument("--out", default=os.environ.get("OUT"))
    args = p.parse_args()

    import torch

    from brrrtui.capture.convert import Interner, convert_events
    from brrrtui.capture.lines import SPAN_PREFIX, LineTable, LineTagger, UserFrames
    from brrrtui.capture.session import ProfilerSession
    from brrrtui.contract.userfiles import is_user_file

    tg = load_train_gpt()
    cuda = torch.cuda.is_available() and not args.smoke
    dev = torch.device("cuda" if cuda else "cpu")
    layers, batch, seq, vocab = (12, 16, 1024, 50304) if cuda else (2, 2, 64, 4096)
    model = tg.GPT(vocab, max(seq, 64), layers, 12 if cuda else 2, 768 if cuda else 64).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)

    def step() -> float:
        t0 = time.perf_counter()
        data = torch.randint(0, vocab, (batch, seq + 1), device=dev)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=cuda):
            loss = model(data[:, :-1], data[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    for _ in range(3):
        step()  # warm-up

    def timed(record_shapes: bool, tagger: bool) -> tuple[float, dict]:
        session = ProfilerSession(torch, cuda)
        if not record_shapes:
            session.config = torch.autograd.ProfilerConfig(
                torch.autograd.ProfilerState.KINETO, False, False, False, False, False,
                torch._C._profiler._ExperimentalConfig(), "",
            )  # fmt: skip
        session.start()
        mode = LineTagger(LineTable(), UserFrames(is_user_file)) if tagger else None
        if mode:
            mode.__enter__()
        times = [step() for _ in range(args.steps)]
        if mode:
            mode.__exit__(None, None, None)
        t0 = time.perf_counter()
        result = session.stop()
        t1 = time.perf_counter()
        events = result.events()
        t2 = time.perf_counter()
        convert_events(events, 0, Interner(), SPAN_PREFIX)
        t3 = time.perf_counter()
        return statistics.median(times), {
            "events": len(events), "stop_ms": (t1 - t0) * 1e3, "events_ms": (t2 - t1) * 1e3,
            "convert_ms": (t3 - t2) * 1e3, "convert_us_per_event": (t3 - t2) / max(1, len(events)) * 1e6,
        }  # fmt: skip

    rows = []
    plain = statistics.median([step() for _ in range(args.steps)])
    rows.append(("plain", plain, {}))
    for name, shapes, tagger in (("kineto cpu+cuda", False, False), ("+ record_shapes", True, False),
                                 ("+ line tagger (brrrtui)", True, True)):  # fmt: skip
        ms, extra = timed(shapes, tagger)
        rows.append((name, ms, extra))
    plain_again = statistics.median([step() for _ in range(args.steps)])
    rows.append(("plain (again)", plain_again, {}))

    print(f"\n{'configuration':28} {'step ms':>9} {'vs plain':>9}  details")
    for name, ms, extra in rows:
        print(
            f"{name:28} {ms:9.2f} {ms / plain:9.2f}x  {json.dumps({k: round(v, 2) for k, v in extra.items()})}"
        )
    steps_per_window = args.steps
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_window_cost.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if cuda else "cpu", "steps": steps_per_window,
                       "rows": [{"name": n, "step_ms": m, **e} for n, m, e in rows]}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

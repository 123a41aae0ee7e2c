"""examples/train_gpt.py (GPT-2 small, eager) with one of the fixes brrrtui advises applied, for
validation/savings.py's A/B timing; train_gpt.py itself is left as it is (its line numbers and text are what
brrrtui's findings and the TUI snapshots point at).

    python validation/workloads/gpt2_eager_fixes.py --compile-block [train_gpt.py's options]
    python validation/workloads/gpt2_eager_fixes.py --compile-loss  [train_gpt.py's options]

--compile-block  torch.compile each Block (Block.forward: the residual add + LayerNorm chains brrrtui's fusion
                 finding names, whose advice is "torch.compile the function `forward`"); one graph, shared by
                 the 12 blocks (regional compilation: no recompilation per block).
--compile-loss   only the cross-entropy is compiled: train_gpt.py's `F.cross_entropy(...)` in GPT.forward
                 resolves `F` in its module, which gets a copy of torch.nn.functional whose cross_entropy is
                 torch.compile'd (log_softmax + nll_loss, forward and backward, become fused kernels).
Without either flag it is train_gpt.py unchanged.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import types

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_train_gpt() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("train_gpt", os.path.join(ROOT, "examples", "train_gpt.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def with_compiled_loss() -> types.ModuleType:
    """A copy of torch.nn.functional whose cross_entropy is compiled."""
    fn = types.ModuleType("functional_compiled_loss")
    fn.__dict__.update({k: v for k, v in F.__dict__.items() if not k.startswith("__")})

    def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)

    fn.cross_entropy = torch.compile(cross_entropy)
    return fn


def apply_fixes(tg: types.ModuleType, compile_block: bool, compile_loss: bool) -> None:
    base = tg.GPT

    class FixedGPT(base):  # type: ignore[misc, valid-type]
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, **k)
            if compile_block:
                for block in self.h:
                    block.compile()

    tg.GPT = FixedGPT
    if compile_loss:
        tg.F = with_compiled_loss()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compile-block", action="store_true", help="torch.compile each Block")
    p.add_argument("--compile-loss", action="store_true", help="torch.compile only the cross-entropy")
    args, rest = p.parse_known_args(argv)
    tg = load_train_gpt()
    apply_fixes(tg, args.compile_block, args.compile_loss)
    print(
        f"gpt2_eager_fixes: compile_block={args.compile_block} compile_loss={args.compile_loss}", flush=True
    )
    return tg.main(rest)


if __name__ == "__main__":
    sys.exit(main())

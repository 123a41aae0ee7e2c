"""A fusion fix on the H200, before and after: GPT-2 small eager (validation/workloads/gpt2_eager_fixes.py, which
runs examples/train_gpt.py, 120 steps, default `brrrtui record`) and the same with `--compile-block`
(torch.compile of Block.forward, the cure of brrrtui's Block fusion finding; predicted ~3.8 ms a step)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEFORE = os.path.join(ROOT, "tests", "fixtures", "h200_gpt2_eager_before_compile.brrr.gz")
AFTER = os.path.join(ROOT, "tests", "fixtures", "h200_gpt2_compile_block_after.brrr.gz")
MS = 1e6


def test_diff_shows_the_fused_kernels_gone_and_the_memory_time_saved():
    r = subprocess.run(
        [sys.executable, "-m", "brrrtui", "diff", "--json", BEFORE, AFTER],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    run = {c["what"]: c for c in d["run"]}
    # median unprofiled step 45.5 -> 42.0 ms; the step-to-step spread of this GPU's steps (sigma ~4 ms) keeps
    # the change inside the noise band, the memory-bound time shows where it came from
    step = run["step time"]
    assert round(step["before"] / MS, 1) == 45.5 and round(step["after"] / MS, 1) == 42.0
    assert run["GPU memory"]["change"] < -4.5 * MS and abs(run["GPU compute"]["change"]) < 1.0 * MS
    kernels = {k["name"]: k for k in d["kernels"]}
    ln_backward = [k for n, k in kernels.items() if "GammaBetaBackward" in n]
    # the LayerNorm backward of 12 blocks x 2 norms fused into the compiled blocks' kernels (ln_f's remains)
    assert [k["calls"] for k in ln_backward] == [{"before": 25.0, "after": 1.0}]
    lines = {x["before"]["line"]: x for x in d["lines"] if x["before"] and x["after"]}
    assert lines[68]["change_ns"] < -2.5 * MS and lines[67]["change_ns"] < -1.5 * MS  # the Block's residuals

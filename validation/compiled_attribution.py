"""How much of a torch.compile'd run's kernel time brrrtui attributes to the user's model lines.

    python validation/compiled_attribution.py RUN.brrr [--model-file train_gpt.py]

Over the analysed (steady-state) windows: the GPU time of kernels whose launch op took its line from
Inductor's provenance (compiled kernels), the share of it on lines of the model file (weighted by each
kernel's line shares), on generated files (must be none), and the Triton kernels that have bytes and a regime.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from analyzers.analyze import analyze  # noqa: E402
from analyzers.link.compiled import kernel_line_shares  # noqa: E402
from brrrtui.contract.userfiles import is_user_file  # noqa: E402
from brrrtui.recording.load import load_trace  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording")
    p.add_argument("--model-file", default="train_gpt.py", help="basename of the file holding the model")
    args = p.parse_args()
    a = analyze(load_trace(args.recording))
    t, links = a.trace, a.links
    dur = t.gpu.dur_ns.astype(np.float64)
    ops = links.kernel_op
    compiled = (ops >= 0) & links.op_compiled[np.maximum(ops, 0)] if len(links.op_compiled) else ops < -1
    rows, lines, weight = kernel_line_shares(
        t, links.kernel_op, links.kernel_line, links.op_compiled, links.compiled
    )
    on_compiled = compiled[rows]
    files = [t.lines[i].file for i in lines.tolist()]
    model = np.array([os.path.basename(f) == args.model_file for f in files], dtype=bool)
    generated = np.array([not is_user_file(f) for f in files], dtype=bool)
    w_ns = dur[rows] * weight
    triton = np.array([t.name(n).startswith("triton_") for n in t.gpu.name.tolist()], dtype=bool)
    total_compiled = float(dur[compiled].sum())
    out = {
        "recording": args.recording,
        "phase": a.phase.value,
        "windows": list(a.windows),
        "kernels_gpu_ns": float(dur.sum()),
        "compiled_kernels": int(compiled.sum()),
        "compiled_gpu_ns": total_compiled,
        "compiled_share_of_gpu": total_compiled / float(dur.sum()) if len(dur) else None,
        "compiled_on_model_file": float(w_ns[on_compiled & model].sum()) / total_compiled
        if total_compiled
        else None,
        "compiled_on_generated_or_library_files": float(w_ns[on_compiled & generated].sum()) / total_compiled
        if total_compiled
        else None,
        "triton_kernels": int(triton.sum()),
        "triton_with_bytes": int((triton & np.isfinite(a.kernel_bytes)).sum()),
        "triton_with_flops": int((triton & np.isfinite(a.kernel_flops)).sum()),
        "triton_regimes": {
            r: int((triton & (a.kernel_regime == code)).sum())
            for r, code in (("compute", 0), ("memory", 1), ("overhead", 2))
        },
        "no_line_gpu_share": float(dur[links.kernel_line < 0].sum()) / float(dur.sum()) if len(dur) else None,
        "top_lines": [
            {"line": str(s.line), "gpu_ms": s.gpu_ns / 1e6, "regime": s.regime.value} for s in a.lines[:12]
        ],
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

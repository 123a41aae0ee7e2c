"""Where a recording's analysed GPU time lands, by the file of each kernel's line and of its library line,
compiled kernels apart: the workload file, the training loop's common.py, generated code (Inductor/Triton's
caches), another user file, or a library. Prints one JSON object (top lines, top library lines, kernels with no
line, the recorded graph breaks and recompiles).

    python validation/compiled_files.py RECORDING MODEL_FILE      # MODEL_FILE: basename of the workload file
"""

from __future__ import annotations

import collections
import json
import os
import sys

import numpy as np

from analyzers.analyze import analyze
from brrrtui.contract.userfiles import _GENERATED_MARKERS, is_user_file, package_path
from brrrtui.recording.load import load_trace

if len(sys.argv) != 3:
    raise SystemExit(__doc__.strip().splitlines()[-1].strip())
path, model_file = sys.argv[1:]
trace = load_trace(path)
a = analyze(trace)
t, links = a.trace, a.links
dur = t.gpu.dur_ns.astype(np.float64)
total = float(dur.sum()) or 1.0
ops = links.kernel_op
op_compiled = links.op_compiled
compiled = (ops >= 0) & op_compiled[np.maximum(ops, 0)] if len(op_compiled) else np.zeros(len(dur), bool)
names = [t.name(n) for n in t.gpu.name.tolist()]
places = links.compiled.by_name if links.compiled is not None else {}
op_name = np.where(compiled, t.ops.name[np.maximum(ops, 0)] if len(op_compiled) else -1, -1)
# (row, line, library line, weight): a compiled kernel over several lines by its shares, else weight 1
rows = []
for i in np.nonzero(links.kernel_line >= 0)[0].tolist():
    pl = places.get(int(op_name[i])) if compiled[i] else None
    if pl and len(pl) >= 2:
        rows += [(i, ln, lib, w) for ln, lib, w in pl]
    else:
        rows.append((i, int(links.kernel_line[i]), int(links.kernel_lib_line[i]), 1.0))


def where(file):
    if os.path.basename(file) == model_file:
        return "workload file " + model_file
    if os.path.basename(file) == "common.py" and "workloads" in file:
        return "workloads/common.py"
    if any(m in file for m in _GENERATED_MARKERS):
        return "generated (Inductor/Triton cache)"
    if is_user_file(file):
        return "other user file"
    rel = package_path(file) or file
    return "library " + rel.split("/", 1)[0]


def loc(i):
    s = t.lines[i]
    rel = package_path(s.file) or s.file.rsplit("/", 2)[-1]
    return f"{rel}:{s.line} {s.function}"


by_file = {"compiled": collections.Counter(), "not compiled": collections.Counter()}
by_lib = {"compiled": collections.Counter(), "not compiled": collections.Counter()}
by_line = collections.Counter()
line_kernels = collections.defaultdict(collections.Counter)
lib_line = collections.Counter()
for i, ln, lib, w in rows:
    kind = "compiled" if compiled[i] else "not compiled"
    ns = dur[i] * w
    by_file[kind][where(t.lines[ln].file)] += ns
    by_lib[kind]["no library line" if lib < 0 else where(t.lines[lib].file)] += ns
    by_line[(ln, kind)] += ns
    line_kernels[ln][names[i][:70]] += ns
    if lib >= 0:
        lib_line[(lib, kind)] += ns
no_line = collections.Counter()
no_line_n = collections.Counter()
for i in np.nonzero(links.kernel_line < 0)[0].tolist():
    no_line[names[i][:80]] += dur[i]
    no_line_n[names[i][:80]] += 1
meta_rows = t.meta.get("compiled_kernels") or []


def pct(c: collections.Counter) -> dict:
    return {k: round(100 * v / total, 2) for k, v in c.most_common()}


out = {
    "recording": path,
    "phase": a.phase.value,
    "windows": list(a.windows),
    "gpu_ms": total / 1e6,
    "kernels": len(dur),
    "no_line_pct": round(100 * float(dur[links.kernel_line < 0].sum()) / total, 2),
    "provenance_pct": round(100 * float(dur[compiled].sum()) / total, 2),
    "triton_pct": round(100 * sum(d for d, n in zip(dur, names, strict=True) if n.startswith("triton_")) / total, 2),
    "meta_compiled_kernel_rows": len(meta_rows),
    "meta_compiled_kernel_names": len({r[0] for r in meta_rows if isinstance(r, list) and r}),
    "meta_graph_breaks": t.meta.get("graph_breaks"),
    "meta_recompiles": t.meta.get("recompiles"),
    "line_file_pct": {k: pct(c) for k, c in by_file.items()},
    "library_line_file_pct": {k: pct(c) for k, c in by_lib.items()},
    "top_lines": [
        {"line": loc(ln), "kind": kind, "gpu_ms": round(ns / 1e6, 3), "pct": round(100 * ns / total, 2),
         "top_kernels": [(k, round(v / 1e6, 3)) for k, v in line_kernels[ln].most_common(4)]}
        for (ln, kind), ns in by_line.most_common(15)
    ],
    "top_library_lines": [
        {"line": loc(ln), "kind": kind, "gpu_ms": round(ns / 1e6, 3), "pct": round(100 * ns / total, 2)}
        for (ln, kind), ns in lib_line.most_common(15)
    ],
    "no_line_kernels": [(k, no_line_n[k], round(v / 1e6, 3)) for k, v in no_line.most_common(12)],
}
print(json.dumps(out, indent=1))

#!/usr/bin/env bash
# Lines of torch.compile'd library models under brrrtui, with Inductor on the GPU: Hugging Face GPT-2 small
# (validation/workloads/hf_gpt2_compiled.py: hf_gpt2.py with the model compiled) and torchvision ResNet-50
# (validation/workloads/resnet50.py --compile), each run plain and under `brrrtui record` with
# TORCH_LOGS=graph_breaks,recompiles and a fresh
# Inductor cache. For each: graph-break / recompile log lines, step medians, the report (text and JSON),
# validation/compiled_attribution.py, and where the steady GPU time lands by file (the workload file, the
# training loop's common.py, transformers / torchvision, torch, generated code, no line) and by library line.
# The whole script keeps under ~9 minutes (a deadline caps every timeout). Everything lands in
# $OUT/compile_models.tar.gz; summary.txt and the gzipped recordings (when under 4 MB) next to it.
#   bash validation/run_compile_models_h200.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
DEADLINE=$((SECONDS + 500))
echo "commit $(cat REVISION 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$R/README.txt"
echo "command: bash validation/run_compile_models_h200.sh" >>"$R/README.txt"
python -c "import torch, torchvision, transformers; print('torch', torch.__version__, torch.cuda.get_device_name(),
'torchvision', torchvision.__version__, 'transformers', transformers.__version__)" | tee -a "$R/README.txt"

left() { # the smaller of $1 seconds and what is left before the deadline (at least 5)
    local l=$((DEADLINE - SECONDS))
    [ "$l" -lt 5 ] && l=5
    [ "$1" -lt "$l" ] && l=$1
    echo "$l"
}

run_case() { # name, plain timeout, recorded timeout, script and its flags
    local name=$1 t_plain=$2 t_rec=$3 model_file
    shift 3
    model_file=${MODEL_FILE:-$(basename "$1")}  # the file holding the model call
    for mode in plain rec; do
        export TORCHINDUCTOR_CACHE_DIR=$R/inductor_cache_${name}_$mode
        local t0=$SECONDS
        if [ "$mode" = plain ]; then
            TORCH_LOGS=graph_breaks,recompiles timeout "$(left "$t_plain")" python "$@" --out "$R" \
                --name "${name}_plain" >"$R/${name}_plain.log" 2>&1
        else
            TORCH_LOGS=graph_breaks,recompiles timeout "$(left "$t_rec")" python -m brrrtui record \
                -o "$R/$name.brrr" "$@" --out "$R" --name "${name}_rec" >"$R/${name}_rec.log" 2>&1
        fi
        echo "$name $mode rc=$? wall $((SECONDS - t0)) s, graph-break lines $(grep -c 'Graph break' "$R/${name}_$mode.log")," \
            "recompile lines $(grep -c 'Recompiling' "$R/${name}_$mode.log")," \
            "brrrtui-code lines $(grep -c '_getframe\|RecordFunctionFast\|brrrtui/' "$R/${name}_$mode.log")" |
            tee -a "$R/summary.txt"
        rm -rf "$TORCHINDUCTOR_CACHE_DIR"
    done
    python - "$R" "$name" <<'PY' | tee -a "$R/summary.txt"
import json, statistics, sys
r, name = sys.argv[1:]
for mode in ("plain", "rec"):
    try:
        d = json.load(open(f"{r}/{name}_{mode}_steps.json"))
    except OSError as e:
        print(name, mode, "no result:", e)
        continue
    s = d["steps_ms"]
    print(name, mode, "median", round(d["median_step_ms"], 2), "mean", round(d["mean_step_ms"], 2),
          "over steps", d["warmup"], "-", len(s) - 1, "first", round(s[0], 1))
PY
    [ -f "$R/$name.brrr" ] || { echo "$name: no recording" | tee -a "$R/summary.txt"; return; }
    timeout "$(left 90)" python -m brrrtui report --json "$R/$name.brrr" >"$R/${name}_report.json" 2>&1
    timeout "$(left 90)" python -m brrrtui report "$R/$name.brrr" >"$R/${name}_report.txt" 2>&1
    timeout "$(left 90)" python validation/compiled_attribution.py "$R/$name.brrr" --model-file "$model_file" \
        >"$R/${name}_attribution.json" 2>&1
    python - "$R/${name}_attribution.json" "$name" <<'PY' | tee -a "$R/summary.txt"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print(sys.argv[2], "attribution failed:", open(sys.argv[1]).read()[-400:])
    raise SystemExit
r4 = lambda v: None if v is None else round(v, 4)
print(sys.argv[2], "no-line share of GPU", r4(d["no_line_gpu_share"]), "compiled share", r4(d["compiled_share_of_gpu"]),
      "compiled on model file", r4(d["compiled_on_model_file"]),
      "compiled on generated/library files", r4(d["compiled_on_generated_or_library_files"]),
      "top lines", [(x["line"].rsplit("/", 1)[-1], round(x["gpu_ms"], 1)) for x in d["top_lines"][:8]])
PY
    timeout "$(left 90)" python - "$R/$name.brrr" "$model_file" >"$R/${name}_files.json" 2>&1 <<'PY'
# Where the analysed windows' GPU time lands, by the file of its line and of its library line.
import collections, json, os, sys
import numpy as np
sys.path.insert(0, os.getcwd())
from analyzers.analyze import analyze
from brrrtui.contract.userfiles import _GENERATED_MARKERS, is_user_file, package_path
from brrrtui.recording.load import load_trace

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
pct = lambda c: {k: round(100 * v / total, 2) for k, v in c.most_common()}
out = {
    "recording": path,
    "phase": a.phase.value,
    "windows": list(a.windows),
    "gpu_ms": total / 1e6,
    "kernels": len(dur),
    "no_line_pct": round(100 * float(dur[links.kernel_line < 0].sum()) / total, 2),
    "provenance_pct": round(100 * float(dur[compiled].sum()) / total, 2),
    "triton_pct": round(100 * sum(d for d, n in zip(dur, names) if n.startswith("triton_")) / total, 2),
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
PY
    python - "$R/${name}_files.json" "$name" <<'PY' | tee -a "$R/summary.txt"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print(sys.argv[2], "file split failed:", open(sys.argv[1]).read()[-600:])
    raise SystemExit
n = sys.argv[2]
print(n, f"steady GPU {d['gpu_ms']:.1f} ms, {d['kernels']} kernels, windows {d['windows']}: no line {d['no_line_pct']} %,"
      f" placed by Inductor provenance {d['provenance_pct']} %, triton {d['triton_pct']} %,"
      f" meta compiled_kernels rows {d['meta_compiled_kernel_rows']} ({d['meta_compiled_kernel_names']} names)")
for k, v in d["line_file_pct"].items():
    print(n, "line file %", k, v)
for k, v in d["library_line_file_pct"].items():
    print(n, "library-line file %", k, v)
for x in d["top_lines"][:6]:
    print(n, "line", x["line"], x["kind"], x["gpu_ms"], "ms", x["pct"], "%", x["top_kernels"][:2])
for x in d["top_library_lines"][:5]:
    print(n, "library line", x["line"], x["kind"], x["gpu_ms"], "ms", x["pct"], "%")
print(n, "no-line kernels (name, count, ms)", d["no_line_kernels"][:6])
PY
}

CASES=${CASES:-hf_gpt2 resnet50}  # CASES=hf_gpt2: that one only
[[ " $CASES " == *" hf_gpt2 "* ]] &&
    MODEL_FILE=hf_gpt2.py run_case hf_gpt2 150 180 validation/workloads/hf_gpt2_compiled.py --steps 60
[[ " $CASES " == *" resnet50 "* ]] && run_case resnet50 150 180 validation/workloads/resnet50.py --compile --steps 60
gzip -f "$R"/*.brrr
echo "elapsed $SECONDS s" | tee -a "$R/summary.txt"
cat "$R/summary.txt"
ls -la "$R" | tee "$R/files.txt"
tar -czf "${OUT:-.}/compile_models.tar.gz" -C "$R" --exclude='inductor_cache_*' .
cp "$R/summary.txt" "$R/README.txt" "${OUT:-.}/" 2>/dev/null
for f in "$R"/*.brrr.gz; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 4000000 ] && cp "$f" "${OUT:-.}/"
done
ls -la "${OUT:-.}"

#!/usr/bin/env bash
# Lines of a torch.compile'd script's eager code under brrrtui, with Inductor on the GPU: three ways of
# compiling GPT-2 small (the whole model; each Block through nn.Module.compile; only the cross-entropy through
# a compiled function), each run plain and under `brrrtui record` with TORCH_LOGS=graph_breaks,recompiles and
# a fresh Inductor cache. For each: graph-break / recompile log lines, step medians, the report, and
# validation/compiled_attribution.py (the steady windows' GPU time by line: compiled kernels on the model
# file, and the share with no line at all). Everything lands in $OUT/compile_lines.tar.gz.
#   bash validation/run_compile_lines_h200.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
echo "commit $(cat REVISION 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown); command: bash validation/run_compile_lines_h200.sh" >"$R/README.txt"
python -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$R/README.txt"

run_case() { # name, steps, script and its flags
    local name=$1 steps=$2
    shift 2
    for mode in plain rec; do
        export TORCHINDUCTOR_CACHE_DIR=$R/inductor_cache_${name}_$mode
        if [ "$mode" = plain ]; then
            TORCH_LOGS=graph_breaks,recompiles timeout 240 python "$@" --steps "$steps" --out "$R" \
                --name "${name}_plain" >"$R/${name}_plain.log" 2>&1
        else
            TORCH_LOGS=graph_breaks,recompiles timeout 300 python -m brrrtui record -o "$R/$name.brrr" "$@" \
                --steps "$steps" --out "$R" --name "${name}_rec" >"$R/${name}_rec.log" 2>&1
        fi
        echo "$name $mode rc=$? graph-break lines $(grep -c 'Graph break' "$R/${name}_$mode.log")," \
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
        s = json.load(open(f"{r}/{name}_{mode}_result.json"))["step_ms"]
    except OSError as e:
        print(name, mode, "no result:", e)
        continue
    t = s[10:]
    print(name, mode, "median", round(statistics.median(t), 2), "mean", round(statistics.mean(t), 2),
          "first", round(s[0], 1))
PY
    timeout 120 python -m brrrtui report --json "$R/$name.brrr" >"$R/${name}_report.json" 2>&1
    timeout 120 python -m brrrtui report "$R/$name.brrr" >"$R/${name}_report.txt" 2>&1
    timeout 120 python validation/compiled_attribution.py "$R/$name.brrr" >"$R/${name}_attribution.json" 2>&1
    python - "$R/${name}_attribution.json" "$name" <<'PY' | tee -a "$R/summary.txt"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print(sys.argv[2], "attribution failed:", open(sys.argv[1]).read()[-400:])
    raise SystemExit
print(sys.argv[2], "no-line share of GPU", round(d["no_line_gpu_share"], 4), "compiled share", round(d["compiled_share_of_gpu"], 4),
      "compiled on model file", round(d["compiled_on_model_file"], 4),
      "top lines", [(x["line"].rsplit("/", 1)[-1], round(x["gpu_ms"], 1)) for x in d["top_lines"][:8]])
PY
}

run_case full 300 examples/train_gpt.py --compile
run_case block 120 validation/workloads/gpt2_eager_fixes.py --compile-block
run_case loss 120 validation/workloads/gpt2_eager_fixes.py --compile-loss
gzip -f "$R"/*.brrr
cat "$R/summary.txt"
tar -czf "${OUT:-.}/compile_lines.tar.gz" -C "$R" .
cp "$R/summary.txt" "$R/block.brrr.gz" "${OUT:-.}/" 2>/dev/null
ls -la "$R"

#!/usr/bin/env bash
# torch.compile'd GPT-2 small with and without brrrtui (graph breaks, recompiles, step times; both compile
# cold: Inductor's provenance tracking is part of its cache key), the report and how much compiled-kernel
# time lands on the model's lines (validation/compiled_attribution.py); then the default capture's cost on
# eager GPT-2 (1000 steps) and the tiny-op loop (4000 steps) against the plain scripts in the same call.
# Everything lands in $OUT/compile.tar.gz.
#   bash validation/run_compile_h200.sh            # SKIP_BENCH=1: the compiled runs only
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
echo "commit $(cat REVISION 2>/dev/null || echo unknown); command: bash validation/run_compile_h200.sh" >"$R/README.txt"
export TORCHINDUCTOR_CACHE_DIR=$R/inductor_cache
(
    export TORCH_LOGS=graph_breaks,recompiles
    timeout 240 python examples/train_gpt.py --compile --steps 300 --out "$R" --name compile_plain >"$R/compile_plain.log" 2>&1
    echo "plain rc=$?"
    timeout 300 python -m brrrtui record -o "$R/compile.brrr" examples/train_gpt.py --compile --steps 300 --out "$R" \
        --name compile_rec >"$R/compile_rec.log" 2>&1
    echo "record rc=$?"
)
for f in plain rec; do
    echo "$f: graph-break lines $(grep -c 'Graph break' "$R/compile_$f.log"), recompile lines $(grep -c 'Recompiling' "$R/compile_$f.log"), brrrtui-code lines $(grep -c '_getframe\|RecordFunctionFast\|brrrtui/capture' "$R/compile_$f.log")"
done
python - "$R" <<'PY'
import json, sys, statistics
r = sys.argv[1]
for name in ("compile_plain", "compile_rec"):
    d = json.load(open(f"{r}/{name}_result.json"))
    s = d["step_ms"][10:]
    print(name, "median", round(statistics.median(s), 2), "mean", round(statistics.mean(s), 2), "first", round(d["step_ms"][0], 1))
PY
timeout 120 python -m brrrtui report --json "$R/compile.brrr" >"$R/compile_report.json" 2>&1
timeout 120 python -m brrrtui report "$R/compile.brrr" >"$R/compile_report.txt" 2>&1
timeout 120 python validation/compiled_attribution.py "$R/compile.brrr" | tee "$R/compile_attribution.json"
head -60 "$R/compile_report.txt"
rm -rf "$R/inductor_cache"
[ -n "${SKIP_BENCH:-}" ] || timeout 330 python benchmarks/bench_stream.py --rounds 1 --variants plain,windows --gpt-steps 1000 --tiny-steps 4000 \
    --out "$R" >"$R/bench_stream.log" 2>&1
echo "bench rc=$?"; tail -20 "$R/bench_stream.log"
gzip -f "$R"/*.brrr
tar -czf "${OUT:-.}/compile.tar.gz" -C "$R" .
ls -la "$R"

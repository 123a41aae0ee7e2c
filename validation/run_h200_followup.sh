#!/usr/bin/env bash
# The second H200 call of a validation round (after validation/run_h200_checks.sh), ~8.5 min, all files in
# $OUT/followup.tar.gz:
#   1. the four workloads under `brrrtui record` (recordings + reports; no plain runs: step 1 of the checks has them)
#   2. ncu (steady state, a partial step each) on GPT-2 eager and HF BERT against those reports
#   3. examples/known_regimes.py recorded (a time.sleep and a Python loop on their own lines)
#   4. GPT-2 eager recorded with --stream (unprofiled steps, for validation/unprofiled_lines.py)
#   5. the tiny-op loop, plain and recorded (benchmarks/bench_stream.py)
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
W=$(mktemp -d /tmp/followup.XXXXXX)
OUT=${OUT:-$PWD/followup_out}
mkdir -p "$OUT" "$W/workloads" "$W/ncu"
pack() { tar --exclude='*.ncu-rep' -czf "$OUT/followup.tar.gz" -C "$W" .; }
echo "=== 1. workloads ($SECONDS s)"
RUN_DIR="$W/workloads" PLAIN=0 T_RECORD=75 STEPS_GPT2_EAGER=150 STEPS_HF_GPT2=120 STEPS_HF_BERT=120 \
    STEPS_RESNET50=150 bash validation/run_workloads.sh >"$W/workloads.log" 2>&1
grep -E "record rc|phase|^note" "$W/workloads.log"; pack
for spec in gpt2_eager:examples/train_gpt.py:160 hf_bert:validation/workloads/hf_bert.py:140; do
    IFS=: read -r name script budget <<<"$spec"
    echo "=== 2. ncu $name ($SECONDS s, budget $budget s)"
    timeout --kill-after=5 "$budget" python validation/ncu_verdicts.py --script "$script" \
        --report "$W/workloads/${name}_report.json" --out "$W/ncu/$name" --skip-steps 4 --max-kernels 400 \
        --timeout $((budget - 10)) -- --steps 7 >"$W/ncu/$name.log" 2>&1
    echo "rc=$?"; grep -E "^ncu: [0-9]+ kernels|^GT_SUMMARY|^kernel agreement|^ERROR" "$W/ncu/$name.log"; pack
done
echo "=== 3. known_regimes ($SECONDS s)"
timeout 60 python -m brrrtui record -o "$W/known_regimes.brrr" examples/known_regimes.py --steps 60 \
    >"$W/known_regimes.log" 2>&1; echo "rc=$?"
python -m brrrtui report "$W/known_regimes.brrr" >"$W/known_regimes_report.txt" 2>&1
grep -E "known_regimes.py:(8[5-9]|9[01]) " "$W/known_regimes_report.txt"; pack
echo "=== 4. GPT-2 eager --stream ($SECONDS s)"
timeout 90 python -m brrrtui record --stream -o "$W/gpt2_stream.brrr" examples/train_gpt.py --steps 200 \
    >"$W/gpt2_stream.log" 2>&1; echo "rc=$?"
python validation/unprofiled_lines.py "$W/gpt2_stream.brrr" --json "$W/unprofiled_lines.json" 2>&1 | tail -14
pack
echo "=== 5. tiny loop ($SECONDS s)"
timeout 100 python benchmarks/bench_stream.py --rounds 1 --subjects tiny --variants plain,windows \
    --tiny-steps 4000 --out "$W/bench_tiny" >"$W/bench_tiny.log" 2>&1; echo "rc=$?"
tail -5 "$W/bench_tiny.log"
gzip -f "$W"/*.brrr
pack; echo "done in $SECONDS s"

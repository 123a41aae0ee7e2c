#!/usr/bin/env bash
# Recordings for three checks, on a GPU; everything lands in $OUT/verdicts.tar.gz:
# - the four workloads under `brrrtui record` with default options (their reports are scored against the
#   Nsight Compute CSVs of validation/results/issue17_h200/ncu/ by validation/ncu_verdicts.py, on any machine);
# - HF GPT-2 again with its vocabulary padded to 50304 (the `slow_gemm` fix), and `brrrtui diff` of the pair;
# - GPT-2 eager with `--stream`, and validation/unprofiled_lines.py on it (per-line overhead, unprofiled steps).
#   bash validation/run_verdicts_h200.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
RUN_DIR=$R PLAIN=0 STEPS_GPT2_EAGER=120 STEPS_HF_GPT2=120 STEPS_HF_BERT=120 STEPS_RESNET50=100 \
    bash validation/run_workloads.sh 2>&1 | tee "$R/workloads.log" | grep -v "^ "
t0=$SECONDS
timeout 300 python -m brrrtui record -o "$R/hf_gpt2_vocab50304.brrr" validation/workloads/hf_gpt2.py --steps 120 \
    --vocab 50304 --out "$R" --name hf_gpt2_vocab50304 >"$R/hf_gpt2_vocab50304.log" 2>&1
echo "hf_gpt2 --vocab 50304 record rc=$? in $((SECONDS - t0)) s"
python -m brrrtui diff "$R/hf_gpt2.brrr.gz" "$R/hf_gpt2_vocab50304.brrr" >"$R/diff_vocab.txt" 2>&1
echo "diff rc=$?"; head -40 "$R/diff_vocab.txt"
python -m brrrtui diff --json "$R/hf_gpt2.brrr.gz" "$R/hf_gpt2_vocab50304.brrr" >"$R/diff_vocab.json" 2>&1
t0=$SECONDS
timeout 300 python -m brrrtui record --stream -o "$R/gpt2_stream.brrr" examples/train_gpt.py --steps 200 \
    >"$R/gpt2_stream.log" 2>&1
echo "gpt2 --stream record rc=$? in $((SECONDS - t0)) s"
python validation/unprofiled_lines.py "$R/gpt2_stream.brrr" --json "$R/unprofiled_lines.json" \
    >"$R/unprofiled_lines.txt" 2>&1
echo "unprofiled_lines rc=$?"; head -30 "$R/unprofiled_lines.txt"
gzip -f "$R"/*.brrr
echo "commit $(cat REVISION 2>/dev/null || echo unknown); command: bash validation/run_verdicts_h200.sh" >"$R/README.txt"
tar -czf "${OUT:-.}/verdicts.tar.gz" -C "$R" .
ls -la "$R"

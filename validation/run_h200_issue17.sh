#!/usr/bin/env bash
# Issue 17's remaining H200 checks, in two device calls (each under 10 min); files land in $OUT, at most 8.
#   bash validation/run_h200_issue17.sh a   # ~5 min: savings.py (fusion_block, cross_entropy; records GPT-2
#                                           #   eager), the other three workloads recorded, known_regimes.py
#                                           #   recorded with a 2 ms and a 20 ms time.sleep
#   bash validation/run_h200_issue17.sh b   # ~4 min: Nsight Compute on the four workloads, the same calls of
#                                           #   every kernel name (--sample-invocations), raw CSVs only
#   bash validation/run_h200_issue17.sh c   # ~2.5 min: every call of a few names that run on many shapes
#                                           #   (bf16 casts, fills, copies), 40 launches in a steady step
# The comparisons run on any machine afterwards, from what comes back:
#   python validation/ncu_verdicts.py --csv ncu_<w>_raw.csv [--csv-extra ncu_<w>_named_raw.csv] --report <w>.brrr.gz --out DIR
# COMMIT (a file beside this script's repository root) names the commit the snapshot was made from.
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
PART=${1:-a}
W=$(mktemp -d /tmp/i17.XXXXXX)
OUT=${OUT:-$PWD/i17_out}
mkdir -p "$OUT"
COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "commit $COMMIT part $PART" | tee "$W/commit.txt"
pack() { tar -czf "$OUT/logs_$PART.tar.gz" -C "$W" --exclude='*.brrr' --exclude='*.brrr.gz' --exclude='*.ncu-rep' .; }

if [ "$PART" = a ]; then
    nvidia-smi -L; python -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())'
    echo "=== 1. savings ($SECONDS s)"
    OUT="$W" timeout 260 python validation/savings.py --out "$W/savings" --cases fusion_block,cross_entropy \
        --steps 50 --warmup 10 --record-steps 100 --timeout 200 >"$W/savings.log" 2>&1
    echo "rc=$?"; tail -8 "$W/savings.log"
    gzip -c "$W/savings/savings_gpt2_eager.brrr" >"$OUT/gpt2_eager.brrr.gz" 2>/dev/null; pack
    echo "=== 2. known_regimes, time.sleep 2 ms and 20 ms ($SECONDS s)"
    for ms in 2 20; do
        OUT="$W" timeout 60 python -m brrrtui record -o "$W/known_regimes_sleep$ms.brrr" examples/known_regimes.py \
            --steps 60 --sleep-ms "$ms" >"$W/known_regimes_sleep$ms.log" 2>&1; echo "record rc=$?"
        python -m brrrtui report "$W/known_regimes_sleep$ms.brrr" >"$W/known_regimes_sleep${ms}_report.txt" 2>&1
        python -m brrrtui report --json "$W/known_regimes_sleep$ms.brrr" >"$W/known_regimes_sleep${ms}_report.json" 2>&1
        grep -E "known_regimes.py:(8[0-9]|9[0-9]) " "$W/known_regimes_sleep${ms}_report.txt" | head -12
    done
    tar -czf "$OUT/known_regimes.tar.gz" -C "$W" known_regimes_sleep2.brrr known_regimes_sleep20.brrr; pack
    echo "=== 3. the other workloads recorded ($SECONDS s)"
    for spec in hf_gpt2:validation/workloads/hf_gpt2.py hf_bert:validation/workloads/hf_bert.py \
                resnet50:validation/workloads/resnet50.py; do
        IFS=: read -r name script <<<"$spec"
        t0=$SECONDS
        OUT="$W" timeout 75 python -m brrrtui record -o "$W/$name.brrr" "$script" --steps 45 >"$W/${name}_rec.log" 2>&1
        echo "$name record rc=$? in $((SECONDS - t0)) s"
        gzip -c "$W/$name.brrr" >"$OUT/$name.brrr.gz"; pack
    done
elif [ "$PART" = c ]; then  # every call of a few many-shaped kernel names, in a steady step
    for spec in gpt2_eager:examples/train_gpt.py hf_gpt2:validation/workloads/hf_gpt2.py \
                hf_bert:validation/workloads/hf_bert.py; do
        IFS=: read -r name script <<<"$spec"
        echo "=== ncu $name, named kernels ($SECONDS s)"
        timeout --kill-after=5 "${NCU_BUDGET:-70}" python validation/ncu_verdicts.py --script "$script" \
            --out "$W/ncu_$name" --kernel-regex "${NCU_REGEX:-bfloat16_copy|FillFunctor|direct_copy}" \
            --launch-skip "${NCU_SKIP:-2000}" --launch-count "${NCU_COUNT:-40}" \
            --timeout $((${NCU_BUDGET:-70} - 8)) -- --steps "${NCU_STEPS:-40}" >"$W/ncu_$name.log" 2>&1
        echo "rc=$?"; grep -E "^ncu: [0-9]+ kernels|^ncu: rc|ERROR" "$W/ncu_$name.log"
        cp "$W/ncu_$name/ncu_raw.csv" "$W/ncu_${name}_named_raw.csv" 2>/dev/null
        pack
    done
else
    if [ -n "${RECORD:-}" ]; then  # workloads whose recording did not come back from call a
        for name in $RECORD; do
            OUT="$W" timeout 75 python -m brrrtui record -o "$W/$name.brrr" "validation/workloads/$name.py" \
                --steps 45 >"$W/${name}_rec.log" 2>&1
            echo "$name record rc=$?"; gzip -c "$W/$name.brrr" >"$OUT/$name.brrr.gz"
        done
    fi
    ncu --version | tail -1
    ncu --query-metrics 2>/dev/null | grep -iE "^sm__pipe_tensor|^sm__inst_executed_pipe_tensor" >"$W/tensor_metrics.txt"
    cat "$W/tensor_metrics.txt" | cut -c1-100
    echo "=== kernel-id sampling check ($SECONDS s)"
    timeout 60 ncu --clock-control none --kernel-name-base demangled --kernel-id '::regex:.:^(3|7)$' \
        --metrics gpu__time_duration.sum \
        --csv python -c "import torch
x = torch.randn(1 << 20, device='cuda')
for _ in range(10):
    y = x.sin(); z = x.cos()
torch.cuda.synchronize()" >"$W/kernel_id_check.csv" 2>&1
    echo "rc=$? profiled rows (expect 4: sin and cos, calls 3 and 7):"
    grep -cE '"gpu__time_duration.sum"' "$W/kernel_id_check.csv"; grep -oE '"[^"]*(sin|cos)_kernel[^"]{0,20}' "$W/kernel_id_check.csv" | sort | uniq -c
    pack
    for spec in gpt2_eager:examples/train_gpt.py hf_gpt2:validation/workloads/hf_gpt2.py \
                hf_bert:validation/workloads/hf_bert.py resnet50:validation/workloads/resnet50.py; do
        IFS=: read -r name script <<<"$spec"
        echo "=== ncu $name ($SECONDS s)"
        timeout --kill-after=5 "${NCU_BUDGET:-110}" python validation/ncu_verdicts.py --script "$script" \
            --out "$W/ncu_$name" --sample-invocations "${NCU_CALLS:-50,200,800}" --max-kernels "${NCU_MAX:-200}" \
            --timeout $((${NCU_BUDGET:-110} - 8)) -- --steps "${NCU_STEPS:-60}" >"$W/ncu_$name.log" 2>&1
        echo "rc=$?"; grep -E "^ncu: [0-9]+ kernels|^ncu: rc|ERROR" "$W/ncu_$name.log"
        cp "$W/ncu_$name/ncu_raw.csv" "$W/ncu_${name}_raw.csv" 2>/dev/null
        pack
    done
fi
pack; ls -la "$OUT"; echo "done in $SECONDS s"

#!/usr/bin/env bash
# Record, report and Nsight-Compute the hold-out workloads, then score them (score.py).
#   bash validation/holdout/run.sh RESULTS_DIR WORKLOAD...        # on the GPU
#   SMOKE=1 NCU=0 bash validation/holdout/run.sh /tmp/h lstm_lm   # on the CPU: tiny sizes, no ncu
# RECORD=0 skips recording where RESULTS_DIR/<w>.report.json exists; NCU=0 skips Nsight Compute.
# NCU_TIMEOUT (s, default 150) and MAX_KERNELS (default 400) bound each ncu run; STEPS (default 60) the recording.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$1; shift; mkdir -p "$R"
H=$(dirname "$0")
PY=${PY:-python3}
declare -A SMALL=(
  [llama_decoder]="--seq 32 --dim 64 --layers 2 --heads 4 --vocab 100 --batch 2"
  [unet_diffusion]="--size 16 --ch 32 --batch 2"
  [lstm_lm]="--seq 16 --dim 32 --hidden 32 --vocab 100 --batch 2"
  [moe_layer]="--seq 16 --dim 32 --hidden 64 --vocab 100 --batch 2"
  [cnn_channels_last]="--size 32 --batch 2"
)
for w in "$@"; do
  extra=""; [ "${SMOKE:-0}" = 1 ] && extra=${SMALL[$w]}
  if [ "${RECORD:-1}" = 1 ] || [ ! -f "$R/$w.report.json" ]; then
    t0=$SECONDS
    # shellcheck disable=SC2086
    timeout "${RECORD_TIMEOUT:-200}" "$PY" -m brrrtui record -o "$R/$w.brrr" "$H/$w.py" --steps "${STEPS:-60}" $extra \
      >"$R/$w.record.log" 2>&1
    echo "$w: record rc=$? in $((SECONDS - t0)) s; $(grep -h '^RESULT' "$R/$w.record.log")"
    "$PY" -m brrrtui report --json --top 1000 "$R/$w.brrr" >"$R/$w.report.json" 2>"$R/$w.report.err"
    "$PY" -m brrrtui report "$R/$w.brrr" >"$R/$w.report.txt" 2>&1
  fi
  if [ "${NCU:-1}" = 1 ]; then
    t0=$SECONDS
    nt=${NCU_TIMEOUT:-150}
    timeout "$nt" "$PY" validation/ncu_verdicts.py --script "$H/$w.py" --report "$R/$w.report.json" \
      --out "$R/ncu_$w" --max-kernels "${MAX_KERNELS:-400}" --skip-steps "${SKIP_STEPS:-5}" \
      --timeout $((nt - 10)) -- --steps "${NCU_STEPS:-10}" \
      >"$R/ncu_$w.log" 2>&1
    echo "$w: ncu rc=$? in $((SECONDS - t0)) s; $(grep -h '^GT_SUMMARY' "$R/ncu_$w.log")"
  fi
done
"$PY" "$H/score.py" "$R"

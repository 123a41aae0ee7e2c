#!/usr/bin/env bash
# A real model's big recording on the H200, against the tiled one the CPU benchmarks use, one device call
# (<= 580 s): GPT-2 small (examples/train_gpt.py, B=16, T=1024, bf16) under `brrrtui record` with windows as
# close as the capture allows (--duty 0.5 --min-gap 0.2) for up to RECORD_S seconds (default 330), then
# benchmarks/tiled_recording.py makes the H200 HF GPT-2 fixture's window into a recording of as many kernels,
# and both are opened on the same machine: `report --json` (bench_report_pairs.py, the checkout against
# itself: 2 x PAIRS runs of each) and the passes one by one (bench_passes.py: CPU, tracemalloc). Writes to $OUT:
#   summary.txt     rows per table, file size and bytes a kernel of both recordings; the benchmarks' output
#   record.log      brrrtui's stderr and the script's last lines; gpu.txt; report.json.gz (the real one's)
#
#   bash validation/run_real_scale_h200.sh                     # from the repository root
#   OUT=/tmp/rs RECORD_S=40 ARGS="--layers 2 --seq 128 --batch 4 --vocab 4096" bash validation/run_real_scale_h200.sh
#                                                             # the plumbing on a CPU (no kernels: no tiling)
#
# The script is given more steps than fit (STEPS, default 20000), so the run ends at RECORD_S: timeout sends
# SIGINT to brrrtui and the script, and the recording keeps every committed batch, as after Ctrl-C.
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/real_scale_out}
mkdir -p "$OUT"
RECORD_S=${RECORD_S:-330}
STEPS=${STEPS:-20000}
PAIRS=${PAIRS:-3}
W=$(mktemp -d /tmp/real_scale.XXXXXX)
REC=$W/real.brrr
TILED=$W/tiled.brrr
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>&1
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores; $(date -u)" >"$S"

timeout --signal=INT --kill-after=10 "$RECORD_S" \
    python -m brrrtui record --no-calibrate --duty 0.5 --min-gap 0.2 -o "$REC" \
    examples/train_gpt.py --steps "$STEPS" ${ARGS:-} >"$W/script.out" 2>"$OUT/record.log"
echo "record rc=$? after at most ${RECORD_S} s" | tee -a "$OUT/record.log" >>"$S"
tail -n 5 "$W/script.out" >>"$OUT/record.log"

count() {  # rows per table, the file's size and its bytes a kernel
    python - "$1" <<'EOF'
import os, sys
from brrrtui.recording.load import load_trace
t = load_trace(sys.argv[1])
n = {k: len(getattr(t, k)) for k in ("windows", "gpu", "ops", "spans", "runtime", "steps")}
size = os.path.getsize(sys.argv[1])
print(f"{sys.argv[1]}: {size / 1e6:.1f} MB; " + ", ".join(f"{v:,} {k}" for k, v in n.items())
      + f"; {size / max(n['gpu'], 1):.0f} B a kernel, {n['ops'] / max(n['gpu'], 1):.2f} ops and "
      + f"{n['spans'] / max(n['gpu'], 1):.2f} spans a kernel")
with open(sys.argv[1] + ".kernels", "w") as f:
    f.write(str(n["gpu"]))
EOF
}
count "$REC" >>"$S" 2>&1
KERNELS=$(cat "$REC.kernels" 2>/dev/null || echo 0)
python -m brrrtui report --json "$REC" 2>>"$OUT/record.log" | gzip >"$OUT/report.json.gz"

RECS=("$REC")
if [ "${KERNELS:-0}" -ge 1000 ]; then
    python benchmarks/tiled_recording.py tests/fixtures/h200_hf_gpt2_steady.brrr.gz "$TILED" --kernels "$KERNELS" \
        >>"$S" 2>&1 && RECS+=("$TILED")
    count "$TILED" >>"$S" 2>&1
fi
for r in "${RECS[@]}"; do
    echo "\$ python benchmarks/bench_report_pairs.py $(basename "$r") --baseline . --pairs $PAIRS" >>"$S"
    python benchmarks/bench_report_pairs.py "$r" --baseline . --pairs "$PAIRS" >>"$S" 2>&1
    echo "\$ python benchmarks/bench_passes.py $(basename "$r") --repeat 1" >>"$S"
    python benchmarks/bench_passes.py "$r" --repeat 1 >>"$S" 2>&1
done
cat "$S"

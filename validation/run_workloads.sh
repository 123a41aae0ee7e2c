#!/usr/bin/env bash
# The four real workloads on a GPU: each run plain (its own step times) and under `brrrtui record` with default
# options, then brrrtui's report. Everything lands in $OUT/workloads.tar.gz.
#   bash validation/run_workloads.sh [workload ...]     # default: gpt2_eager hf_gpt2 hf_bert resnet50
# Optional environment (validation/run_h200_checks.sh sets them):
#   RUN_DIR=dir   write the files there (kept) instead of a temporary folder; no workloads.tar.gz
#   PLAIN=0       skip the plain runs (only the recordings and their reports)
#   RECORD_OPTS   extra options of `brrrtui record` (e.g. --stream)
#   STEPS_GPT2_EAGER, STEPS_HF_GPT2, STEPS_HF_BERT, STEPS_RESNET50   steps per run (300, 200, 200, 150)
#   T_PLAIN=240 T_RECORD=300 T_REPORT=120   timeouts per command, seconds
set -uo pipefail
export PYTHONUNBUFFERED=1
R=${RUN_DIR:-$(mktemp -d)}
mkdir -p "$R"
W=validation/workloads
run() {  # name, then the script and its arguments
    local name=$1; shift
    if [ "${PLAIN:-1}" != 0 ]; then
        timeout "${T_PLAIN:-240}" python "$@" --out "$R" --name "${name}_plain" >"$R/${name}_plain.log" 2>&1
        echo "$name plain rc=$? $(grep RESULT "$R/${name}_plain.log")"
    fi
    local t0=$SECONDS
    timeout "${T_RECORD:-300}" python -m brrrtui record ${RECORD_OPTS:-} -o "$R/$name.brrr" "$@" --out "$R" --name "${name}_rec" \
        >"$R/${name}_rec.log" 2>&1
    echo "$name record rc=$? in $((SECONDS - t0)) s $(grep RESULT "$R/${name}_rec.log")"
    timeout "${T_REPORT:-120}" python -m brrrtui report --json "$R/$name.brrr" >"$R/${name}_report.json" 2>"$R/${name}_report.err"
    echo "$name report --json rc=$?"
    timeout "${T_REPORT:-120}" python -m brrrtui report "$R/$name.brrr" >"$R/${name}_report.txt" 2>&1
    head -30 "$R/${name}_report.txt"
}
for w in ${@:-gpt2_eager hf_gpt2 hf_bert resnet50}; do
    case $w in
        gpt2_eager) run gpt2_eager examples/train_gpt.py --steps "${STEPS_GPT2_EAGER:-300}" ;;
        hf_gpt2) run hf_gpt2 "$W/hf_gpt2.py" --steps "${STEPS_HF_GPT2:-200}" ;;
        hf_bert) run hf_bert "$W/hf_bert.py" --steps "${STEPS_HF_BERT:-200}" ;;
        resnet50) run resnet50 "$W/resnet50.py" --steps "${STEPS_RESNET50:-150}" ;;
        *) echo "unknown workload $w" ;;
    esac
done
gzip -f "$R"/*.brrr
if [ -z "${RUN_DIR:-}" ]; then
    tar -czf "${OUT:-.}/workloads.tar.gz" -C "$R" .
fi
ls -la "$R"

#!/usr/bin/env bash
# The four real workloads on a GPU: each run plain (its own step times) and under `brrrtui record` with default
# options, then brrrtui's report. Everything lands in $OUT/workloads.tar.gz.
#   bash validation/run_workloads.sh [workload ...]     # default: gpt2_eager hf_gpt2 hf_bert resnet50
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
W=validation/workloads
run() {  # name, then the script and its arguments
    local name=$1; shift
    timeout 240 python "$@" --out "$R" --name "${name}_plain" >"$R/${name}_plain.log" 2>&1
    echo "$name plain rc=$? $(grep RESULT "$R/${name}_plain.log")"
    timeout 300 python -m brrrtui record -o "$R/$name.brrr" "$@" --out "$R" --name "${name}_rec" \
        >"$R/${name}_rec.log" 2>&1
    echo "$name record rc=$? $(grep RESULT "$R/${name}_rec.log")"
    python -m brrrtui report --json "$R/$name.brrr" >"$R/${name}_report.json" 2>&1
    python -m brrrtui report "$R/$name.brrr" >"$R/${name}_report.txt" 2>&1
    head -30 "$R/${name}_report.txt"
}
for w in ${@:-gpt2_eager hf_gpt2 hf_bert resnet50}; do
    case $w in
        gpt2_eager) run gpt2_eager examples/train_gpt.py --steps 300 ;;
        *) run "$w" "$W/$w.py" ;;
    esac
done
gzip -f "$R"/*.brrr
tar -czf "${OUT:-.}/workloads.tar.gz" -C "$R" .
ls -la "$R"

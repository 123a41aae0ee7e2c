#!/usr/bin/env bash
# The H200 checks in one device call (~9 min), everything in $OUT/checks.tar.gz (+ $OUT/checks_summary.txt):
#   1. the four workloads under `brrrtui record` + report (validation/run_workloads.sh; recordings only)
#   2. ncu on each workload, steady state (--skip-steps 4), against step 1's report JSON (ncu_verdicts.py)
#   3. predicted vs measured savings of three fixes, predictions from step 1's reports (validation/savings.py)
#   4. benchmarks/bench_stream.py --rounds 1 --subjects gpt,tiny --variants plain,windows (1000 / 4000 steps)
# then a compact summary table (the device returns only the last 12,000 characters of output).
#
#   bash validation/run_h200_checks.sh
#   CHECKS="2 3" bash validation/run_h200_checks.sh     # a subset (without 1: ncu has no report to compare
#                                                       #  with, savings.py records its own)
# Budgets (seconds, environment): B1=115 B2=145 B3=115 B4=175, DEADLINE=560 for the whole script: a step may
# use DEADLINE - 10 - elapsed - (the budgets of the steps after it), i.e. its budget plus what the steps
# before it left unused. NCU_MAX=300 kernels per workload under ncu: part of a step (GPT-2 eager launches
# ~970 a step); raise it, with B2, for a whole step.
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."

if [ "${1:-}" = __ncu ]; then  # step 2's body: $2 = the work folder; STEP_BUDGET seconds for the four
    W=$2
    per=$(( ${STEP_BUDGET:-170} / 4 - 5 ))
    for spec in gpt2_eager:examples/train_gpt.py hf_gpt2:validation/workloads/hf_gpt2.py \
                hf_bert:validation/workloads/hf_bert.py resnet50:validation/workloads/resnet50.py; do
        name=${spec%%:*}; script=${spec#*:}; rep=()
        [ -s "$W/workloads/${name}_report.json" ] && rep=(--report "$W/workloads/${name}_report.json")
        echo "--- ncu $name (timeout ${per} s)"
        timeout --kill-after=5 $((per + 5)) python validation/ncu_verdicts.py --script "$script" "${rep[@]}" \
            --out "$W/ncu/$name" --skip-steps 4 --max-kernels "${NCU_MAX:-300}" --timeout "$per" -- --steps 8 \
            >"$W/ncu/${name}.log" 2>&1
        echo "ncu $name rc=$?"
        grep -E "^ncu: --launch|^ncu: rc=|^ncu: [0-9]+ kernels|^GT_SUMMARY|^kernel agreement|^ERROR" \
            "$W/ncu/${name}.log"
    done
    exit 0
fi

OUT=${OUT:-$PWD/checks_out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/h200_checks.XXXXXX)  # the files; only the tarball and the summary go to $OUT
DEADLINE=${DEADLINE:-560}
B1=${B1:-115} B2=${B2:-145} B3=${B3:-115} B4=${B4:-175}
CHECKS=${CHECKS-1 2 3 4}
STATUS="$W/status.tsv"
: >"$STATUS"
mkdir -p "$W/workloads" "$W/ncu" "$W/savings" "$W/bench_stream"

left() {  # seconds step $1 may take: DEADLINE - 10 - elapsed - the budgets of the selected steps after it
    local later=0 n
    for n in $CHECKS; do [ "$n" -gt "$1" ] && later=$((later + $(eval echo "\$B$n"))); done
    local b=$((DEADLINE - 10 - SECONDS - later))
    [ "$b" -lt 1 ] && b=1
    echo "$b"
}
pack() { tar --exclude='*.ncu-rep' -czf "$OUT/checks.tar.gz" -C "$W" . 2>/dev/null; }
step() {  # number, name, command...: the command under timeout, its output in $W/stepN_name.log
    local n=$1 name=$2 budget; budget=$(left "$1"); shift 2
    case " $CHECKS " in *" $n "*) ;; *) printf '%s\t%s\tskipped\t0\t0\n' "$n" "$name" >>"$STATUS"; return ;; esac
    echo "=== step $n: $name (budget ${budget} s, at ${SECONDS} s)"
    local t0=$SECONDS
    STEP_BUDGET=$budget timeout --kill-after=10 "$budget" "$@" >"$W/step${n}_${name}.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$name" "$rc" "$((SECONDS - t0))" "$budget" >>"$STATUS"
    echo "    rc=$rc in $((SECONDS - t0)) s"
    pack
}

step 1 workloads env RUN_DIR="$W/workloads" PLAIN=0 T_RECORD=75 T_REPORT=30 \
    STEPS_GPT2_EAGER=120 STEPS_HF_GPT2=100 STEPS_HF_BERT=100 STEPS_RESNET50=80 \
    bash validation/run_workloads.sh gpt2_eager hf_gpt2 hf_bert resnet50

step 2 ncu bash validation/run_h200_checks.sh __ncu "$W"

sav=()
[ -s "$W/workloads/gpt2_eager_report.json" ] && sav+=(--report-gpt2-eager "$W/workloads/gpt2_eager_report.json")
[ -s "$W/workloads/hf_gpt2_report.json" ] && sav+=(--report-hf-gpt2 "$W/workloads/hf_gpt2_report.json")
step 3 savings bash -c 'python validation/savings.py --out "$0" --steps 50 --warmup 10 --timeout 80 "$@"' \
    "$W/savings" "${sav[@]}"

step 4 bench_stream bash -c 'python benchmarks/bench_stream.py --rounds 1 --subjects gpt,tiny \
    --variants plain,windows --gpt-steps 1000 --tiny-steps 4000 --timeout 75 --out "$0"' "$W/bench_stream"

# --- summary ------------------------------------------------------------------------------------------------
python - "$W" >"$W/checks_summary.txt" 2>&1 <<'EOF'
import glob, json, os, re, sys
w = sys.argv[1]
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
print("== steps (rc 124: over budget)")
print("| step | name | rc | s | budget s |\n|---|---|---|---:|---:|")
for line in open(os.path.join(w, "status.tsv")):
    print("| " + " | ".join(line.rstrip("\n").split("\t")) + " |")
print("\n== 1. workloads under brrrtui (recorded run; report phase, steps, top findings)")
print("| workload | rec median ms | phase | steady from | findings (kind ~ms) |\n|---|---:|---|---:|---|")
for name in ("gpt2_eager", "hf_gpt2", "hf_bert", "resnet50"):
    r = load(os.path.join(w, "workloads", f"{name}_report.json")) or {}
    res = load(os.path.join(w, "workloads", f"{name}_rec_result.json")) or load(
        os.path.join(w, "workloads", f"{name}_rec_steps.json")) or {}
    f = ", ".join(f"{x['kind']} {(x.get('saving_ns') or 0) / 1e6:.2f}" for x in r.get("findings", [])[:4])
    ph = r.get("phases") or {}
    med = res.get("median_step_ms")
    print(f"| {name} | {med if med is None else round(med, 2)} | {r.get('phase')} | {ph.get('steady_from_step')} | {f} |")
print("\n== 2. ncu vs brrrtui (SOL rule / the issue's ground-truth rule, by brrrtui GPU time)")
print("| workload | ncu kernels | SOL agree | GT agree | GT scored share | disagreeing (top 3: name share brrrtui/ncu roof) |")
print("|---|---:|---:|---:|---:|---|")
for name in ("gpt2_eager", "hf_gpt2", "hf_bert", "resnet50"):
    g = load(os.path.join(w, "ncu", name, "ncu_ground_truth.json"))
    if not g:
        log = os.path.join(w, "ncu", f"{name}.log")
        tail = open(log).read().strip().splitlines()[-1:] if os.path.exists(log) else ["no log"]
        print(f"| {name} | — | — | — | — | {tail[0][:100] if tail else ''} |")
        continue
    pct = lambda v: "—" if v is None else f"{v:.1%}"
    dis = "; ".join(f"{d['short'][:38]} {pct(d['gpu_share'])} {d['brrrtui']}/{d['ncu']} {d['roof'] if d['roof'] is None else round(d['roof'], 2)}"
                    for d in g["disagreeing"][:3])
    print(f"| {name} | {g.get('ncu_kernels')} | {pct(g.get('sol_agreement'))} | {pct(g.get('agreement'))} | {pct(g.get('scored_gpu_share'))} | {dis} |")
print("\n== 3. savings: predicted vs measured (ms per step)")
t = os.path.join(w, "savings", "savings_table.md")
print(open(t).read() if os.path.exists(t) else "no savings table")
print("== 4. bench_stream")
b = load(os.path.join(w, "bench_stream", "bench_stream.json")) or load(os.path.join(w, "bench_stream", "bench_stream.partial.json"))
if b and b.get("table"):
    print(b["table"])
elif b:
    for name, runs in b.get("results", {}).items():
        for x in runs:
            print(name, x.get("variant"), x.get("rc"), x.get("mean_step_ms"))
else:
    print("no bench_stream output")
EOF
pack
cp "$W/checks_summary.txt" "$OUT/checks_summary.txt"
echo
echo "=== per-step logs (tails)"
for f in "$W"/step*.log; do echo "--- $(basename "$f")"; tail -4 "$f" | cut -c1-220; done
echo
cat "$W/checks_summary.txt"
echo
echo "files: $OUT/checks.tar.gz ($(du -h "$OUT/checks.tar.gz" | cut -f1)), $OUT/checks_summary.txt; total ${SECONDS} s"

#!/usr/bin/env bash
# Per-line overhead against unprofiled steps, on a GPU; everything lands in $OUT/lines.tar.gz:
# - the four workloads recorded with `--stream` (every kernel of the unprofiled steps between windows), and
#   validation/unprofiled_lines.py on each: per line, the overhead share brrrtui estimates from its windows
#   against the one the stream measures;
# - examples/known_regimes.py with a 20 ms and a 2 ms `time.sleep` a step, default options: what the sleep's
#   line is charged (`brrrtui report`);
# - validation/kv_cache_saving.py: what use_cache=False changes in an HF GPT-2 training step.
#   bash validation/run_lines_h200.sh
#   PARTS="lines sleep" bash validation/run_lines_h200.sh    # some of the three parts: lines, sleep, kv
set -uo pipefail
PARTS=" ${PARTS:-lines sleep kv} "
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
if [[ $PARTS == *" lines "* ]]; then
    RUN_DIR=$R PLAIN=0 RECORD_OPTS=--stream STEPS_GPT2_EAGER=200 STEPS_HF_GPT2=200 STEPS_HF_BERT=200 \
        STEPS_RESNET50=150 bash validation/run_workloads.sh 2>&1 | tee "$R/workloads.log" | grep -v "^ "
    for w in gpt2_eager hf_gpt2 hf_bert resnet50; do
        python validation/unprofiled_lines.py "$R/$w.brrr.gz" --json "$R/${w}_lines.json" >"$R/${w}_lines.txt" 2>&1
        echo "== $w unprofiled_lines rc=$?"; cat "$R/${w}_lines.txt"
    done
fi
if [[ $PARTS == *" sleep "* ]]; then
    for ms in 20 2; do
        t0=$SECONDS
        timeout 200 python -m brrrtui record -o "$R/known_regimes_sleep$ms.brrr" examples/known_regimes.py \
            --steps 300 --sleep-ms "$ms" >"$R/kr$ms.log" 2>&1
        echo "known_regimes --sleep-ms $ms record rc=$? in $((SECONDS - t0)) s"
        python -m brrrtui report "$R/known_regimes_sleep$ms.brrr" >"$R/known_regimes_sleep${ms}_report.txt" 2>&1
        python -m brrrtui report --json "$R/known_regimes_sleep$ms.brrr" >"$R/known_regimes_sleep${ms}_report.json" 2>&1
        head -40 "$R/known_regimes_sleep${ms}_report.txt"
    done
fi
if [[ $PARTS == *" kv "* ]]; then
    timeout 300 python validation/kv_cache_saving.py --json "$R/kv_cache_saving.json" >"$R/kv_cache_saving.txt" 2>&1
    echo "kv_cache_saving rc=$?"; tail -3 "$R/kv_cache_saving.txt"
fi
gzip -f "$R"/*.brrr
echo "commit $(cat REVISION 2>/dev/null || echo unknown); command: PARTS=\"$PARTS\" bash validation/run_lines_h200.sh" >"$R/README.txt"
tar -czf "${OUT:-.}/lines.tar.gz" -C "$R" .
ls -la "$R"

#!/usr/bin/env bash
# Module paths and library lines on the four workloads (recordings with default options, their reports) and
# what Inductor says about the kernels it generates (validation/inductor_probe.py). Lands in $OUT/modules.tar.gz.
#   bash validation/run_modules_h200.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
RUN_DIR=$R PLAIN=0 STEPS_GPT2_EAGER=${STEPS:-120} STEPS_HF_GPT2=${STEPS:-120} STEPS_HF_BERT=${STEPS:-120} \
    STEPS_RESNET50=${STEPS:-100} bash validation/run_workloads.sh 2>&1 | tee "$R/workloads.log" | grep -v "^ "
timeout 300 python validation/inductor_probe.py "$R/inductor_probe.json" >"$R/inductor_probe.log" 2>&1
echo "probe rc=$?"; head -c 4000 "$R/inductor_probe.log"
git_rev=$(cat REVISION 2>/dev/null || echo unknown)
echo "commit $git_rev; command: bash validation/run_modules_h200.sh" >"$R/README.txt"
tar -czf "${OUT:-.}/modules.tar.gz" -C "$R" .
ls -la "$R"

"""Under torch.compile brrrtui stays out of Dynamo's sight: the same graph breaks, recompiles and graphs with
and without it, and none of Dynamo's warnings about brrrtui's own code (CPU, Dynamo with the aot_eager backend:
what Dynamo traces does not depend on the backend)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "compiled_train.py")
ENV = {**os.environ, "TORCH_LOGS": "graph_breaks,recompiles"}


def counters_and_logs(argv: list[str], tmp_path) -> tuple[dict, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTERS ")]
    return json.loads(line.removeprefix("COUNTERS ")), proc.stderr


def test_compiled_model_compiles_the_same_under_brrrtui(tmp_path):
    plain, plain_log = counters_and_logs([sys.executable, SCRIPT], tmp_path)
    out = str(tmp_path / "c.brrr")
    traced, traced_log = counters_and_logs(
        [sys.executable, "-m", "brrrtui", "record", "-o", out, "--duty", "1", "--min-gap", "0", SCRIPT], tmp_path
    )
    assert traced.get("graph_break", {}) == plain.get("graph_break", {}) == {}
    assert traced.get("recompiles", {}) == plain.get("recompiles", {})
    assert traced["stats"]["unique_graphs"] == plain["stats"]["unique_graphs"] == 1
    log_lines = re.compile(r"Graph break|Recompiling|_getframe|RecordFunctionFast|brrrtui/capture")
    assert not log_lines.findall(traced_log), traced_log[-2000:]
    assert len(log_lines.findall(plain_log)) == 0
    assert re.search(r"(\d+) windows", traced_log) and int(re.search(r"(\d+) windows", traced_log)[1]) >= 3

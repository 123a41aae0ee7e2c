"""What brrrtui's verdicts would be if a recording held `is_causal`: the recording's attention ops get the
Concrete Inputs the capture would record (is_causal=True, as examples/train_gpt.py calls SDPA), the report is
made again and written as JSON, for validation/ncu_verdicts.py --report. A what-if: recordings do not hold
Concrete Inputs yet.

    python validation/ncu_causal_whatif.py RECORDING OUT.json
"""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np

from analyzers.analyze import analyze
from analyzers.cost.attention_cost import CAUSAL_ARG
from analyzers.cost.op_families import base_name
from brrrtui.contract.model import Table
from brrrtui.present.report import to_json
from brrrtui.recording.load import load_trace


def with_causal(path: str):
    trace = load_trace(path)
    strings = list(trace.strings)
    ids: dict[str, int] = {}
    concrete = np.full(len(trace.ops), -1, dtype=np.int32)
    for r in range(len(trace.ops)):
        b = base_name(trace.name(int(trace.ops.name[r])))
        if b not in CAUSAL_ARG:
            continue
        n, i = CAUSAL_ARG[b][0]
        args: list[object] = [None] * n
        args[i] = 1 if b.startswith("_efficient_attention") else True
        text = json.dumps(args)
        if text not in ids:
            strings.append(text)
            ids[text] = len(strings) - 1
        concrete[r] = ids[text]
    ops = dict(trace.ops.columns) | {"concrete": concrete}
    return dataclasses.replace(trace, strings=strings, ops=Table(ops)), int((concrete >= 0).sum())


def main() -> int:
    trace, n = with_causal(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        json.dump(to_json(analyze(trace)), f)
    print(f"{n} attention ops marked causal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

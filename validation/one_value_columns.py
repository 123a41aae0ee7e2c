"""How much of a recording loads as one value repeated (no memory), and does the analysis come out the same
as with every column held whole?

    python validation/one_value_columns.py RUN.brrr [RUN2.brrr ...]

Per recording: the bytes its window tables (gpu, runtime, ops, spans) take in memory as whole columns, the
share of them that loads as one value repeated (brrrtui/recording/columns.py), those columns, and whether
`report --json` of the trace as loaded equals that of the same trace with every column copied whole.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np

from analyzers.analyze import analyze
from brrrtui.contract.model import Table
from brrrtui.present.report import to_json
from brrrtui.recording.load import load_trace

TABLES = ("gpu", "runtime", "ops", "spans")


def main(paths: list[str]) -> None:
    for path in paths:
        trace = load_trace(path)
        whole_bytes, repeated = 0, []
        for t in TABLES:
            for c, v in getattr(trace, t).columns.items():
                whole_bytes += v.nbytes
                if v.strides == (0,) and len(v) > 1:
                    repeated.append((f"{t}.{c}", v.nbytes))
        saved = sum(n for _, n in repeated)
        whole = replace(
            trace,
            **{t: Table({k: np.array(v) for k, v in getattr(trace, t).columns.items()}) for t in TABLES},
        )
        same = json.dumps(to_json(analyze(trace))) == json.dumps(to_json(analyze(whole)))
        print(
            f"{path}: format {trace.meta.get('format_version')}, {len(trace.gpu):,} GPU rows, "
            f"{whole_bytes / 2**20:.1f} MiB as whole columns, {saved / 2**20:.1f} MiB "
            f"({saved / max(whole_bytes, 1):.0%}) as one value repeated; report the same with whole columns: {same}"
        )
        print("  one value:", ", ".join(name for name, _ in repeated) or "none")


if __name__ == "__main__":
    main(sys.argv[1:])

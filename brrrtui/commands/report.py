"""`brrrtui report FILE`: the verdicts of a recording or trace as text, JSON or SARIF."""

from __future__ import annotations

import json
import sys

from brrrtui import __version__
from brrrtui.commands.args import Parser


def _parser() -> Parser:
    p = Parser(prog="brrrtui report", description="Print the verdicts of a recording or trace.")
    p.add_argument("file", help="a .brrr recording or a torch.profiler .json / .json.gz trace")
    form = p.add_mutually_exclusive_group()
    form.add_argument(
        "--json", action="store_true", help="print one JSON object (schema in docs/reference.md)"
    )
    form.add_argument("--sarif", action="store_true", help="print the findings as SARIF 2.1.0 (editors, CI)")
    p.add_argument("--top", type=int, default=15, metavar="N", help="lines and kernels to list (default 15)")
    p.add_argument(
        "--peaks", metavar="SPEC", help="override ceilings, e.g. flops=800e12,bw=4.2e12 (FLOP/s and bytes/s)"
    )
    return p


def cmd_report(argv: list[str]) -> int:
    ns = _parser().parse_args(argv)
    from brrrtui import session

    trace = session.read(ns.file)
    from brrrtui.present.report import render_text, to_json

    analysis, others = session.analyse_phases(trace, ns.peaks)
    notes = session.notes_of(trace)  # about the file itself: incomplete, no window and why
    from brrrtui.present.ranks_report import ranks_json, ranks_text

    ranks = session.compare_rank_set(trace)  # a distributed run: every rank side by side (None otherwise)
    if ranks:  # a wait inside a collective: its cure names the rank this one waited for
        import dataclasses

        from analyzers.comm.ranks import name_straggler

        analysis = dataclasses.replace(
            analysis, findings=name_straggler(analysis.findings, ranks[0], ranks[1])
        )
    if ns.json or ns.sarif:
        if ns.sarif:
            from brrrtui.present.sarif import to_sarif

        doc = to_sarif(analysis, __version__) if ns.sarif else to_json(analysis, others=others)
        if ranks and not ns.sarif:
            doc["ranks"] = ranks_json(*ranks)
        print(json.dumps(doc, indent=1))
        for n in notes:
            print(f"brrrtui: note: {n}", file=sys.stderr)
    else:
        if ranks:
            print(ranks_text(*ranks) + "\n")
        print(render_text(analysis, top=ns.top, others=others))
        for n in notes:
            print(f"note: {n}")
    return 0

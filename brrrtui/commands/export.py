"""`brrrtui export --perfetto OUT.json RUN.brrr`: a recording as a Chrome / Perfetto trace."""

from __future__ import annotations

import gzip
import sys

from brrrtui.commands.args import Parser, UsageError, shown_path


def cmd_export(argv: list[str]) -> int:
    p = Parser(
        prog="brrrtui export",
        description="Write a recording as a Chrome / Perfetto trace (ui.perfetto.dev, chrome://tracing): kernels "
        "coloured by regime, GPU idle gaps with their cause, source lines, launch flows, telemetry counters. "
        "`brrrtui view` and `report` read it back with the same verdicts.",
    )
    p.add_argument("--perfetto", metavar="OUT", required=True, help="the trace to write (.json, or .json.gz)")
    p.add_argument("file", help="a .brrr recording or a torch.profiler .json / .json.gz trace")
    p.add_argument("--peaks", metavar="SPEC", help="override ceilings, e.g. flops=800e12,bw=4.2e12")
    ns = p.parse_args(argv)
    from analyzers.analyze import analyze_with_other_phases
    from brrrtui.present.perfetto import write_perfetto
    from brrrtui.recording.load import load_trace

    trace = load_trace(ns.file)
    lead, others = analyze_with_other_phases(trace, ns.peaks)
    analyses = [lead, *others.values()]
    phases = {} if lead.phases is None else {w: p.value for w, p in lead.phases.windows.items()}
    try:
        if ns.perfetto.endswith(".gz"):  # gzip(1)'s default level: 9 took ~3x as long for 14 % less
            with gzip.open(ns.perfetto, "wt", encoding="utf-8", compresslevel=6) as f:
                events = write_perfetto(f, trace, analyses, phases)
        else:
            with open(ns.perfetto, "w", encoding="utf-8") as f:
                events = write_perfetto(f, trace, analyses, phases)
    except OSError as e:
        raise UsageError(f"cannot write {ns.perfetto} ({e.strerror or e})") from None
    kernels = sum(len(a.trace.gpu) for a in analyses)
    gaps = sum(len(a.gaps) for a in analyses)
    print(
        f"brrrtui: wrote {shown_path(ns.perfetto)}: {events:,} events ({kernels:,} GPU rows, {gaps:,} idle "
        f"gaps, {len(trace.windows)} windows); open it in https://ui.perfetto.dev or chrome://tracing",
        file=sys.stderr,
    )
    return 0

"""`brrrtui export --perfetto OUT.json RUN.brrr`: a recording as a Chrome / Perfetto trace.

OUT is written under brrrtui's output policy (brrrtui.recording.outputs): a new file, or a trace brrrtui
wrote (known by its first bytes, present/perfetto.py EXPORT_HEADS), or with --force any regular file; never
the input, the recorded script or a source file the recording names, never a FIFO, device or link. The trace
is written beside OUT and renamed over it when complete.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from typing import Any

from brrrtui.commands.args import Parser, shown_path


def _is_export(path: str) -> bool:
    from brrrtui.present.perfetto import EXPORT_HEADS
    from brrrtui.recording.outputs import is_exported_trace

    return is_exported_trace(path, EXPORT_HEADS)


def _recorded_sources(trace: Any) -> Any:
    """The recorded script and every source file its lines name: never an export's OUT."""
    from brrrtui.recording.outputs import Protected

    p = Protected()
    argv, cwd = trace.meta.get("argv"), trace.meta.get("cwd")
    if isinstance(argv, list) and argv and isinstance(argv[0], str) and argv[0] != "-m":
        script = argv[0] if not isinstance(cwd, str) else os.path.join(cwd, argv[0])
        p.files.append((script, "the recorded script"))
    for f in {ln.file for ln in trace.lines}:
        if isinstance(f, str) and f.startswith(os.sep):
            p.files.append((f, "a source file of the recorded run"))
    return p


def _write(out: str, binary: Any, write: Any) -> int:
    if out.endswith(".gz"):  # gzip(1)'s default level: 9 took ~3x as long for 14 % less
        with gzip.GzipFile(filename="", mode="wb", fileobj=binary, compresslevel=6) as z:
            with io.TextIOWrapper(z, encoding="utf-8") as f:
                return write(f)
    with io.TextIOWrapper(binary, encoding="utf-8") as f:
        return write(f)


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
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite OUT even if it is not a trace brrrtui wrote (never the input or the recorded script)",
    )
    ns = p.parse_args(argv)
    from brrrtui import session
    from brrrtui.contract.errors import InputError
    from brrrtui.present.perfetto import write_perfetto
    from brrrtui.recording.outputs import Output, Replacement

    output = Output(
        ns.perfetto, "a trace brrrtui exported", _is_export, "--perfetto", ns.force, inputs=[ns.file]
    )
    output.check()  # before the work: a path that cannot be written is said at once
    trace = session.read(ns.file)
    output.protected = _recorded_sources(trace)
    existing = output.check()
    lead, others = session.analyse_phases(trace, ns.peaks)
    analyses = [lead, *others.values()]
    phases = {} if lead.phases is None else {w: p.value for w, p in lead.phases.windows.items()}
    replacement = Replacement(ns.perfetto, existing, "--perfetto", keep_open=True)
    try:
        with os.fdopen(replacement.take_fd(), "wb") as binary:
            events = _write(ns.perfetto, binary, lambda f: write_perfetto(f, trace, analyses, phases))
    except BaseException as e:
        replacement.discard()  # the earlier OUT, if any, stays as it was
        if isinstance(e, OSError):
            raise InputError(f"cannot write {ns.perfetto} ({e.strerror or e})") from None
        raise
    replacement.commit()
    kernels = sum(len(a.trace.gpu) for a in analyses)
    gaps = sum(len(a.gaps) for a in analyses)
    print(
        f"brrrtui: wrote {shown_path(ns.perfetto)}: {events:,} events ({kernels:,} GPU rows, {gaps:,} idle "
        f"gaps, {len(trace.windows)} windows); open it in https://ui.perfetto.dev or chrome://tracing",
        file=sys.stderr,
    )
    return 0

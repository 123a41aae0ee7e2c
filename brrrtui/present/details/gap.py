"""An idle stretch of the GPU: its cause, where it was caused, and what to do about it."""

from __future__ import annotations

from brrrtui.contract.units import fmt_ns
from brrrtui.present.details.common import Detail, cause_of, display_path
from brrrtui.present.finding_words import words
from brrrtui.present.paths import Phrase
from brrrtui.present.selection import Kind
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.verdicts import FINDING_KINDS_BY_CAUSE, GAP_ADVICE, GAP_VERDICT


def gap(snap: Snapshot, row: int) -> Detail:
    g = snap.analysis.gaps
    cause = cause_of(int(g.cause[row]))
    dur = float(g.dur_ns[row])
    d = Detail(f"GPU idle {fmt_ns(dur)}: {cause.value}")
    d.add(("verdict: ", "label"), (GAP_VERDICT[cause].format(d=fmt_ns(dur)), f"gap-{cause.value}"))
    wl = snap.lanes.get(int(g.window[row]))
    rel = float(g.start_ns[row] - (wl.start_ns if wl else 0))
    where = f"stream {g.stream[row]}" if int(g.stream[row]) >= 0 else "the whole GPU (no stream busy)"
    d.add((f"from +{fmt_ns(rel)} to +{fmt_ns(rel + dur)} on {where}, window {g.window[row]}", ""))
    s = snap.lines_by_id.get(int(g.line[row]))
    if s is not None:
        d.add(("caused at ", "label"), (display_path(snap, s.line), "path"))
    kinds = FINDING_KINDS_BY_CAUSE[cause]
    matched = [
        (i, f)
        for i, f in enumerate(snap.findings)
        if f.kind in kinds and (s is None or not f.lines or s.line in f.lines)
    ]
    for i, f in matched:
        said = words(f)
        d.add(("advice: ", "label"), (said.action, "advice"))
        d.link(f"⚑ {said.message}", Kind.FINDING, i)
    if not matched:
        d.add(("advice: ", "label"), (GAP_ADVICE[cause], "advice"))
    if s is not None:
        d.link(Phrase("line ", display_path(snap, s.line)), Kind.LINE, s.line_id)
    return d

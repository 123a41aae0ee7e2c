"""A kernel streamed between windows: what CUPTI recorded, and the line and regime inferred for it."""

from __future__ import annotations

from analyzers.results import REGIMES_BY_CODE
from brrrtui.contract.units import fmt_bytes, fmt_ns
from brrrtui.present.details.common import Detail, display_path, short
from brrrtui.present.paths import Phrase
from brrrtui.present.selection import Kind
from brrrtui.present.snapshot import Snapshot


def streamed(snap: Snapshot, rowid: int) -> Detail:
    row = snap.stream_row(rowid)
    if row is None or snap.stream is None:
        raise KeyError(rowid)
    st = snap.stream.stream
    nm = snap.stream_name(int(st.name[row]))
    d = Detail(short(nm, 60))
    _inferred(snap, row, d)
    wl = snap.stream_lanes.get(int(st.after_window[row]))
    rel = float(st.start_ns[row] - (wl.start_ns if wl else 0))
    after = int(st.after_window[row])
    where = f"streamed after window {after}" if after >= 0 else "streamed before the first window"
    d.add(
        (
            f"{fmt_ns(float(st.dur_ns[row]))} at +{fmt_ns(rel)} on GPU{st.device[row]} stream {st.stream[row]}"
            f" · {where}",
            "",
        )
    )
    if int(st.grid[row]) >= 0 or int(st.block[row]) >= 0:
        grid, block = snap.stream_name(int(st.grid[row])), snap.stream_name(int(st.block[row]))
        d.add((f"grid [{grid}] block [{block}]", "muted"))
    if int(st.bytes[row]) > 0:
        d.add((f"{fmt_bytes(float(st.bytes[row]))} moved", "muted"))
    _inferred_line(snap, row, d)
    d.add((nm, "muted"))
    t = int(snap.stream.template_row[row])
    if t >= 0:
        d.link(f"matched window kernel: {short(snap.kernel_name(t), 60)}", Kind.KERNEL, t)
    return d


def _inferred(snap: Snapshot, row: int, d: Detail) -> None:
    assert snap.stream is not None
    view = snap.stream
    t = int(view.template_row[row])
    if t < 0:
        d.add(("inferred: ", "label"), ("no window has seen this kernel", "streamed"))
        return
    regime = REGIMES_BY_CODE.get(int(view.regime[row]))
    how = "confirmed by the next window" if view.confirmed[row] else "not confirmed by a later window"
    d.add(
        ("inferred: ", "label"),
        (regime.value if regime else "?", f"{regime.value}-inferred" if regime else "streamed"),
        (f" like window {int(snap.trace.gpu.window[t])}'s kernel ({how})", ""),
    )


def _inferred_line(snap: Snapshot, row: int, d: Detail) -> None:
    assert snap.stream is not None
    lid = int(snap.stream.line[row])
    stat = snap.lines_by_id.get(lid)
    line = stat.line if stat is not None else None
    if line is None and 0 <= lid < len(snap.trace.lines):
        line = snap.trace.lines[lid]
    if line is not None:
        d.add(("line ", "label"), (display_path(snap, line), "path"), (" (inferred)", "muted"))
        if stat is not None:
            d.link(Phrase("line ", display_path(snap, line), " (inferred)"), Kind.LINE, lid)
    elif int(snap.stream.template_row[row]) >= 0:
        d.add(("line: ", "label"), ("the matched window kernel has no line", "muted"))

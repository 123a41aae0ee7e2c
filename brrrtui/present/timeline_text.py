"""The timeline's words: its title (page, steps, span, view, zoom) and the line naming the selection."""

from __future__ import annotations

from analyzers.results import REGIMES_BY_CODE
from brrrtui.contract.units import fmt_ns
from brrrtui.present.details import CAUSES_BY_CODE
from brrrtui.present.lanes import WindowLanes
from brrrtui.present.selection import Kind, Selection
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.status import PHASE_NAMES
from brrrtui.present.timeline import View


def timeline_title(snap: Snapshot | None, wl: WindowLanes | None, view: View) -> str:
    """`timeline · steady window 2/5 · steps 4–5 · 12.3 ms · view +0 ns…+12.3 ms · zoom ×1`."""
    if snap is None or wl is None:
        return "timeline"
    where = f"{fmt_ns(wl.extent_ns)} · view +{fmt_ns(view.t0)}…+{fmt_ns(view.t1)} · zoom ×{view.zoom:.0f}"
    if wl.stream:
        return f"timeline · {stream_page_title(snap, wl)} · {where}"
    k, n = snap.window_place(wl.window)
    phase = PHASE_NAMES.get(snap.analysis.phase)
    page = f"{phase} window" if phase else "window"
    return f"timeline · {page} {k}/{n}{_steps(snap, wl.window)} · {where}"


def _steps(snap: Snapshot, window: int) -> str:
    w = snap.trace.windows
    rows = (w.window == window).nonzero()[0]
    if not len(rows) or int(w.first_step[rows[0]]) < 0:
        return ""
    first, last = int(w.first_step[rows[0]]), int(w.last_step[rows[0]])
    return f" · step {first}" if first == last else f" · steps {first}–{last}"


def stream_page_title(snap: Snapshot, wl: WindowLanes) -> str:
    """The title of a stream page: stream after window 3 · 12,345 kernels · lines inferred (87% matched)."""
    if wl.window in snap.windows:
        where = f"after window {snap.windows.index(wl.window) + 1}"
    else:
        where = "before the first window" if wl.window < 0 else f"after window {wl.window + 1}"
    held = [lane.items.rows[lane.items.rows >= 0] for lane in wl.lanes]  # < 0: folded time profile
    raw = sum(len(r) for r in held)
    view = snap.stream
    matched = 0
    if view is not None and raw:
        matched = sum(int((view.template_row[r] >= 0).sum()) for r in held)
    folded, folded_matched = _folded(snap, wl.window)
    count, matched = raw + folded, matched + folded_matched
    share = 100 * matched / count if count else None
    pct = "–" if share is None else f"{share:.0f}%" if share < 99.5 or matched == count else f"{share:.1f}%"
    kernels = f"{raw:,} kernels" + (f" + {folded:,} folded" if folded else "")
    return f"stream {where} · {kernels} · lines inferred ({pct} matched)"


def _folded(snap: Snapshot, after: int) -> tuple[int, int]:
    """Rows of a stream page that the recorder folded, and how many of them matched a window's kernel."""
    view = snap.stream
    if view is None or view.agg is None:
        return 0, 0
    mine = view.agg.after_window == after
    counts = view.agg["count"]
    return int(counts[mine].sum()), int(counts[mine & (view.agg_template_row >= 0)].sum())


def selection_text(snap: Snapshot | None, s: Selection | None, cursor_t: float) -> str:
    """One line naming the selection: name · duration · regime or cause · start on the page."""
    if s is None or snap is None:
        return "cursor +" + fmt_ns(cursor_t)
    dur, at = fmt_ns(s.end - s.start), f"+{fmt_ns(s.start)}"
    if s.kind == Kind.KERNEL:
        regime = REGIMES_BY_CODE.get(int(snap.analysis.kernel_regime[s.row]))
        return f"{snap.kernel_name(s.row)[:60]} · {dur} · {regime.value if regime else '?'} · {at}"
    if s.kind == Kind.STREAMED and snap.stream is not None:
        st = snap.stream
        regime = REGIMES_BY_CODE.get(int(st.regime[s.row]))
        name = snap.stream_name(int(st.stream.name[s.row]))
        verdict = f"{regime.value} (inferred)" if regime else "no window has seen it"
        return f"{name[:60]} · {dur} · {verdict} · {at}"
    if s.kind == Kind.GAP:
        cause = CAUSES_BY_CODE.get(int(snap.analysis.gaps.cause[s.row]))
        return f"GPU idle · {dur} · {cause.value if cause else '?'} · {at}"
    name = snap.op_name(int(snap.trace.ops.name[s.row]))
    return f"{name} · {dur} on the CPU · {at}"

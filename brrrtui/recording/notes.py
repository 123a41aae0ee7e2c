"""What a reader should be told about a recording itself, before any analysis: it is incomplete (its writer
stopped without finishing it), or it holds no window (and why). `load_recording` puts these lines in
`trace.meta["load_notes"]`; the report and the UI show them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from brrrtui.contract.model import Table

_TIME_COLUMNS = {"windows": "end_ns", "steps": "t_ns", "telemetry": "t_ns", "stream": "start_ns"}


def _clock(t_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_ns / 1e9))


def _last_data_ns(tables: Mapping[str, Table]) -> int | None:
    ends = [int(t[c].max()) for name, c in _TIME_COLUMNS.items() if len(t := tables[name])]
    return max(ends) if ends else None


def mark_incomplete(meta: dict[str, Any], tables: Mapping[str, Table]) -> dict[str, Any]:
    """`meta` of a recording that says "running" while no recorder holds it: its writer was killed."""
    last = meta.get("last_batch_ns")
    if not isinstance(last, int):
        last = _last_data_ns(tables)
    started = meta.get("started_at_ns")
    when = ""
    if isinstance(last, int) and last > 0:
        after = f", {(last - started) / 1e9:.1f} s after the start" if isinstance(started, int) else ""
        when = f"; the last batch was committed at {_clock(last)}{after}"
    text = (
        "this recording is incomplete: brrrtui stopped without finishing it (killed or crashed)"
        f"{when}; everything committed before that is shown"
    )
    status = f"incomplete (stopped at {_clock(last)})" if isinstance(last, int) and last > 0 else "incomplete"
    return {**meta, "status": status, "stopped_at_ns": last, "load_notes": [*load_notes(meta), text]}


def load_notes(meta: Mapping[str, Any]) -> list[str]:
    """The notes a recording's `meta` carries for its reader (strings only; none when absent or malformed)."""
    notes = meta.get("load_notes")
    return [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []


def explain_no_window(meta: dict[str, Any], tables: Mapping[str, Table]) -> dict[str, Any]:
    """`meta` with a note saying why a finished recording holds no profiler window."""
    if len(tables["windows"]) or meta.get("status") == "running":
        return meta
    config = meta.get("window_config")
    config = config if isinstance(config, dict) else {}
    first = config.get("first_time_window_after_s", 1.0)
    first = first if isinstance(first, int | float) else 1.0
    t0, t1 = meta.get("started_at_ns"), meta.get("ended_at_ns")
    ran = f" after {(t1 - t0) / 1e9:.1f} s" if isinstance(t0, int) and isinstance(t1, int) else ""
    steps = len(tables["steps"])
    if steps:
        text = (
            f"no profiler window was opened: the script ended{ran}, after {steps} optimizer step(s), before "
            "its step time settled (the first step window waits for the steady state, up to "
            f"{config.get('warmup_max_steps', 30)} steps or {config.get('warmup_max_s', 20.0)} s); "
            "run more steps to capture one"
        )
    else:
        text = (
            f"no profiler window was opened: the script ended{ran}, before the first time-based window "
            f"({first:g} s after it imports torch; it made no optimizer step, which would open step windows)"
            + ("; record it with --first-window 0 to open one at once" if first > 0 else "")
        )
    return {**meta, "load_notes": [*load_notes(meta), text]}

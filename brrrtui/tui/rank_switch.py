"""`r` in a distributed run's view: the whole view switches to another rank.

A distributed run opens as one rank's trace with `meta["rank_set"]` naming every rank's recording
(brrrtui.recording.ranks). The picker (screens/ranks.py) lists them; the chosen rank's file is read in a
thread worker, as `view` reads a file, and analysed by the app's own worker (`request_analysis(trace)`, as the
phase key does), so the timeline, source, hot lines, details and header (`rank 1 of 2`) all show that rank,
in the phase picked with `P`.
"""

from __future__ import annotations

import functools
from typing import Any

from brrrtui.present.ranks_report import rank_choices
from brrrtui.tui.screens.ranks import RankPicker


class RankSwitch:
    """Mixed into the app (BrrrApp): its `r` action."""

    def action_pick_rank(self) -> None:
        app: Any = self
        trace = app._trace
        if trace is None and app._busy:  # the first analysis (a big recording's first look on screen) runs on
            app.notify("Still analysing: pick the rank again in a moment.", timeout=3)
            return
        rows, shown = rank_choices(trace.meta) if trace is not None else ([], None)
        if not rows:
            app.notify("One rank only: r picks a rank of a distributed run.", timeout=3)
            return
        app.push_screen(RankPicker(rows, shown), functools.partial(_picked, app, shown))


def _picked(app: Any, shown: int | None, rank: int | None) -> None:
    if rank is None or rank == shown:
        return
    if app._busy:
        app.notify("Still analysing: pick the rank again in a moment.", timeout=3)
        return
    path = app._trace.meta["rank_set"]["files"][rank]
    app.notify(f"Reading rank {rank}…", timeout=2)
    app.run_worker(functools.partial(_load, app, path), thread=True, group="rank", exit_on_error=False)


def _load(app: Any, path: str) -> None:
    from brrrtui import session
    from brrrtui.contract.errors import InputError

    try:
        trace = session.read(path)  # the rank's own file: it opens with the same set, itself shown
    except (InputError, OSError) as e:
        app.call_from_thread(app.notify, f"That rank cannot be read: {e}", severity="error", timeout=5)
        return
    app.call_from_thread(app.request_analysis, trace)

"""Which phase of the run the app shows: the one `analyze()` leads with (the steady state once a window of it
exists, else warm-up, else set-up) until the user picks another with the phase key.

    automatic:  set-up ──(warm-up window)──▶ warm-up ──(steady window)──▶ steady
    picked:     stays on the picked phase while windows arrive; the header counts what is new elsewhere

Picking the phase the run leads with hands the choice back to the automatic one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzers.phases.run_phases import Phase
from analyzers.results import Analysis
from brrrtui.present.status import (
    PHASE_KEY,
    PHASE_NAMES,
    PhaseView,
    lead_phase,
    next_phase,
    phase_text,
    phase_view,
)


@dataclass
class PhaseChoice:
    picked: Phase | None = None  # None: the automatic choice
    seen: dict[Phase, int] = field(default_factory=dict)  # windows per phase when the user picked

    def step(self, shown: Analysis) -> Phase | None:
        """The phase key: move to the next phase that has windows (None: there is no other)."""
        nxt = next_phase(shown)
        if nxt is None:
            return None
        if nxt is lead_phase(shown):
            self.picked, self.seen = None, {}
        else:
            phases = shown.phases
            self.picked = nxt
            self.seen = {p: len(phases.windows_in(p)) for p in Phase} if phases is not None else {}
        return nxt

    def view(self, a: Analysis) -> PhaseView | None:
        return phase_view(a, self.picked is not None and a.phase is self.picked, self.seen)

    def news(self, old: Analysis, new: Analysis) -> str | None:
        """A log line when a new analysis moved the phase on screen (by itself or by the key), or when the run
        now leads with another phase than the picked one on screen."""
        v = phase_view(new)
        if v is None:
            return None
        if new.phase is not old.phase:
            how = "" if self.picked is not None else f"; {PHASE_KEY} cycles the phases"
            return f"now showing {phase_text(v)} (window {_ids(new.windows)}{how})"
        lead = lead_phase(new)
        if self.picked is not None and lead is not lead_phase(old) and lead is not None and new.phases:
            n = len(new.phases.windows_in(lead))
            return (
                f"the run now has {n} {PHASE_NAMES.get(lead, lead.label)} window(s); still showing the picked "
                f"{PHASE_NAMES.get(new.phase, new.phase.label)} — {PHASE_KEY} to switch"
            )
        return None


def _ids(windows: tuple[int, ...]) -> str:
    return ", ".join(str(w) for w in windows)

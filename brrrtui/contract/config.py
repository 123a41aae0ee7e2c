"""How the capture is configured: the CLI builds a WindowConfig, the child reads it from its environment as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class WindowConfig:
    duty: float = 0.02  # target share of run time spent on capture cost
    window_steps: int = 2  # optimizer steps per step-aligned window (fewer when a step makes many events)
    window_max_s: float = 2.0  # a step window never runs longer than this
    time_window_s: float = 0.2  # length of the first time-based window (later ones sized by event rate)
    target_events: int = 25_000  # aim for about this many events per window
    first_time_window_after_s: float = 1.0  # time fallback: first window this long after torch appears
    step_stale_s: float = 5.0  # no optimizer step for this long: fall back to time windows
    min_gap_s: float = 1.0  # at least this long between windows
    max_windows: int = 0  # 0 = unlimited
    # The first step window waits for the steady state: the last `settle_steps` step durations within
    # `settle_tolerance` of their median. It opens anyway after `warmup_max_steps` steps or `warmup_max_s`.
    settle_steps: int = 3
    settle_tolerance: float = 0.25
    warmup_max_steps: int = 30
    warmup_max_s: float = 20.0
    stream: bool = False  # every kernel between windows from CUPTI (brrrtui.capture.stream); opt-in (docs/guide.md)

    @classmethod
    def from_json(cls, text: str | None) -> WindowConfig:
        return cls(**json.loads(text)) if text else cls()

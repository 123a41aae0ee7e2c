"""Profiler windows: when to open and close them, and turning one into rows for the recording.

A window is a short torch.profiler session. Inside it steps run slower and closing it stalls the thread
(~15-20 us per event, DESIGN.md), so windows are short and spaced out by a duty-cycle budget:

    steps     |s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|s|
    windows     [=W1=]xx                          [=W2=]xx
                      ^ stall (stop + convert)
                <------------ cost(W1) / duty ----------->   next window may open

cost(W) = the stall + the extra time steps took inside the window (against the median unprofiled step).
Training scripts open and close windows on optimizer steps; scripts with no optimizer get time-based windows
from ticks the timer thread delivers to the main thread (the profiler must start and stop on the thread that
runs the model, DESIGN.md).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

STEP_MODE, TIME_MODE = 0, 1  # = analyzers.model.WindowMode.STEPS / TIME


@dataclass
class WindowConfig:
    duty: float = 0.03  # target share of run time spent on capture cost
    window_steps: int = 3  # optimizer steps per step-aligned window
    window_max_s: float = 2.0  # a window never runs longer than this
    time_window_s: float = 0.5  # length of a time-based window
    first_time_window_after_s: float = 1.0  # time fallback: first window this long after torch appears
    step_stale_s: float = 5.0  # no optimizer step for this long: fall back to time windows
    min_gap_s: float = 1.0  # at least this long between windows
    max_windows: int = 0  # 0 = unlimited

    @classmethod
    def from_json(cls, text: str | None) -> WindowConfig:
        return cls(**json.loads(text)) if text else cls()


class Action(IntEnum):
    NONE = 0
    OPEN = 1
    CLOSE = 2


class Scheduler:
    """Pure decision logic (tested without torch): feed it ticks, it says open / close / nothing."""

    def __init__(self, config: WindowConfig, now_ns: int):
        self.cfg = config
        self.started_ns = now_ns
        self.torch_seen_ns: int | None = None
        self.open_since_ns: int | None = None
        self.open_mode = STEP_MODE
        self.steps_in_window = 0
        self.next_open_ns = now_ns
        self.windows = 0
        self.step_times_ns: list[int] = []  # end time of every optimizer step
        self.window_steps: set[int] = set()  # indices of steps that ended inside a window
        self.step_windows = 0
        self.disabled = False

    # -- inputs
    def on_step(self, now_ns: int) -> Action:
        self.step_times_ns.append(now_ns)
        if self.open_since_ns is not None:
            self.window_steps.add(len(self.step_times_ns) - 1)
            self.steps_in_window += 1
            if self.open_mode == TIME_MODE or self.steps_in_window >= self.cfg.window_steps:
                return Action.CLOSE
            if now_ns - self.open_since_ns >= self.cfg.window_max_s * 1e9:
                return Action.CLOSE
            return Action.NONE
        if self.disabled or self._limit_reached():
            return Action.NONE
        # the first step window of a run opens at once (short runs are never empty); later ones wait
        if self.step_windows == 0 or now_ns >= self.next_open_ns:
            self.open_mode = STEP_MODE
            return Action.OPEN
        return Action.NONE

    def on_timer(self, now_ns: int) -> Action:
        action = self.timer_decision(now_ns)
        if action == Action.OPEN:
            self.open_mode = TIME_MODE
        return action

    def timer_decision(self, now_ns: int) -> Action:
        """No side effects: the timer thread asks this before interrupting the main thread."""
        if self.disabled:
            return Action.NONE
        if self.open_since_ns is not None:
            limit = self.cfg.time_window_s if self.open_mode == TIME_MODE else self.cfg.window_max_s
            return Action.CLOSE if now_ns - self.open_since_ns >= limit * 1e9 else Action.NONE
        if self.torch_seen_ns is None or self._limit_reached():
            return Action.NONE
        last_step = self.step_times_ns[-1] if self.step_times_ns else None
        if last_step is not None and now_ns - last_step < self.cfg.step_stale_s * 1e9:
            return Action.NONE  # steps drive the windows
        if (
            now_ns - self.torch_seen_ns < self.cfg.first_time_window_after_s * 1e9
            or now_ns < self.next_open_ns
        ):
            return Action.NONE
        return Action.OPEN

    # -- outcomes
    def opened(self, now_ns: int) -> None:
        self.open_since_ns = now_ns
        self.steps_in_window = 0
        self.windows += 1
        self.step_windows += self.open_mode == STEP_MODE

    def closed(self, opened_ns: int, closed_ns: int, stall_ns: int) -> None:
        """Schedule the next window so capture cost stays under the duty budget."""
        self.open_since_ns = None
        cost_ns = stall_ns + self._slowdown_ns(opened_ns, closed_ns)
        gap_ns = max(cost_ns / self.cfg.duty, self.cfg.min_gap_s * 1e9)
        self.next_open_ns = int(closed_ns + gap_ns)

    def unprofiled_step_ns(self) -> float | None:
        t = self.step_times_ns
        d = [t[i] - t[i - 1] for i in range(max(1, len(t) - 200), len(t))
             if i not in self.window_steps and i - 1 not in self.window_steps]  # fmt: skip
        return statistics.median(d) if d else None

    def _slowdown_ns(self, opened_ns: int, closed_ns: int) -> float:
        base = self.unprofiled_step_ns()
        inside = [i for i in self.window_steps if opened_ns <= self.step_times_ns[i] <= closed_ns]
        if base is None or not inside:
            return 0.25 * (closed_ns - opened_ns)  # DESIGN.md: profiled steps ran ~25% slower (nanoGPT)
        return max(0.0, (closed_ns - opened_ns) - base * len(inside))

    def _limit_reached(self) -> bool:
        return bool(self.cfg.max_windows) and self.windows >= self.cfg.max_windows


# ---------------------------------------------------------------------------------------------------------
# Converting a finished profiler session into rows (analyzers.model schemas)


class Interner:
    """Child-side string interning: ids are the recording's `strings` ids."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.new: list[tuple[int, str]] = []

    def __call__(self, s: str | None) -> int:
        if s is None:
            return -1
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.ids)
            self.new.append((i, s))
        return i

    def take_new(self) -> list[tuple[int, str]]:
        new, self.new = self.new, []
        return new


_GPU_KINDS = {"kernel": 0, "gpu_memcpy": 1, "gpu_memset": 2}
_RUNTIME_KINDS = {"cuda_runtime", "cuda_driver"}


def activity_kind(e: Any) -> str:
    """Kineto's activity type. torch >= 2.12 exposes it; older builds only give the device, so tell kinds
    apart by name: CUDA API calls are `cuda*` / `cu[A-Z]*`, GPU copies and fills `Memcpy*` / `Memset*`."""
    try:
        return e.activity_type()
    except AttributeError:
        pass
    name = e.name()
    if e.is_user_annotation():
        return "gpu_user_annotation" if e.device_type().name == "CUDA" else "user_annotation"
    if e.device_type().name == "CUDA":
        return (
            "gpu_memcpy"
            if name.startswith("Memcpy")
            else "gpu_memset"
            if name.startswith("Memset")
            else "kernel"
        )
    if name.startswith("cuda") or (name.startswith("cu") and name[2:3].isupper()):
        return "cuda_runtime"
    return "cpu_op"


def _as_json(value: list[Any]) -> str | None:
    """Shapes and dtype names as JSON text. repr() of these lists is JSON but for the quotes, and ~10x
    cheaper than json.dumps (which was half the conversion time at 58 k events)."""
    return str(value).replace("'", '"') if value else None


def _grid_block(meta: str) -> tuple[str | None, str | None]:
    if not meta or "grid" not in meta:
        return None, None
    try:
        d = (
            json.loads("{" + meta.strip().strip(",") + "}")
            if not meta.lstrip().startswith("{")
            else json.loads(meta)
        )
    except ValueError:
        return None, None
    g, b = d.get("grid"), d.get("block")
    return (",".join(map(str, g)) if g else None, ",".join(map(str, b)) if b else None)


def convert_events(events: Any, window: int, strings: Interner, span_prefix: str) -> dict[str, list[tuple]]:
    """kineto_results.events() -> rows in schema order (cheap accessors only; DESIGN.md: prof.events() costs
    70-150 us per event, these a few)."""
    gpu: list[tuple] = []
    runtime: list[tuple] = []
    ops: list[tuple] = []
    spans: list[tuple] = []
    plen = len(span_prefix)
    for e in events:
        kind = activity_kind(e)
        name = e.name()
        if kind in _GPU_KINDS:
            grid, block = _grid_block(e.metadata_json()) if kind == "kernel" else (None, None)
            nbytes = e.nbytes() if kind != "kernel" else -1
            gpu.append((
                window, _GPU_KINDS[kind], strings(name), e.start_ns(), e.duration_ns(), e.device_index(),
                e.device_resource_id(), e.correlation_id(), strings(grid), strings(block),
                nbytes if nbytes and nbytes > 0 else -1,
            ))  # fmt: skip
        elif kind in _RUNTIME_KINDS:
            runtime.append((window, strings(name), e.start_ns(), e.duration_ns(), e.start_thread_id(),
                            e.correlation_id()))  # fmt: skip
        elif kind in ("cpu_op", "user_annotation"):
            if name.startswith(span_prefix):
                spans.append((window, int(name[plen:]), e.start_ns(), e.duration_ns(), e.start_thread_id()))
                continue
            fl = e.flops()
            ops.append((
                window, strings(name), e.start_ns(), e.duration_ns(), e.start_thread_id(), e.sequence_nr(),
                e.fwd_thread_id() or -1, strings(_as_json(e.shapes())), strings(_as_json(e.dtypes())),
                float(fl) if fl else float("nan"),
            ))  # fmt: skip
    return {"gpu": gpu, "runtime": runtime, "ops": ops, "spans": spans}


def now_ns() -> int:
    return time.time_ns()

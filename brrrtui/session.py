"""The headless core every front end uses: open a recording or trace, choose its phases and windows, analyse
it, and hand back typed results: `Analysis` objects for the commands (`read` and `analyse_phases`: report,
export, diff), `Snapshot`s for the UI (view and the live run, from its thread workers: `Source`, `first_look`,
`follow_stream`). The UI only schedules these and shows their results; it reads no file and runs no analysis.

An analysis covers the windows of one phase: the one `analyze()` leads with (the steady state once the run has
a window in it), or the phase the user picked with the phase key. A picked phase with no window (the run's
phases were re-judged as more steps came) falls back to the automatic choice. Picking a phase re-analyses the
trace already loaded instead of re-reading the recording.

Live (`Source` with `follow`), a new window costs the same whether it is the 10th or the 100th: the recording
is read by a `Follower` (only the batches committed since the last read), and while the script runs an
analysis takes the newest `LIVE_WINDOWS` windows of the phase shown (analyzers/phases/live_windows.py), so its figures
are those of `analyze(trace, windows=...)` on those windows, and it says so in its notes; once the script has
ended it takes every window of the phase, as `brrrtui report` does.

View mode, a big recording first shows its newest window of the phase, analysed alone (`first_look`: ~0.05 s
for a window of 20 k kernels), while every window of the phase is analysed (~1 s at 1 M kernels); the full
analysis then replaces it, as a live one replaces the one before.

A full analysis keeps at most `STREAM_TAIL` streamed rows, the newest (a load may have been given a larger
tail). A stream update polls a `StreamReader` for the rows added since, keeps the newest `STREAM_TAIL` rows of
the shown stream and the new ones, re-infers their lines against the analysis it has and rebuilds the stream
pages only.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from analyzers.comm.clocks import ClockOffset, clock_offsets
from analyzers.comm.ranks import RankComparison, compare_ranks
from analyzers.phases.live_windows import LIVE_WINDOWS, WindowIndex, bounded_note, live_windows
from analyzers.phases.run_phases import Phase, TracePhases
from analyzers.results import Analysis
from brrrtui.contract.model import STREAM_SCHEMA, Table, Trace
from brrrtui.present.snapshot import Snapshot, build_snapshot, with_stream
from brrrtui.present.status import Loading
from brrrtui.recording import store
from brrrtui.recording.follow import Follower
from brrrtui.recording.ranks import rank_traces
from brrrtui.recording.stream_reader import StreamReader

AnalyzeFn = Callable[..., Any]
T = TypeVar("T")
# A recording of this many events (events_in) or more first shows one window: all of them take 0.2 s or more.
FIRST_LOOK_EVENTS = 1_000_000
DRAIN_CHUNK = 2_000  # feed events handled at a time: a key waits for one chunk at most


def favour_the_ui(interval_s: float = 0.001) -> None:
    """Live, the recorder's threads share the interpreter with the UI thread. A reader thread copying a
    script's flood of output runs Python flat out, and the UI thread gets the GIL back only when the switch
    interval (5 ms by default) has passed; at 1 ms keys are handled sooner under a flood
    (benchmarks/bench_log_flood.py)."""
    sys.setswitchinterval(min(sys.getswitchinterval(), interval_s))


def read(path: str) -> Trace:
    """A recording or a torch.profiler trace, whole (brrrtui.contract.errors.InputError: neither, or damaged)."""
    from brrrtui.recording import load  # looked up at each call: tests count the loads

    return abandonable(load.load_trace, path)


def load_recording(path: str) -> Trace:
    """What the UI shows of a file: `read`, with the newest `STREAM_TAIL` streamed rows."""
    return _newest_stream_rows(read(path))


def analyse(trace: Trace, peaks: str | None = None) -> Analysis:
    """The analysis the run leads with (`--peaks` SPEC applied): what `diff` compares."""
    from analyzers.analyze import analyze

    return analyze(trace, peaks_override=peaks)


def analyse_phases(trace: Trace, peaks: str | None = None) -> tuple[Analysis, dict[Phase, Analysis]]:
    """The analysis the run leads with and one of each other phase that has windows (`--peaks` SPEC applied):
    what `report` and `export` show."""
    from analyzers.analyze import analyze_with_other_phases

    return analyze_with_other_phases(trace, peaks)


def notes_of(trace: Trace) -> list[str]:
    """What the file itself says to its reader (incomplete, no window and why)."""
    from brrrtui.recording.notes import load_notes

    return load_notes(trace.meta)


def compare_rank_set(
    trace: Trace,
) -> tuple[RankComparison, int, list[str], dict[int, ClockOffset]] | None:
    """The ranks of the run `trace` belongs to, side by side: (comparison, the rank shown, notes, every
    rank's clock against the lowest rank's); None for a single-process recording. A rank whose file is
    missing or unreadable is left out, with a note."""
    found = rank_traces(trace)
    if found is None:
        return None
    shown, traces, notes = found
    return compare_ranks(traces), shown, notes, clock_offsets(traces)


def events_in(trace: Trace) -> int:
    """What the loading line counts: GPU activities, CPU operators, runtime calls and line spans."""
    return len(trace.gpu) + len(trace.ops) + len(trace.runtime) + len(trace.spans)


def read_position(path: str) -> int | None:
    """How far this process has read `path`: the file position of a descriptor open on it (Linux's
    /proc/self/fdinfo). The readers of Chrome traces and of gzip files read front to back, so this is their
    progress; SQLite reads at offsets and leaves the position at 0. None where it cannot be seen."""
    try:
        want = os.path.realpath(path)
        best = None
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}") != want:
                    continue
                with open(f"/proc/self/fdinfo/{fd}") as f:
                    pos = int(f.readline().split()[1])  # first line: "pos:\t<offset>"
            except (OSError, ValueError, IndexError):
                continue
            best = pos if best is None else max(best, pos)
        return best
    except OSError:
        return None


def loading(path: str, stage: str, events: int | None, elapsed_s: float) -> Loading:
    """The header's loading line: the stage, the file's size and how much of it was read (while reading)."""
    try:
        size: int | None = os.path.getsize(path)
    except OSError:
        size = None
    read = read_position(path) if stage == "reading" else None
    return Loading(stage, elapsed_s, size, read or None, events)


def analyse_trace(
    trace: Trace,
    script: str | None,
    version: int,
    analyze: AnalyzeFn | None = None,
    phase: Phase | None = None,
) -> Snapshot:
    """Analyse the windows of `phase` (None: of the phase the run leads with) and build a snapshot (`analyze`
    replaces analyzers.analyze.analyze in tests). Raises what analysing raises; loading (`load_recording`)
    raises brrrtui.contract.errors.InputError for a file that is not a recording."""
    from analyzers.analyze import analyze as analyze_trace, phases_of

    fn = analyze or analyze_trace
    shown = with_windows(phases_of(trace), phase)
    if shown is not None:
        return abandonable(lambda: build_snapshot(fn(trace, None, phase=shown), script, version))
    return abandonable(lambda: build_snapshot(fn(trace), script, version))


def with_windows(phases: TracePhases, phase: Phase | None) -> Phase | None:
    """`phase` when it has windows; else None, the phase the run leads with (a picked phase can lose its
    windows when more steps re-judge the run's phases)."""
    return phase if phase is not None and phases.windows_in(phase) else None


def first_look(
    trace: Trace,
    script: str | None,
    version: int,
    analyze: AnalyzeFn | None = None,
    phase: Phase | None = None,
    min_events: int | None = None,
) -> Snapshot | None:
    """A snapshot of the newest window of `phase` (None, or a phase without windows: the one the run leads
    with) analysed alone, to show while analyse_trace takes all of them; None for a recording of fewer than
    `min_events` events (default FIRST_LOOK_EVENTS), a phase of one window, or an analysis that failed."""
    from analyzers.analyze import analyze as analyze_trace, choose_windows, phases_of

    if events_in(trace) < (FIRST_LOOK_EVENTS if min_events is None else min_events):
        return None
    phases = phases_of(trace)
    lead, windows = choose_windows(phases, None, with_windows(phases, phase))
    if len(windows) < 2:
        return None
    newest, label = max(windows), lead.label if lead is not Phase.UNKNOWN else "recorded"
    # without the kernel stream's rows: their lines are inferred against every window's (the whole analysis's)
    alone = dataclasses.replace(trace, stream=trace.stream.take(np.arange(0)))
    stream = ", and the kernel stream's lines," if len(trace.stream) else ""

    def look() -> Snapshot:
        a = (analyze or analyze_trace)(alone, None, windows=[newest])
        a.notes.insert(
            0,
            f"first look: window {newest} alone, the newest of {len(windows)} {label} windows; all of them"
            f"{stream} are being analysed",
        )
        return dataclasses.replace(build_snapshot(a, script, version), first_look=tuple(windows))

    try:
        return abandonable(look)
    except Abandoned:
        raise
    except Exception:  # noqa: BLE001 - the whole analysis comes next: it meets the same error and reports it
        return None


class Source:
    """Where the app's analyses read from, and how they analyse. View mode: the file, loaded whole
    (`load_recording`, `analyse_trace`). Live mode (`follow`): a `Follower` that reads only the batches committed
    since its last read, and an analysis of the newest `LIVE_WINDOWS` windows of the phase shown while the
    script runs (all of them once it has ended), their rows cut out by a `WindowIndex` fed each read
    (analyzers/phases/live_windows.py): a new window costs the same whether it is the 10th or the 100th. Used by one
    thread worker at a time."""

    def __init__(
        self,
        path: str,
        follow: bool,
        script: str | None = None,
        analyze: AnalyzeFn | None = None,
        keep: int = LIVE_WINDOWS,
    ):
        self.path, self.script, self.analyze = path, script, analyze
        self.follower = Follower(path, store.STREAM_TAIL) if follow else None
        self.index = WindowIndex()
        self.keep = keep

    def read(self) -> Trace:
        """The whole recording as committed now (live: the rows read before plus the new batches)."""
        if self.follower is None:
            return load_recording(self.path)
        return abandonable(self.follower.poll)

    def analyse(
        self, trace: Trace, version: int, phase: Phase | None = None, running: bool = False
    ) -> Snapshot:
        """A snapshot of `phase` (None: the phase the run leads with); live and `running`: of its newest
        windows only."""
        if self.follower is None or trace.source != self.path:  # view mode, or another file (a rank's)
            return analyse_trace(trace, self.script, version, self.analyze, phase)
        return abandonable(
            lambda: build_snapshot(self.analysis(trace, self.analyze, phase, running), self.script, version)
        )

    def analysis(self, trace: Trace, analyze: AnalyzeFn | None, phase: Phase | None, running: bool) -> Any:
        """The analysis a live snapshot shows: of `phase`'s windows (None, or a phase without windows: the
        phase the run leads with), the newest `keep` while `running`, analysed on their rows only."""
        from analyzers.analyze import analyze as analyze_trace, phases_of

        fn = analyze or analyze_trace
        self.index.add(trace)
        phases = phases_of(trace)
        phase = with_windows(phases, phase)
        windows, total = live_windows(phases, phase, self.keep if running else None)
        cut = self.index.cut(trace, windows)
        if len(windows) == total:  # every window of the phase: as analyse_trace would call it
            return fn(cut) if phase is None else fn(cut, None, phase=phase)
        a = fn(cut, None, windows=windows)
        a.notes.append(bounded_note(windows, total, a.phase))
        return a


class Abandoned(Exception):
    """The worker was cancelled (the app is closing) while `abandonable` waited."""


def _not_in_a_worker() -> Callable[[], bool] | None:
    return None


# Set by a front end that runs the session's calls in cancellable workers (the TUI: Textual's thread workers):
# returns, for the calling thread, a function that says whether its worker was cancelled, or None outside one.
cancel_probe: Callable[[], Callable[[], bool] | None] = _not_in_a_worker


def abandonable(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) in a daemon thread, waited for here, in a cancellable worker (`cancel_probe`), unless the worker
    is cancelled: then it raises Abandoned at once and the thread is left to finish alone. Textual's thread
    workers run in asyncio's executor, whose threads the interpreter joins at exit, so a `q` during a 20 s load
    would otherwise hold the process, its terminal already given back, until the load ends. Outside a worker
    (or in tests, or headless): a plain call."""
    cancelled = cancel_probe()
    if cancelled is None:
        return fn(*args)
    done = threading.Event()
    out: list[Any] = []

    def run() -> None:
        try:
            out.append((True, fn(*args)))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting worker
            out.append((False, e))
        done.set()

    threading.Thread(target=run, name="brrrtui-abandonable", daemon=True).start()
    while not done.wait(0.1):
        if cancelled():
            raise Abandoned
    ok, value = out[0]
    if not ok:
        raise value
    return value


def _newest_stream_rows(trace: Trace) -> Trace:
    n, tail = len(trace.stream), store.STREAM_TAIL
    if n <= tail:
        return trace
    return dataclasses.replace(trace, stream=trace.stream.take(np.arange(n - tail, n)))


def stream_reader(path: str, snap: Snapshot) -> StreamReader:
    """A reader positioned where the snapshot's load ended (its stream rows and strings)."""
    tr = snap.trace
    return StreamReader(path, tr.stream_total, len(tr.strings) - 1)


def follow_stream(base: Snapshot, reader: StreamReader) -> Snapshot | None:
    """`base` with the stream rows the reader gained since its last poll (and, when the recorder folded rows
    it had not read, the aggregates read again); None when it gained none."""
    tail = store.STREAM_TAIL
    rows, strings = reader.poll(limit=tail)
    if not len(rows) and not strings and reader.reload is None:
        return None
    old = base.stream.stream if base.stream is not None else base.trace.stream
    if reader.reload is not None:
        # the recorder folded rows the page had not read: it takes the aggregates the reader read with the rows
        # in place of its own, and drops its raw rows (older than those, so folded too)
        trace = dataclasses.replace(base.trace, **reader.reload)  # type: ignore[arg-type]  # Tables by name
        base = dataclasses.replace(base, analysis=dataclasses.replace(base.analysis, trace=trace))
        old = old.take(np.arange(0))
    keep = max(tail - len(rows), 0)
    old = old.take(np.arange(max(len(old) - keep, 0), len(old)))
    names = dict(base.stream_names)
    n = len(base.trace.strings)
    names.update((i, s) for i, s in strings if i >= n)
    return with_stream(base, Table.concat([old, rows], STREAM_SCHEMA), reader.rowid, names)

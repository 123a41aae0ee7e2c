"""The Textual app: wiring only. Loads and analyses off the UI thread, drains the live feed, pauses, quits.

    make_app(path, feed, script) -> BrrrApp

- View mode (feed None): `path` is a finished recording or a torch.profiler trace; it is loaded once (or given
  as `trace`) and analysed in a thread worker; the header says how far it is from the first frame
  (session.loading). A big one first shows its newest window analysed alone (session.first_look), then the whole
  phase's analysis. A file it cannot read ends the app: `load_error` holds the one line to print.
- Live mode: a recorder writes the recording at `path` and puts events on `feed`. A timer drains the feed
  every `poll_s`; a WindowAdded reads what the recording gained and analyses it in a thread worker (one at a
  time; a window that arrives meanwhile triggers one more run; brrrtui.session.Source), and the new
  snapshot replaces the old one unless the user paused.
- The kernel stream between windows (StreamAdded, about once a second) is followed without re-reading the
  recording: at most every `stream_s`, a thread worker asks brrrtui.session for the rows added since (it
  re-infers their lines against the analysis it has and rebuilds the stream pages only). A full analysis
  resets the reader to where its load ended; a stream update started before it is dropped (the reader re-reads
  those rows).
- Phases: an analysis covers one phase's windows (brrrtui.tui.phase_choice): the one the run leads with (the
  steady state once it has a window: live, the view moves there by itself), or the one picked with `P`, which
  stays on screen across reloads. `P` re-analyses the trace already loaded, in the same worker.

The loading, analysing and stream merging themselves live in brrrtui.session; what the header says after an
analysis in brrrtui.present.status.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.worker import NoActiveWorker, get_current_worker

from analyzers.phases.run_phases import Phase
from brrrtui import session
from brrrtui.contract.model import Trace
from brrrtui.present.snapshot import Snapshot
from brrrtui.present.status import (
    PHASE_NAMES,
    RunState,
    exit_line,
    opening_lines,
    phases_with_windows,
    state_after_analysis,
)
from brrrtui.record.feed import Exited, Feed, LogLine, StepsAdded, StreamAdded, TelemetrySample, WindowAdded
from brrrtui.runtime.allocator import tune_for_analysis
from brrrtui.session import StreamReader
from brrrtui.tui.keymap import bindings
from brrrtui.tui.messages import AnalysisFailed, SnapshotReady, StreamReady
from brrrtui.tui.phase_choice import PhaseChoice
from brrrtui.tui.rank_switch import RankSwitch
from brrrtui.tui.screens.confirm_quit import ConfirmQuit
from brrrtui.tui.screens.help import HelpScreen
from brrrtui.tui.screens.main import MainScreen
from brrrtui.tui.widgets._roles import THEME_VARIABLES
from brrrtui.tui.widgets.telemetry import Telemetry

AnalyzeFn = session.AnalyzeFn


def _worker_cancelled() -> Callable[[], bool] | None:
    """The session's cancel probe: inside a Textual thread worker, whether that worker was cancelled (the app is
    closing, so a long load is abandoned rather than waited for); None outside one."""
    try:
        worker = get_current_worker()
    except NoActiveWorker:
        return None
    return lambda: worker.is_cancelled


session.cancel_probe = _worker_cancelled


class BrrrApp(RankSwitch, App):  # RankSwitch: `r`, another rank of a distributed run
    CSS_PATH = "app.tcss"
    TITLE = "brrrtui"
    BINDINGS = bindings("app")

    def __init__(
        self,
        path: str | None,
        feed: Feed | None,
        script: str | None,
        on_quit_confirm: Callable[[], None] | None = None,
        analyze: AnalyzeFn | None = None,
        poll_s: float = 0.15,
        clock: Callable[[], float] = time.monotonic,
        stream_s: float = 1.0,
        on_interrupt: Callable[[], None] | None = None,
        trace: Trace | None = None,
    ) -> None:
        super().__init__()
        self._preloaded = trace  # view mode: the file, read already (its first analysis does not read it)
        self.load_error: str | None = None  # view mode: why the file could not be read (the app has exited)
        self._stage: tuple[str, int | None] = ("reading", None)  # set by the worker: (stage, events)
        self.on_interrupt = on_interrupt
        self.interrupts = 0
        self.path = path
        self.feed = feed
        self.script = script
        self.on_quit_confirm = on_quit_confirm
        self._analyze = analyze
        self.poll_s = poll_s
        self.clock = clock
        self.live = feed is not None
        self.started = clock()
        name = script or (os.path.basename(path) if path else "brrrtui")
        self.state = RunState(name=name, live=self.live, running=self.live)
        self.snapshot: Snapshot | None = None
        self.pending: Snapshot | None = None  # arrived while paused
        self.analyses = 0  # finished analyses (tests wait on it)
        self._busy = False
        self._again = False
        self._version = 0
        self.phases = PhaseChoice()
        self._trace: Trace | None = None  # the whole recording the newest analysis came from
        # live: reads what was added
        self._source = session.Source(path or "", feed is not None, script, analyze)
        # following the kernel stream (live mode)
        self.stream_s = stream_s
        self.stream_updates = 0  # stream updates applied or pending (tests wait on it)
        self._latest: Snapshot | None = None  # the newest snapshot, shown or pending
        self._reader: StreamReader | None = None  # positioned where _latest's rows end
        self._generation = 0  # bumped by every full analysis: older stream updates are dropped
        self._stream_dirty = False
        self._stream_busy = False
        self._stream_error: str | None = None

    # ------------------------------------------------------------------ theme

    def get_theme_variable_defaults(self) -> dict[str, str]:
        colors = self.current_theme.to_color_system().generate()
        return {name: colors[source] for name, source in THEME_VARIABLES.items()}

    # ------------------------------------------------------------------ lifecycle

    @property
    def main(self) -> MainScreen:
        return self.get_screen("main")  # type: ignore[return-value]

    def on_mount(self) -> None:
        self.install_screen(MainScreen(self.state), "main")
        self.push_screen("main")
        if self.live:
            session.favour_the_ui()
            self.set_interval(self.poll_s, self.drain_feed)
            self._tick()  # the header shows the elapsed time from the first frame, not after a second
            self.set_interval(1.0, self._tick)
            self.set_interval(self.stream_s, self._poll_stream)
        if self.path and not self.live:
            self._show_loading()
            self._loading_timer = self.set_interval(0.25, self._show_loading)
            self.call_after_refresh(self.request_analysis, self._preloaded)  # the first frame comes first
        elif self.path and os.path.exists(self.path):
            self.request_analysis()

    def _show_loading(self) -> None:
        """View mode, until the first analysis: what the worker is at (the header's loading line)."""
        if self.snapshot is not None or self.load_error is not None:  # the analysis clears the line
            self._loading_timer.stop()
            return
        self._set_state(loading=session.loading(self.path or "", *self._stage, self.clock() - self.started))

    def _tick(self) -> None:
        if self.state.running:
            self._set_state(elapsed_s=self.clock() - self.started)

    def _set_state(self, **kw: Any) -> None:
        self.state = self.state.with_(**kw)
        if self.screen_stack and self.is_screen_installed("main"):
            self.main.set_state(self.state)

    # ------------------------------------------------------------------ live feed

    def drain_feed(self) -> None:
        if self.feed is None or not self.is_screen_installed("main") or not self.main.query("#log"):
            return  # not yet, or the app is closing (its panes gone; a chained drain may come after)
        new_window, main = False, self.main
        events = self.feed.drain(session.DRAIN_CHUNK)
        logs = [ev for ev in events if type(ev) is LogLine]  # most of a flood: drawn at once, below
        for ev in [ev for ev in events if type(ev) is not LogLine] if len(logs) < len(events) else ():
            if isinstance(ev, WindowAdded):
                self._set_state(windows=max(self.state.windows, ev.window + 1))
                new_window = True
            elif isinstance(ev, StreamAdded):
                self._stream_dirty = True
            elif isinstance(ev, StepsAdded):
                self._set_state(steps=ev.last_step + 1)
            elif isinstance(ev, TelemetrySample):
                telemetry = main.query_one("#telemetry", Telemetry)
                telemetry.add(ev.t_ns, ev.gpu_util_pct, ev.mem_used_bytes, ev.power_w, ev.sm_clock_mhz)
            elif isinstance(ev, Exited):
                self._set_state(running=False, exit_code=ev.exit_code, elapsed_s=self.clock() - self.started)
                logs.append(LogLine("brrrtui", exit_line(ev.exit_code, ev.summary)))
                new_window = True  # the recorder's final batch (and calibrated peaks) may have landed
        main.log_pane.take(logs)
        if len(events) == session.DRAIN_CHUNK:  # more waiting (a flood): drain on, keys in between
            self.call_later(self.drain_feed)
        else:
            main.log_pane.flush(every_s=self.poll_s)  # the rest at a later poll
        if new_window:
            self.request_analysis()

    # ------------------------------------------------------------------ analysis (thread worker)

    def request_analysis(self, trace: Trace | None = None) -> None:
        """Re-read the recording and analyse it; with `trace`, analyse that one again (the phase key)."""
        if self._busy:
            self._again = True  # the next run re-reads the recording, in the phase chosen by then
            return
        self._busy = True
        self._set_state(analysing=True)
        look = not self.live and self.snapshot is None  # view mode, nothing on screen yet: a first look
        work = functools.partial(self._analyse, self.phases.picked, trace, look)
        self.run_worker(work, thread=True, group="analysis", exit_on_error=False)

    def _analyse(self, phase: Phase | None, trace: Trace | None, look: bool = False) -> None:
        from brrrtui.contract.errors import InputError

        worker = get_current_worker()
        try:
            assert self.path is not None
            whole = trace if trace is not None else self._source.read()
            self._stage = ("analysing", session.events_in(whole))
            first = (
                session.first_look(whole, self.script, self._version + 1, self._analyze, phase)
                if look
                else None
            )
            if first is not None and not worker.is_cancelled:
                self.post_message(SnapshotReady(first, whole))
            snap = self._source.analyse(whole, self._version + 1, phase, running=self.state.running)
        except InputError as e:
            self.post_message(AnalysisFailed(str(e), unreadable=True))
            return
        except Exception as e:  # noqa: BLE001 - shown to the user; the next window retries
            self.post_message(AnalysisFailed(f"analysis failed: {type(e).__name__}: {e}"))
            return
        if not worker.is_cancelled:
            self.post_message(SnapshotReady(snap, whole, picked=trace is not None))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if message.snapshot.first_look:  # shown while the analysis it precedes runs on (still `analysing`)
            if self.snapshot is None:
                self._apply(message.snapshot)
            return
        self._version = message.snapshot.version
        self.analyses += 1
        self._generation += 1
        self._latest = message.snapshot
        self._trace = message.trace
        if self.live and self.path:
            self._reader = session.stream_reader(self.path, message.snapshot)
        self._finish_analysis()
        if self.state.paused and not message.picked:
            self.pending = message.snapshot
        else:
            self.pending = None  # a pick is shown even when paused: it answers a key
            self._apply(message.snapshot)

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        if message.unreadable and not self.live and self.snapshot is None:
            self.load_error = message.error  # the CLI prints it: one line, exit 2
            self.exit(return_code=2)
            return
        self.analyses += 1
        self._set_state(error=message.error)
        self.main.log_pane.add("brrrtui", message.error)
        self._finish_analysis()

    def _finish_analysis(self) -> None:
        self._busy = False
        self._set_state(analysing=False)
        if self._again:
            self._again = False
            self.request_analysis()

    # ------------------------------------------------------------------ kernel stream (thread worker)

    def _poll_stream(self) -> None:
        """Every `stream_s`: read what the stream gained, unless nothing did or a worker is already at it (a
        full analysis reads it too)."""
        if not self._stream_dirty or self._stream_busy or self._busy:
            return
        if self._reader is None or self._latest is None:
            return
        self._stream_dirty = False
        self._stream_busy = True
        base, reader, gen = self._latest, self._reader, self._generation
        work = functools.partial(self._follow_stream, base, reader, gen)
        self.run_worker(work, thread=True, group="stream", exit_on_error=False)

    def _follow_stream(self, base: Snapshot, reader: StreamReader, generation: int) -> None:
        try:
            snap = session.follow_stream(base, reader)
        except Exception as e:  # noqa: BLE001 - shown once in the log; the next window's analysis reloads it
            self.post_message(StreamReady(None, generation, f"kernel stream: {type(e).__name__}: {e}"))
            return
        self.post_message(StreamReady(snap, generation))

    def on_stream_ready(self, message: StreamReady) -> None:
        self._stream_busy = False
        if message.error and message.error != self._stream_error:
            self._stream_error = message.error
            self.main.log_pane.add("brrrtui", message.error)
        snap = message.snapshot
        if snap is None or message.generation != self._generation:
            return
        self.stream_updates += 1
        self._latest = snap
        if self.state.paused:
            self.pending = snap
        elif self.pending is None:
            self.snapshot = snap
            self.main.show_stream(snap)

    def _apply(self, snap: Snapshot) -> None:
        old = self.snapshot
        self.snapshot = snap
        self.state = state_after_analysis(self.state, snap, self.phases.view(snap.analysis))
        self._set_state()
        moved = old is not None and old.analysis.phase is not snap.analysis.phase
        # live, follow the newest page, unless a picked phase is on screen (the newest is another phase's)
        self.main.show_snapshot(snap, follow=self.live and self.phases.picked is None, fresh=moved)
        if old is None or old.first_look:
            # the file's notes once (a first look precedes the whole analysis); not live: still being written
            file_notes = session.notes_of(snap.trace) if old is None and not self.live else []
            for line in opening_lines(snap, self.path, file_notes):
                self.main.log_pane.add("brrrtui", line)
            return
        news = self.phases.news(old.analysis, snap.analysis)
        if news:
            self.main.log_pane.add("brrrtui", news)

    # ------------------------------------------------------------------ actions

    def action_toggle_pause(self) -> None:
        paused = not self.state.paused
        self._set_state(paused=paused)
        if not paused and self.pending is not None:
            snap, self.pending = self.pending, None
            self._apply(snap)

    def action_cycle_phase(self) -> None:
        """P: analyse the next phase that has windows (steady → warm-up → set-up → steady)."""
        snap, trace = self.snapshot, self._trace
        if snap is None or trace is None:
            self.notify("Nothing to switch yet: the analysis is still running.", timeout=2)
            return
        if self.phases.step(snap.analysis) is None:
            have = phases_with_windows(snap.analysis)
            why = f"only {PHASE_NAMES[have[0]]} has windows" if have else "the trace has no optimizer steps"
            self.notify(f"No other phase to show: {why}.", timeout=3)
            return
        self.request_analysis(trace)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_interrupt(self) -> None:
        """Ctrl-C: live, the first stops the script (the UI stays), the second kills it and quits; else quits."""
        if not (self.live and self.state.running):
            self.exit()
            return
        self.interrupts += 1
        if self.on_interrupt is not None:
            self.on_interrupt()
        if self.interrupts > 1:
            self.exit()
            return
        text = "Ctrl-C: stopping the script (SIGINT); Ctrl-C again kills it and quits (the recording is kept)"
        self.main.log_pane.add("brrrtui", text)
        self.notify(text, timeout=4, markup=False)

    def action_request_quit(self) -> None:
        if self.live and self.state.running:

            def answered(yes: bool | None) -> None:
                if yes:
                    if self.on_quit_confirm is not None:
                        self.on_quit_confirm()
                    self.exit()

            self.push_screen(ConfirmQuit(), answered)
        else:
            self.exit()


def make_app(
    path: str | None,
    feed: Feed | None = None,
    script: str | None = None,
    on_quit_confirm: Callable[[], None] | None = None,
    *,
    analyze: AnalyzeFn | None = None,
    poll_s: float = 0.15,
    clock: Callable[[], float] = time.monotonic,
    stream_s: float = 1.0,
    on_interrupt: Callable[[], None] | None = None,
    trace: Trace | None = None,
) -> BrrrApp:
    """The app the CLI runs. `on_quit_confirm` is called (on the UI thread) when the user confirms quitting
    while the script still runs, before the app exits; the CLI stops the recorder after `run()` returns
    anyway. `analyze` replaces `analyzers.analyze.analyze` (tests). `stream_s`: the least time between two
    reads of the kernel stream while it runs. `on_interrupt` is called on each Ctrl-C while the script runs
    (the CLI's recorder sends SIGINT, then kills). `trace`: view mode, the file already read."""
    if feed is None:  # view mode: before the UI starts threads that would take malloc arenas of their own
        tune_for_analysis()
    return BrrrApp(path, feed, script, on_quit_confirm, analyze, poll_s, clock, stream_s, on_interrupt, trace)

"""Command line: `brrrtui SCRIPT ...` (live) and `record`; the other commands are in brrrtui/commands.

Everything after the script path (or `-m MODULE`) belongs to the script, verbatim. Mistakes the user can fix
end in one `brrrtui: error: ...` line and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterable, Sequence

from brrrtui import __version__
from brrrtui.commands import COMMANDS, run_command
from brrrtui.commands.args import (
    Parser,
    UsageError,
    on_a_terminal as _tui_available,  # tests stand in for it
    shown_path,
)
from brrrtui.commands.report import cmd_report
from brrrtui.commands.view import cmd_view
from brrrtui.contract.safe import safe_text

EXIT_USAGE = 2
SUBCOMMANDS = ("record", *COMMANDS)
LAUNCHERS = {  # `brrrtui [OPTIONS] WORD ...`, WORD no file here: a launcher of ranks (brrrtui/record/ranks.py)
    "torchrun": (
        "torchrun [TORCHRUN OPTIONS] SCRIPT [ARGS...]",
        "Run a torchrun job with every worker rank traced, headless: -o run.brrr (default "
        "SCRIPT-TIMESTAMP.brrr) holds the run and run.rank<N>.brrr each rank's recording; `brrrtui view "
        "run.brrr` shows the ranks side by side. TORCHRUN OPTIONS are torchrun's own (python -m "
        "torch.distributed.run --help lists them); brrrtui's options, below, go before `torchrun`.",
    ),
    "spawn": (
        "spawn SCRIPT [ARGS...]",
        "Run a script that starts its own ranks (torch.multiprocessing.spawn, multiprocessing.Process) with "
        "every rank traced, headless: -o run.brrr (default SCRIPT-TIMESTAMP.brrr) holds the run and "
        "run.rank<N>.brrr each rank's recording. brrrtui's options, below, go before `spawn`; everything "
        "after SCRIPT is the script's.",
    ),
}
OUTPUT_LINES = 40  # of the script's output, printed after the live TUI

DESCRIPTION = """\
Run a PyTorch script under GPU tracing and see, line by line, whether its time goes to compute,
memory bandwidth or overhead.

  brrrtui train.py --lr 3e-4            live TUI while the script runs
  brrrtui -m pkg.train --lr 3e-4        the same for a module
  brrrtui record -o run.brrr train.py   headless capture (SSH, batch jobs, CI)
  brrrtui torchrun --nproc_per_node=8 train.py   every rank of a torchrun job, headless: run.brrr and
                                        run.rank<N>.brrr (also: brrrtui record -o run.brrr torchrun ...)
  brrrtui spawn train.py                every rank a script starts itself (torch.multiprocessing.spawn)
  brrrtui merge -o all.brrr n0/run.brrr n1/run.brrr   one run of every host's ranks
  brrrtui view run.brrr                 browse a recording or a torch.profiler trace (.json/.json.gz)
  brrrtui report run.brrr [--json]      the verdicts as text or JSON (--sarif: findings for editors and CI)
  brrrtui export --perfetto out.json run.brrr   a Perfetto / chrome://tracing trace
  brrrtui diff before.brrr after.brrr   what changed per line and kernel (--fail-if-slower PCT for CI)
  brrrtui demo                          the UI on GPT-2 training recorded on an H200 (no GPU, no torch)

Under the live TUI the script's stdin is /dev/null (use `brrrtui record` for a script that reads it); its
stdout and stderr go to the log pane, and their last lines are printed when brrrtui exits.
"""


def _capture_options(p: argparse.ArgumentParser) -> None:
    from brrrtui.contract.config import WindowConfig  # plain Python, no torch

    d = WindowConfig()
    g = p.add_argument_group("capture")
    g.add_argument(
        "--python",
        metavar="PATH",
        default=sys.executable,
        help="interpreter that runs the script (default: the one running brrrtui)",
    )
    g.add_argument(
        "--duty",
        type=float,
        default=d.duty,
        metavar="FRACTION",
        help=f"share of run time the capture may cost (default {d.duty}); windows are spaced to fit it",
    )
    g.add_argument(
        "--window-steps",
        type=int,
        default=d.window_steps,
        metavar="N",
        help=f"most optimizer steps per profiler window (default {d.window_steps}; fewer when a step makes "
        f"more than {d.target_events // d.window_steps:,} events)",
    )
    g.add_argument(
        "--min-gap",
        type=float,
        default=d.min_gap_s,
        metavar="SECONDS",
        help=f"at least this long between windows (default {d.min_gap_s:g})",
    )
    g.add_argument("--max-windows", type=int, default=0, metavar="N", help="stop capturing after N windows")
    g.add_argument(
        "--first-window",
        type=float,
        default=d.first_time_window_after_s,
        metavar="SECONDS",
        help=f"without optimizer steps, open the first time-based window this long after the script imports "
        f"torch (default {d.first_time_window_after_s:g}; 0 captures scripts shorter than that)",
    )
    g.add_argument(
        "--stream",
        action="store_true",
        help="also record every kernel between windows from CUPTI (experimental: measured 2.4-2.9%% more "
        "step time than the default on GPT-2 small on an H200, see docs/performance.md)",
    )
    g.add_argument(
        "--no-calibrate",
        action="store_true",
        help="skip measuring matmul FLOP/s and copy bandwidth after the script ends",
    )


def _run_parser(prog: str, record: bool) -> Parser:
    p = Parser(
        prog=prog,
        description=DESCRIPTION if not record else "Capture headlessly into a recording.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"brrrtui {__version__}")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        required=record,
        help="recording file to write" + ("" if record else " (default: SCRIPT-TIMESTAMP.brrr)"),
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite FILE even if it is not a brrrtui recording (an earlier recording is always replaced; "
        "the script itself never)",
    )
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    _capture_options(p)
    if not record:
        p.add_argument("--peaks", metavar="SPEC", help="override ceilings, e.g. flops=800e12,bw=4.2e12")
    p.add_argument("script", nargs="?", help="the Python script (its own arguments follow it)")
    return p


def split_script(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """Split argv into (brrrtui's options, the target): the target starts at the first positional or at
    `-m MODULE`, and runs to the end — so `brrrtui train.py --help` passes --help to the script."""
    takes_value = {
        s for a in parser._actions if a.nargs is None and a.option_strings for s in a.option_strings
    }
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return argv[:i], argv[i + 1 :]
        if tok == "-m":
            return argv[:i], argv[i:]
        if tok.startswith("-") and tok != "-":
            i += 2 if (tok in takes_value and "=" not in tok) else 1
            continue
        return argv[:i], argv[i:]
    return argv, []


def _window_config(ns: argparse.Namespace):  # noqa: ANN202
    from brrrtui.contract.config import WindowConfig

    if not 0 < ns.duty <= 1:
        raise UsageError("--duty must be a fraction in (0, 1]")
    if ns.window_steps < 1:
        raise UsageError("--window-steps must be at least 1")
    if ns.min_gap < 0:
        raise UsageError("--min-gap must not be negative")
    if not 0 <= ns.first_window < 1e6:
        raise UsageError("--first-window must be a number of seconds, 0 or more")
    return WindowConfig(
        duty=ns.duty,
        window_steps=ns.window_steps,
        min_gap_s=ns.min_gap,
        max_windows=max(0, ns.max_windows),
        first_time_window_after_s=ns.first_window,
        stream=ns.stream,
    )


def _default_output(target: list[str]) -> str:
    stem = target[1] if target[0] == "-m" else os.path.splitext(os.path.basename(target[0]))[0]
    return f"{stem.replace('.', '_')}-{time.strftime('%Y%m%d-%H%M%S')}.brrr"


def _stderr_progress(text: str) -> None:
    try:
        print(f"brrrtui: {text}", file=sys.stderr, flush=True)
    except OSError:  # the terminal hung up (SIGHUP): the recording still finishes
        pass


def cmd_run(argv: list[str], record: bool) -> int:
    from brrrtui.record.ranks import is_distributed, naming_target, torchrun_target
    from brrrtui.record.recorder import RunSpec

    parser = _run_parser("brrrtui record" if record else "brrrtui", record)
    own, target = split_script(argv, parser)
    ns = parser.parse_args(own)
    from brrrtui.commands.peaks import peaks_analyzer

    analyze = peaks_analyzer(getattr(ns, "peaks", None))  # a bad SPEC fails before the script starts
    target = torchrun_target(target)  # `brrrtui [record] torchrun ARGS`: every rank traced (record/ranks.py)
    if not target:
        raise UsageError(
            "no script given"
            + (
                "; usage: brrrtui record -o FILE SCRIPT [ARGS...]"
                if record
                else "; usage: brrrtui SCRIPT [ARGS...] (see brrrtui --help)"
            )
        )
    spec = RunSpec(
        target=target,
        out_path=ns.output or _default_output(naming_target(target)),
        python=ns.python,
        window=_window_config(ns),
        calibrate=not ns.no_calibrate,
        force=ns.force,
    )
    if record or not _tui_available() or is_distributed(target):  # no live view of several ranks yet
        if not record and is_distributed(target) and _tui_available():
            _stderr_progress(
                "several ranks: recording without the live view (brrrtui view the run afterwards)"
            )
        return _run_headless(spec)
    return _run_live(spec, analyze)


def _run_headless(spec) -> int:  # noqa: ANN001
    from brrrtui.record.ranks import make_recorder

    recorder = make_recorder(spec, progress=_stderr_progress)
    with recorder.passing_signals():  # from before the start: a Ctrl-C then reaches the script too
        recorder.start()
        _stderr_progress(f"recording {safe_text(' '.join(spec.target))} -> {shown_path(spec.out_path)}")
        code = recorder.wait()
    exit_code = recorder.exit_code or 0
    exit_text = (
        f"exited with code {recorder.exit_code}"
        if exit_code >= 0
        else (f"was killed by {signal.Signals(-exit_code).name}")
    )
    out = shown_path(recorder.sink.path)  # out_path, or the sibling the recording moved to when out_path failed
    _stderr_progress(
        f"script {exit_text}; {recorder.windows} windows, {recorder.steps} steps, "
        f"{recorder.kernels:,} kernels -> {out} (brrrtui view {shlex.quote(out)})"
    )
    return code


def _run_live(spec, analyze=None) -> int:  # noqa: ANN001
    from brrrtui.record.feed import Feed
    from brrrtui.record.recorder import Recorder
    from brrrtui.tui.app import make_app

    spec.capture_output = True
    feed = Feed()
    recorder = Recorder(spec, feed=feed)
    recorder.start()
    recorder.wait_in_background()  # the script's exit reaches the UI and the recording when it happens
    stop = functools.partial(recorder.interrupt, now=True)
    app = make_app(recorder.sink.path, feed=feed, script=" ".join(spec.target), on_interrupt=stop, analyze=analyze)
    with recorder.passing_signals(on_end=lambda: app.exit()):  # SIGTERM, SIGHUP: the UI ends
        try:
            app.run()
        finally:
            code = recorder.finish()
    _print_output_tail(recorder.output_tail)
    out = shown_path(recorder.sink.path)
    if recorder.replaced:
        print(f"brrrtui: replaced the earlier file {shown_path(spec.out_path)}", file=sys.stderr)
    print(f"brrrtui: recording kept in {out} (brrrtui view {shlex.quote(out)})", file=sys.stderr)
    return code


def _print_output_tail(lines: Iterable[tuple[str, str]], most: int = OUTPUT_LINES) -> None:
    """The script's last output lines (a traceback among them), which the TUI's log pane took off screen."""
    tail = list(lines)[-most:]
    if not tail:
        return
    print(f"brrrtui: the script's last {len(tail)} output lines:", file=sys.stderr)
    from brrrtui.contract.safe import terminal_line

    for _stream, text in tail:  # in the order printed, both streams on stderr; its control sequences dropped
        print(terminal_line(text), file=sys.stderr)


def _launcher(args: list[str], record: bool) -> int | None:
    """`brrrtui [record] [OPTIONS] torchrun|spawn ...` asking for help (printed, nothing runs: 0) or naming
    no script (a UsageError); None for anything else, which cmd_run runs."""
    parser = _run_parser("brrrtui record" if record else "brrrtui", record)
    _own, target = split_script(args, parser)
    if not target or target[0] not in LAUNCHERS or os.path.isfile(target[0]):
        return None
    usage, description = LAUNCHERS[target[0]]
    if len(target) == 1:
        raise UsageError(f"no script given; usage: {parser.prog} [OPTIONS] {usage}")
    if target[0] == "spawn":  # `spawn SCRIPT ARGS`: what follows the script is the script's
        launcher_options = target[1:2]
    else:  # torchrun's own options end at its training script (or -m MODULE)
        ends = [i for i, a in enumerate(target) if i and (a.endswith(".py") or a in ("-m", "--module"))]
        launcher_options = target[1 : ends[0] if ends else None]
    if not {"-h", "--help"} & set(launcher_options):
        return None
    parser.usage = f"{parser.prog} [OPTIONS] {usage}"
    parser.description = description
    parser.formatter_class = argparse.HelpFormatter  # the description wrapped to the terminal
    parser.print_help()
    return 0


def _unknown_command(word: str) -> None:
    """`brrrtui WORD` where WORD is no file here but close to a command's name: a typo, not a script."""
    if word in LAUNCHERS or word.startswith("-") or os.path.exists(word) or "/" in word or "." in word:
        return
    close = difflib.get_close_matches(word, [*SUBCOMMANDS, *LAUNCHERS], n=1)
    if close:
        raise UsageError(f"{word!r} is neither a command nor a file here (did you mean {close[0]!r}?)")


def main(argv: Sequence[str] | None = None) -> int:
    from brrrtui.contract.errors import InputError
    from brrrtui.numpy_start import import_numpy

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        import_numpy()  # before anything else loads it: one OpenBLAS thread in this process
        if args and args[0] in SUBCOMMANDS:
            command, rest = args[0], args[1:]
            if command == "record":
                done = _launcher(rest, record=True)
                return cmd_run(rest, record=True) if done is None else done
            if command == "view":  # the UI where the live run would show one
                return cmd_view(rest, _tui_available)
            if command == "report" and argv is None:  # a process of its own (tests call main(argv)): it ends
                rc = cmd_report(rest)  # once the report is out, without Python's teardown (~8 % of 1 M
                sys.stdout.flush()  # kernels' time, docs/performance.md); stderr is line-buffered
                os._exit(rc)
            return run_command(command, rest)
        if args:
            _unknown_command(args[0])
        done = _launcher(args, record=False)
        return cmd_run(args, record=False) if done is None else done
    except (UsageError, InputError) as e:  # a path it echoes may hold anything: printed safe, on one line
        from brrrtui.contract.safe import safe_text

        print(f"brrrtui: error: {safe_text(e)}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:  # a legitimately huge trace: one line, not a traceback from inside a pass
        from brrrtui.recording.checks import memory_note

        print(f"brrrtui: error: out of memory{memory_note()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("brrrtui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `brrrtui report x | head`
        sys.stderr.close()
        return 0

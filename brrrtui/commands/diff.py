"""`brrrtui diff BEFORE AFTER`: what changed per step, per line and per kernel between two runs of a script.

Source text for matching lines is read here (analyzers stay free of I/O): each recorded file from its path,
or, for the before run, from `--before-src DIR` (a checkout of the old version). When both runs name the same
file and it was edited in between, only the new text exists: lines are then matched by number, with a note.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

from analyzers.diff.compare import Change, RunDiff
from brrrtui.commands.args import Parser, UsageError, on_a_terminal, shown_path

EXIT_SLOWER = 1


def _read(path: str) -> list[str] | None:
    """A source file the recordings name, read as the view reads it (a regular text file, size-capped)."""
    from brrrtui.present.source import Unreadable, read_text

    try:
        return read_text(path).splitlines()
    except Unreadable:
        return None


def _old_copy(path: str, src: str, cwd: object) -> str:
    """Where the before version of `path` lies under `src`: its path relative to the run's cwd, else its name."""
    if isinstance(cwd, str) and os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        if not rel.startswith("..") and os.path.exists(os.path.join(src, rel)):
            return os.path.join(src, rel)
    return os.path.join(src, os.path.basename(path))


def _texts(
    before_files: Iterable[str], after_files: Iterable[str], before_meta: dict[str, object], src: str | None
) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    after_set = set(after_files)
    tb: dict[str, list[str]] = {}
    ta = {f: t for f in after_set if (t := _read(f)) is not None}
    notes = []
    started = before_meta.get("started_at_ns")
    for f in set(before_files):
        if src is not None:
            text = _read(_old_copy(f, src, before_meta.get("cwd")))
        elif f in after_set:
            edited = isinstance(started, int) and os.path.exists(f) and os.stat(f).st_mtime_ns > started
            if edited:
                notes.append(
                    f"{f} changed after the before run started and only its new text exists: its lines are "
                    "matched by number (give --before-src DIR, a copy of the old version, to match them by text)"
                )
            text = None
        else:
            text = _read(f)
        if text is not None:
            tb[f] = text
    return tb, ta, notes


def _parser() -> Parser:
    p = Parser(
        prog="brrrtui diff",
        description="Compare two recordings of the same script: step time, GPU time by regime, idle, per line "
        "(matched by source text) and per kernel, each change judged against the run-to-run noise of the step "
        "times.",
    )
    p.add_argument("before", help="the recording (or trace) before the change")
    p.add_argument("after", help="the recording (or trace) after it")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print one JSON object")
    form.add_argument("--view", action="store_true", help="show it in the terminal UI (else: print it)")
    p.add_argument("--top", type=int, default=15, metavar="N", help="lines and kernels to list (default 15)")
    p.add_argument("--peaks", metavar="SPEC", help="override ceilings, e.g. flops=800e12,bw=4.2e12")
    p.add_argument(
        "--fail-if-slower",
        type=float,
        metavar="PCT",
        help="exit 1 when the median step time rose by more than PCT %% and beyond the noise (CI gates)",
    )
    p.add_argument(
        "--before-src", metavar="DIR", help="a copy of the before version's source, to match lines"
    )
    return p


def compute_diff(before: str, after: str, peaks: str | None = None, before_src: str | None = None) -> RunDiff:
    """Load and analyse both files, read their sources, match their lines and compare them."""
    from analyzers.diff.compare import diff_runs
    from analyzers.diff.line_match import match_lines
    from brrrtui import session

    tb, ta = session.read(before), session.read(after)
    b, a = session.analyse(tb, peaks), session.analyse(ta, peaks)
    files_b, files_a = [s.line.file for s in b.lines], [s.line.file for s in a.lines]
    text_b, text_a, notes = _texts(files_b, files_a, tb.meta, before_src)
    d = diff_runs(b, a, match_lines(files_b, files_a, text_b, text_a))
    d.notes.extend(notes)
    return d


def cmd_diff(argv: list[str]) -> int:
    ns = _parser().parse_args(argv)
    if ns.before_src is not None and not os.path.isdir(ns.before_src):
        raise UsageError(f"--before-src {ns.before_src}: not a directory")
    if ns.fail_if_slower is not None and not ns.fail_if_slower >= 0:
        raise UsageError("--fail-if-slower must be a percentage, 0 or more")
    from brrrtui.present.diff_report import header_text, render_text, table_rows, to_json

    d = compute_diff(ns.before, ns.after, ns.peaks, ns.before_src)
    before, after = shown_path(ns.before), shown_path(ns.after)
    if ns.json:
        print(json.dumps(to_json(d, ns.before, ns.after), indent=1))
    elif ns.view and on_a_terminal():
        from brrrtui.tui.diff_app import DiffApp

        DiffApp(header_text(d, before, after), table_rows(d), d.unit).run()
    else:
        print(render_text(d, before, after, top=max(ns.top, 0)))
        if ns.view:  # a pipe, a file, CI: no UI to wait for keys that never come
            print("brrrtui: not a terminal: the diff as text, not the UI", file=sys.stderr)
    return _gate(d.run[0], ns.fail_if_slower)


def _gate(step: Change, pct: float | None) -> int:
    if pct is None:
        return 0
    if step.relative is None:
        raise UsageError("--fail-if-slower needs step times (an optimizer) in both recordings")
    slower = step.relative * 100 > pct and step.beyond_noise is not False
    verdict = "slower" if slower else "not slower"
    print(
        f"brrrtui: step time {step.relative * 100:+.1f}% (limit +{pct:g}%, beyond the noise: "
        f"{'yes' if step.beyond_noise else 'no'}): {verdict}",
        file=sys.stderr,
    )
    return EXIT_SLOWER if slower else 0

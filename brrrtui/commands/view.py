"""`brrrtui view FILE`: the terminal UI on a recording or a torch.profiler trace; off a terminal (a pipe, a
file, CI), its report, since a UI there would wait for keys that never come."""

from __future__ import annotations

import sys
from collections.abc import Callable

from brrrtui.commands.args import Parser, on_a_terminal, shown_path


def cmd_view(argv: list[str], tui_available: Callable[[], bool] = on_a_terminal) -> int:
    """`tui_available` says whether the UI can run here (brrrtui/cli.py passes the check its live run uses)."""
    p = Parser(
        prog="brrrtui view",
        description="Browse a recording or a torch.profiler trace (not on a terminal: print its report).",
    )
    p.add_argument("file", help="a .brrr recording or a torch.profiler .json / .json.gz trace")
    p.add_argument("--peaks", metavar="SPEC", help="override ceilings, e.g. flops=800e12,bw=4.2e12")
    ns = p.parse_args(argv)
    from brrrtui.commands.peaks import peaks_analyzer

    analyze = peaks_analyzer(ns.peaks)  # a bad SPEC is one line before anything is read
    if not tui_available():
        from brrrtui.commands.report import cmd_report

        code = cmd_report([ns.file] + (["--peaks", ns.peaks] if ns.peaks else []))
        print(f"brrrtui: not a terminal: {shown_path(ns.file)}'s report, not the UI", file=sys.stderr)
        return code
    from brrrtui.tui.app import make_app

    app = make_app(ns.file, feed=None, script=None, analyze=analyze)  # reads it: progress on screen
    app.run()
    if getattr(app, "load_error", None):  # the UI could not read it: one line and exit 2, as for report
        from brrrtui.contract.errors import InputError

        raise InputError(app.load_error)
    return 0

"""`brrrtui merge -o all.brrr node0/run.brrr node1/run.brrr`: the run files of a job's hosts (one `brrrtui
torchrun` per host) as one run, which `view` and `report` open like a one-host run: every rank side by side,
the ranks' clocks against rank 0's from the collectives they share (analyzers.comm.clocks). The rank recordings
stay where they are; the merged file names them relative to itself. It is written under brrrtui's output
policy (brrrtui.recording.outputs): a new file, or an earlier recording replaced; never one of its inputs."""

from __future__ import annotations

import sys

from brrrtui.commands.args import Parser, command_line, shown_path
from brrrtui.record.targets import recording_output
from brrrtui.recording.ranks import merge_runs


def cmd_merge(argv: list[str]) -> int:
    p = Parser(
        prog="brrrtui merge", description="Merge the run files of a distributed job's hosts into one run."
    )
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the merged run file to write")
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="each host's run file (brrrtui -o RUN torchrun ...)"
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite FILE even if it is not a brrrtui recording"
    )
    ns = p.parse_args(argv)
    output = recording_output(ns.output, None, ns.force)
    output.inputs = ns.runs  # a host's run file is never replaced by the merged one
    meta = merge_runs(ns.output, ns.runs, output.check())
    ranks = meta["dist"]["ranks"]
    print(
        f"brrrtui: {len(ranks)} ranks of {len(ns.runs)} run files -> {shown_path(ns.output)} "
        f"({command_line('report', shown_path(ns.output))})",
        file=sys.stderr,
    )
    return 0

"""A distributed run's recordings opened as one: `run.brrr` (the launcher: argv, status, the rank files) and
`run.rank<N>.brrr` (one per worker rank, brrrtui.record.ranks writes them).

Opening any file of the set gives one rank's trace for the UI and the report (rank 0 from `run.brrr`, or the
rank whose file it is), with `meta["rank_set"]` naming every rank's file, so the report can set the ranks
side by side (analyzers.comm.ranks). Rank files are found from `run.brrr`'s list, beside it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from brrrtui.contract.errors import InputError
from brrrtui.contract.model import Trace
from brrrtui.recording.notes import load_notes
from brrrtui.recording.outputs import Replacement
from brrrtui.recording.store import RecordingWriter, is_recording, load_recording


def _dist(meta: dict[str, Any]) -> dict[str, Any] | None:
    d = meta.get("dist")
    return d if isinstance(d, dict) else None


def _rank_files(run_path: str, run_meta: dict[str, Any]) -> dict[int, str]:
    """rank -> its file (the latest restart of a rank wins), from the launcher recording's list."""
    dist = _dist(run_meta) or {}
    entries = dist.get("ranks")
    folder = os.path.dirname(os.path.abspath(run_path))
    out: dict[int, tuple[int, str]] = {}
    for e in entries if isinstance(entries, list) else []:
        if (
            not isinstance(e, dict)
            or not isinstance(e.get("rank"), int)
            or not isinstance(e.get("file"), str)
        ):
            continue
        restart = e.get("restart")
        restart = restart if isinstance(restart, int) else 0
        if e["rank"] not in out or restart >= out[e["rank"]][0]:
            out[e["rank"]] = (
                restart,
                os.path.normpath(os.path.join(folder, e["file"])),
            )  # beside it, or merged
    return {rank: path for rank, (_, path) in sorted(out.items())}


def _is_recording_file(path: str) -> bool:
    try:
        return os.path.isfile(path) and is_recording(path)
    except (OSError, ValueError):  # unreadable, or a name a recording's meta made up (a NUL byte)
        return False


def _note(trace: Trace, text: str) -> Trace:
    return dataclasses.replace(trace, meta={**trace.meta, "load_notes": [*load_notes(trace.meta), text]})


def open_as_one(trace: Trace, path: str) -> Trace:
    """`trace` itself unless it belongs to a multi-rank run: then the trace of the rank it stands for, with
    `meta["rank_set"]` = {"run", "files": {rank: path}, "shown": rank}."""
    dist = _dist(trace.meta)
    if dist is None:
        return trace
    if "ranks" in dist:  # the launcher's recording: show rank 0 (or the lowest rank recorded)
        files = _rank_files(path, trace.meta)
        present = {r: p for r, p in files.items() if _is_recording_file(p)}
        if not present:
            raise InputError(
                f"{path} is the launcher's recording of a distributed run, and none of its rank recordings "
                f"({', '.join(os.path.basename(p) for p in files.values()) or 'none was written'}) is there"
            )
        shown = min(present)
        rank_trace = load_recording(present[shown])
        text = f"a run of {len(files)} ranks: rank {shown} is shown"
        return _with_job_notes(_with_set(rank_trace, path, files, shown, text), trace.meta)
    run = dist.get("run")
    rank = dist.get("rank")
    if not isinstance(run, str) or not isinstance(rank, int):
        return trace
    run_path = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(run))
    if not _is_recording_file(run_path):
        return _note(trace, f"rank {rank} of a distributed run; its run file {run} is not beside it")
    run_meta = load_recording(run_path).meta
    files = _rank_files(run_path, run_meta)
    one = _with_set(trace, run_path, files or {rank: path}, rank, f"rank {rank} of {len(files)} is shown")
    return _with_job_notes(one, run_meta)


def _with_job_notes(trace: Trace, run_meta: dict[str, Any]) -> Trace:
    """`trace` with what the launcher's recorder said about the job as a whole (`run_meta`'s notes)."""
    notes = run_meta.get("notes")
    for note in notes if isinstance(notes, list) else []:
        trace = _note(trace, f"the job: {note}")
    return trace


def _with_set(trace: Trace, run: str, files: dict[int, str], shown: int, text: str) -> Trace:
    others = [os.path.basename(p) for r, p in files.items() if r != shown]
    if others:
        text += f" (the others: brrrtui view {' / '.join(others)}); the report sets every rank side by side"
    trace = dataclasses.replace(
        trace, meta={**trace.meta, "rank_set": {"run": run, "files": files, "shown": shown}}
    )
    return _note(trace, text)


def rank_traces(trace: Trace) -> tuple[int, dict[int, Trace], list[str]] | None:
    """Every rank's trace of the run `trace` belongs to: (the rank shown, rank -> trace, notes); None for a
    single-process recording. A rank whose file is missing or unreadable is left out, with a note."""
    rank_set = trace.meta.get("rank_set")
    if not isinstance(rank_set, dict):
        return None
    shown, notes, traces = rank_set["shown"], [], {}
    for rank, path in rank_set["files"].items():
        if rank == shown:
            traces[rank] = trace
            continue
        try:
            traces[rank] = load_recording(path)
        except (InputError, OSError) as e:
            notes.append(f"rank {rank} is left out: {e}")
    return shown, traces, notes


def merge_runs(out_path: str, runs: list[str], replacing: os.stat_result | None = None) -> dict[str, Any]:
    """Write `out_path`: one run of every rank the per-host run files `runs` hold (`brrrtui merge`), rank
    files named relative to it, so that `view`/`report` open them as one. Returns the meta it wrote.
    `replacing`: the file at `out_path` the output policy allowed to replace (brrrtui.recording.outputs.
    Output.check); with None, `out_path` must be a new file. Written beside it, then renamed to it."""
    folder = os.path.dirname(os.path.abspath(out_path))
    entries: list[dict[str, Any]] = []
    owner: dict[int, str] = {}
    starts, ends = [], []
    for run in runs:
        meta = load_recording(run).meta
        if _dist(meta) is None or "ranks" not in (_dist(meta) or {}):
            raise InputError(
                f"{run} is not the run file of a distributed recording (brrrtui -o run.brrr torchrun ...)"
            )
        for rank, path in _rank_files(run, meta).items():
            if rank in owner:
                raise InputError(f"rank {rank} is in both {owner[rank]} and {run}")
            owner[rank] = run
            entries.append({"rank": rank, "file": os.path.relpath(path, folder), "host_run": run})
        starts += [meta["started_at_ns"]] if isinstance(meta.get("started_at_ns"), int) else []
        ends += [meta["ended_at_ns"]] if isinstance(meta.get("ended_at_ns"), int) else []
    meta = {
        "argv": ["merge", *runs],
        "status": "finished",
        "started_at_ns": min(starts, default=0),
        "ended_at_ns": max(ends, default=0),
        "dist": {
            "launcher": "merge",
            "world_size": len(entries),
            "ranks": sorted(entries, key=lambda e: e["rank"]),
            "merged_from": [os.path.relpath(os.path.abspath(r), folder) for r in runs],
        },
    }
    replacement = Replacement(out_path, replacing)
    try:
        writer = RecordingWriter(replacement.temp)
        try:
            writer.set_meta(**meta)
        finally:
            writer.close()
    except BaseException:
        replacement.discard()
        raise
    replacement.commit()
    return meta

"""The events of an exported Chrome trace, written as JSON text a chunk of rows at a time.

A 1 M-kernel recording exports ~10 M events. Built as Python dicts and dumped at once, they would hold 7 GB
and take 330 s (31 s and 579 MiB as here: docs/performance.md). Here each family of events
reads its table's columns CHUNK rows at a time and formats each event straight into JSON text, the strings
that repeat (names, shapes, lines, argument sets) formatted once per distinct value. What the text holds is
what `json.dumps` of the same dicts holds: floats as `repr` writes them (as json does), strings through
`json.dumps`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyzers.results import GAP_CAUSE_CODES, REGIMES_BY_CODE, Analysis, Regime
from brrrtui.contract.model import NONE, GpuKind, Table, Trace
from brrrtui.present.perfetto_block import GPU_PID, IDLE_TID, num

CHUNK = 1 << 16  # rows formatted at a time: their column slices as Python values, their events' text
STREAM_TID = 2_000_000_000  # + stream: kernels streamed between windows
REGIME_TID = 3_000_000_000  # + stream: the stream's regime band (one slice per kernel, named by its regime)
# Chrome's reserved colour names (trace-viewer's color_scheme): compute green, memory yellow, overhead red,
# communication (collectives) blue
COLOURS = {
    Regime.COMPUTE: "good",
    Regime.MEMORY: "yellow",
    Regime.OVERHEAD: "terrible",
    Regime.COMMUNICATION: "rail_load",
}
IDLE_COLOUR = "grey"
CAUSES = {code: cause.value for cause, code in GAP_CAUSE_CODES.items()}
Events = Iterator[list[str]]  # the events' JSON text, a chunk at a time


def text(value: Any) -> str:
    """`value` as the compact JSON the export writes (no NaN: JSON has none)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


class Clock:
    """Microseconds after `base_ns` (the earliest event), so a float keeps every ns."""

    def __init__(self, base_ns: int):
        self.base_ns = base_ns

    def us(self, t_ns: int) -> float:
        return round((t_ns - self.base_ns) / 1000.0, 3)


class Strings:
    """The trace's strings and lines as JSON text, each formatted once."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._name: dict[int, str] = {}
        self._line: dict[int, str | None] = {}
        self._shape: dict[int, str | None] = {}
        self._parsed: dict[int, str] = {}

    def name(self, sid: int) -> str:
        out = self._name.get(sid)
        if out is None:
            out = self._name[sid] = text(self.trace.name(sid))
        return out

    def line(self, line_id: int) -> str | None:
        """`"file:line function"`, None for no line."""
        if line_id not in self._line:
            self._line[line_id] = None if (s := line_text(self.trace, line_id)) is None else text(s)
        return self._line[line_id]

    def shape(self, sid: int) -> str | None:
        """A grid or block `"a,b,c"` as a JSON list of ints; None for none or another string."""
        if sid not in self._shape:
            try:
                self._shape[sid] = (
                    None if sid < 0 else text([int(v) for v in self.trace.name(sid).split(",")])
                )
            except ValueError:
                self._shape[sid] = None
        return self._shape[sid]

    def parsed(self, sid: int) -> str:
        """A string that holds JSON (an op's input shapes or types), as compact JSON."""
        out = self._parsed.get(sid)
        if out is None:
            out = self._parsed[sid] = text(json.loads(self.trace.name(sid)))
        return out


def line_text(trace: Trace, line_id: int) -> str | None:
    if not 0 <= line_id < len(trace.lines):
        return None
    ln = trace.lines[line_id]
    return f"{ln.file}:{ln.line} {ln.function}"


def chunks(table: Table, *names: str, rows: np.ndarray | None = None) -> Iterator[tuple[list[Any], ...]]:
    """The columns `names` of `table` (of `rows` only, when given) as Python lists, CHUNK rows at a time."""
    n = len(table) if rows is None else len(rows)
    for lo in range(0, n, CHUNK):
        take: slice | np.ndarray = slice(lo, min(n, lo + CHUNK)) if rows is None else rows[lo : lo + CHUNK]
        yield tuple(table[name][take].tolist() for name in names)


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float) -> str:
    """A complete event ("ph":"X") up to its args; `name` already JSON."""
    return f'"ph":"X","cat":"{cat}","name":{name},"pid":{pid},"tid":{tid},"ts":{ts!r},"dur":{dur!r}'


def cpu_events(trace: Trace, s: Strings, pid: int, clock: Clock) -> Events:
    """Runtime calls, operators and the user's lines, in the shapes torch.profiler writes them."""
    us = clock.us
    for name, tid, start, dur, corr in chunks(
        trace.runtime, "name", "tid", "start_ns", "dur_ns", "correlation"
    ):
        yield [
            f'{{{_x("cuda_runtime", s.name(n), pid, t, us(a), d / 1000)},"args":{{"correlation":{c}}}}}'
            for n, t, a, d, c in zip(name, tid, start, dur, corr, strict=True)
        ]
    op_cols = ("name", "tid", "start_ns", "dur_ns", "shapes", "dtypes", "seq", "fwd_tid", "flops")
    for name, tid, start, dur, shapes, dtypes, seq, fwd, flops in chunks(trace.ops, *op_cols):
        out = []
        rows = zip(name, tid, start, dur, shapes, dtypes, seq, fwd, flops, strict=True)
        for n, t, a, d, sh, ty, q, fw, fl in rows:
            args = [f'"Input Dims":{s.parsed(sh)}'] if sh >= 0 else []
            if ty >= 0:
                args.append(f'"Input type":{s.parsed(ty)}')
            if q >= 0:
                args.append(f'"Sequence number":{q}')
            if fw >= 0:
                args.append(f'"Fwd thread id":{fw}')
            if (v := num(fl)) is not None:
                args.append(f'"flops":{v!r}')
            out.append(f'{{{_x("cpu_op", s.name(n), pid, t, us(a), d / 1000)},"args":{{{",".join(args)}}}}}')
        yield out
    frames: dict[tuple[int, int, int], tuple[str, str]] = {}  # (line, module, library line) -> name, args
    span_cols = ("line", "tid", "start_ns", "dur_ns", "module", "lib_line")
    for line, tid, start, dur, module, lib in chunks(trace.spans, *span_cols):
        out = []
        for ln_id, t, a, d, m, lb in zip(line, tid, start, dur, module, lib, strict=True):
            frame = frames.get((ln_id, m, lb))
            if frame is None:
                ln = trace.lines[ln_id]
                scope = {"module": trace.name(m), "library_line": line_text(trace, lb)}
                frame = frames[(ln_id, m, lb)] = (
                    text(f"{ln.file}({ln.line}): {ln.function}"),
                    text({k: v for k, v in scope.items() if v}),
                )
            out.append(f'{{{_x("python_function", frame[0], pid, t, us(a), d / 1000)},"args":{frame[1]}}}')
        yield out


@dataclass
class RowFacts:
    """Per GPU row of the whole trace, gathered from the analyses that cover its window."""

    regime: np.ndarray  # int8 regime code, -1 where no analysis covers the row
    line: np.ndarray  # line id or NONE
    flops: np.ndarray
    bytes: np.ndarray
    flops_rate: np.ndarray
    bytes_rate: np.ndarray
    roof: np.ndarray


def row_facts(trace: Trace, analyses: Iterable[Analysis]) -> RowFacts:
    n = len(trace.gpu)
    nan = np.full(n, np.nan)
    facts = RowFacts(np.full(n, -1, np.int8), np.full(n, NONE, np.int64), *(nan.copy() for _ in range(5)))
    for a in analyses:
        rows = np.nonzero(np.isin(trace.gpu.window, np.asarray(a.windows, dtype=np.int64)))[0]
        if len(rows) != len(a.trace.gpu):
            continue  # not an analysis of this trace's rows
        facts.regime[rows] = a.kernel_regime
        facts.line[rows] = a.links.kernel_line
        facts.flops[rows], facts.bytes[rows] = a.kernel_flops, a.kernel_bytes
        rates = a.kernel_rates()
        if rates is not None:
            facts.flops_rate[rows], facts.bytes_rate[rows], facts.roof[rows] = rates
    return facts


_FACTS = (  # args key, RowFacts column
    ("flops", "flops"),
    ("bytes_moved", "bytes"),
    ("achieved_flops_per_s", "flops_rate"),
    ("achieved_bytes_per_s", "bytes_rate"),
    ("roof_fraction", "roof"),
)
_CATS = {GpuKind.MEMCPY: "gpu_memcpy", GpuKind.MEMSET: "gpu_memset"}


def _kernel_head(kind: int, code: int) -> str:
    """A GPU row's category and colour, and its args' regime, by (kind, regime code): `"cat":…[,"cname":…]`."""
    regime = REGIMES_BY_CODE.get(code)
    cat = _CATS.get(GpuKind(kind), "kernel") + (
        f",{regime.value}" if regime and kind == GpuKind.KERNEL else ""
    )
    return f'"cat":"{cat}"' + (f',"cname":"{COLOURS[regime]}"' if regime is not None else "")


def gpu_events(trace: Trace, s: Strings, facts: RowFacts, clock: Clock) -> Events:
    """Each GPU row: kernels (their regime, line, FLOPs, bytes and rates), copies and memsets."""
    us = clock.us
    heads: dict[tuple[int, int], str] = {}  # (kind, regime code) -> _kernel_head
    cols = (
        "name",
        "kind",
        "device",
        "stream",
        "correlation",
        "window",
        "start_ns",
        "dur_ns",
        "grid",
        "block",
    )
    row_chunks = chunks(trace.gpu, *cols, "bytes")
    fact_chunks = chunks(Table(vars(facts)), "regime", "line", *(column for _, column in _FACTS))
    for row_chunk, fact_chunk in zip(row_chunks, fact_chunks, strict=True):
        name, kind, dev, stream, corr, win, start, dur, grid, block, nbytes = row_chunk
        regime, line, *measured = fact_chunk
        out = []
        for i, n in enumerate(name):
            head = heads.get((kind[i], regime[i]))
            if head is None:
                head = heads[(kind[i], regime[i])] = _kernel_head(kind[i], regime[i])
            args = f'"device":{dev[i]},"stream":{stream[i]},"correlation":{corr[i]},"window":{win[i]}'
            for key, sid in (("grid", grid[i]), ("block", block[i])):
                if (shape := s.shape(sid)) is not None:
                    args += f',"{key}":{shape}'
            if nbytes[i] >= 0:
                args += f',"bytes":{nbytes[i]}'
            if (r := REGIMES_BY_CODE.get(regime[i])) is not None:
                args += f',"regime":"{r.value}"'
            if (where := s.line(line[i])) is not None:
                args += f',"line":{where}'
            for (key, _), column in zip(_FACTS, measured, strict=True):
                if (v := num(column[i])) is not None:
                    args += f',"{key}":{v!r}'
            out.append(
                f'{{"ph":"X","name":{s.name(n)},"pid":{GPU_PID + dev[i]},"tid":{stream[i]},'
                f'"ts":{us(start[i])!r},"dur":{dur[i] / 1000.0!r},{head},"args":{{{args}}}}}'
            )
        yield out


def regime_band(trace: Trace, s: Strings, facts: RowFacts, clock: Clock) -> Events:
    """Per stream, a track of slices named `compute`, `memory` or `overhead` over each GPU row: Perfetto colours
    slices by name, so this band shows the regimes in three colours where the kernels' own names cannot."""
    g = Table(
        {
            **{c: trace.gpu[c] for c in ("name", "device", "stream", "window", "start_ns", "dur_ns")},
            "regime": facts.regime,
        }
    )
    cols = ("regime", "name", "device", "stream", "window", "start_ns", "dur_ns")
    for regime, name, dev, stream, win, start, dur in chunks(g, *cols, rows=np.nonzero(facts.regime >= 0)[0]):
        out = []
        for code, n, d, st, w, a, du in zip(regime, name, dev, stream, win, start, dur, strict=True):
            r = REGIMES_BY_CODE[code]
            out.append(
                f'{{"ph":"X","cat":"gpu_regime","name":"{r.value}","cname":"{COLOURS[r]}","pid":{GPU_PID + d},'
                f'"tid":{REGIME_TID + st},"ts":{clock.us(a)!r},"dur":{du / 1000.0!r},'
                f'"args":{{"kernel":{s.name(n)},"window":{w}}}}}'
            )
        yield out


def flows(analyses: Iterable[Analysis], pid: int, clock: Clock) -> Events:
    """One flow per linked kernel: from its launch on the CPU thread to its start on the GPU stream."""
    n = 0
    for a in analyses:
        g, rt, launch = a.trace.gpu, a.trace.runtime, a.links.kernel_launch
        rows = np.nonzero(launch >= 0)[0]
        for lo in range(0, len(rows), CHUNK):
            i, out = rows[lo : lo + CHUNK], []
            r = launch[i]
            cols = (rt.tid[r], rt.start_ns[r], g.device[i], g.stream[i], g.start_ns[i])
            for tid, cpu_ts, dev, stream, gpu_ts in zip(*(c.tolist() for c in cols), strict=True):
                n += 1
                base = f'{{"cat":"ac2g","name":"launch","id":{n}'
                out.append(f'{base},"ph":"s","pid":{pid},"tid":{tid},"ts":{clock.us(cpu_ts)!r}}}')
                out.append(
                    f'{base},"ph":"f","bp":"e","pid":{GPU_PID + dev},"tid":{stream},"ts":{clock.us(gpu_ts)!r}}}'
                )
            yield out


def gap_events(analyses: Iterable[Analysis], s: Strings, clock: Clock) -> Events:
    """Each analysis's device-wide idle gaps, with their cause and line."""
    for a in analyses:
        device = int(a.trace.gpu.device[0]) if len(a.trace.gpu) else 0
        s_a = s if a.trace.lines is s.trace.lines else Strings(a.trace)
        for cause, win, line, start, dur in chunks(a.gaps, "cause", "window", "line", "start_ns", "dur_ns"):
            out = []
            for c, w, ln, t, d in zip(cause, win, line, start, dur, strict=True):
                why = CAUSES.get(c, "other")
                where = s_a.line(ln)
                args = f'"cause":"{why}","window":{w}' + ("" if where is None else f',"line":{where}')
                head = _x("gpu_idle", f'"idle: {why}"', GPU_PID + device, IDLE_TID, clock.us(t), d / 1000)
                out.append(f'{{{head},"cname":"{IDLE_COLOUR}","args":{{{args}}}}}')
            yield out


def stream_events(trace: Trace, s: Strings, clock: Clock) -> Events:
    """Kernels streamed between windows (`--stream`): no CPU side, so no regime, line or flow of their own."""
    cols = ("name", "device", "stream", "start_ns", "dur_ns", "after_window")
    for name, dev, stream, start, dur, after in chunks(trace.stream, *cols):
        yield [
            f'{{"ph":"X","cat":"kernel_stream","name":{s.name(n)},"pid":{GPU_PID + d},"tid":{STREAM_TID + st},'
            f'"ts":{clock.us(t)!r},"dur":{du / 1000!r},"args":{{"after_window":{aw},"stream":{st}}}}}'
            for n, d, st, t, du, aw in zip(name, dev, stream, start, dur, after, strict=True)
        ]


def step_events(trace: Trace, pid: int, tid: int, clock: Clock) -> Events:
    """Every optimizer step of the run, from the end of the one before."""
    ends, steps = trace.steps.t_ns.tolist(), trace.steps.step.tolist()
    for lo in range(1, len(ends), CHUNK):
        yield [
            f'{{"ph":"X","cat":"brrrtui_step","name":"step {steps[k]}","pid":{pid},"tid":{tid},'
            f'"ts":{clock.us(ends[k - 1])!r},"dur":{(ends[k] - ends[k - 1]) / 1000!r}}}'
            for k in range(lo, min(len(ends), lo + CHUNK))
        ]

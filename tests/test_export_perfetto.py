"""`brrrtui export --perfetto`: a real H200 recording (Hugging Face GPT-2, tests/test_h200_workloads.py) as a
Chrome / Perfetto trace, and the round trip: the exported file, re-opened by brrrtui's Chrome trace loader,
gives the recording's verdicts."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analyzers.analyze import analyze, analyze_with_other_phases
from analyzers.results import REGIMES_BY_CODE, Regime
from brrrtui.contract.errors import InputError
from brrrtui.contract.model import SourceLine, Table
from brrrtui.present.perfetto import REGIME_TID, to_perfetto
from brrrtui.recording.load import load_trace
from tests.fixtures.synthetic import phased_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "h200_hf_gpt2_steady.brrr.gz")


def export(out: str, src: str = FIXTURE) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "brrrtui", "export", "--perfetto", out, src]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("perfetto") / "run.json")
    r = export(out)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and "ui.perfetto.dev" in r.stderr
    with open(out, encoding="utf-8") as f:
        doc = json.load(f, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    return out, doc


@pytest.fixture(scope="module")
def original():
    trace = load_trace(FIXTURE)
    lead, others = analyze_with_other_phases(trace)
    return trace, lead, others


def _lines(a):
    return sorted((s.line.file, s.line.line, s.gpu_ns, s.idle_ns, s.regime) for s in a.lines)


def _kernels(a):
    return sorted((k.name, k.calls, k.gpu_ns, k.regime) for k in a.kernels)


def _findings(a):
    return Counter((f.kind, tuple(map(str, f.lines)), round(f.saving_ns or 0)) for f in a.findings)


def test_the_exported_trace_reopens_with_the_same_verdicts(exported, original):
    path, _ = exported
    trace, lead, others = original
    again = load_trace(path)
    b, b_others = analyze_with_other_phases(again)
    assert b.phase is lead.phase and b.windows == lead.windows == (1,)
    # exact: the same rows in the same windows, the same steps (overhead correction) and measured ceilings
    assert b.breakdown == lead.breakdown
    assert b.window_breakdowns == lead.window_breakdowns
    assert b.overhead == lead.overhead
    assert b.peaks == lead.peaks and b.peaks.source == "measured"
    assert _kernels(b) == _kernels(lead)
    assert _lines(b) == _lines(lead)
    assert _findings(b) == _findings(lead) and any(f.kind == "slow_gemm" for f in b.findings)
    assert list(b_others) == list(others)
    assert len(again.telemetry) == len(trace.telemetry) > 0
    assert len(again.line_samples) == len(trace.line_samples) > 0


def test_kernels_carry_their_regime_colour_and_line(exported, original):
    _, doc = exported
    _, lead, _ = original
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["cat"].startswith("kernel,")]
    assert len(kernels) == sum(1 for e in doc["traceEvents"] if e.get("cat", "").startswith("kernel"))
    colours = {"compute": "good", "memory": "yellow", "overhead": "terrible"}
    for e in kernels:
        regime = e["cat"].split(",")[1]
        assert e["args"]["regime"] == regime and e["cname"] == colours[regime]
    steady = [e for e in kernels if e["args"]["window"] == 1]
    gpu_by_regime = Counter()
    for e in steady:
        gpu_by_regime[e["args"]["regime"]] += round(e["dur"] * 1000)
    g = lead.trace.gpu
    expected = Counter()
    for kind, code, dur in zip(g.kind.tolist(), lead.kernel_regime.tolist(), g.dur_ns.tolist(), strict=True):
        if kind == 0:
            expected[REGIMES_BY_CODE[code].value] += dur
    single_gpu = {r.value for r in Regime} - {Regime.COMMUNICATION.value}  # a one-GPU run has no collectives
    assert gpu_by_regime == expected and set(expected) == single_gpu
    # Perfetto colours by name: a band per stream repeats each GPU row as a slice named by its regime
    band = [e for e in doc["traceEvents"] if e.get("cat") == "gpu_regime"]
    with_regime = [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and "regime" in e.get("args", {}) and e["cat"] != "gpu_regime"
    ]
    assert len(band) == len(with_regime) > len(kernels)  # copies and memsets have a regime too
    assert {e["name"] for e in band} == {"compute", "memory", "overhead"}
    starts = {(e["tid"], e["ts"], e["dur"], e["args"]["regime"]) for e in with_regime}
    assert all((e["tid"] - REGIME_TID, e["ts"], e["dur"], e["name"]) in starts for e in band)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M"}
    assert "stream 7: regime" in names
    with_line = [e for e in steady if "line" in e["args"]]
    assert len(with_line) == int(((lead.links.kernel_line >= 0) & (g.kind == 0)).sum()) > 0
    assert any(e["args"]["line"].endswith("hf_gpt2.py:32 loss_of") for e in with_line)


def test_idle_gaps_flows_and_counters(exported, original):
    _, doc = exported
    trace, lead, others = original
    events = doc["traceEvents"]
    gaps = [e for e in events if e.get("cat") == "gpu_idle"]
    steady_gaps = [e for e in gaps if e["args"]["window"] == 1]
    assert round(sum(e["dur"] * 1000 for e in steady_gaps)) == lead.breakdown.idle_ns
    assert len(gaps) == len(lead.gaps) + sum(len(a.gaps) for a in others.values())
    assert {e["args"]["cause"] for e in gaps} <= {"host", "sync", "h2d", "data", "other"}
    assert any("line" in e["args"] for e in steady_gaps)
    starts = [e for e in events if e.get("ph") == "s"]
    ends = [e for e in events if e.get("ph") == "f"]
    linked = int((lead.links.kernel_launch >= 0).sum()) + sum(
        int((a.links.kernel_launch >= 0).sum()) for a in others.values()
    )
    assert len(starts) == len(ends) == linked > 0
    gpu_cats = ("kernel", "gpu_memcpy", "gpu_memset")
    kernel_at = {(e["pid"], e["tid"], e["ts"]) for e in events if e.get("cat", "").startswith(gpu_cats)}
    assert all((e["pid"], e["tid"], e["ts"]) in kernel_at for e in ends)  # each flow ends on its kernel
    assert min(e["ts"] for e in events if "ts" in e) == 0  # telemetry starts before the first window
    counters = Counter(e["name"] for e in events if e.get("ph") == "C")
    assert counters["GPU utilisation"] == len(trace.telemetry)
    assert {"GPU power", "GPU memory used", "SM clock"} <= set(counters)
    names = {e["args"]["name"] for e in events if e.get("ph") == "M"}
    assert {"GPU idle", "capture windows", "optimizer steps"} <= names
    assert any(n.startswith("GPU 0: NVIDIA H200") for n in names)


def test_a_gzipped_export_and_a_damaged_block(tmp_path, original):
    out = str(tmp_path / "run.json.gz")
    assert export(out).returncode == 0
    with gzip.open(out, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    doc["brrrtui"]["windows"] = [["not", "a", "row"]]
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(doc))
    t = load_trace(str(damaged))  # the events alone still make a trace: one foreign window
    assert len(t.windows) == 1 and any("brrrtui block is left out" in n for n in t.meta["load_notes"])
    r = subprocess.run(
        [sys.executable, "-m", "brrrtui", "report", str(damaged)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr and "brrrtui block is left out" in r.stdout


def test_bad_arguments_are_one_line_errors(tmp_path):
    r = export(str(tmp_path / "no" / "such" / "dir.json"))
    assert (
        r.returncode == 2
        and r.stderr.startswith("brrrtui: error: cannot write")
        and "Traceback" not in r.stderr
    )
    r = export(str(tmp_path / "x.json"), str(tmp_path / "missing.brrr"))
    assert r.returncode == 2 and "no such file" in r.stderr


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
KEYS = [
    "format",
    "windows",
    "steps",
    "peaks",
    "device",
    "lines",
    "line_samples",
    "telemetry",
    "meta",
    "span_scopes",
]


@pytest.fixture(scope="module")
def small_export():
    trace = phased_trace()
    lead, others = analyze_with_other_phases(trace)
    phases = {w: p.value for w, p in lead.phases.windows.items()}
    return to_perfetto(trace, [lead, *others.values()], phases)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(key=st.sampled_from(KEYS), value=JSON, row=st.integers(0, 3), cell=st.integers(0, 7), number=JSON)
def test_a_damaged_block_is_a_note_or_a_trace_never_a_traceback(small_export, key, value, row, cell, number):
    doc = copy.deepcopy(small_export)
    block = doc["brrrtui"]
    block[key] = value  # a field replaced by anything JSON holds
    rows = block.get("windows") if isinstance(block.get("windows"), list) else []
    if row < len(rows) and isinstance(rows[row], list) and cell < len(rows[row]):
        rows[row][cell] = number  # or one cell of a window row
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        try:
            trace = load_trace(path)
        except InputError:
            return
        analyze(trace)  # whatever was restored analyses


def test_both_chrome_readers_restore_the_same_run(exported, original):
    from brrrtui.recording.chrome.load import load_chrome

    path, _ = exported
    _, lead, _ = original
    for fast in (True, False):  # msgspec in bulk, and json event by event
        b = analyze(load_chrome(path, fast=fast))
        assert b.breakdown == lead.breakdown and b.overhead == lead.overhead and _lines(b) == _lines(lead)


def test_module_chains_and_library_lines_come_back(tmp_path):
    trace = phased_trace()
    chain = "=GPT;blocks.0=Block;blocks.0.mlp=MLP"
    strings = [*trace.strings, chain]
    lines = [*trace.lines, SourceLine("/site-packages/modellib/blocks.py", 88, "forward")]
    spans = dict(trace.spans.columns)
    spans["module"] = np.full(len(trace.spans), len(strings) - 1, dtype=spans["module"].dtype)
    spans["lib_line"] = np.full(len(trace.spans), len(lines) - 1, dtype=spans["lib_line"].dtype)
    spans["module"][0] = spans["lib_line"][0] = -1  # the set-up span: no module, no library line
    trace = dataclasses.replace(trace, strings=strings, lines=lines, spans=Table(spans))
    lead, others = analyze_with_other_phases(trace)
    doc = to_perfetto(trace, [lead, *others.values()], {})
    frames = [e for e in doc["traceEvents"] if e.get("cat") == "python_function"]
    assert [e["args"].get("module") for e in frames] == [None] + [chain] * (len(frames) - 1)
    assert frames[1]["args"]["library_line"] == "/site-packages/modellib/blocks.py:88 forward"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    back = load_trace(str(path))

    def scopes(t):
        sp = t.spans
        return sorted(
            (
                int(sp.tid[i]),
                int(sp.start_ns[i]),
                t.name(int(sp.module[i])),
                t.lines[int(sp.lib_line[i])] if sp.lib_line[i] >= 0 else None,
            )
            for i in range(len(sp))
        )

    assert scopes(back) == scopes(trace)


def test_the_document_is_the_same_whatever_the_chunk_size(original, monkeypatch):
    """Events are written a chunk of rows at a time: chunk edges change nothing (flows keep their ids)."""
    import io

    from brrrtui.present import perfetto_events
    from brrrtui.present.perfetto import write_perfetto

    trace, lead, others = original
    phases = {w: p.value for w, p in lead.phases.windows.items()}
    whole = io.StringIO()
    n = write_perfetto(whole, trace, [lead, *others.values()], phases)
    monkeypatch.setattr(perfetto_events, "CHUNK", 7)
    chunked = io.StringIO()
    assert write_perfetto(chunked, trace, [lead, *others.values()], phases) == n
    assert chunked.getvalue() == whole.getvalue()
    assert len(json.loads(whole.getvalue())["traceEvents"]) == n > 7 * 1000

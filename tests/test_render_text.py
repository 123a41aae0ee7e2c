"""Units, gutter, regime bar, sparklines, status line, syntax roles (pure renderers)."""

import math

import numpy as np
import pytest

from analyzers.results import Breakdown, LineStat, Regime
from brrrtui.contract.model import SourceLine
from brrrtui.contract.units import NA, fmt_bytes, fmt_flop_count, fmt_flops, fmt_mem, fmt_ns, fmt_pct
from brrrtui.present.gutter import gutter_spans, share_bar
from brrrtui.present.regime_bar import regime_bar, split_cells
from brrrtui.present.source import highlight
from brrrtui.present.sparkline import resample_max, spark
from brrrtui.present.status import RunState, status_spans, telemetry_metrics, telemetry_spans
from brrrtui.present.units import fmt_elapsed, fmt_tick, nice_step


def text(spans):
    return "".join(t for t, _ in spans)


def test_units():
    assert fmt_ns(512) == "512 ns"
    assert fmt_ns(12_345) == "12.3 µs"
    assert fmt_ns(4_560_000) == "4.56 ms"
    assert fmt_ns(1.5e9) == "1.5 s"
    assert fmt_ns(None) == fmt_ns(math.nan) == NA == "?"  # unknown is never shown as 0
    assert fmt_bytes(1.6e9) == "1.6 GB"  # decimal, as bandwidth datasheets
    assert fmt_mem(1536) == "1.5 KiB" and fmt_mem(141 * 2**30) == "141 GiB"  # memory capacity: binary
    assert fmt_mem(512) == "512 B" and fmt_mem(None) == NA
    assert fmt_flops(8.0e14) == "800 TFLOP/s"  # a rate
    assert fmt_flop_count(1.2e12) == "1.2 TFLOP" and fmt_flop_count(math.nan) == NA  # a count
    assert fmt_pct(0.625) == "62%" and fmt_pct(0.051) == "5.1%"
    assert fmt_elapsed(3723) == "1:02:03" and fmt_elapsed(65) == "1:05"
    assert [nice_step(x) for x in (0.7, 1.2, 3, 7, 12)] == [1, 2, 5, 10, 20]
    assert fmt_tick(1.5e6, 5e5) == "1500 µs"  # unit from the step alone
    assert fmt_tick(1.5e6, 5e5, 3e6) == "1.5 ms"  # one unit for the whole axis
    assert fmt_tick(26.8e6, 2e4, 27e6) == "26.80 ms"
    assert fmt_tick(20e6, 10e6) == "20 ms"


def stat(gpu_ns=1_000_000, regime=Regime.MEMORY, idle_ns=0, per_step=500_000.0):
    by = {r: 0 for r in Regime}
    by[regime] = gpu_ns
    return LineStat(SourceLine("t.py", 5, "f"), 0, gpu_ns, by, 0, idle_ns, None, None, 3, regime, per_step)


def test_share_bar_eighths():
    assert share_bar(0.5, 4) == "██  "
    assert share_bar(0.5 + 1 / 32, 4) == "██▏ "
    assert share_bar(1e-6, 4) == "▏   "  # any share > 0 shows
    assert share_bar(0.0, 4) == "    "
    assert share_bar(1.0, 4) == "████"


def test_gutter_has_time_share_badge_fusion_and_the_same_width_on_every_line():
    full = gutter_spans(stat(), 2_000_000, True, True, False, 3, 5)
    assert text(full) == "  500 µs ██   M F   5 │"
    assert ("M", "memory") in full and (" F", "fusion") in full
    blank = gutter_spans(None, 2_000_000, True, False, False, 3, 6)
    assert len(text(blank)) == len(text(full))
    compact = gutter_spans(stat(regime=Regime.COMPUTE), 2_000_000, False, False, True, 3, 5)
    assert text(compact) == "    1 ms C     5 │"  # per window when steps are unknown, no bar


def test_regime_bar_cells_add_up_and_each_regime_has_its_own_glyph():
    assert split_cells([0.62, 0.25, 0.13], 20) == [12, 5, 3]
    assert sum(split_cells([1 / 3] * 3, 10)) == 10
    spans = regime_bar("run", Breakdown(100, 62, 25, 13), 20)
    assert text(spans) == "run " + "█" * 12 + "▓" * 5 + "░" * 3 + " C 62% M 25% O 13%"
    assert "waiting" in text(regime_bar("run", None, 10))


def test_sparkline_resamples_by_max_and_right_aligns_short_series():
    assert resample_max(np.array([1, 9, 2, 3]), 2).tolist() == [9, 3]
    r = resample_max(np.array([5.0]), 3)
    assert math.isnan(r[0]) and r[2] == 5
    assert spark(np.array([0, 50, 100]), 3, 0, 100) == "▁▅█"
    assert spark(np.array([]), 4) == "    "


def test_status_line_states():
    live = RunState("train.py", live=True, running=True, steps=12, windows=3, elapsed_s=65)
    assert text(status_spans(live)) == "brrrtui train.py  ▶ running 1:05  steps 12  windows 3"
    done = live.with_(running=False, exit_code=1, paused=True)
    assert "■ finished, exit 1" in text(status_spans(done)) and "PAUSED" in text(status_spans(done))
    assert ("■ finished, exit 1", "failed") in status_spans(done)
    assert ("■ killed by SIGKILL", "failed") in status_spans(done.with_(exit_code=-9))


def test_telemetry_line_fits_the_width_and_says_when_there_is_none():
    t = np.arange(10)
    m = telemetry_metrics(
        t, np.linspace(0, 100, 10), np.full(10, 40e9), np.full(10, 600.0), np.full(10, 1980.0), 141e9
    )
    line = text(telemetry_spans(m, 100))
    assert len(line) <= 100
    assert (
        line.startswith("util ")
        and "100%" in line
        and "37.3 GiB" in line
        and "600 W" in line
        and "1980 MHz" in line
    )
    assert (
        text(telemetry_spans(telemetry_metrics(*[np.array([])] * 5), 80))
        == "no GPU telemetry in this recording"
    )


def test_highlight_assigns_roles_per_line():
    lines = highlight("def f(x):\n    return x.cos()  # two\n")
    assert len(lines) == 2
    assert ("def", "syn-keyword") in lines[0] and ("f", "syn-function") in lines[0]
    assert ("# two", "syn-comment") in lines[1]
    assert "".join(t for t, _ in lines[1]) == "    return x.cos()  # two"


@pytest.mark.parametrize(
    "mod", ["timeline", "lanes", "details", "gutter", "snapshot", "search", "status", "source"]
)
def test_renderers_never_import_textual(mod):
    import subprocess
    import sys

    code = f"import sys, brrrtui.present.{mod}; sys.exit('textual' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0

"""Achieved rates worked out where they are read (analyzers/cost/rates.py): the frugal roof fraction is the full
computation's, bit for bit, and the analysis gives the roofline's figures."""

import os

import numpy as np

from analyzers.analyze import analyze
from analyzers.cost.rates import achieved, roof_fraction
from brrrtui.recording.load import load_trace


def test_roof_fraction_is_the_full_computations_bit_for_bit():
    rng = np.random.default_rng(11)
    n = 5000
    flops = np.where(rng.random(n) < 0.2, np.nan, rng.random(n) * 1e12)
    nbytes = np.where(rng.random(n) < 0.2, np.nan, rng.random(n) * 1e9)
    dur = rng.integers(-2, 10**7, n)  # 0 and below: no rate
    peak = np.where(rng.random(n) < 0.1, np.nan, rng.choice([989e12, 494e12, 67e12], n))
    for bw in (4.8e12, np.nan):
        full = achieved(flops, nbytes, dur, peak, bw)
        frugal = roof_fraction(flops, nbytes, dur, peak, bw)
        np.testing.assert_array_equal(frugal.view(np.uint64), full.roof_fraction.view(np.uint64))
        assert np.isnan(frugal[dur <= 0]).all() and np.isfinite(frugal).any()
        # by hand, where both figures are known and the duration positive
        ok = (dur > 0) & np.isfinite(flops) & np.isfinite(nbytes) & np.isfinite(peak) & np.isfinite(bw)
        secs = dur[ok] * 1e-9
        want = np.maximum(flops[ok] / secs / peak[ok], nbytes[ok] / secs / bw)
        np.testing.assert_array_equal(frugal[ok], want)


def test_the_analysis_rates_are_the_roofline_ones_on_a_real_recording():
    trace = load_trace(os.path.join(os.path.dirname(__file__), "fixtures", "h200_hf_gpt2_modules.brrr.gz"))
    a = analyze(trace)
    rates = a.kernel_rates()
    assert rates is not None
    rows = np.array([0, len(a.trace.gpu) // 2, len(a.trace.gpu) - 1])
    some = a.kernel_rates(rows)
    assert some is not None
    for whole, part in zip(rates, some, strict=True):
        np.testing.assert_array_equal(whole[rows], part)
    known = np.isfinite(rates.roof_fraction)
    assert known.mean() > 0.5 and 0 < np.median(rates.roof_fraction[known]) < 1  # measured for most kernels

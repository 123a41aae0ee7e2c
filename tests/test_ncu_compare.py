"""validation/ncu_verdicts.py: the ncu CSV parser, the speed-of-light rule and the agreement arithmetic.

The CSV is tests/fixtures/ncu_sample.csv, written by hand in the format `ncu --csv --page raw` prints
(header, units row, one row per kernel, ==PROF== and app lines around it); its values are chosen, not
measured. Every expected number below is worked out from that file by hand.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "ncu_verdicts", os.path.join(ROOT, "validation", "ncu_verdicts.py")
)
nv = importlib.util.module_from_spec(_spec)
sys.modules["ncu_verdicts"] = nv  # dataclasses look their module up by name
_spec.loader.exec_module(nv)

GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNN"
# Kineto's spelling of the fixture's mul kernel; ncu may differ in spacing and the leading "void "
MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, "
    "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 2ul>)"
)
ADD_NO_PARAMS = "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >"


@pytest.fixture(scope="module")
def kernels():
    with open(os.path.join(ROOT, "tests", "fixtures", "ncu_sample.csv")) as f:
        return nv.parse_ncu_csv(f.read())


def test_parse_rows_units_and_separators(kernels):
    assert len(kernels) == 11
    assert [k.id for k in kernels] == list(range(11))
    g = kernels[0]
    assert g.name == GEMM
    assert g.duration_ns == 1_402_336.0
    assert g.dram_read_bytes == 590_558_003.0
    assert g.dram_write_bytes == 134_217_728.0
    assert g.dram_bytes == 724_775_731.0
    assert (g.sm_pct, g.mem_pct, g.tensor_pct) == (93.10, 45.20, 97.10)
    assert kernels[10].tensor_pct == 96.80  # hmma "n/a", gmma 96.80
    assert [k.regime for k in kernels] == [
        "compute", "memory", "memory", "memory", "memory", "latency", "latency", "latency", "latency",
        "latency", "compute",
    ]  # fmt: skip


def test_scaled_units_are_converted():
    text = (
        '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum",'
        '"sm__throughput.avg.pct_of_peak_sustained_elapsed",'
        '"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"\n'
        '"","","Mbyte","Kbyte","usecond","%","%"\n'
        '"0","k(float*)","2.5","1,024","3.25","10","n/a"\n'
    )
    (k,) = nv.parse_ncu_csv(text)
    assert k.dram_read_bytes == 2.5e6
    assert k.dram_write_bytes == 1.024e6
    assert k.duration_ns == 3250.0
    assert k.mem_pct is None and k.regime == "unknown"


def test_no_header_is_an_error():
    with pytest.raises(ValueError, match="no ncu CSV header"):
        nv.parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n")


@pytest.mark.parametrize(
    ("sm", "mem", "want"),
    [
        (93.1, 45.2, "compute"),
        (60.0, 59.9, "compute"),
        (60.0, 60.0, "compute"),  # a tie at or above the threshold goes to compute
        (59.9, 59.9, "latency"),
        (30.0, 60.0, "memory"),
        (59.99, 60.0, "memory"),
        (0.4, 0.6, "latency"),
        (None, 50.0, "unknown"),
    ],
)
def test_speed_of_light_rule(sm, mem, want):
    assert nv.classify_sol(sm, mem) == want


def test_classify_threshold_is_a_parameter():
    assert nv.classify_sol(55.0, 10.0) == "latency"
    assert nv.classify_sol(55.0, 10.0, threshold=50.0) == "compute"
    # measured on the H200: an 8192^3 bf16 matmul keeps memory throughput above SM throughput, but its tensor
    # pipe is 97% busy: compute-bound
    assert nv.classify_sol(93.3, 94.5, tensor_pct=96.9) == "compute"
    assert nv.classify_sol(93.3, 94.5) == "memory"


def test_aggregate_by_name_time_weighted(kernels):
    by = nv.aggregate_by_name(kernels)
    assert len(by) == 8
    g = by[GEMM]
    assert (g.calls, g.duration_ns, g.regime, g.regime_share) == (2, 2_800_336.0, "compute", 1.0)
    assert g.dram_bytes == 590_558_003 + 134_217_728 + 588_000_000 + 134_217_728
    assert g.sm_pct == pytest.approx((93.10 * 1_402_336 + 92.50 * 1_398_000) / 2_800_336, rel=1e-12)
    # the mul kernel ran once on 1 GiB (memory) and once on 32 elements (latency): the big launch decides
    m = by[kernels[1].name]
    assert (m.calls, m.duration_ns, m.regime) == (2, 506_752.0, "memory")
    assert m.regime_share == pytest.approx(504_928 / 506_752, rel=1e-12)
    assert (m.regime_calls, m.regime_duration_ns, m.regime_dram_bytes) == (1, 504_928.0, 2_147_491_840.0)


def test_name_matching():
    ncu_names = [
        GEMM,
        MUL.replace(", ", ","),
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)",
    ]
    m = nv.match_names(
        [MUL, GEMM, ADD_NO_PARAMS, "void at::native::vectorized_elementwise_kernel<8, x>()"], ncu_names
    )
    assert m[MUL] == ncu_names[1]  # spacing and "void " differ
    assert m[GEMM] == GEMM
    assert m[ADD_NO_PARAMS] == ncu_names[2]  # no parameter list on one side
    # base name vectorized_elementwise_kernel is shared by two ncu kernels: no guess
    assert "void at::native::vectorized_elementwise_kernel<8, x>()" not in m


def test_strip_params_keeps_anonymous_namespace():
    n = nv.normalize_name(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<A<2>, B>(A<2>, B)"
    )
    assert nv.strip_params(n) == "at::native::(anonymousnamespace)::multi_tensor_apply_kernel<A<2>,B>"
    assert nv.base_name(n) == "multi_tensor_apply_kernel"


def test_compare_agreement_bytes_and_lines(kernels, tmp_path):
    names = {nv.short_name(k.name): k.name for k in kernels}
    abs_name = next(v for s, v in names.items() if "abs_kernel_cuda" in s)
    tanh_name = next(v for s, v in names.items() if "tanh_kernel_cuda" in s)
    add_name = next(v for s, v in names.items() if "CUDAFunctorOnSelf_add" in s)
    report = {
        "kernels": [
            {
                "name": GEMM,
                "calls": 60,
                "gpu_ns": 84_000_000,
                "regime": "compute",
                "achieved_flops_per_s": 7.85e14,
                "achieved_bytes_per_s": None,
            },
            {
                "name": MUL,
                "calls": 60,
                "gpu_ns": 30_300_000,
                "regime": "memory",
                "achieved_bytes_per_s": 4.25e12,
                "bytes": 60 * 2 * 2**30,
            },
            {
                "name": add_name,
                "calls": 60,
                "gpu_ns": 30_400_000,
                "regime": "memory",
                "achieved_bytes_per_s": 4.24e12,
            },
            {"name": abs_name, "calls": 60, "gpu_ns": 30_400_000, "regime": "compute"},
            {"name": tanh_name, "calls": 12000, "gpu_ns": 24_000_000, "regime": "overhead"},
            {
                "name": "void some_kernel_ncu_never_saw(float*)",
                "calls": 1,
                "gpu_ns": 1_000_000,
                "regime": "memory",
            },
        ],
        "lines": [
            {
                "file": "/repo/examples/known_regimes.py",
                "line": 10,
                "function": "main",
                "gpu_ns": 84_000_000,
                "idle_ns": 0,
                "regime": "compute",
            },
            {
                "file": "/repo/examples/known_regimes.py",
                "line": 11,
                "function": "main",
                "gpu_ns": 30_300_000,
                "idle_ns": 0,
                "regime": "compute",
            },
            {
                "file": "/repo/examples/known_regimes.py",
                "line": 99,
                "function": "main",
                "gpu_ns": 5,
                "idle_ns": 7,
                "regime": "overhead",
            },
            {
                "file": "/repo/examples/other.py",
                "line": 12,
                "function": "f",
                "gpu_ns": 1,
                "idle_ns": 0,
                "regime": "memory",
            },
        ],
    }
    script = tmp_path / "known_regimes.py"
    script.write_text(
        '"""# expect: memory  (in a docstring: not a comment, ignored)"""\n'
        + "\n" * 8
        + "a @ b  # expect: compute\n"  # line 10
        + "x * 2  # expect: memory\n"  # line 11
        + "time.sleep(1)  # expect: overhead\n"  # line 12
        + "y = 1  # expect: fast\n"  # line 13: not a regime, ignored
    )
    expected = nv.expected_lines(str(script))
    assert expected == {10: "compute", 11: "memory", 12: "overhead"}

    c = nv.compare(kernels, report, expected, "known_regimes.py")
    matched = 84_000_000 + 30_300_000 + 30_400_000 + 30_400_000 + 24_000_000
    assert c["kernels_matched"] == 5 and c["kernels_in_report"] == 6
    assert c["kernel_agreement"] == pytest.approx((matched - 30_400_000) / matched, rel=1e-12)
    assert c["kernel_agreement"] == pytest.approx(0.8473129080863, rel=1e-12)
    assert c["matched_gpu_share"] == pytest.approx(matched / (matched + 1_000_000), rel=1e-12)
    ncu_matched = 2_800_336 + 506_752 + 505_760 + 506_112 + 4_032
    assert c["kernel_agreement_by_ncu_time"] == pytest.approx(
        (ncu_matched - 506_112) / ncu_matched, rel=1e-12
    )
    by = {r["name"]: r for r in c["kernels"]}
    assert by[abs_name]["agree"] is False and by[abs_name]["ncu"] == "memory"
    assert by[tanh_name]["agree"] is True and by[tanh_name]["ncu"] == "latency"
    assert by["void some_kernel_ncu_never_saw(float*)"]["ncu_name"] is None

    # bytes: only the memory-bound launch of the mul kernel counts on ncu's side
    b = {r["name"]: r for r in c["bytes"]}
    assert b[MUL]["bandwidth_ratio"] == pytest.approx(4.25e12 / (2_147_491_840 / 504_928e-9), rel=1e-12)
    assert b[MUL]["ncu_dram_bytes_per_call"] == 2_147_491_840.0
    assert b[MUL]["bytes_per_call_ratio"] == pytest.approx(2 * 2**30 / 2_147_491_840, rel=1e-12)
    assert b[add_name]["bandwidth_ratio"] == pytest.approx(4.24e12 / (2_147_487_744 / 505_760e-9), rel=1e-12)
    assert b[add_name]["bytes_per_call_ratio"] is None  # the report gave no bytes
    assert GEMM not in b and tanh_name not in b  # not memory-bound

    lines = {r["line"]: r for r in c["lines"]}
    assert lines[10]["agree"] is True
    assert (lines[11]["got"], lines[11]["agree"]) == ("compute", False)
    assert (lines[12]["got"], lines[12]["agree"]) == (None, False)  # missing from the report
    assert lines[99]["expected"] is None and lines[99]["agree"] is None  # reported, not tagged
    assert c["line_agreement"] == pytest.approx(1 / 3, rel=1e-12)
    text = nv.format_compare(c)
    assert "kernel agreement (brrrtui GPU time) 84.7%" in text


def test_known_regimes_tags_parse():
    got = nv.expected_lines(os.path.join(ROOT, "examples", "known_regimes.py"))
    assert sorted(set(got.values())) == ["compute", "memory", "overhead"]
    assert list(got.values()).count("compute") == 1
    assert list(got.values()).count("memory") == 4


def test_kineto_and_ncu_spellings_of_one_kernel_match():
    # both names as recorded on the H200 (Kineto in torch 2.11; ncu 2025.3 --print-kernel-base demangled)
    kineto = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
        "std::array<char*, 2ul> >(int, at::native::sqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
        "::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
    )
    ncu = (
        "void at::vectorized_elementwise_kernel<4, at::sqrt_kernel_cuda(at::TensorIteratorBase &)::[lambda() "
        "(instance 2)]::operator ()() const::[lambda() (instance 2)]::operator ()() const::[lambda(float) "
        "(instance 1)], std::array<char *, 2>>(int, T2, T3)"
    )
    tanh = ncu.replace("sqrt_kernel_cuda", "tanh_kernel_cuda")
    assert nv.signature(kineto) == nv.signature(ncu)
    assert nv.match_names([kineto], [tanh, ncu]) == {kineto: ncu}


# --- the ground-truth rule (tensor >= 50 -> compute; memory >= 60 above SM, or DRAM >= 2.4 TB/s -> memory) ---


def _k(sm=None, mem=None, tensor=None, dur=1000.0, dram=None):
    return nv.NcuKernel(0, "k", dur, dram, None if dram is None else 0.0, sm, mem, tensor, "x")


@pytest.mark.parametrize(
    ("kernel", "want"),
    [
        (_k(93.1, 45.2, 97.1), "compute"),
        (_k(40.0, 45.0, 50.0), "compute"),  # tensor pipe at the threshold
        (_k(93.3, 94.5, 49.9), "memory"),  # tensor pipe below 50%: memory 94.5% above SM 93.3%
        (_k(20.0, 88.0, 0.0), "memory"),
        (_k(20.0, 60.0), "memory"),
        (_k(61.0, 60.0), "under"),  # memory not above SM (an SM-bound fp32 kernel: the rule is silent)
        (_k(30.0, 40.0, dur=1000.0, dram=2.41e6), "memory"),  # 2.41 MB in 1 µs: 2.41 TB/s
        (_k(30.0, 40.0, dur=1000.0, dram=2.399e6), "under"),
        (_k(0.4, 0.6), "under"),
        (_k(), "unknown"),
    ],
)
def test_ground_truth_rule(kernel, want):
    assert nv.ground_truth(kernel) == want


def test_ground_truth_of_the_sample(kernels):
    assert [nv.ground_truth(k) for k in kernels] == ["compute"] + ["memory"] * 4 + ["under"] * 5 + ["compute"]
    by = nv.ground_truth_by_name(kernels)
    m = by[kernels[1].name]  # 1 GiB launch (memory) and a 32-element one (under): the big one decides
    assert (m.calls, m.verdict, m.sol) == (2, "memory", "memory")
    assert m.verdict_share == pytest.approx(504_928 / 506_752, rel=1e-12)
    assert m.dram_bytes_per_s == pytest.approx((2_147_491_840 + 384) / 506_752e-9, rel=1e-12)


def test_roof_fraction_and_agreement():
    dev = {"peak_flops_per_s": 1e15, "peak_bytes_per_s": 4e12}
    assert nv.roof_fraction({"achieved_flops_per_s": 5e14, "achieved_bytes_per_s": 1e12}, dev) == (
        0.5,
        "computed",
    )
    assert nv.roof_fraction({"achieved_flops_per_s": None, "achieved_bytes_per_s": 3e12}, dev) == (
        0.75,
        "computed",
    )
    assert nv.roof_fraction({"roof_fraction": 0.3, "achieved_bytes_per_s": 3e12}, dev) == (0.3, "report")
    assert nv.roof_fraction({"achieved_bytes_per_s": 3e12}, {}) == (None, "unknown")
    assert nv.gt_agrees("compute", "compute", 0.9) and not nv.gt_agrees("compute", "memory", 0.9)
    assert nv.gt_agrees("memory", "memory", None) and not nv.gt_agrees("memory", "overhead", 0.1)
    # under-utilised: any verdict, provided the roof fraction shown is below 60%
    assert nv.gt_agrees("under", "memory", 0.59) and nv.gt_agrees("under", "compute", 0.1)
    assert not nv.gt_agrees("under", "overhead", 0.6)
    assert nv.gt_agrees("under", "overhead", None) and not nv.gt_agrees("under", "memory", None)
    assert nv.gt_agrees("unknown", "memory", 0.1) is None


def test_compare_ground_truth_on_the_smoke_report(kernels):
    g = nv.compare_ground_truth(kernels, nv.smoke_report())
    rows = {r["short"]: r for r in g["kernels"]}
    assert g["kernels_scored"] == g["kernels_in_report"] == 6
    # disagreeing: abs (ncu memory, brrrtui compute: 506 µs) and the sum reduction (under-utilised,
    # brrrtui memory at 3.0 / 4.18 TB/s = 72% of its roof: 4.1 µs)
    total = 2_800_000 + 507_000 + 506_000 + 506_000 + 4_000 + 4_100
    assert g["agreement"] == pytest.approx((total - 506_000 - 4_100) / total, rel=1e-12)
    assert [r["ncu"] for r in g["disagreeing"]] == ["memory", "under"]
    assert g["disagreeing"][0]["gpu_share"] == pytest.approx(506_000 / total, rel=1e-12)
    tanh = next(r for s, r in rows.items() if "tanh" in s)
    assert (tanh["ncu"], tanh["brrrtui"], tanh["agree"]) == ("under", "memory", True)  # roof 0.00006
    assert g["roof_source"] == ["computed"]
    assert "ground truth" in nv.format_ground_truth(g)


def test_kernels_per_step_and_launch_window():
    report = {
        "span_ns": 210_000_000,
        "overhead": {"profiled_step_ns": 100_000_000},
        "kernels": [
            {"name": "gemm", "calls": 1500},
            {"name": "Memcpy HtoD (Pageable -> Device)", "calls": 99},
            {"name": "Memset (Device)", "calls": 7},
            {"name": "add", "calls": 440},
        ],
    }
    assert nv.kernels_per_step(report) == 970  # 1940 kernel calls in round(2.1) = 2 steps
    assert nv.kernels_per_step({"kernels": []}) is None
    args = nv.parse_args(["--script", "examples/train_gpt.py", "--", "--steps", "8"])
    assert args.script_args == ["--steps", "8"] and nv.script_args(args) == ["--steps", "8"]
    assert nv.launch_window(args, report)[:2] == (4850, 970)
    assert nv.launch_window(args, None)[:2] == (4850, 970)  # the table: train_gpt.py ~970 per step
    args = nv.parse_args(
        ["--script", "validation/workloads/hf_gpt2.py", "--skip-steps", "4", "--max-kernels", "400"]
    )
    assert nv.launch_window(args, None)[:2] == (2400, 400)
    args = nv.parse_args(["--script", "x.py", "--launch-skip", "7", "--launch-count", "9"])
    assert nv.launch_window(args, report)[:2] == (7, 9)
    # known_regimes.py keeps its defaults: its own arguments, no skip, 300 kernels
    args = nv.parse_args([])
    assert nv.script_args(args) == ["--steps", "3", "--tiny-ops", "50", "--device", "cuda"]
    assert nv.launch_window(args, None)[:2] == (0, 300)
    assert nv.with_steps(["--steps", "8", "--batch", "4", "--steps=3"], 300) == [
        "--batch",
        "4",
        "--steps",
        "300",
    ]

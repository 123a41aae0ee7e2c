"""A finding is facts (analyzers.findings.facts); brrrtui.present.finding_words makes its words. Every kind of
finding renders there, and the finders build no sentence."""

from __future__ import annotations

import ast
import dataclasses
import glob
import os

import pytest

from analyzers.comm.ranks import RankComparison, Straggler, name_straggler
from analyzers.cost.gemm_shapes import Diagnosis
from analyzers.findings import facts as F
from analyzers.phases.slow_steps import SlowSteps
from analyzers.results import Finding, FindingKind
from brrrtui.contract.model import SourceLine
from brrrtui.present.finding_words import DDP_ACTION, action, facts_words, message, words

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = SourceLine("train.py", 30, "step")
# 2 steps of 100 ms each; the profiler doubles idle (scale 0.5)
PER = F.Per(per=2, by_step=True, step_ns=100e6, idle_scale=0.5)
RATES = F.RateSpan(100e12, 150e12, 989e12, 0.10, 0.15)


def _one_of_each() -> list[Finding]:
    """One finding of every kind, with facts whose figures are easy to divide by hand."""

    def f(kind: FindingKind, facts: F.Facts, saving: float | None = 10e6) -> Finding:
        return Finding(kind, (LINE,), saving, facts)

    return [
        f(
            FindingKind.FUSION,
            F.FusionFacts(PER, 3, 3, 0, ("mul", "add"), 2, 400e6, 1e12, 4e12, 200e6, 2, None, "forward", False),
        ),
        f(FindingKind.ATTENTION, F.AttentionFacts(PER, 3, 80e6)),
        f(FindingKind.NO_TENSOR_CORES, F.TensorCoreFacts(PER, 40e6, 20e12, 60e12, 400e12, 800e12)),
        f(FindingKind.OPTIMIZER, F.OptimizerFacts(PER, "Adam", 240, 4e6, 10e3)),
        f(FindingKind.OVERHEAD, F.OverheadFacts(PER, 0.4, None, None, 60_000_000, 2000, 5e3, 8e3)),
        f(FindingKind.SMALL_KERNELS, F.SmallKernelsFacts(PER, 200, 400, 400_000, 9e3, 6e6, 1.0)),
        f(FindingKind.SYNC, F.GapFacts(PER, 2, 20e6)),
        f(FindingKind.H2D, F.GapFacts(PER, 4, 20e6, F.HostCopies(64e6, 0.01, True))),
        f(FindingKind.DATA, F.GapFacts(PER, 2, 20e6)),
        f(FindingKind.CPU_WAIT, F.GapFacts(PER, 2, 20e6)),
        f(FindingKind.COMMUNICATION, F.CollectiveWaitFacts(PER, 20e6, ("gloo:all_reduce",))),
        f(
            FindingKind.COMMUNICATION,
            F.CommunicationFacts(PER, 60_000_000, 200_000_000, 10_000_000, (("all_reduce", 60e6),)),
        ),
        f(
            FindingKind.SLOW_GEMM,
            F.SlowGemmFacts(
                PER,
                Diagnosis("align", (50257,), "M=8192 N=50257 K=768"),
                False,
                ("M=8192 N=50257 K=768",),
                False,
                ("cutlass_80_tensorop_gemm",),
                4,
                8e6,
                1.0,
                RATES,
                0.8,
            ),  # fmt: skip
        ),
        f(
            FindingKind.SLOW_GEMM,
            F.UnknownGemmFacts(PER, False, (), ("nvjet_tst",), 4, 8e6, RATES, (66,), 132, 0.8),
        ),
        f(
            FindingKind.SLOW_GEMM,
            F.SlowAttentionFacts(
                PER, None, "batch=8 heads=16 seq=4096 head_dim=64 bf16", ("_scaled_dot_product_flash_attention",),
                ("flash_fwd_kernel",), 4, 8e6, RATES, 0.5, False, 4e6,
            ),  # fmt: skip
        ),
        f(
            FindingKind.CONV_LAYOUT,
            F.ConvLayoutFacts(PER, 4, 8, ("nchwToNhwcKernel",), 2e6, None, 0.8),
        ),
        f(FindingKind.GRAPH_BREAK, F.GraphBreakFacts(2, "Tensor.item"), None),
        f(FindingKind.RECOMPILE, F.RecompileFacts(3, ("size of x changed",)), None),
        f(
            FindingKind.SLOW_STEPS,
            F.SlowStepsFacts(SlowSteps(20, 10e6, 12e6, (5, 10, 15), (30e6, 30e6, 30e6), 5), False),
        ),
    ]


def test_finding_holds_facts_not_words():
    names = {x.name for x in dataclasses.fields(Finding)}
    assert "facts" in names and not names & {"message", "action"}
    assert not hasattr(Finding, "message") and not hasattr(Finding, "action")


def test_every_kind_and_every_facts_class_renders_through_present():
    found = _one_of_each()
    assert {f.kind for f in found} == set(FindingKind)
    classes = {
        c for c in vars(F).values() if isinstance(c, type) and issubclass(c, F.Facts) and c is not F.Facts
    }
    assert {type(f.facts) for f in found} == classes  # the table above holds every facts class
    base = facts_words.dispatch(F.Facts)
    assert all(facts_words.dispatch(c) is not base for c in classes)
    for f in found:
        said = words(f)
        assert said.message and said.action and (message(f), action(f)) == tuple(said)


def test_facts_are_worded_per_step_from_run_totals():
    """Run totals in the facts are divided by `per` (2 steps) when worded, per-step ones are not."""
    by = {type(f.facts).__name__ + str(f.kind): f for f in _one_of_each()}
    overhead = message(by["OverheadFactsoverhead"])
    # 60 ms of host idle over 2 steps: 30 ms a step; unprofiled at half: 15 ms; 2000 kernels: 1000 a step
    assert "40% of the profiled time: 30 ms idle per step (~15 ms per step without the profiler)" in overhead
    assert "issue 1000 kernels (median 5 µs, 8 µs between kernels); most idle after train.py:30" in overhead
    h2d = message(by["GapFactsh2d"])
    # 64 MB in 10 ms over 2 steps: 32 MB a step at 6.4 GB/s; 20 ms idle of a 100 ms step
    assert h2d.startswith("host-to-device copies from train.py:30 leave the GPU idle 20 ms per step (20%)")
    assert ": 32 MB per step at 6.4 GB/s from pageable memory (~10 ms per step without the profiler)" in h2d
    wait = message(by["GapFactscpu_wait"])
    assert "without the profiler" not in wait  # the profiler does not slow a wait
    assert message(by["GapFactssync"]).startswith("train.py:30 synchronises with the GPU once per step")
    assert message(by["OptimizerFactsoptimizer"]).startswith("Adam.step launches 120 kernels per step (4 ms")


def test_the_overhead_finding_says_the_step_left_without_it():
    # unprofiled steps of 21 ms, 7 ms of them the overhead's saving: the cure leaves a 14 ms step, a figure
    # that holds where the host's speed (and with it the step and the saving) changes between runs
    facts = F.OverheadFacts(PER, 0.7, 0.33, 21e6, 60_000_000, 2000, 5e3, 8e3)
    said = message(Finding(FindingKind.OVERHEAD, (LINE,), 7e6, facts))
    assert said.endswith("most idle after train.py:30; a step without it: ~14 ms of the 21 ms unprofiled step")
    # unknown unprofiled steps, or no saving: no such figure
    for unknown, saving in ((None, 7e6), (21e6, 0.0)):
        facts = F.OverheadFacts(PER, 0.7, None, unknown, 60_000_000, 2000, 5e3, 8e3)
        assert "a step without it" not in message(Finding(FindingKind.OVERHEAD, (LINE,), saving, facts))


def test_no_optimizer_name_is_worded_by_present():
    f = Finding(FindingKind.OPTIMIZER, (), 1e6, F.OptimizerFacts(PER, None, 240, 4e6, 10e3))
    assert message(f).startswith("the optimizer.step launches 120 kernels")
    assert action(f).startswith("the optimizer(..., foreach=True)")


def test_the_straggler_is_data_on_the_finding_and_present_words_the_cure():
    found = [f for f in _one_of_each() if f.kind in (FindingKind.COMMUNICATION, FindingKind.SYNC)]
    straggler = Straggler(rank=1, late_ns=30e6, basis="communication", line=LINE, line_extra_ns=29e6)
    named = name_straggler(found, RankComparison((), ((1, 1),), 0, straggler, 70e6, 0.4), shown=0)
    assert [f.waits_for for f in named] == [None if f.kind is FindingKind.SYNC else straggler for f in found]
    nccl = next(f for f in named if isinstance(f.facts, F.CommunicationFacts))
    cure = "this rank waits for rank 1, 30 ms per step late, most of it on train.py:30: make rank 1 faster"
    assert action(nccl).startswith(cure) and action(nccl).endswith(DDP_ACTION)
    assert message(nccl) == message(dataclasses.replace(nccl, waits_for=None))  # the verdict is the same
    sync = next(f for f in named if f.kind is FindingKind.SYNC)
    assert not action(sync).startswith("this rank waits")


def test_facts_without_words_are_refused():
    @dataclasses.dataclass(frozen=True)
    class Unworded(F.Facts):
        n: int

    with pytest.raises(TypeError, match="no words for Unworded"):
        message(Finding(FindingKind.SYNC, (), None, Unworded(1)))


def _sentences(path: str) -> list[str]:
    """String literals of `path` (docstrings aside) with a space in their text: words, not names or codes."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            text = "".join(v.value for v in n.values if isinstance(v, ast.Constant))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs | parts:
            text = n.value
        else:
            continue
        if " " in text:
            found.append((n.lineno, f"{os.path.relpath(path, ROOT)}:{n.lineno}: {text[:60]!r}"))
    return [text for _, text in sorted(found)]


FINDERS = sorted(glob.glob(os.path.join(ROOT, "analyzers", "findings", "*.py"))) + [
    os.path.join(ROOT, "analyzers", "phases", "slow_steps.py"),
    os.path.join(ROOT, "analyzers", "comm", "collectives.py"),
]


@pytest.mark.parametrize("path", FINDERS, ids=lambda p: os.path.relpath(p, ROOT))
def test_finders_build_no_finding_text(path):
    """No f-string or string constant with a space outside docstrings: a finding's words are present's."""
    assert _sentences(path) == []


def test_the_sentence_check_sees_an_f_string_and_a_constant(tmp_path):
    src = tmp_path / "finder.py"
    src.write_text(
        '"""Doc string."""\nx = 3\nA = f"{x} kernels per step"\nB = "the optimizer"\nC = "hf_gelu"\n'
    )
    assert [s.split(": ", 1)[1] for s in _sentences(str(src))] == ["' kernels per step'", "'the optimizer'"]

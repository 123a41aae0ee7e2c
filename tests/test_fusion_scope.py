"""What compiling a function fuses (analyzers/fusion/scope.py): every run of fusable kernels in its scope, on
hand-built traces whose bytes and savings are exact."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fixtures.synthetic import BF16, F32, H200_BW, TraceBuilder

from analyzers import arrays
from analyzers.analyze import analyze
from analyzers.cost.peaks import resolve_peaks
from analyzers.cost.roofline import roofline
from analyzers.fusion import scope as fusion_scope, scope_runs
from analyzers.fusion.chains import fusion_chains
from analyzers.link.links import link
from brrrtui.present.finding_words import action
from brrrtui.recording.load import load_trace

N = 1 << 24  # elements: 32 MiB per bf16 tensor, 64 MiB per fp32 one
T, T4 = 2 * N, 4 * N
LAUNCH = 2_000.0
KERNEL_NS = 20_000  # Script's kernels: one reading and writing a bf16 tensor streams 2T in this time
STREAMED = 2 * T / (KERNEL_NS * 1e-9)  # their bandwidth (3.4 TB/s, under H200_BW): the rate a run fuses at
MM = ("sm90_xmma_gemm_bf16", "aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16])


class Script:
    """Ops on stream 7, one kernel each, back to back; each on a line of model.py, optionally in a module."""

    def __init__(self) -> None:
        self.b = TraceBuilder()
        self.lines: dict[tuple[int, str], int] = {}
        self.cpu, self.gpu = 0, 10_000

    def op(self, line: int, name: str, shapes, dtypes, module: str | None = None, func: str = "forward",
           kernel: str | None = None, dur_ns: int = KERNEL_NS) -> int:  # fmt: skip
        b = self.b
        if (line, func) not in self.lines:
            self.lines[(line, func)] = b.line("model.py", line, func)
        mod = b.strings(module) if module else -1
        b.spans.append((0, self.lines[(line, func)], b.t0 + self.cpu, 4_000, 1, mod, -1))
        b.op(name, self.cpu + 500, 3_000, shapes=shapes, dtypes=dtypes)
        row = b.launch(kernel or f"vectorized_elementwise_kernel<{name}>", self.cpu + 1_000, self.gpu, dur_ns)
        self.cpu, self.gpu = self.cpu + 4_000, self.gpu + dur_ns + 2_000
        return row

    def mm(self, line: int, module: str | None = None) -> int:
        kernel, name, shapes, dtypes = MM
        return self.op(line, name, shapes, dtypes, module, kernel=kernel, dur_ns=100_000)

    def chains(self):
        self.b.window(0, self.gpu + 10_000, first_step=0, last_step=0)
        trace = self.b.build()
        links = link(trace)
        peaks = resolve_peaks(trace)
        return fusion_chains(trace, links, roofline(trace, links, peaks), peaks, per_launch_ns=LAUNCH)


def pair(s: Script, line: int, module: str | None = None, func: str = "forward") -> None:
    """y = x * 2; z = y + 1 (bf16, N): one intermediate of T bytes, written and re-read."""
    s.op(line, "aten::mul", [[N], []], [BF16, "Scalar"], module, func)
    s.op(line + 1, "aten::add", [[N], []], [BF16, "Scalar"], module, func)


def test_two_chains_of_one_function_between_matmuls_are_one_estimate():
    s = Script()
    pair(s, 10)
    s.mm(12)
    pair(s, 14)
    (c,) = s.chains()
    assert c.scope and c.pattern is None
    assert c.line_ids == [0, 1, 3, 4]  # the larger chain's lines first, then the rest of the function
    assert c.bytes_now == 2 * (2 * 2 * T)  # two runs of two ops, each reading and writing T
    assert c.bytes_saved == 2 * (2 * T)  # per run: y not written, not re-read
    assert c.launches == 2 and c.launches_saved == 2  # one occurrence
    assert c.saving_ns == pytest.approx(2 * (2 * T / STREAMED * 1e9 + LAUNCH))  # at the runs' own bandwidth
    assert len(c.all_rows) == 4


def test_a_run_far_under_the_memory_roof_saves_in_proportion_to_its_time():
    """The pair's kernels take 200 us each for 2T bytes (a tenth of STREAMED): fused, the remaining 2T
    stream at that same rate, so the intermediate's 2T save half of the 400 us, not 2T at peak."""
    s = Script()
    s.op(10, "aten::mul", [[N], []], [BF16, "Scalar"], dur_ns=200_000)
    s.op(11, "aten::add", [[N], []], [BF16, "Scalar"], dur_ns=200_000)
    (c,) = s.chains()
    assert c.scope and c.bytes_now == 4 * T and c.bytes_saved == 2 * T
    assert c.saving_ns == pytest.approx(200_000 + LAUNCH)


def test_a_run_faster_than_the_peak_fuses_at_the_peak():
    """2T bytes in 13 us a kernel is above H200_BW (the bytes hit a cache): the fused kernel is not credited
    with more than the peak. At peak its 2T take longer than the 28 us wall time (two kernels and the 2 us
    gap between them) leaves of the 2T saved and the launch, so the wall caps the saving."""
    s = Script()
    s.op(10, "aten::mul", [[N], []], [BF16, "Scalar"], dur_ns=13_000)
    s.op(11, "aten::add", [[N], []], [BF16, "Scalar"], dur_ns=13_000)
    (c,) = s.chains()
    assert 4 * T / 26_000e-9 > H200_BW
    at_peak = 2 * T / H200_BW * 1e9
    assert c.saving_ns == pytest.approx(min(at_peak + LAUNCH, 28_000 - at_peak))


def test_a_same_shaped_input_from_outside_is_still_read():
    """a = x.exp(); b = a * y, with y a tensor of a's shape made before the run. Shapes alone would take
    both of the mul's inputs for a (3T saved); the mul reads two (N, bf16) tensors where the run made one, so
    the fused kernel still reads x and y and writes b: 3T of its 5T, and only a's 2T are saved."""
    s = Script()
    s.op(10, "aten::exp", [[N]], [BF16])
    s.op(11, "aten::mul", [[N], [N]], [BF16, BF16])
    (c,) = s.chains()
    assert c.bytes_now == 2 * T + 3 * T
    assert c.bytes_saved == 2 * T
    assert c.saving_ns == pytest.approx(2 * T / (5 * T / (2 * KERNEL_NS * 1e-9)) * 1e9 + LAUNCH)


def test_a_cross_entropy_backward_still_reads_the_log_probabilities_and_writes_the_gradient():
    """nll_loss_backward writes one gradient per target into an (R, V) fp32 tensor (its bytes: the scalar
    grad_out, the targets and the picks), then _log_softmax_backward_data(grad, log_probs) reads that tensor
    and the forward's log-probabilities, of the same shape, and writes the gradient. Shapes alone take all
    three (R, V) reads and writes of the softmax backward for intermediates; the fused kernel still reads the
    log-probabilities (a second input of that shape where the run made one) and writes the gradient: only
    the grad tensor's read is saved. The nll op's (R, V) input is charged its picks, not the whole tensor."""
    rows, vocab = 8192, 4096
    x = rows * vocab * 4
    s = Script()
    s.op(20, "aten::nll_loss_backward", [[], [rows, vocab], [rows], [], [], [], []],
         [F32, F32, "long int", "", "Scalar", "Scalar", F32])  # fmt: skip
    s.op(20, "aten::_log_softmax_backward_data", [[rows, vocab], [rows, vocab], [], []],
         [F32, F32, "Scalar", "Scalar"], dur_ns=200_000)  # fmt: skip
    (c,) = s.chains()
    nll = 4 + rows * 8 + rows * 4  # grad_out, targets, one fp32 pick per target
    assert c.bytes_now == nll + 3 * x
    assert c.bytes_saved == x
    assert c.saving_ns == pytest.approx(x / ((nll + 3 * x) / (KERNEL_NS + 200_000)) + LAUNCH)


def test_a_copy_destination_is_written_not_read():
    """y = x * 2 (bf16); out.copy_(y) into an fp32 tensor made before: the fused kernel reads x and writes
    out (T + 2T of the 2T + 3T moved); the copy's destination is not an input it reads."""
    s = Script()
    s.op(10, "aten::mul", [[N], []], [BF16, "Scalar"])
    s.op(11, "aten::copy_", [[N], [N], []], [F32, BF16, "Scalar"])
    (c,) = s.chains()
    assert c.bytes_now == 2 * T + 3 * T
    assert c.bytes_saved == 2 * T  # y not written, not re-read


def test_without_a_chain_there_is_no_scope_to_widen():
    """a: y = x * 2 (bf16 N); b: h = g.float() (a different tensor, fp32 N/2); c: z = y + 1 reads a's y."""
    s = Script()
    s.op(10, "aten::mul", [[N], []], [BF16, "Scalar"])
    s.op(11, "aten::_to_copy", [[N // 2]], [F32])
    s.op(12, "aten::add", [[N], []], [BF16, "Scalar"])
    s.mm(13)
    (c,) = [c for c in s.chains() if c.scope] or [None]
    assert c is None  # no two neighbours share a tensor: no chain, so no compile advice to widen


def test_a_chain_seeds_its_scope_and_a_non_neighbour_intermediate_counts():
    s = Script()
    s.op(10, "aten::mul", [[N], []], [BF16, "Scalar"])  # y
    s.op(11, "aten::add", [[N], []], [BF16, "Scalar"])  # reads y: the chain
    s.op(12, "aten::_to_copy", [[N]], [BF16])  # reads the add's output (same shape): also flows
    s.op(13, "aten::sin", [[N]], [BF16])
    (c,) = s.chains()
    # every op reads an earlier op's (N, bf16) output: 3 inputs not re-read, 3 productions not written
    assert c.bytes_saved == 6 * T and c.bytes_now == 4 * 2 * T
    assert c.saving_ns == pytest.approx(6 * T / STREAMED * 1e9 + 3 * LAUNCH)


BLOCK = "=Model;blocks.0=Block"
MLP = BLOCK + ";blocks.0.mlp=MLP"
ROOT = "=Model"


def block_script(with_modules: bool) -> Script:
    """Block.forward (lines 60-61) calls MLP.forward (lines 30-31); Model.forward (line 80) calls the block."""
    s = Script()
    pair(s, 60, BLOCK if with_modules else None)  # norm-like pair in Block.forward
    s.mm(30, MLP if with_modules else None)
    gelu_module = MLP if with_modules else None
    s.op(30, "aten::gelu", [[N]], [BF16], gelu_module)  # lone kernels: no chain of their own
    s.mm(31, MLP if with_modules else None)
    s.op(61, "aten::add", [[N], [N]], [BF16, BF16], BLOCK if with_modules else None)  # residual add
    s.mm(80, ROOT if with_modules else None)
    pair(s, 80, ROOT if with_modules else None)  # the model's own chain (lines 80-81)
    return s


def test_with_module_chains_a_block_covers_its_submodules_but_not_the_model():
    chains = block_script(with_modules=True).chains()
    block = next(c for c in chains if 0 in c.line_ids)
    model = next(c for c in chains if c is not block)
    assert block.scope and model.scope
    # Block: the pair (2 kernels, one intermediate), the MLP's gelu and the residual add (runs of one)
    assert len(block.all_rows) == 4
    assert block.bytes_now == 2 * 2 * T + 2 * T + 3 * T
    assert block.bytes_saved == 2 * T
    assert block.saving_ns == pytest.approx(2 * T / STREAMED * 1e9 + LAUNCH)
    # the model's chain is its own lines only: a root module's scope is not the whole model
    assert len(model.all_rows) == 2 and model.bytes_saved == 2 * T


def test_without_module_chains_distant_lines_of_one_name_are_other_functions():
    chains = block_script(with_modules=False).chains()
    assert sorted(len(c.all_rows) for c in chains) == [2, 3]  # Block: pair + add (lines 60-62); model: pair
    block = next(c for c in chains if len(c.all_rows) == 3)
    assert block.bytes_saved == 2 * T


def test_a_function_inside_another_functions_scope_is_not_counted_twice():
    s = Script()
    pair(s, 60, BLOCK)
    s.mm(62, BLOCK)
    pair(s, 30, MLP)  # MLP.forward has a chain of its own
    s.mm(32, MLP)
    (c,) = s.chains()
    assert c.line_ids[:2] in ([0, 1], [2, 3]) and len(c.all_rows) == 4
    assert c.bytes_saved == 2 * (2 * T)


def test_scope_finding_in_the_analysis_names_the_function_and_the_launches():
    s = block_script(with_modules=True)
    s.b.window(0, s.gpu + 10_000, first_step=0, last_step=0)
    a = analyze(s.b.build())
    msgs = [f for f in a.findings if f.kind == "fusion"]
    assert msgs and all("torch.compile the function `forward`" in action(f) for f in msgs)


def test_every_instance_of_a_module_is_one_function():
    """Two blocks (blocks.0, blocks.1) run the same Block.forward: their lines are one function whose scope
    is both blocks' kernels, apart from the model's own chain."""
    s = Script()
    for i in (0, 1):
        block = f"=Model;blocks.{i}=Block"
        pair(s, 60, block)
        s.mm(30, f"{block};blocks.{i}.mlp=MLP")
        s.op(30, "aten::gelu", [[N]], [BF16], f"{block};blocks.{i}.mlp=MLP")
    s.mm(80, ROOT)
    pair(s, 80, ROOT)
    chains = s.chains()
    assert sorted(len(c.all_rows) for c in chains) == [2, 6]  # the model's pair; both blocks' pair + gelu
    block = next(c for c in chains if len(c.all_rows) == 6)
    # runs: [mul, add] | mm | [gelu, mul, add] (block 0's gelu feeds block 1's mul) | mm | [gelu]
    assert block.occurrences == 2 and block.launches == 3 and block.bytes_saved == 2 * T + 4 * T


def test_a_named_fused_op_stays_its_own_finding_outside_the_scope():
    """An HF-style hand-written GELU (a named pattern) between matmuls of the function, and a plain chain:
    the GELU keeps its named advice and its kernels are left out of the function's scope."""
    from test_fusion import REAL_GELU

    s = Script()
    pair(s, 10)
    s.mm(12)
    for _, name, shapes, dtypes in REAL_GELU:
        s.op(13, name, shapes, dtypes)
    s.mm(14)
    chains = s.chains()
    gelu = next(c for c in chains if c.pattern == "gelu_tanh")
    scope = next(c for c in chains if c.scope)
    assert len(gelu.rows) == len(REAL_GELU) and not set(gelu.all_rows) & set(scope.all_rows)
    assert len(scope.all_rows) == 2 and scope.bytes_saved == 2 * T


@pytest.mark.parametrize("collide", [False, True])
def test_runs_with_the_same_op_sequence_share_one_saving_and_a_hash_collision_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, collide: bool
) -> None:
    """_same_sequences groups runs by their sequence of costed ops; with hashing made useless (every sequence
    of a length collides) the element-wise check catches it and the groups are the same."""
    if collide:
        monkeypatch.setattr(scope_runs, "_P1", np.uint64(0))
        monkeypatch.setattr(scope_runs, "_P2", np.uint64(0))
    seqs = [[3, 4], [3, 4], [4, 3], [5], [3, 4], [-1, 4], [4, 3]]
    values = np.array([v for q in seqs for v in q], dtype=np.int64)
    lengths = np.array([len(q) for q in seqs])
    bounds = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    group, rep = scope_runs._same_sequences(values, bounds, lengths)
    assert [seqs[r] for r in rep[group].tolist()] == seqs
    assert len(rep) == 4 and sorted(rep.tolist()) == [0, 2, 3, 5]


@pytest.mark.parametrize("name", ["h200_hf_gpt2_modules", "h200_known_regimes_sleep20"])  # 2 and 4 windows
def test_scope_totals_a_window_group_at_a_time_are_the_whole_traces(name: str, monkeypatch) -> None:
    """A scope's runs summed a group of windows at a time (arrays.window_groups) give exactly the figures and
    rows of one group of every row, on the scopes of real H200 recordings, every window analysed."""
    trace = load_trace(os.path.join(os.path.dirname(__file__), "fixtures", f"{name}.brrr.gz"))
    calls = []
    real = scope_runs.scope_totals
    monkeypatch.setattr(fusion_scope, "scope_totals", lambda *a: calls.append(a) or real(*a))
    analyze(trace, windows=trace.windows.window.tolist())
    assert calls
    for args in calls:
        whole = real(*args)  # the recordings' kernels are far fewer than GROUP_ROWS: one group
        with monkeypatch.context() as m:
            m.setattr(arrays, "GROUP_ROWS", 100)
            assert len(arrays.window_groups((trace.gpu.window[args[2].order],))) == len(trace.windows)
            grouped = real(*args)
        np.testing.assert_array_equal(grouped.rows, whole.rows)
        assert (grouped.bytes_now, grouped.saved, grouped.kernel_ns, grouped.saving_ns, grouped.launches) == (
            whole.bytes_now,
            whole.saved,
            whole.kernel_ns,
            whole.saving_ns,
            whole.launches,
        )
        assert whole.saving_ns > 0 and len(whole.rows)

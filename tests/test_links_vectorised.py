"""links.nesting is vectorised (pointer jumping); it must equal the plain stack walk it replaced."""

from __future__ import annotations

import numpy as np

from analyzers.link.links import NONE, nesting


def stack_walk(start, end, tid):
    order = np.lexsort((-end, start, tid))
    s, e, t = start[order], end[order], tid[order]
    parent = np.full(len(order), NONE, dtype=np.int64)
    stack: list[int] = []
    last = None
    for k in range(len(order)):
        if t[k] != last:
            stack.clear()
            last = t[k]
        while stack and e[stack[-1]] <= s[k]:
            stack.pop()
        if stack:
            parent[k] = stack[-1]
        stack.append(k)
    return order, parent


def test_random_intervals_match_the_stack_walk():
    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(0, 80))
        s = rng.integers(0, 200, n)
        e = s + rng.integers(0, 60, n)  # nested, disjoint, partly overlapping and zero-length intervals
        t = rng.integers(0, 3, n)
        o1, p1 = stack_walk(s, e, t)
        o2, p2 = nesting(s, e, t)[:2]
        assert np.array_equal(o1, o2) and np.array_equal(p1, p2)


def test_long_flat_and_deep_sequences():
    n = 10_000
    s = np.arange(n) * 10
    flat = nesting(s, s + 5, np.zeros(n)).parent
    assert (flat == NONE).all()
    deep = nesting(np.arange(200), 1_000 - np.arange(200), np.zeros(200)).parent
    assert deep.tolist() == [NONE] + list(range(199))


def test_backward_node_takes_the_line_of_its_creator_the_last_op_with_its_sequence_number():
    from fixtures.synthetic import TraceBuilder

    from analyzers.link.links import link

    b = TraceBuilder()
    l79, l86, l88 = b.line("k.py", 79), b.line("k.py", 86), b.line("k.py", 88)
    # every forward op records the next sequence number; `w * t` creates node 0, so it is the last with 0
    for line, name, t in ((l79, "aten::mul", 0), (l86, "aten::tanh", 100), (l88, "aten::mul", 200)):
        b.span(line, t, 50)
        b.op(name, t + 1, 40, seq=0, fwd_tid=0)
    b.op("aten::sum", 301, 40, seq=1, fwd_tid=0)
    b.span(l88, 300, 50)
    b.op("autograd::engine::evaluate_function: MulBackward0", 1_000, 100, tid=2, seq=0, fwd_tid=1)
    b.op("aten::mul", 1_010, 50, tid=2)
    b.launch("vectorized_elementwise_kernel<mul>", 1_020, 2_000, 5, tid=2)
    b.window(0, 3_000)
    links = link(b.build())
    assert links.kernel_line.tolist() == [l88]


def enclosing_walk(start, end, tid, q_time, q_tid):
    """innermost_enclosing as a loop: per point, the last interval of its thread starting at or before it,
    then up its parents while they end before the point."""
    order, parent = nesting(start, end, tid)[:2]
    s, e, t = start[order], end[order], tid[order]
    out = []
    for qt, qd in zip(q_time.tolist(), q_tid.tolist(), strict=True):
        k = max((i for i in range(len(order)) if t[i] == qd and s[i] <= qt), default=NONE)
        while k != NONE and e[k] < qt:
            k = int(parent[k])
        out.append(int(order[k]) if k != NONE else NONE)
    return out


def test_innermost_enclosing_matches_the_walk_per_point():
    from analyzers.link.links import innermost_enclosing

    rng = np.random.default_rng(4)
    for _ in range(200):
        n, m = int(rng.integers(0, 40)), int(rng.integers(0, 30))
        s = rng.integers(0, 200, n)
        e = s + rng.integers(0, 60, n)
        t = rng.integers(0, 3, n)
        qt, qd = rng.integers(-10, 260, m), rng.integers(0, 4, m)
        got = innermost_enclosing(s, e, t, qt, qd).tolist()
        assert got == enclosing_walk(s, e, t, qt, qd)


def test_from_nearest_ancestor_matches_a_walk_up_the_parents():
    from analyzers.link.links import _from_nearest_ancestor

    rng = np.random.default_rng(6)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        parent = np.array([int(rng.integers(-1, i)) if i else NONE for i in range(n)])  # parents come first
        value = np.where(rng.random(n) < 0.3, rng.integers(0, 9, n), NONE)
        want = []
        for i in range(n):
            k = i
            while k != NONE and value[k] < 0:
                k = int(parent[k])
            want.append(int(value[k]) if k != NONE else NONE)
        assert _from_nearest_ancestor(value, parent).tolist() == want


def test_kernels_of_a_compiled_call_and_of_its_backward_take_the_calls_line_when_inductor_names_none():
    """A torch.compile'd library model runs untagged: the capture's `brrr.compiled:<line id>` op around the
    call names the line that made it. Its ops, and the backward node its last op created (with the node's
    kernels, on the autograd thread), take that line; an eager op after the call keeps its own span, and a
    backward node created by eager code keeps its creator's span."""
    from fixtures.synthetic import TraceBuilder

    from analyzers.link.links import link

    b = TraceBuilder()
    l35, l40 = b.line("hf_gpt2.py", 35), b.line("hf_gpt2.py", 40)
    b.op(f"brrr.compiled:{l35}", 0, 500)  # the compiled call, no span around it
    b.op("CompiledFunction", 10, 480, seq=3, fwd_tid=0)  # creates CompiledFunctionBackward (seq 3)
    b.op("triton_poi_fused_gelu_0", 20, 10)
    b.launch("triton_poi_fused_gelu_0", 21, 1_000, 5)
    b.span(l40, 600, 50)  # eager: `loss * 2` creates MulBackward0 (seq 4)
    b.op("aten::mul", 601, 40, seq=4, fwd_tid=0)
    b.launch("vectorized_elementwise_kernel<mul>", 602, 1_100, 5)
    b.op("autograd::engine::evaluate_function: MulBackward0", 2_000, 100, tid=2, seq=4, fwd_tid=1)
    b.launch("vectorized_elementwise_kernel<mul>", 2_010, 2_200, 5, tid=2)
    b.op("autograd::engine::evaluate_function: CompiledFunctionBackward", 3_000, 400, tid=2, seq=3, fwd_tid=1)
    b.op("triton_poi_fused_gelu_backward_0", 3_010, 10, tid=2)
    b.launch("triton_poi_fused_gelu_backward_0", 3_011, 3_500, 5, tid=2)
    b.window(0, 4_000)
    links = link(b.build())
    assert links.kernel_line.tolist() == [l35, l40, l40, l35]


def test_without_a_compiled_call_op_unplaced_ops_keep_no_line():
    from fixtures.synthetic import TraceBuilder

    from analyzers.link.links import link

    b = TraceBuilder()
    b.line("hf_gpt2.py", 35)
    b.op("CompiledFunction", 10, 480, seq=3, fwd_tid=0)
    b.launch("triton_poi_fused_gelu_0", 21, 1_000, 5)
    b.op("brrr.compiled:notanumber", 600, 10)  # not the capture's: ignored
    b.launch("triton_poi_fused_gelu_1", 601, 1_100, 5)
    b.window(0, 4_000)
    assert link(b.build()).kernel_line.tolist() == [NONE, NONE]

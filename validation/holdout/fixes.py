"""The hold-out workloads with one of brrrtui's advised fixes applied: an opt-in `--fix NAME` for each script.

    python validation/holdout/fixes.py llama_decoder --fix compile_forward --steps 30 --sync-steps
    python validation/holdout/fixes.py lstm_lm --steps 30            # no --fix: the workload as it is

The workload scripts are left line for line as recorded (the recordings' line numbers stay valid), so the
fix is applied from here: the script is imported as a module (its `main()` does not run on import), the fix
patches a class's method, a global setting or the `train` the script calls, and then the script's own
`main()` runs with the remaining arguments.

Each fix is the advice of one of the workload's top findings, applied as the advice reads:

  compile_forward   torch.compile the `forward` the fusion finding names: the method whose lines carry its
                    kernels (DecoderLayer.forward, UNet.forward, LSTMLanguageModel.forward, MoELayer.forward).
  compile_loss      torch.compile the function `loss_of`, its model call left eager (torch.compiler.disable):
                    the finding is on the loss line's kernels, not the model's, which another finding covers.
                    In cnn_channels_last the model is torchvision's, whose kernels all land on the loss line:
                    there the whole `loss_of` is compiled, model included.
  reduce_overhead   torch.compile(mode="reduce-overhead") of the model's forward: CUDA graphs replay the
                    forward and backward kernels without the CPU launching each (overhead, small_kernels).
  cuda_graphs       torch.compile(backend="cudagraphs") of the model's forward: CUDA graphs alone, no Inductor
                    fusion, so the saving is the launches' and the CPU's (overhead, small_kernels) without the
                    fusion finding's (in cnn_channels_last: torchvision's ResNet.forward).
  graph_step        the whole training step (loss, backward, optimizer step) captured once as one CUDA graph
                    (torch.cuda.graph, the optimizer made again with capturable=True) and replayed by the
                    loop: the same kernels without the CPU launching them (overhead, small_kernels). Unlike
                    cuda_graphs, nothing is traced again: on unet_diffusion, backend="cudagraphs" replays
                    what AOT autograd traced (an index backward of ~2 ms a call among its kernels), and its
                    synchronised step took ~20 ms where the eager step's kernels take 13.6 ms.
  tf32              torch.set_float32_matmul_precision("high"): fp32 matmuls on TF32 tensor cores.
  channels_last     the model and its input in channels_last (conv_layout).
  gc_freeze         gc.collect(); gc.freeze() after set-up, before the loop (slow_steps).
  pad_channels      the 3 input channels padded with zeros to 8, conv1 given 8 input channels whose extra
                    weights are zero: the same function, on tensor-core-aligned shapes (slow_gemm).
  static_experts    (moe_layer) the overhead advice when the step has data-dependent shapes: each expert takes a
                    fixed capacity of tokens (1.25x its even share, Switch Transformer's dispatch: a token's
                    slot is a cumsum of its one-hot choice, tokens over capacity are dropped) in place of
                    torch.where's variable-length rows, so no op syncs or sizes its output from the data; then
                    the model's forward under torch.compile(backend="cudagraphs"), as cuda_graphs.
  autocast_rnn      the LSTM alone under torch.autocast("cuda", dtype=torch.float16), its output cast back to
                    fp32 for the fp32 head: the recurrent layer's GEMMs in float16 (the recurrence's
                    slow_gemm). No GradScaler: the loop is the workload's own; the scaler's few kernels are
                    left out of the timing.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("llama_decoder", "unet_diffusion", "lstm_lm", "moe_layer", "cnn_channels_last")

Train = Callable[..., None]
Transform = Callable[[argparse.Namespace, Any, Callable[[], Any], Any], tuple[Any, Callable[[], Any], Any]]


def load(workload: str) -> ModuleType:
    """The workload script as a module named after it (so `if __name__ == "__main__"` does not fire)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r} (one of {', '.join(WORKLOADS)})")
    path = os.path.join(HERE, f"{workload}.py")
    spec = importlib.util.spec_from_file_location(workload, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[workload] = mod
    spec.loader.exec_module(mod)
    return mod


def wrap_train(mod: ModuleType, transform: Transform) -> None:
    """Have the script's main() hand train() a transformed (model, loss_of, optimizer)."""
    original: Train = mod.train

    def train(
        name: str, args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], optimizer: Any
    ) -> None:
        model, loss_of, optimizer = transform(args, model, loss_of, optimizer)
        original(name, args, model, loss_of, optimizer)

    mod.train = train


def compile_method(cls: type, name: str = "forward", **kwargs: Any) -> None:
    import torch

    setattr(cls, name, torch.compile(getattr(cls, name), **kwargs))


def _compile_loss(keep_model_eager: bool) -> Transform:
    def transform(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
        import torch

        if keep_model_eager:
            model.forward = torch.compiler.disable(model.forward)
        return model, torch.compile(loss_of), opt

    return transform


def _cuda_graphs_model(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
    import torch

    model.forward = torch.compile(model.forward, backend="cudagraphs")
    return model, loss_of, opt


def _gc_freeze(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
    gc.collect()
    gc.freeze()
    return model, loss_of, opt


def _pad_channels(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
    """conv1 with 8 input channels (the 5 extra weights zero) and the input batch padded to 8 channels with
    zeros, once: the same outputs, on channel counts the tensor-core convolutions take. The optimizer is made
    again the same way over the new parameters (no step has run yet)."""
    import torch

    free = loss_of.__code__.co_freevars
    cell = loss_of.__closure__[free.index("x")]  # type: ignore[index]
    x = cell.cell_contents
    old = model.conv1
    new = torch.nn.Conv2d(
        8, old.out_channels, old.kernel_size, old.stride, old.padding, bias=old.bias is not None
    )
    new = new.to(device=old.weight.device, memory_format=torch.channels_last)
    with torch.no_grad():
        new.weight.zero_()
        new.weight[:, : old.in_channels].copy_(old.weight)
    model.conv1 = new
    pad = torch.zeros(x.shape[0], 8 - x.shape[1], *x.shape[2:], device=x.device, dtype=x.dtype)
    cell.cell_contents = torch.cat([x, pad], dim=1).contiguous(memory_format=torch.channels_last)
    group = opt.param_groups[0]
    opt = type(opt)(model.parameters(), **{k: v for k, v in group.items() if k != "params"})
    return model, loss_of, opt


def _channels_last(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
    import torch

    model.to(memory_format=torch.channels_last)
    inner = model.forward

    def forward(x: Any, *rest: Any) -> Any:
        return inner(x.contiguous(memory_format=torch.channels_last), *rest)

    model.forward = forward
    return model, loss_of, opt


def _autocast_rnn(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
    import torch

    rnn = model.rnn
    plain = rnn.forward

    def forward(*inputs: Any, **kwargs: Any) -> Any:
        with torch.autocast("cuda", dtype=torch.float16):
            out, state = plain(*inputs, **kwargs)
        return out.float(), state

    rnn.forward = forward
    return model, loss_of, opt


class _ReplayedLoss:
    """What `loss_of` returns under graph_step: the captured loss, its backward and the optimizer step having
    run in the replay."""

    def __init__(self, loss: Any):
        self.loss = loss

    def backward(self) -> None:
        pass

    def item(self) -> float:
        return float(self.loss.item())


class _ReplayedOptimizer:
    """The loop's optimizer under graph_step: its step ran in the replay, and the replay writes fresh grads."""

    def step(self) -> None:
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass


def capturable_copy(opt: Any, params: Any) -> Any:
    """The optimizer made again over `params` with its first group's settings and capturable=True (its step
    then runs on the GPU, as capture needs); only the settings its constructor takes are passed: AdamW's group
    also records Adam's decoupled_weight_decay, which AdamW's constructor does not accept."""
    import inspect

    cls = type(opt)
    accepted = inspect.signature(cls.__init__).parameters
    group = opt.param_groups[0]
    settings = {k: v for k, v in group.items() if k in accepted and k not in ("self", "params", "capturable")}
    return cls(params, **settings, capturable=True)


def _graph_step(args: argparse.Namespace, model: Any, loss_of: Callable[[], Any], opt: Any) -> Any:
    """PyTorch's whole-network capture: three warm-up steps on a side stream, the grads set to None so that the
    captured backward allocates them from the graph's pool, then one step captured; the loop replays it."""
    import torch

    if not str(args.device).startswith("cuda"):
        raise ValueError("graph_step needs a CUDA device")
    opt = capturable_copy(opt, model.parameters())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_of().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = loss_of()
        loss.backward()
        opt.step()

    def replay() -> _ReplayedLoss:
        graph.replay()
        return _ReplayedLoss(loss)

    return model, replay, _ReplayedOptimizer()


CAPACITY_FACTOR = 1.25  # each expert's capacity over its even share of the routed tokens (Switch Transformer's)


def static_expert_forward(self: Any, x: Any) -> Any:
    """moe_layer's MoELayer.forward with static shapes: the same router, top-k and load-balancing loss; each
    expert runs on a fixed `capacity` of rows gathered by index_copy into one buffer (a token's slot: the
    number of earlier tokens that chose the same expert), and its outputs are gathered back by slot, so every
    tensor's size depends only on the input's shape."""
    import math

    import torch
    from torch.nn import functional as F

    tokens = self.norm(x).reshape(-1, x.shape[-1])
    probs = F.softmax(self.router(tokens).float(), dim=-1)
    weight, chosen = probs.topk(self.top_k, dim=-1)
    weight = (weight / weight.sum(-1, keepdim=True)).to(tokens.dtype)
    n, experts = tokens.shape[0], len(self.experts)
    capacity = math.ceil(n * self.top_k / experts * CAPACITY_FACTOR)
    flat = chosen.reshape(-1)  # (n * top_k,): token i's choices at i * top_k + slot
    # the running count per expert along the tokens, scanned as E rows of n * top_k: a scan down the long
    # outer dimension of an (n * top_k, E) one-hot runs E threads wide and took 2.9 ms a layer on an H100
    onehot = F.one_hot(flat, experts).t()
    position = ((onehot.cumsum(1) - 1) * onehot).sum(0)
    kept = position < capacity
    dump = experts * capacity  # one extra row takes the dropped tokens
    slot = torch.where(kept, flat * capacity + position, torch.full_like(flat, dump))
    routed = tokens.repeat_interleave(self.top_k, dim=0)
    buffer = tokens.new_zeros(dump + 1, tokens.shape[-1]).index_copy(0, slot, routed)
    outs = [expert(buffer[e * capacity : (e + 1) * capacity]) for e, expert in enumerate(self.experts)]
    outs.append(tokens.new_zeros(1, tokens.shape[-1]))
    gathered = torch.cat(outs)[slot] * (weight.reshape(-1, 1) * kept[:, None])
    out = gathered.view(n, self.top_k, -1).sum(1)
    first = F.one_hot(chosen[:, 0], probs.shape[-1]).float().mean(0)
    balance = probs.shape[-1] * (first * probs.mean(0)).sum()
    return x + out.view_as(x), balance


def apply(mod: ModuleType, workload: str, fix: str) -> None:
    """Patch the loaded workload module with the fix."""
    import torch

    if fix == "tf32":
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
    elif fix == "compile_forward":
        cls = {"llama_decoder": "DecoderLayer", "unet_diffusion": "UNet", "lstm_lm": "LSTMLanguageModel",
               "moe_layer": "MoELayer"}.get(workload)  # fmt: skip
        if cls is None:
            raise ValueError(f"no compile_forward for {workload}")
        compile_method(getattr(mod, cls))
    elif fix == "reduce_overhead":
        cls = {"unet_diffusion": "UNet", "moe_layer": "MoELayer", "llama_decoder": "Decoder"}.get(workload)
        if cls is None:
            raise ValueError(f"no reduce_overhead for {workload}")
        compile_method(getattr(mod, cls), mode="reduce-overhead")
    elif fix == "cuda_graphs":
        if workload == "cnn_channels_last":
            wrap_train(mod, _cuda_graphs_model)
        else:
            cls = {"unet_diffusion": "UNet", "moe_layer": "MoEStack", "llama_decoder": "Decoder",
                   "lstm_lm": "LSTMLanguageModel"}[workload]  # fmt: skip
            compile_method(getattr(mod, cls), backend="cudagraphs")
    elif fix == "graph_step":
        wrap_train(mod, _graph_step)
    elif fix == "static_experts":
        if workload != "moe_layer":
            raise ValueError(f"no static_experts for {workload}")
        mod.MoELayer.forward = static_expert_forward
        compile_method(mod.MoEStack, backend="cudagraphs")
    elif fix == "compile_loss":
        wrap_train(mod, _compile_loss(keep_model_eager=workload != "cnn_channels_last"))
    elif fix == "gc_freeze":
        wrap_train(mod, _gc_freeze)
    elif fix == "pad_channels":
        if workload != "cnn_channels_last":
            raise ValueError(f"no pad_channels for {workload}")
        wrap_train(mod, _pad_channels)
    elif fix == "channels_last":
        wrap_train(mod, _channels_last)
    elif fix == "autocast_rnn":
        if workload != "lstm_lm":
            raise ValueError(f"no autocast_rnn for {workload}")
        wrap_train(mod, _autocast_rnn)
    else:
        raise ValueError(f"unknown fix {fix!r}")


FIXES = (
    "compile_forward",
    "compile_loss",
    "reduce_overhead",
    "cuda_graphs",
    "graph_step",
    "tf32",
    "channels_last",
    "gc_freeze",
    "pad_channels",
    "autocast_rnn",
    "static_experts",
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("--fix", choices=FIXES, default=None)
    ours, rest = p.parse_known_args(argv)
    mod = load(ours.workload)
    if ours.fix:
        apply(mod, ours.workload, ours.fix)
    sys.argv = [os.path.join(HERE, f"{ours.workload}.py"), *rest]
    mod.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

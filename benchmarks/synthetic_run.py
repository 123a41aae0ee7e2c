"""A synthetic training run for the benchmarks (numpy, no torch), and writers for it: today's recording, a
format 1 recording (one SQL row per record), and the Chrome JSON torch.profiler writes.

Steps of 1,000 kernels from a transformer-like template (linear -> addmm -> GEMM, layer norm, GELU, add, a
few tiny ops), each kernel under an outer op with a span on the user's line, an inner op, an `aten::empty`
and its cudaLaunchKernel; a loss.item() sync per step; capture windows of 20 steps with unprofiled steps
between them (so the profiler correction runs). Per kernel: 3 ops, 1 span, 1 runtime call; the GPU timeline
follows the CPU (a kernel starts when it was launched and its stream is free).
"""

from __future__ import annotations

import json
import os

import numpy as np

from brrrtui.contract.model import (
    GPU_SCHEMA,
    NONE,
    OP_SCHEMA,
    RUNTIME_SCHEMA,
    SPAN_SCHEMA,
    STEP_SCHEMA,
    TELEMETRY_SCHEMA,
    WINDOW_SCHEMA,
    Device,
    GpuKind,
    SourceLine,
    Table,
    Trace,
    WindowMode,
    empty_table,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

T0 = 1_790_000_000_000_000_000
KERNELS_PER_STEP = 1000
STEPS_PER_WINDOW = 20
UNPROFILED_STEPS_BETWEEN = 30
B, S, D = 16, 1024, 1024  # batch, sequence, model width
BT = B * S

# (outer op, inner op, kernel, shapes, dtypes, kernel ns, line) -- a transformer block's worth of kernels
TEMPLATE = [
    ("aten::linear", "aten::addmm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
     [[D * 3], [BT, D], [D, D * 3]], ["c10::BFloat16"] * 3, 180_000, 41),
    ("aten::layer_norm", "aten::native_layer_norm", "void at::native::vectorized_layer_norm_kernel<c10::BFloat16>",
     [[BT, D], [D], [D]], ["c10::BFloat16"] * 3, 30_000, 40),
    ("aten::gelu", "aten::gelu", "void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>",
     [[BT, D * 4]], ["c10::BFloat16"], 45_000, 43),
    ("aten::add", "aten::add", "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<c10::BFloat16>>",
     [[BT, D], [BT, D], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"], 25_000, 44),
    ("aten::mul", "aten::mul", "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>",
     [[64], []], ["float", "Scalar"], 2_000, 47),
]  # fmt: skip
PATTERN = [0, 1, 0, 2, 0, 3, 4, 4]  # kernels cycle through the template in this order


def generate(n_kernels: int) -> Trace:
    steps = max(1, n_kernels // KERNELS_PER_STEP)
    per = n_kernels // steps
    strings: list[str] = []
    ids: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in ids:
            ids[s] = len(strings)
            strings.append(s)
        return ids[s]

    lines = [SourceLine("train.py", ln, "block") for ln in (40, 41, 43, 44, 47, 52)]
    line_of = {40: 0, 41: 1, 43: 2, 44: 3, 47: 4, 52: 5}
    kinds = np.array([PATTERN[i % len(PATTERN)] for i in range(per)])
    tmpl = TEMPLATE
    outer_name = np.array([sid(tmpl[k][0]) for k in range(len(tmpl))])[kinds]
    inner_name = np.array([sid(tmpl[k][1]) for k in range(len(tmpl))])[kinds]
    kname = np.array([sid(tmpl[k][2]) for k in range(len(tmpl))])[kinds]
    shapes = np.array([sid(json.dumps(tmpl[k][3])) for k in range(len(tmpl))])[kinds]
    dtypes = np.array([sid(json.dumps(tmpl[k][4])) for k in range(len(tmpl))])[kinds]
    kdur = np.array([tmpl[k][5] for k in range(len(tmpl))], dtype=np.int64)[kinds]
    kline = np.array([line_of[tmpl[k][6]] for k in range(len(tmpl))])[kinds]
    empty, launch, sync, item = (
        sid("aten::empty"),
        sid("cudaLaunchKernel"),
        sid("cudaStreamSynchronize"),
        sid("aten::item"),
    )

    gpu_cols: dict[str, list[np.ndarray]] = {k: [] for k in GPU_SCHEMA}
    rt_cols: dict[str, list[np.ndarray]] = {k: [] for k in RUNTIME_SCHEMA}
    op_cols: dict[str, list[np.ndarray]] = {k: [] for k in OP_SCHEMA}
    sp_cols: dict[str, list[np.ndarray]] = {k: [] for k in SPAN_SCHEMA}
    windows: list[tuple] = []
    step_rows: list[tuple[int, int]] = []
    t = T0
    corr = 0
    step_no = 0
    cpu_per_kernel = 10_000  # ns of Python + dispatch + launch per kernel while profiled
    for s in range(steps):
        w = s // STEPS_PER_WINDOW
        if s % STEPS_PER_WINDOW == 0:
            if s:  # close the previous window, then unprofiled steps (only their end times are recorded)
                windows[-1] = (*windows[-1][:3], t, *windows[-1][4:])
                for _ in range(UNPROFILED_STEPS_BETWEEN):
                    t += int(0.8 * per * cpu_per_kernel)
                    step_rows.append((step_no, t))
                    step_no += 1
            windows.append((w, WindowMode.STEPS, t, 0, step_no, step_no + STEPS_PER_WINDOW - 1, 5_000_000, 0))
        n = per
        cpu = t + np.arange(n, dtype=np.int64) * cpu_per_kernel
        launch_t = cpu + 3_000
        # a kernel starts when launched (+4 us) and its stream is free: start_i = C_i + max_j<=i (a_j - C_j)
        ready = launch_t + 4_000
        c = np.concatenate(([0], np.cumsum(kdur[:-1] + 1_000)))
        start = c + np.maximum.accumulate(ready - c)
        end = start + kdur
        cor = corr + 1 + np.arange(n, dtype=np.int64)
        corr += n + 1
        win = np.full(n, w, dtype=np.int32)
        gpu_cols["window"].append(win)
        gpu_cols["kind"].append(np.full(n, GpuKind.KERNEL, np.int8))
        gpu_cols["name"].append(kname)
        gpu_cols["start_ns"].append(start)
        gpu_cols["dur_ns"].append(kdur)
        gpu_cols["device"].append(np.zeros(n, np.int32))
        gpu_cols["stream"].append(np.full(n, 7, np.int32))
        gpu_cols["correlation"].append(cor)
        for k in ("grid", "block", "bytes"):
            gpu_cols[k].append(np.full(n, -1, dtype=GPU_SCHEMA[k]))
        # CPU: outer op [cpu, +8us], inner op [+1, +7], empty [+1.2, +0.3], launch [+3, +2.5]
        sync_t = cpu[-1] + cpu_per_kernel
        sync_end = max(int(end[-1]) + 2_000, int(sync_t) + 5_000)
        rt_cols["window"].append(np.concatenate((win, [w])))
        rt_cols["name"].append(np.concatenate((np.full(n, launch), [sync])))
        rt_cols["start_ns"].append(np.concatenate((launch_t, [sync_t + 500])))
        rt_cols["dur_ns"].append(np.concatenate((np.full(n, 2_500), [sync_end - sync_t - 1_000])))
        rt_cols["tid"].append(np.full(n + 1, 1))
        rt_cols["correlation"].append(np.concatenate((cor, [corr])))
        o_start = np.concatenate((cpu, cpu + 1_000, cpu + 1_200, [sync_t]))
        o_dur = np.concatenate((np.full(n, 8_000), np.full(n, 6_000), np.full(n, 300), [sync_end - sync_t]))
        m = len(o_start)
        op_cols["window"].append(np.full(m, w, np.int32))
        op_cols["name"].append(np.concatenate((outer_name, inner_name, np.full(n, empty), [item])))
        op_cols["start_ns"].append(o_start)
        op_cols["dur_ns"].append(o_dur)
        op_cols["tid"].append(np.full(m, 1))
        op_cols["seq"].append(np.full(m, -1))
        op_cols["fwd_tid"].append(np.full(m, -1))
        op_cols["shapes"].append(np.concatenate((shapes, shapes, np.full(n + 1, -1))))
        op_cols["dtypes"].append(np.concatenate((dtypes, dtypes, np.full(n + 1, -1))))
        op_cols["flops"].append(np.full(m, np.nan))
        sp_cols["window"].append(np.full(n + 1, w, np.int32))
        sp_cols["line"].append(np.concatenate((kline, [5])))
        sp_cols["start_ns"].append(np.concatenate((cpu - 200, [sync_t - 200])))
        sp_cols["dur_ns"].append(np.concatenate((np.full(n, 8_400), [sync_end - sync_t + 400])))
        sp_cols["tid"].append(np.full(n + 1, 1))
        sp_cols["module"].append(np.full(n + 1, -1))
        sp_cols["lib_line"].append(np.full(n + 1, -1))
        t = sync_end + 50_000
        step_rows.append((step_no, t))
        step_no += 1
    windows[-1] = (*windows[-1][:3], t, *windows[-1][4:])

    def table(cols: dict[str, list[np.ndarray]], schema: dict) -> Table:
        """The columns made above; a column the schema has and this run does not make is unknown (-1, NaN)."""
        made = {k: np.concatenate(v).astype(schema[k]) for k, v in cols.items() if v}
        n = len(next(iter(made.values())))
        return Table(
            {
                k: made.get(k, np.full(n, np.nan if np.dtype(d).kind == "f" else -1, d))
                for k, d in schema.items()
            }
        )

    return Trace(
        strings=strings,
        lines=lines,
        gpu=table(gpu_cols, GPU_SCHEMA),
        runtime=table(rt_cols, RUNTIME_SCHEMA),
        ops=table(op_cols, OP_SCHEMA),
        spans=table(sp_cols, SPAN_SCHEMA),
        windows=Table(
            {
                k: np.array([r[i] for r in windows], dtype=dt)
                for i, (k, dt) in enumerate(WINDOW_SCHEMA.items())
            }
        ),
        steps=Table(  # the optimizer's step()/zero_grad() untimed, as in a foreign trace
            {
                k: np.array([r[i] if i < 2 else NONE for r in step_rows], dtype=dt)
                for i, (k, dt) in enumerate(STEP_SCHEMA.items())
            }
        ),
        telemetry=empty_table(TELEMETRY_SCHEMA),
        device=Device(name="NVIDIA H200", num_sms=132),
        source="synthetic",
    )


def write_recording(trace: Trace, path: str) -> None:
    """Today's recording format (brrrtui.recording.store), in batches of 500 k rows."""
    from brrrtui.recording.store import write_trace

    write_trace(trace, path)


V1_TABLES = ["windows", "steps", "gpu", "runtime", "ops", "spans", "telemetry"]


def write_recording_v1(trace: Trace, path: str) -> None:
    """Format 1, as brrrtui wrote recordings before the columnar layout: one SQL row per record (the layout
    brrrtui.recording.rows_v1 reads), one transaction per 500 k rows."""
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE strings(id INTEGER PRIMARY KEY, s TEXT NOT NULL)")
    db.execute("CREATE TABLE lines(id INTEGER PRIMARY KEY, file TEXT, line INTEGER, function TEXT)")
    meta = {"format": "brrrtui-recording", "format_version": 1, "status": "finished",
            "device": {"name": trace.device.name, "num_sms": trace.device.num_sms}}  # fmt: skip
    with db:
        db.execute("BEGIN")
        db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
        db.executemany("INSERT INTO strings VALUES (?, ?)", list(enumerate(trace.strings)))
        db.executemany("INSERT INTO lines VALUES (?, ?, ?, ?)",
                       [(i, ln.file, ln.line, ln.function) for i, ln in enumerate(trace.lines)])  # fmt: skip
    for name in V1_TABLES:
        table: Table = getattr(trace, name)
        schema = table.columns
        cols = ", ".join(f"{c} {'REAL' if v.dtype.kind == 'f' else 'INTEGER'}" for c, v in schema.items())
        db.execute(f"CREATE TABLE {name}({cols})")
        rows = list(zip(*[v.tolist() for v in schema.values()], strict=True))
        for i in range(0, len(rows), 500_000):
            with db:
                db.execute("BEGIN")
                db.executemany(
                    f"INSERT INTO {name} VALUES ({', '.join('?' * len(schema))})", rows[i : i + 500_000]
                )
    db.close()


def write_chrome(trace: Trace, path: str) -> None:
    """The Chrome JSON torch.profiler writes (ts/dur in us), with what HTA and our loader read."""
    base = T0 - 1_000_000_000  # keep ts small, as Kineto does relative to baseTimeNanoseconds
    names = trace.strings
    lines = trace.lines
    batch = 200_000
    first = True

    def us(ns: np.ndarray) -> list[str]:
        return [f"{x / 1000:.3f}" for x in (ns - base).tolist()]

    def events(table: Table, fmt) -> None:  # type: ignore[no-untyped-def]
        nonlocal first
        for i in range(0, len(table), batch):
            part = table.take(np.arange(i, min(i + batch, len(table))))
            text = ",\n".join(fmt(part))
            f.write(("" if first else ",\n") + text)
            first = False

    def ops(o: Table) -> list[str]:
        sh = [names[i] if i >= 0 else "[]" for i in o.shapes.tolist()]
        dt = [names[i] if i >= 0 else "[]" for i in o.dtypes.tolist()]
        return [
            f'{{"ph":"X","cat":"cpu_op","name":"{names[n]}","pid":1,"tid":1,"ts":{ts},"dur":{d / 1000:.3f},'
            f'"args":{{"Input Dims":{a},"Input type":{b}}}}}'
            for n, ts, d, a, b in zip(o.name.tolist(), us(o.start_ns), o.dur_ns.tolist(), sh, dt, strict=True)
        ]

    def runtime(r: Table) -> list[str]:
        return [
            f'{{"ph":"X","cat":"cuda_runtime","name":"{names[n]}","pid":1,"tid":1,"ts":{ts},"dur":{d / 1000:.3f},'
            f'"args":{{"correlation":{c}}}}}'
            for n, ts, d, c in zip(
                r.name.tolist(), us(r.start_ns), r.dur_ns.tolist(), r.correlation.tolist(), strict=True
            )
        ]

    def kernels(g: Table) -> list[str]:
        return [
            f'{{"ph":"X","cat":"kernel","name":"{names[n]}","pid":0,"tid":7,"ts":{ts},"dur":{d / 1000:.3f},'
            f'"args":{{"device":0,"stream":7,"correlation":{c},"External id":{c}}}}}'
            for n, ts, d, c in zip(
                g.name.tolist(), us(g.start_ns), g.dur_ns.tolist(), g.correlation.tolist(), strict=True
            )
        ]

    def frames(s: Table) -> list[str]:
        return [
            f'{{"ph":"X","cat":"python_function","name":"{lines[ln].file}({lines[ln].line}): {lines[ln].function}",'
            f'"pid":1,"tid":1,"ts":{ts},"dur":{d / 1000:.3f},"args":{{}}}}'
            for ln, ts, d in zip(s.line.tolist(), us(s.start_ns), s.dur_ns.tolist(), strict=True)
        ]

    with open(path, "w") as f:
        f.write('{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA H200","numSms":132}],')
        f.write(f'"distributedInfo":{{"rank":0}},"baseTimeNanoseconds":{base},"traceEvents":[\n')
        events(trace.ops, ops)
        events(trace.runtime, runtime)
        events(trace.gpu, kernels)
        events(trace.spans, frames)
        f.write("\n]}\n")

"""Device validation runs: one named suite per call, run from the repository root on the GPU machine.

    python -m validation.run SUITE [ARGS ...] [--out DIR] [--set KEY=VALUE ...]
    python -m validation.run --list

Each suite writes its files into a work folder and packs them into DIR (default $OUT, else ./validation_out) as
one tarball, so that what a device run returns is a few files. A suite's settings (steps, timeouts, parts) come
from `--set KEY=VALUE`, else from an environment variable of the same name, else the default its description
gives. Commands run with a time limit each; one that runs over is stopped (SIGTERM, or SIGINT where the suite
stops a recording on purpose, as Ctrl-C would) and reported with exit code 124.

Suites (what each runs; its tarball):

  workloads [W ...]   the four real workloads (gpt2_eager = examples/train_gpt.py, hf_gpt2, hf_bert, resnet50 in
                      validation/workloads/), each plain (its step times) and under `brrrtui record` with default
                      options, then `brrrtui report --json` and the text report. workloads.tar.gz.
                      PLAIN=1, RECORD_OPTS, STEPS_GPT2_EAGER=300 STEPS_HF_GPT2=200 STEPS_HF_BERT=200
                      STEPS_RESNET50=150, T_PLAIN=240 T_RECORD=300 T_REPORT=120.
  verdicts            the workloads recorded (120/120/120/100 steps) for validation/ncu_verdicts.py; HF GPT-2 again
                      with --vocab 50304 and `brrrtui diff` of the pair; GPT-2 eager with --stream for 200 steps and
                      validation/unprofiled_lines.py on it. verdicts.tar.gz.
  checks              one ~9 min call: 1 the workloads recorded; 2 Nsight Compute on each (steady state, NCU_MAX=300
                      kernels) against step 1's reports; 3 predicted vs measured savings (validation/savings.py);
                      4 benchmarks/bench_stream.py plain vs windows; then a summary table. CHECKS="1 2 3 4",
                      budgets B1=115 B2=145 B3=115 B4=175 s, DEADLINE=560. checks.tar.gz + checks_summary.txt.
  followup            the second call of a round: the workloads recorded (150/120/120/150 steps); ncu on GPT-2 eager
                      and HF BERT against them; examples/known_regimes.py recorded; GPT-2 eager with --stream and
                      unprofiled_lines.py; the tiny-op loop plain vs windows. followup.tar.gz.
  savings             validation/savings.py for fusion_block and cross_entropy (records GPT-2 eager); HF GPT-2, HF
                      BERT and ResNet-50 recorded (45 steps); known_regimes.py with a 2 ms and a 20 ms time.sleep.
                      savings.tar.gz (recordings beside it, gzipped).
  ncu-sampled         Nsight Compute on the four workloads, the same calls of every kernel name
                      (--sample-invocations NCU_CALLS=50,200,800, NCU_MAX=200, NCU_STEPS=60, NCU_BUDGET=110 s each);
                      RECORD="hf_gpt2 ..." records those workloads first. ncu_sampled.tar.gz (raw CSVs).
  ncu-named           every call of the many-shaped copy/fill kernels (NCU_REGEX) in a steady step of GPT-2 eager,
                      HF GPT-2 and HF BERT (NCU_SKIP=2000, NCU_COUNT=40 launches, NCU_STEPS=40). ncu_named.tar.gz.
  lines               PARTS="lines sleep kv": the four workloads recorded with --stream and unprofiled_lines.py on
                      each; known_regimes.py with a 20 ms and a 2 ms sleep (300 steps), reported;
                      validation/kv_cache_saving.py. lines.tar.gz.
  modules             the workloads recorded (STEPS=120) and validation/inductor_probe.py. modules.tar.gz.
  compile             GPT-2 small compiled, plain and recorded (graph breaks, recompiles, step medians,
                      compiled_attribution.py); then bench_stream.py plain vs windows unless SKIP_BENCH=1.
                      compile.tar.gz.
  compile-lines       GPT-2 small compiled three ways (whole model 300 steps; each Block, only the loss 120 steps),
                      plain and recorded, each with a fresh Inductor cache. compile_lines.tar.gz.
  compile-models      CASES="hf_gpt2 resnet50": library models compiled whole, plain and recorded, with
                      compiled_attribution.py and validation/compiled_files.py. compile_models.tar.gz (and the
                      recordings under 4 MB beside it).
  real-scale          GPT-2 small recorded for RECORD_S=330 s with windows close together (--duty 0.5 --min-gap 0.2,
                      STEPS=20000, ARGS), a tiled recording of as many kernels, and `report --json` and the passes
                      timed on both (PAIRS=3). summary.txt, record.log, gpu.txt, report.json.gz.
  stream-hour         GPT-2 small under `record --stream` for RECORD_S=525 s (STEPS=20000, ARGS), then
                      `report --json` timed; KEEP=1 keeps the recording. stream_hour.json, stream_hour.txt,
                      record.log, report.json, gpu.txt.

Most suites need a GPU, torch's CUDA build, and for some transformers, torchvision or Nsight Compute (`ncu`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from typing import Any

PY = sys.executable
WORKLOADS = {
    "gpt2_eager": "examples/train_gpt.py",
    "hf_gpt2": "validation/workloads/hf_gpt2.py",
    "hf_bert": "validation/workloads/hf_bert.py",
    "resnet50": "validation/workloads/resnet50.py",
}
STEPS = {"gpt2_eager": 300, "hf_gpt2": 200, "hf_bert": 200, "resnet50": 150}


class Suite:
    """One suite's settings, work folder and output folder."""

    def __init__(self, name: str, out: str, settings: dict[str, str]) -> None:
        self.name, self.out, self.settings = name, os.path.abspath(out), settings
        os.makedirs(self.out, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix=f"validation_{name.replace('-', '_')}.")
        self.t0 = time.monotonic()

    def get(self, key: str, default: str) -> str:
        return self.settings.get(key, os.environ.get(key, default))

    def num(self, key: str, default: float) -> int:
        return int(float(self.get(key, str(default))))

    def path(self, *parts: str) -> str:
        return os.path.join(self.work, *parts)

    def elapsed(self) -> int:
        return int(time.monotonic() - self.t0)

    def pack(self, tarball: str, exclude: tuple[str, ...] = (".ncu-rep",), folder: str | None = None) -> None:
        """Everything in the work folder (or `folder`), but names ending in `exclude`, as out/tarball."""
        src = folder or self.work
        with tarfile.open(os.path.join(self.out, tarball), "w:gz") as tar:
            for entry in sorted(os.listdir(src)):
                tar.add(os.path.join(src, entry), arcname=entry,
                        filter=lambda ti: None if ti.name.endswith(exclude) else ti)  # fmt: skip

    def note_commit(self, command: str) -> None:
        with open(self.path("README.txt"), "a") as f:
            f.write(f"commit {commit()}; command: python -m validation.run {command}\n")


def commit() -> str:
    for name in ("REVISION", "COMMIT"):
        if os.path.exists(name):
            with open(name) as f:
                return f.read().strip()
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def run(
    cmd: list[str],
    log: str | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    stdout: str | None = None,
    interrupt: bool = False,
) -> int:
    """Run `cmd` in a process group of its own: its stdout to `stdout` (else to `log`), its stderr to `log` (else
    inherited). Past `timeout` seconds the group gets SIGTERM (SIGINT with `interrupt`, as Ctrl-C), SIGKILL 10 s
    later; the exit code is then 124."""
    files = []
    if stdout:
        files.append(open(stdout, "w"))  # noqa: SIM115 - closed below
    if log:
        files.append(open(log, "w"))  # noqa: SIM115 - closed below
    out = files[0] if files else None
    err = files[-1] if log else None
    if log and not stdout:
        err = subprocess.STDOUT
    try:
        try:
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
        except OSError as e:  # no such program (nvidia-smi, ncu on a machine without them)
            say(f"{cmd[0]}: {e.strerror}")
            return 127
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGINT if interrupt else signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            return 124
    finally:
        for f in files:
            f.close()


def say(*parts: object) -> None:
    print(*parts, flush=True)


def grep(path: str, *needles: str, limit: int = 40) -> None:
    """Print the lines of `path` holding any of `needles` (all lines when none)."""
    if not os.path.exists(path):
        return
    with open(path, errors="replace") as f:
        hits = [ln.rstrip("\n") for ln in f if not needles or any(n in ln for n in needles)]
    for ln in hits[:limit]:
        say(ln[:220])


def gzip_all(folder: str, suffix: str = ".brrr") -> None:
    for name in os.listdir(folder):
        if name.endswith(suffix):
            src = os.path.join(folder, name)
            with open(src, "rb") as f, gzip.open(src + ".gz", "wb") as g:
                shutil.copyfileobj(f, g)
            os.remove(src)


def step_medians(folder: str, name: str, key: str = "step_ms", skip: int = 10) -> None:
    """The plain and recorded runs' median and mean step (`<name>_<mode>_result.json` or `_steps.json`)."""
    for mode in ("plain", "rec"):
        doc = None
        for suffix in ("_result.json", "_steps.json"):
            p = os.path.join(folder, f"{name}_{mode}{suffix}")
            if os.path.exists(p):
                with open(p) as f:
                    doc = json.load(f)
                break
        if doc is None:
            say(name, mode, "no result")
            continue
        s = doc.get(key) or doc.get("steps_ms") or []
        t = s[skip:] or s
        if t:
            say(name, mode, "median", round(statistics.median(t), 2), "mean", round(statistics.mean(t), 2),
                "first", round(s[0], 1))  # fmt: skip


def count_in(path: str, *needles: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, errors="replace") as f:
        return sum(1 for ln in f if any(n in ln for n in needles))


# --- the workloads ------------------------------------------------------------------------------------------


def workloads(s: Suite, names: list[str], folder: str, plain: bool | None = None, steps: dict[str, int] | None = None,
              record_opts: list[str] | None = None, t_record: int | None = None) -> None:  # fmt: skip
    """Each workload plain (unless not `plain`) and under `brrrtui record`, then its reports, into `folder`."""
    os.makedirs(folder, exist_ok=True)
    plain = s.get("PLAIN", "1") != "0" if plain is None else plain
    opts = record_opts if record_opts is not None else s.get("RECORD_OPTS", "").split()
    t_plain, t_report = s.num("T_PLAIN", 240), s.num("T_REPORT", 120)
    t_rec = t_record or s.num("T_RECORD", 300)
    for name in names:
        if name not in WORKLOADS:
            say(f"unknown workload {name}")
            continue
        n = (steps or {}).get(name) or s.num(f"STEPS_{name.upper()}", STEPS[name])
        script = [WORKLOADS[name], "--steps", str(n)]
        if plain:
            log = os.path.join(folder, f"{name}_plain.log")
            rc = run([PY, *script, "--out", folder, "--name", f"{name}_plain"], log, t_plain)
            say(f"{name} plain rc={rc}")
            grep(log, "RESULT")
        rec = os.path.join(folder, f"{name}.brrr")
        t0 = time.monotonic()
        log = os.path.join(folder, f"{name}_rec.log")
        rc = run([PY, "-m", "brrrtui", "record", *opts, "-o", rec, *script, "--out", folder, "--name", f"{name}_rec"],
                 log, t_rec)  # fmt: skip
        say(f"{name} record rc={rc} in {int(time.monotonic() - t0)} s")
        grep(log, "RESULT")
        report(rec, os.path.join(folder, f"{name}_report"), t_report)


def report(rec: str, stem: str, timeout: int = 120) -> None:
    rc = run([PY, "-m", "brrrtui", "report", "--json", rec], stem + ".err", timeout, stdout=stem + ".json")
    say(f"{os.path.basename(rec)} report --json rc={rc}")
    run([PY, "-m", "brrrtui", "report", rec], stem + ".txt", timeout)
    grep(stem + ".txt", limit=30)


def suite_workloads(s: Suite, args: list[str]) -> None:
    folder = s.path("workloads")
    workloads(s, args or list(WORKLOADS), folder)
    gzip_all(folder)
    s.note_commit("workloads " + " ".join(args))
    s.pack("workloads.tar.gz", folder=folder)


def suite_verdicts(s: Suite, args: list[str]) -> None:
    w = s.work
    workloads(s, list(WORKLOADS), w, plain=False, steps={"gpt2_eager": 120, "hf_gpt2": 120, "hf_bert": 120, "resnet50": 100})
    t0 = time.monotonic()
    rc = run([PY, "-m", "brrrtui", "record", "-o", s.path("hf_gpt2_vocab50304.brrr"), WORKLOADS["hf_gpt2"],
              "--steps", "120", "--vocab", "50304", "--out", w, "--name", "hf_gpt2_vocab50304"],
             s.path("hf_gpt2_vocab50304.log"), 300)  # fmt: skip
    say(f"hf_gpt2 --vocab 50304 record rc={rc} in {int(time.monotonic() - t0)} s")
    pair = [s.path("hf_gpt2.brrr"), s.path("hf_gpt2_vocab50304.brrr")]
    say("diff rc=", run([PY, "-m", "brrrtui", "diff", *pair], s.path("diff_vocab.txt")))
    grep(s.path("diff_vocab.txt"), limit=40)
    run([PY, "-m", "brrrtui", "diff", "--json", *pair], s.path("diff_vocab.json"))
    t0 = time.monotonic()
    rc = run([PY, "-m", "brrrtui", "record", "--stream", "-o", s.path("gpt2_stream.brrr"), WORKLOADS["gpt2_eager"],
              "--steps", "200"], s.path("gpt2_stream.log"), 300)  # fmt: skip
    say(f"gpt2 --stream record rc={rc} in {int(time.monotonic() - t0)} s")
    rc = run([PY, "validation/unprofiled_lines.py", s.path("gpt2_stream.brrr"), "--json", s.path("unprofiled_lines.json")],
             s.path("unprofiled_lines.txt"))  # fmt: skip
    say(f"unprofiled_lines rc={rc}")
    grep(s.path("unprofiled_lines.txt"), limit=30)
    gzip_all(w)
    s.note_commit("verdicts")
    s.pack("verdicts.tar.gz")


# --- Nsight Compute ------------------------------------------------------------------------------------------


def ncu(name: str, out: str, limit: int, extra: list[str], script_args: list[str], report_json: str = "",
        inner: int | None = None) -> int:  # fmt: skip
    """validation/ncu_verdicts.py on one workload: stopped after `limit` seconds, its own `--timeout` `inner`
    (default: `limit` - 5); its log in out.log."""
    rep = ["--report", report_json] if report_json and os.path.exists(report_json) and os.path.getsize(report_json) else []
    cmd = [PY, "validation/ncu_verdicts.py", "--script", WORKLOADS[name], *rep, "--out", out, *extra,
           "--timeout", str(inner if inner is not None else max(limit - 5, 5)), "--", *script_args]  # fmt: skip
    rc = run(cmd, out + ".log", limit)
    say(f"ncu {name} rc={rc}")
    grep(out + ".log", "ncu: [0-9]", "GT_SUMMARY", "kernel agreement", "ERROR", "ncu: rc=", "ncu: --launch")
    return rc


def suite_checks(s: Suite, args: list[str]) -> None:
    w = s.work
    for d in ("workloads", "ncu", "savings", "bench_stream"):
        os.makedirs(s.path(d), exist_ok=True)
    deadline = s.num("DEADLINE", 560)
    budgets = {n: s.num(f"B{n}", b) for n, b in ((1, 115), (2, 145), (3, 115), (4, 175))}
    chosen = [int(x) for x in s.get("CHECKS", "1 2 3 4").split()]
    status: list[tuple[int, str, str, int, int]] = []

    def left(n: int) -> int:  # its budget plus what the steps before it left unused
        later = sum(budgets[m] for m in chosen if m > n)
        return max(deadline - 10 - s.elapsed() - later, 1)

    def step(n: int, name: str, body: Callable[[int], int]) -> None:
        if n not in chosen:
            status.append((n, name, "skipped", 0, 0))
            return
        budget = left(n)
        say(f"=== step {n}: {name} (budget {budget} s, at {s.elapsed()} s)")
        t0 = s.elapsed()
        rc = body(budget)
        status.append((n, name, str(rc), s.elapsed() - t0, budget))
        say(f"    rc={rc} in {s.elapsed() - t0} s")
        s.pack("checks.tar.gz")

    def step1(budget: int) -> int:
        s.settings.setdefault("T_REPORT", "30")
        workloads(s, list(WORKLOADS), s.path("workloads"), plain=False, t_record=75,
                  steps={"gpt2_eager": 120, "hf_gpt2": 100, "hf_bert": 100, "resnet50": 80})  # fmt: skip
        return 0

    def step2(budget: int) -> int:
        per = budget // 4 - 5
        for name in WORKLOADS:
            ncu(name, s.path("ncu", name), per + 5, ["--skip-steps", "4", "--max-kernels", s.get("NCU_MAX", "300")],
                ["--steps", "8"], s.path("workloads", f"{name}_report.json"), inner=per)  # fmt: skip
        return 0

    def step3(budget: int) -> int:
        reports = []
        for flag, name in (("--report-gpt2-eager", "gpt2_eager"), ("--report-hf-gpt2", "hf_gpt2")):
            p = s.path("workloads", f"{name}_report.json")
            if os.path.exists(p) and os.path.getsize(p):
                reports += [flag, p]
        return run([PY, "validation/savings.py", "--out", s.path("savings"), "--steps", "50", "--warmup", "10",
                    "--timeout", "80", *reports], s.path("step3_savings.log"), budget)  # fmt: skip

    def step4(budget: int) -> int:
        return run([PY, "-m", "benchmarks.bench_stream", "--rounds", "1", "--subjects", "gpt,tiny", "--variants",
                    "plain,windows", "--gpt-steps", "1000", "--tiny-steps", "4000", "--timeout", "75",
                    "--out", s.path("bench_stream")], s.path("step4_bench_stream.log"), budget)  # fmt: skip

    step(1, "workloads", step1)
    step(2, "ncu", step2)
    step(3, "savings", step3)
    step(4, "bench_stream", step4)
    summary = checks_summary(w, status)
    with open(s.path("checks_summary.txt"), "w") as f:
        f.write(summary)
    s.pack("checks.tar.gz")
    shutil.copy(s.path("checks_summary.txt"), os.path.join(s.out, "checks_summary.txt"))
    say(summary)


def _load(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def checks_summary(w: str, status: list[tuple[int, str, str, int, int]]) -> str:
    out = ["== steps (rc 124: over budget)", "| step | name | rc | s | budget s |", "|---|---|---|---:|---:|"]
    out += [f"| {n} | {name} | {rc} | {t} | {b} |" for n, name, rc, t, b in status]
    out += ["", "== 1. workloads under brrrtui (recorded run; report phase, steps, top findings)",
            "| workload | rec median ms | phase | steady from | findings (kind ~ms) |", "|---|---:|---|---:|---|"]  # fmt: skip
    for name in WORKLOADS:
        r = _load(os.path.join(w, "workloads", f"{name}_report.json")) or {}
        res = _load(os.path.join(w, "workloads", f"{name}_rec_result.json")) or _load(
            os.path.join(w, "workloads", f"{name}_rec_steps.json")) or {}  # fmt: skip
        f = ", ".join(f"{x['kind']} {(x.get('saving_ns') or 0) / 1e6:.2f}" for x in r.get("findings", [])[:4])
        med = res.get("median_step_ms")
        out.append(f"| {name} | {med if med is None else round(med, 2)} | {r.get('phase')} | "
                   f"{(r.get('phases') or {}).get('steady_from_step')} | {f} |")  # fmt: skip
    out += ["", "== 2. ncu vs brrrtui (SOL rule / the ground-truth rule, by brrrtui GPU time)",
            "| workload | ncu kernels | SOL agree | GT agree | GT scored share | disagreeing (top 3) |",
            "|---|---:|---:|---:|---:|---|"]  # fmt: skip

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1%}"

    for name in WORKLOADS:
        g = _load(os.path.join(w, "ncu", name, "ncu_ground_truth.json"))
        if not g:
            out.append(f"| {name} | — | — | — | — | no result (see ncu/{name}.log) |")
            continue
        dis = "; ".join(f"{d['short'][:38]} {pct(d['gpu_share'])} {d['brrrtui']}/{d['ncu']}" for d in g["disagreeing"][:3])
        out.append(f"| {name} | {g.get('ncu_kernels')} | {pct(g.get('sol_agreement'))} | {pct(g.get('agreement'))} | "
                   f"{pct(g.get('scored_gpu_share'))} | {dis} |")  # fmt: skip
    out += ["", "== 3. savings: predicted vs measured (ms per step)"]
    t = os.path.join(w, "savings", "savings_table.md")
    out.append(open(t).read() if os.path.exists(t) else "no savings table")  # noqa: SIM115 - read once
    out.append("== 4. bench_stream")
    b = _load(os.path.join(w, "bench_stream", "bench_stream.json")) or _load(
        os.path.join(w, "bench_stream", "bench_stream.partial.json"))  # fmt: skip
    out.append(b["table"] if b and b.get("table") else json.dumps(b)[:2000] if b else "no bench_stream output")
    return "\n".join(out) + "\n"


def suite_followup(s: Suite, args: list[str]) -> None:
    os.makedirs(s.path("ncu"), exist_ok=True)
    say(f"=== 1. workloads ({s.elapsed()} s)")
    workloads(s, list(WORKLOADS), s.path("workloads"), plain=False, t_record=75,
              steps={"gpt2_eager": 150, "hf_gpt2": 120, "hf_bert": 120, "resnet50": 150})  # fmt: skip
    s.pack("followup.tar.gz")
    for name, budget in (("gpt2_eager", 160), ("hf_bert", 140)):
        say(f"=== 2. ncu {name} ({s.elapsed()} s, budget {budget} s)")
        ncu(name, s.path("ncu", name), budget, ["--skip-steps", "4", "--max-kernels", "400"],
            ["--steps", "7"], s.path("workloads", f"{name}_report.json"), inner=budget - 10)  # fmt: skip
        s.pack("followup.tar.gz")
    say(f"=== 3. known_regimes ({s.elapsed()} s)")
    rec = s.path("known_regimes.brrr")
    say("rc=", run([PY, "-m", "brrrtui", "record", "-o", rec, "examples/known_regimes.py", "--steps", "60"],
                   s.path("known_regimes.log"), 60))  # fmt: skip
    run([PY, "-m", "brrrtui", "report", rec], s.path("known_regimes_report.txt"))
    grep(s.path("known_regimes_report.txt"), *(f"known_regimes.py:{n} " for n in range(85, 92)))
    s.pack("followup.tar.gz")
    say(f"=== 4. GPT-2 eager --stream ({s.elapsed()} s)")
    rec = s.path("gpt2_stream.brrr")
    say("rc=", run([PY, "-m", "brrrtui", "record", "--stream", "-o", rec, WORKLOADS["gpt2_eager"], "--steps", "200"],
                   s.path("gpt2_stream.log"), 90))  # fmt: skip
    run([PY, "validation/unprofiled_lines.py", rec, "--json", s.path("unprofiled_lines.json")], s.path("unprofiled_lines.txt"))
    grep(s.path("unprofiled_lines.txt"), limit=14)
    s.pack("followup.tar.gz")
    say(f"=== 5. tiny loop ({s.elapsed()} s)")
    say("rc=", run([PY, "-m", "benchmarks.bench_stream", "--rounds", "1", "--subjects", "tiny", "--variants",
                    "plain,windows", "--tiny-steps", "4000", "--out", s.path("bench_tiny")], s.path("bench_tiny.log"), 100))  # fmt: skip
    gzip_all(s.work)
    s.note_commit("followup")
    s.pack("followup.tar.gz")


def suite_savings(s: Suite, args: list[str]) -> None:
    w = s.work
    run(["nvidia-smi", "-L"])
    say(f"=== 1. savings ({s.elapsed()} s)")
    rc = run([PY, "validation/savings.py", "--out", s.path("savings"), "--cases", "fusion_block,cross_entropy",
              "--steps", "50", "--warmup", "10", "--record-steps", "100", "--timeout", "200"],
             s.path("savings.log"), 260, env=dict(os.environ, OUT=w))  # fmt: skip
    say(f"rc={rc}")
    grep(s.path("savings.log"))
    say(f"=== 2. known_regimes, time.sleep 2 ms and 20 ms ({s.elapsed()} s)")
    for ms in (2, 20):
        rec = s.path(f"known_regimes_sleep{ms}.brrr")
        say("record rc=", run([PY, "-m", "brrrtui", "record", "-o", rec, "examples/known_regimes.py", "--steps", "60",
                               "--sleep-ms", str(ms)], s.path(f"known_regimes_sleep{ms}.log"), 60, env=dict(os.environ, OUT=w)))  # fmt: skip
        report(rec, s.path(f"known_regimes_sleep{ms}_report"))
    say(f"=== 3. the other workloads recorded ({s.elapsed()} s)")
    for name in ("hf_gpt2", "hf_bert", "resnet50"):
        t0 = time.monotonic()
        rc = run([PY, "-m", "brrrtui", "record", "-o", s.path(f"{name}.brrr"), WORKLOADS[name], "--steps", "45"],
                 s.path(f"{name}_rec.log"), 75, env=dict(os.environ, OUT=w))  # fmt: skip
        say(f"{name} record rc={rc} in {int(time.monotonic() - t0)} s")
    if os.path.exists(s.path("savings", "savings_gpt2_eager.brrr")):
        shutil.copy(s.path("savings", "savings_gpt2_eager.brrr"), s.path("gpt2_eager.brrr"))
    gzip_all(w)
    for name in os.listdir(w):
        if name.endswith(".brrr.gz"):
            shutil.copy(os.path.join(w, name), os.path.join(s.out, name))
    s.note_commit("savings")
    s.pack("savings.tar.gz", exclude=(".ncu-rep", ".brrr", ".brrr.gz"))


def suite_ncu_sampled(s: Suite, args: list[str]) -> None:
    for name in s.get("RECORD", "").split():  # workloads whose recording an earlier call did not return
        rc = run([PY, "-m", "brrrtui", "record", "-o", s.path(f"{name}.brrr"), WORKLOADS[name], "--steps", "45"],
                 s.path(f"{name}_rec.log"), 75)  # fmt: skip
        say(f"{name} record rc={rc}")
        gzip_all(s.work)
        shutil.copy(s.path(f"{name}.brrr.gz"), os.path.join(s.out, f"{name}.brrr.gz"))
    run(["ncu", "--version"])
    budget = s.num("NCU_BUDGET", 110)
    for name in WORKLOADS:
        say(f"=== ncu {name} ({s.elapsed()} s)")
        out = s.path(f"ncu_{name}")
        ncu(name, out, budget, ["--sample-invocations", s.get("NCU_CALLS", "50,200,800"),
                                       "--max-kernels", s.get("NCU_MAX", "200")], ["--steps", s.get("NCU_STEPS", "60")],
            inner=budget - 8)  # fmt: skip
        if os.path.exists(os.path.join(out, "ncu_raw.csv")):
            shutil.copy(os.path.join(out, "ncu_raw.csv"), s.path(f"ncu_{name}_raw.csv"))
        s.pack("ncu_sampled.tar.gz", exclude=(".ncu-rep", ".brrr", ".brrr.gz"))
    s.note_commit("ncu-sampled")
    s.pack("ncu_sampled.tar.gz", exclude=(".ncu-rep", ".brrr", ".brrr.gz"))


def suite_ncu_named(s: Suite, args: list[str]) -> None:
    budget = s.num("NCU_BUDGET", 70)
    for name in ("gpt2_eager", "hf_gpt2", "hf_bert"):
        say(f"=== ncu {name}, named kernels ({s.elapsed()} s)")
        out = s.path(f"ncu_{name}")
        ncu(name, out, budget,
            ["--kernel-regex", s.get("NCU_REGEX", "bfloat16_copy|FillFunctor|direct_copy"),
             "--launch-skip", s.get("NCU_SKIP", "2000"), "--launch-count", s.get("NCU_COUNT", "40")],
            ["--steps", s.get("NCU_STEPS", "40")], inner=budget - 8)  # fmt: skip
        if os.path.exists(os.path.join(out, "ncu_raw.csv")):
            shutil.copy(os.path.join(out, "ncu_raw.csv"), s.path(f"ncu_{name}_named_raw.csv"))
        s.pack("ncu_named.tar.gz")
    s.note_commit("ncu-named")
    s.pack("ncu_named.tar.gz")


# --- lines, modules, compile ----------------------------------------------------------------------------------


def suite_lines(s: Suite, args: list[str]) -> None:
    parts = s.get("PARTS", "lines sleep kv").split()
    w = s.work
    if "lines" in parts:
        workloads(s, list(WORKLOADS), w, plain=False, record_opts=["--stream"],
                  steps={"gpt2_eager": 200, "hf_gpt2": 200, "hf_bert": 200, "resnet50": 150})  # fmt: skip
        for name in WORKLOADS:
            rc = run([PY, "validation/unprofiled_lines.py", s.path(f"{name}.brrr"), "--json", s.path(f"{name}_lines.json")],
                     s.path(f"{name}_lines.txt"))  # fmt: skip
            say(f"== {name} unprofiled_lines rc={rc}")
            grep(s.path(f"{name}_lines.txt"))
    if "sleep" in parts:
        for ms in (20, 2):
            rec = s.path(f"known_regimes_sleep{ms}.brrr")
            t0 = time.monotonic()
            rc = run([PY, "-m", "brrrtui", "record", "-o", rec, "examples/known_regimes.py", "--steps", "300",
                      "--sleep-ms", str(ms)], s.path(f"kr{ms}.log"), 200)  # fmt: skip
            say(f"known_regimes --sleep-ms {ms} record rc={rc} in {int(time.monotonic() - t0)} s")
            report(rec, s.path(f"known_regimes_sleep{ms}_report"))
    if "kv" in parts:
        rc = run([PY, "validation/kv_cache_saving.py", "--json", s.path("kv_cache_saving.json")],
                 s.path("kv_cache_saving.txt"), 300)  # fmt: skip
        say(f"kv_cache_saving rc={rc}")
        grep(s.path("kv_cache_saving.txt"))
    gzip_all(w)
    s.note_commit(f"lines (PARTS={' '.join(parts)})")
    s.pack("lines.tar.gz")


def suite_modules(s: Suite, args: list[str]) -> None:
    n = s.num("STEPS", 120)
    workloads(s, list(WORKLOADS), s.work, plain=False,
              steps={"gpt2_eager": n, "hf_gpt2": n, "hf_bert": n, "resnet50": s.num("STEPS", 100)})  # fmt: skip
    rc = run([PY, "validation/inductor_probe.py", s.path("inductor_probe.json")], s.path("inductor_probe.log"), 300)
    say(f"probe rc={rc}")
    grep(s.path("inductor_probe.log"), limit=60)
    s.note_commit("modules")
    s.pack("modules.tar.gz")


def compiled_case(s: Suite, name: str, steps: list[str], script: list[str], t_plain: int, t_rec: int,
                  model_file: str = "", files: bool = False) -> None:  # fmt: skip
    """A compiled script plain and recorded (TORCH_LOGS=graph_breaks,recompiles, a fresh Inductor cache each),
    step medians, the reports and compiled_attribution.py; with `files`, compiled_files.py too."""
    with open(s.path("summary.txt"), "a") as summary:
        for mode in ("plain", "rec"):
            cache = s.path(f"inductor_cache_{name}_{mode}")
            env = dict(os.environ, TORCH_LOGS="graph_breaks,recompiles", TORCHINDUCTOR_CACHE_DIR=cache)
            log = s.path(f"{name}_{mode}.log")
            tail = [*steps, "--out", s.work, "--name", f"{name}_{mode}"]
            cmd = [PY, *script, *tail] if mode == "plain" else [
                PY, "-m", "brrrtui", "record", "-o", s.path(f"{name}.brrr"), *script, *tail]  # fmt: skip
            rc = run(cmd, log, t_plain if mode == "plain" else t_rec, env=env)
            line = (f"{name} {mode} rc={rc} graph-break lines {count_in(log, 'Graph break')}, recompile lines "
                    f"{count_in(log, 'Recompiling')}, brrrtui-code lines "
                    f"{count_in(log, '_getframe', 'RecordFunctionFast', 'brrrtui/')}")  # fmt: skip
            say(line)
            summary.write(line + "\n")
            shutil.rmtree(cache, ignore_errors=True)
    step_medians(s.work, name)
    rec = s.path(f"{name}.brrr")
    if not os.path.exists(rec):
        say(f"{name}: no recording")
        return
    report(rec, s.path(f"{name}_report"))
    attribution = [PY, "validation/compiled_attribution.py", rec] + (["--model-file", model_file] if model_file else [])
    run(attribution, s.path(f"{name}_attribution.json"), 120)
    d = _load(s.path(f"{name}_attribution.json"))
    if d:
        say(name, "no-line share of GPU", round(d["no_line_gpu_share"], 4), "compiled share",
            round(d["compiled_share_of_gpu"], 4), "compiled on model file", round(d["compiled_on_model_file"], 4),
            "top lines", [(x["line"].rsplit("/", 1)[-1], round(x["gpu_ms"], 1)) for x in d["top_lines"][:8]])  # fmt: skip
    if files:
        run([PY, "validation/compiled_files.py", rec, model_file], s.path(f"{name}_files.json"), 90)
        d = _load(s.path(f"{name}_files.json"))
        if d:
            say(name, f"steady GPU {d['gpu_ms']:.1f} ms, {d['kernels']} kernels: no line {d['no_line_pct']} %, placed "
                f"by Inductor provenance {d['provenance_pct']} %, triton {d['triton_pct']} %")  # fmt: skip
            for kind, v in d["line_file_pct"].items():
                say(name, "line file %", kind, v)
            for x in d["top_lines"][:6]:
                say(name, "line", x["line"], x["kind"], x["gpu_ms"], "ms", x["pct"], "%")


def suite_compile(s: Suite, args: list[str]) -> None:
    compiled_case(s, "compile", ["--steps", "300"], ["examples/train_gpt.py", "--compile"], 240, 300)
    if s.get("SKIP_BENCH", "") == "":
        rc = run([PY, "-m", "benchmarks.bench_stream", "--rounds", "1", "--variants", "plain,windows", "--gpt-steps",
                  "1000", "--tiny-steps", "4000", "--out", s.work], s.path("bench_stream.log"), 330)  # fmt: skip
        say(f"bench rc={rc}")
        grep(s.path("bench_stream.log"))
    gzip_all(s.work)
    s.note_commit("compile")
    s.pack("compile.tar.gz")


def suite_compile_lines(s: Suite, args: list[str]) -> None:
    compiled_case(s, "full", ["--steps", "300"], ["examples/train_gpt.py", "--compile"], 240, 300)
    compiled_case(s, "block", ["--steps", "120"], ["validation/workloads/gpt2_eager_fixes.py", "--compile-block"], 240, 300)
    compiled_case(s, "loss", ["--steps", "120"], ["validation/workloads/gpt2_eager_fixes.py", "--compile-loss"], 240, 300)
    gzip_all(s.work)
    s.note_commit("compile-lines")
    s.pack("compile_lines.tar.gz")
    for name in ("summary.txt", "block.brrr.gz"):
        if os.path.exists(s.path(name)):
            shutil.copy(s.path(name), os.path.join(s.out, name))


def suite_compile_models(s: Suite, args: list[str]) -> None:
    cases = s.get("CASES", "hf_gpt2 resnet50").split()
    if "hf_gpt2" in cases:
        compiled_case(s, "hf_gpt2", ["--steps", "60"], ["validation/workloads/hf_gpt2_compiled.py"], 150, 180,
                      model_file="hf_gpt2.py", files=True)  # fmt: skip
    if "resnet50" in cases:
        compiled_case(s, "resnet50", ["--steps", "60"], [WORKLOADS["resnet50"], "--compile"], 150, 180,
                      model_file="resnet50.py", files=True)  # fmt: skip
    gzip_all(s.work)
    s.note_commit("compile-models (CASES=" + " ".join(cases) + ")")
    s.pack("compile_models.tar.gz", exclude=(".ncu-rep",))
    for name in os.listdir(s.work):
        p = s.path(name)
        if name in ("summary.txt", "README.txt") or (name.endswith(".brrr.gz") and os.path.getsize(p) < 4_000_000):
            shutil.copy(p, os.path.join(s.out, name))


# --- long recordings ------------------------------------------------------------------------------------------


def gpu_txt(s: Suite) -> None:
    run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], os.path.join(s.out, "gpu.txt"))


def suite_real_scale(s: Suite, args: list[str]) -> None:
    gpu_txt(s)
    summary = os.path.join(s.out, "summary.txt")
    rec, tiled = s.path("real.brrr"), s.path("tiled.brrr")
    with open(summary, "w") as f:
        f.write(f"commit {commit()}; {os.cpu_count()} cores; {time.strftime('%c', time.gmtime())} UTC\n")
    record_s = s.num("RECORD_S", 330)
    rc = run([PY, "-m", "brrrtui", "record", "--no-calibrate", "--duty", "0.5", "--min-gap", "0.2", "-o", rec,
              "examples/train_gpt.py", "--steps", s.get("STEPS", "20000"), *s.get("ARGS", "").split()],
             os.path.join(s.out, "record.log"), record_s, stdout=s.path("script.out"), interrupt=True)  # fmt: skip
    with open(summary, "a") as f:
        f.write(f"record rc={rc} after at most {record_s} s\n")
    kernels = rows_summary(rec, summary)
    with open(os.path.join(s.out, "report.json.gz"), "wb") as g:
        p = subprocess.run([PY, "-m", "brrrtui", "report", "--json", rec], capture_output=True)
        g.write(gzip.compress(p.stdout))
    recs = [rec]
    if kernels >= 1000:
        rc = run([PY, "-m", "benchmarks.tiled_recording", "tests/fixtures/h200_hf_gpt2_steady.brrr.gz", tiled,
                  "--kernels", str(kernels)], s.path("tiled.log"))  # fmt: skip
        if rc == 0:
            recs.append(tiled)
            rows_summary(tiled, summary)
    for r in recs:
        for cmd in (["benchmarks.bench_report_pairs", r, "--baseline", ".", "--pairs", s.get("PAIRS", "3")],
                    ["benchmarks.bench_passes", r, "--repeat", "1"]):  # fmt: skip
            with open(summary, "a") as f:
                f.write(f"$ python -m {' '.join(cmd)}\n")
            run([PY, "-m", *cmd], s.path("bench.log"), stdout=s.path("bench.out"))
            with open(summary, "a") as f, open(s.path("bench.out")) as b:
                f.write(b.read())
    with open(summary) as f:
        say(f.read())


def rows_summary(path: str, summary: str) -> int:
    """Rows per table, the file's size and bytes a kernel, appended to `summary`; the kernel count."""
    from brrrtui.recording.load import load_trace

    try:
        t = load_trace(path)
    except Exception as e:  # noqa: BLE001 - the summary says what it can
        with open(summary, "a") as f:
            f.write(f"{path}: not readable: {e}\n")
        return 0
    n = {k: len(getattr(t, k)) for k in ("windows", "gpu", "ops", "spans", "runtime", "steps")}
    size = os.path.getsize(path)
    with open(summary, "a") as f:
        f.write(f"{path}: {size / 1e6:.1f} MB; " + ", ".join(f"{v:,} {k}" for k, v in n.items())
                + f"; {size / max(n['gpu'], 1):.0f} B a kernel, {n['ops'] / max(n['gpu'], 1):.2f} ops and "
                + f"{n['spans'] / max(n['gpu'], 1):.2f} spans a kernel\n")  # fmt: skip
    return n["gpu"]


def suite_stream_hour(s: Suite, args: list[str]) -> None:
    gpu_txt(s)
    rec = s.path("stream_hour.brrr")
    record_s = s.num("RECORD_S", 525)
    t0 = time.monotonic()
    rc = run([PY, "-m", "brrrtui", "record", "--stream", "--no-calibrate", "-o", rec, "examples/train_gpt.py",
              "--steps", s.get("STEPS", "20000"), *s.get("ARGS", "").split()],
             os.path.join(s.out, "record.log"), record_s, stdout=s.path("script.out"), interrupt=True)  # fmt: skip
    with open(os.path.join(s.out, "record.log"), "a") as f:
        f.write(f"record rc={rc} wall={time.monotonic() - t0:.1f} s\n")
    t1 = time.monotonic()
    p = subprocess.Popen([PY, "-m", "brrrtui", "report", "--json", rec], stdout=open(os.path.join(s.out, "report.json"), "w"),  # noqa: SIM115
                         stderr=subprocess.DEVNULL)  # fmt: skip
    _, status, usage = os.wait4(p.pid, 0)
    wall, rss_mb = time.monotonic() - t1, usage.ru_maxrss / 1024
    stream_hour_summary(rec, s.out, rc, os.waitstatus_to_exitcode(status), wall, rss_mb, record_s)
    if s.get("KEEP", "0") == "1":
        with open(rec, "rb") as f, gzip.open(os.path.join(s.out, "stream_hour.brrr.gz"), "wb") as g:
            shutil.copyfileobj(f, g)


def stream_hour_summary(rec: str, out: str, rc: int, report_rc: int, wall: float, rss_mb: float, record_s: int) -> None:
    import sqlite3

    from brrrtui.recording.store import load_recording

    db = sqlite3.connect(rec)
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}

    def rows(table: str) -> int | None:
        try:
            return int(db.execute(f"SELECT coalesce(sum(batch_rows), 0) FROM {table}").fetchone()[0])
        except sqlite3.Error:
            return None

    folded = db.execute('SELECT coalesce(sum(batch_rows), 0) FROM stream WHERE "after_window" IS NULL').fetchone()[0]
    size = os.path.getsize(rec)
    start, end = meta.get("started_at_ns"), meta.get("ended_at_ns") or meta.get("last_batch_ns")
    seconds = (int(end) - int(start)) / 1e9 if start and end else None
    stream_section = (_load(os.path.join(out, "report.json")) or {}).get("stream")
    try:  # the stream's span: from the first folded (or raw) kernel to the last raw one
        t = load_recording(rec)
        starts = [int(t.stream_folds.first_ns.min())] if len(t.stream_folds) else []
        starts += [int(t.stream.start_ns.min())] if len(t.stream) else []
        ends = [int((t.stream.start_ns + t.stream.dur_ns).max())] if len(t.stream) else []
        stream_s = (max(ends) - min(starts)) / 1e9 if starts and ends else None
    except Exception as e:  # noqa: BLE001 - the summary still says what it can
        stream_s = None
        say(f"stream span unknown: {e!r}")
    total = rows("stream") or 0
    res = {
        "command": "python -m validation.run stream-hour", "commit": commit(), "record_s_limit": record_s,
        "record_rc": rc, "report_rc": report_rc, "status": meta.get("status"),
        "recording_bytes": size, "seconds_recorded": seconds,
        "bytes_per_hour": size / seconds * 3600 if seconds else None, "stream_span_s": stream_s,
        "stream_rows_per_s": total / stream_s if stream_s else None,
        "stream_rows_total": total, "stream_rows_raw": total - folded, "stream_rows_folded": folded,
        "stream_agg_rows": rows("stream_agg"), "stream_busy_rows": rows("stream_busy"),
        "stream_template_rows": rows("stream_templates"), "windows": rows("windows"), "gpu_rows": rows("gpu"),
        "steps": rows("steps"), "report_json_s": wall, "report_json_peak_rss_mb": rss_mb,
        "meta_stream": meta.get("stream"), "meta_stream_fold": meta.get("stream_fold"), "report_stream": stream_section,
    }  # fmt: skip
    with open(os.path.join(out, "stream_hour.json"), "w") as f:
        json.dump(res, f, indent=1)
    bph = res["bytes_per_hour"] or 0
    lines = [
        f"commit {res['commit']}; record rc {rc} ({meta.get('status')}), report --json rc {report_rc}",
        f"recording {size / 1e6:.1f} MB over {seconds or 0:.0f} s -> {bph:,.0f} bytes/hour ({bph / 1e9:.3f} GB/hour)",
        f"stream span {stream_s or 0:.0f} s, {res['stream_rows_per_s'] or 0:,.0f} rows/s; stream rows {total:,}: raw "
        f"{total - folded:,}, folded {folded:,} into {res['stream_agg_rows'] or 0:,} aggregates; records (meta.stream) "
        f"{(meta.get('stream') or {}).get('records')}",
        f"windows {res['windows']}, steps {res['steps']}, gpu rows {res['gpu_rows'] or 0:,}",
        f"report --json: {wall:.2f} s, peak RSS {rss_mb:.0f} MB",
        f"meta.stream_fold: {json.dumps(meta.get('stream_fold'))}",
        f"meta.stream: {json.dumps(meta.get('stream'))}",
    ]  # fmt: skip
    with open(os.path.join(out, "stream_hour.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    say("\n".join(lines))


SUITES: dict[str, Callable[[Suite, list[str]], None]] = {
    "workloads": suite_workloads,
    "verdicts": suite_verdicts,
    "checks": suite_checks,
    "followup": suite_followup,
    "savings": suite_savings,
    "ncu-sampled": suite_ncu_sampled,
    "ncu-named": suite_ncu_named,
    "lines": suite_lines,
    "modules": suite_modules,
    "compile": suite_compile,
    "compile-lines": suite_compile_lines,
    "compile-models": suite_compile_models,
    "real-scale": suite_real_scale,
    "stream-hour": suite_stream_hour,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m validation.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("suite", nargs="?", choices=sorted(SUITES), metavar="SUITE")
    p.add_argument("args", nargs="*", help="the suite's arguments (workloads: the workloads to run)")
    p.add_argument("--out", default=os.environ.get("OUT") or "validation_out", help="where the results go")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the suite")
    p.add_argument("--list", action="store_true", help="list the suites")
    a = p.parse_args(argv)
    if a.list or not a.suite:
        print("\n".join(sorted(SUITES)))
        return 0 if a.list else 2
    bad = [kv for kv in a.set if "=" not in kv]
    if bad:
        p.error(f"--set wants KEY=VALUE, not {bad[0]!r}")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.abspath(a.out)
    os.chdir(root)  # the suites name scripts from the repository root
    os.environ["PYTHONUNBUFFERED"] = "1"
    suite = Suite(a.suite, out, dict(kv.split("=", 1) for kv in a.set))
    say(f"validation {a.suite}: commit {commit()}, work folder {suite.work}, results in {suite.out}")
    SUITES[a.suite](suite, a.args)
    say(f"done in {suite.elapsed()} s; files in {suite.out}: {', '.join(sorted(os.listdir(suite.out)))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

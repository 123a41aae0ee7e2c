#!/usr/bin/env bash
# A long `--stream` run on the H200, one device call (<= 580 s): GPT-2 small (examples/train_gpt.py, B=16,
# T=1024, bf16) under `brrrtui record --stream` for up to RECORD_S seconds (default 525, ~8.75 min), then
# `brrrtui report --json` of the recording, timed. Writes to $OUT:
#   stream_hour.json   recording bytes, seconds recorded, bytes per hour (projected), stream records, raw rows
#                      and folded rows, aggregates, the time (and peak RSS) of report --json, meta.stream,
#                      meta.stream_fold, the report's "stream" section, the commit
#   stream_hour.txt    the same in a few lines; record.log (brrrtui's stderr, the script's last lines)
#   report.json        the whole report --json
#   KEEP=1: the recording too, gzipped (stream_hour.brrr.gz)
#
#   bash validation/run_stream_hour_h200.sh                 # from the repository root
#   RECORD_S=300 STEPS=6000 bash validation/run_stream_hour_h200.sh
#   OUT=/tmp/sh RECORD_S=60 STEPS=30 ARGS="--layers 2 --seq 128 --batch 4 --vocab 4096" \
#       bash validation/run_stream_hour_h200.sh      # the plumbing on a CPU (no stream there: no CUPTI)
#
# The script is given more steps than fit (STEPS, default 20000, ~16 min), so the run ends at RECORD_S: timeout
# sends SIGINT to brrrtui and the script, the script stops (exit 130) and the recording keeps every committed
# batch, as after Ctrl-C.
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/stream_hour_out}
mkdir -p "$OUT"
RECORD_S=${RECORD_S:-525}
STEPS=${STEPS:-20000}
W=$(mktemp -d /tmp/stream_hour.XXXXXX)
REC=$W/stream_hour.brrr
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>&1

t0=$(date +%s.%N)
timeout --signal=INT --kill-after=10 "$RECORD_S" \
    python -m brrrtui record --stream --no-calibrate -o "$REC" examples/train_gpt.py --steps "$STEPS" ${ARGS:-} \
    >"$W/script.out" 2>"$OUT/record.log"
rc=$?
t1=$(date +%s.%N)
tail -n 20 "$W/script.out" >>"$OUT/record.log"
echo "record rc=$rc wall=$(python -c "print(round($t1 - $t0, 1))") s" | tee -a "$OUT/record.log"

/usr/bin/time -f "%e %M" -o "$W/open.time" timeout 30 python -m brrrtui report --json "$REC" >"$OUT/report.json" \
    2>"$W/report.err"
report_rc=$?

python - "$REC" "$W/open.time" "$OUT" "$rc" "$report_rc" "$COMMIT" "$RECORD_S" <<'EOF'
import json, os, sqlite3, sys

rec, open_time, out, rc, report_rc, commit, record_s = sys.argv[1:]
db = sqlite3.connect(rec)
meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
def rows(table):
    try:
        return db.execute(f"SELECT coalesce(sum(batch_rows), 0) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return None
folded = db.execute('SELECT coalesce(sum(batch_rows), 0) FROM stream WHERE "after_window" IS NULL').fetchone()[0]
size = os.path.getsize(rec)
start, end = meta.get("started_at_ns"), meta.get("ended_at_ns") or meta.get("last_batch_ns")
seconds = (int(end) - int(start)) / 1e9 if start and end else None
try:
    wall, rss_kb = open(open_time).read().split()[-2:]
    wall, rss_mb = float(wall), int(rss_kb) / 1024
except (OSError, ValueError):
    wall = rss_mb = None
try:
    stream_section = json.load(open(os.path.join(out, "report.json"))).get("stream")
except (OSError, ValueError):
    stream_section = None
try:  # the stream's span: from the first folded (or raw) kernel to the last raw one
    sys.path.insert(0, os.getcwd())
    from brrrtui.recording.store import load_recording
    t = load_recording(rec)
    starts = [int(t.stream_folds.first_ns.min())] if len(t.stream_folds) else []
    starts += [int(t.stream.start_ns.min())] if len(t.stream) else []
    ends = [int((t.stream.start_ns + t.stream.dur_ns).max())] if len(t.stream) else []
    stream_s = (max(ends) - min(starts)) / 1e9 if starts and ends else None
except Exception as e:  # noqa: BLE001 - the summary still says what it can
    stream_s = None
    print(f"stream span unknown: {e!r}")
res = {
    "command": "bash validation/run_stream_hour_h200.sh", "commit": commit, "record_s_limit": int(record_s),
    "record_rc": int(rc), "report_rc": int(report_rc), "status": meta.get("status"),
    "recording_bytes": size, "seconds_recorded": seconds,
    "bytes_per_hour": size / seconds * 3600 if seconds else None, "stream_span_s": stream_s,
    "stream_rows_per_s": rows("stream") / stream_s if stream_s else None,
    "stream_rows_total": rows("stream"), "stream_rows_raw": rows("stream") - folded, "stream_rows_folded": folded,
    "stream_agg_rows": rows("stream_agg"), "stream_busy_rows": rows("stream_busy"),
    "stream_template_rows": rows("stream_templates"), "windows": rows("windows"), "gpu_rows": rows("gpu"),
    "steps": rows("steps"),
    "report_json_s": wall, "report_json_peak_rss_mb": rss_mb,
    "meta_stream": meta.get("stream"), "meta_stream_fold": meta.get("stream_fold"),
    "report_stream": stream_section,
}
json.dump(res, open(os.path.join(out, "stream_hour.json"), "w"), indent=1)
lines = [
    f"commit {commit}; record rc {rc} ({meta.get('status')}), report --json rc {report_rc}",
    f"recording {size / 1e6:.1f} MB over {seconds or 0:.0f} s -> {res['bytes_per_hour'] or 0:,.0f} bytes/hour "
    f"({(res['bytes_per_hour'] or 0) / 1e9:.3f} GB/hour)",
    f"stream span {stream_s or 0:.0f} s, {res['stream_rows_per_s'] or 0:,.0f} rows/s; "
    f"stream rows {res['stream_rows_total']:,}: raw {res['stream_rows_raw']:,}, folded {folded:,} into "
    f"{res['stream_agg_rows']:,} aggregates; records (meta.stream) {(meta.get('stream') or {}).get('records')}",
    f"windows {res['windows']}, steps {res['steps']}, gpu rows {res['gpu_rows']:,}",
    f"report --json: {wall} s, peak RSS {rss_mb} MB",
    f"meta.stream_fold: {json.dumps(meta.get('stream_fold'))}",
    f"meta.stream: {json.dumps(meta.get('stream'))}",
]
open(os.path.join(out, "stream_hour.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
[ -s "$W/report.err" ] && { echo "report stderr:"; tail -n 5 "$W/report.err"; }
if [ "${KEEP:-0}" = 1 ]; then gzip -c "$REC" >"$OUT/stream_hour.brrr.gz"; fi
rm -rf "$W"

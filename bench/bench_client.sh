#!/usr/bin/env bash
# How fast is the load client itself? `nibble bench serve` against a mock
# that answers instantly (bench/bench_client_mock.py), the client pinned to
# one core (taskset, when there is one) and the mock to another:
#   1. throughput: concurrency 64, 200 chunks per stream, all sent at once:
#      SSE chunks parsed per second of wall time and per second of the
#      client's own CPU time (results.json levels[].client);
#   2. concurrency: 256 streams each held open 2 s after their first chunk:
#      the mock's count of open streams (its /metrics, sampled by the client)
#      shows whether all 256 were in flight at once, on the client's one thread.
# Usage: bash bench/bench_client.sh [build/nibble]
set -euo pipefail
BIN=${1:-build/nibble}
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
mpid=
trap '[ -n "$mpid" ] && kill $mpid 2>/dev/null; rm -rf "$tmp"' EXIT
PIN_C= PIN_M=
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN_C="taskset -c 0"; PIN_M="taskset -c 1"; fi
ulimit -n 4096 2>/dev/null || true

start_mock() {
  $PIN_M python3 "$HERE/bench_client_mock.py" "$@" >"$tmp/m.log" 2>&1 &
  mpid=$!
  for _ in $(seq 1 100); do grep -q listening "$tmp/m.log" && break; sleep 0.1; done
  U=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/m.log")
}

start_mock --chunks 200
$PIN_C "$BIN" bench serve --endpoint "$U" --concurrency 64 --num-prompts 2000 --warmup 64 --input-len 4 \
  --output-len 200 --json 2>/dev/null >"$tmp/a.json"
kill $mpid; wait $mpid 2>/dev/null || true
python3 - "$tmp/a.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["levels"][0]
c = l["client"]
print("throughput: %d streams ok, %d failed; %d SSE chunks in %.2f s wall = %.0f chunks/s; client CPU %.2f s = %.0f chunks per CPU-second"
      % (l["requests_ok"], l["requests_failed"], c["chunks"], l["duration_s"], c["chunks"] / l["duration_s"], c["cpu_s"], c["chunks_per_cpu_s"]))
PY

start_mock --chunks 16 --hold 2
$PIN_C "$BIN" bench serve --endpoint "$U" --concurrency 256 --num-prompts 512 --warmup 0 --input-len 4 \
  --output-len 16 --metrics-interval 0.2 --json 2>/dev/null >"$tmp/b.json"
python3 - "$tmp/b.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["levels"][0]
print("concurrency: %d streams ok, %d failed; peak open streams at the mock %s (of 256); TTFT p50 %.1f ms, p99 %.1f ms; client CPU %.2f s"
      % (l["requests_ok"], l["requests_failed"], l["server"]["running_peak"], 1e3 * l["ttft_s"]["p50"], 1e3 * l["ttft_s"]["p99"], l["client"]["cpu_s"]))
PY

#!/usr/bin/env bash
# nibble bench serve against a real `nibble serve` (the built-in default
# model, loopback): a 3-level ladder completes, every request generates
# exactly max_tokens under --ignore-eos (nibble serve honours ignore_eos end
# to end), and the client's request and token totals equal the deltas of the
# server's own /metrics counters, read here with curl independently of the
# bench's own server view (which must agree too).
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
for t in curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
unset OPENAI_API_KEY NIBBLE_API_KEY
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$tmp/cache}
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# the server requires a key (NIBBLE_API_KEY); the bench finds it in the same variable
export NIBBLE_API_KEY=bench-key-$$
"$BIN" serve --port 0 --max-model-len 256 --no-enable-prefix-caching -t 2 >"$tmp/s.log" 2>&1 &
PID=$!; pids+=("$PID"); wait_ready "$PID" "$tmp/s.log"
if [ -z "$PORT" ] || ! kill -0 "$PID" 2>/dev/null; then
  bad "nibble serve did not start: $(tail -n 5 "$tmp/s.log")"; finish; exit 1
fi
U=http://127.0.0.1:$PORT
# counters: requests (all finish reasons), prompt tokens, generated tokens
counters() {
  curl -s -m 10 "$U/metrics" | python3 -c '
import sys
v = {"nibble:request_success_total": 0, "nibble:prompt_tokens_total": 0, "nibble:generation_tokens_total": 0}
for line in sys.stdin:
    if line.startswith("#"): continue
    name = line.split("{")[0].split(" ")[0]
    if name in v: v[name] += float(line.rsplit(" ", 1)[1])
print(int(v["nibble:request_success_total"]), int(v["nibble:prompt_tokens_total"]), int(v["nibble:generation_tokens_total"]))'
}
read -r r0 p0 g0 < <(counters)
timeout 600 "$BIN" bench serve --endpoint "$U" --concurrency 1,2,4 --num-prompts 6 --warmup 0 \
  --input-len 12:20 --output-len 8 --ignore-eos --seed 5 --out "$tmp/r" >"$tmp/o" 2>&1; rc=$?
read -r r1 p1 g1 < <(counters)
check "3-level ladder against nibble serve exits 0" '[ $rc -eq 0 ] || { tail -n 20 "$tmp/o"; false; }'
check "the summary table has the three levels and the server columns" \
  'grep -q "^| c=1 " "$tmp/o" && grep -q "^| c=2 " "$tmp/o" && grep -q "^| c=4 " "$tmp/o" && grep -q "server (nibble /metrics)" "$tmp/o"'
python3 - "$tmp/r/results.json" "$tmp/r/requests.csv" $((r1 - r0)) $((p1 - p0)) $((g1 - g0)) <<'PY' >"$tmp/p" 2>&1
import csv, json, sys
d = json.load(open(sys.argv[1]))
dr, dp, dg = (int(x) for x in sys.argv[3:6])
L = d["levels"]
assert [l["concurrency"] for l in L] == [1, 2, 4], L
ok = sum(l["requests_ok"] for l in L); out = sum(l["output_tokens"] for l in L); pr = sum(l["prompt_tokens"] for l in L)
print("client: %d requests, %d prompt, %d generated; server /metrics deltas: %d, %d, %d" % (ok, pr, out, dr, dp, dg))
assert all(l["requests_failed"] == 0 for l in L)
assert (ok, pr, out) == (18, dp, dg) and dr == 18, "totals differ from the server's counters"
for l in L:  # the bench's own server view agrees, level by level
    s = l["server"]
    assert s["available"] and s["flavor"] == "nibble", s
    assert (s["requests"], s["prompt_tokens"], s["generation_tokens"]) == (l["requests_ok"], l["prompt_tokens"], l["output_tokens"]), (s, l)
    # peaks are sampled (every 0.5 s): a level that ends between two samples shows 0, never more than its concurrency
    assert 0 <= s["running_peak"] <= l["concurrency"], s
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 18
assert all(r["output_tokens"] == "8" and r["max_tokens"] == "8" for r in rows), "ignore_eos: every request must generate max_tokens"
assert all(float(r["ttft_s"]) > 0 and float(r["e2e_s"]) >= float(r["ttft_s"]) for r in rows)
PY
check "request / prompt / generation totals equal the deltas of nibble's /metrics; ignore_eos gives max_tokens" '[ $? -eq 0 ] || { cat "$tmp/p"; false; }'
cat "$tmp/p" | head -n 1
timeout 120 "$BIN" bench serve --endpoint "$U" --api-key-env NB_NO_SUCH_KEY --model nibble-default --concurrency 2 \
  --num-prompts 4 --warmup 0 --output-len 4 --json >"$tmp/k.json" 2>/dev/null; rc=$?
check "without the key (--api-key-env naming an unset variable): every request fails as HTTP 401, exit 1" \
  '[ $rc -eq 1 ] && python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; assert l[\"errors\"]=={\"HTTP 401\":4}, l" "$tmp/k.json"'
kill -TERM "$PID"; wait "$PID" 2>/dev/null
finish

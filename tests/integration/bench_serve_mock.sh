#!/usr/bin/env bash
# nibble bench serve against a scripted mock server (clients/mock_openai.py,
# loopback): latencies and their percentiles come out as scheduled, the
# server view is read from vllm:-style /metrics, 500s / cut streams / stalls
# / refused connections are failures with their reason, Poisson send times
# pass a KS test, the knee and --stop-at-slo, Ctrl-C writes a partial
# report, bench compare, and the exit codes (1 over --max-error-rate, 2 on
# bad arguments). Tolerances are generous (the machine is shared): measured
# latencies may exceed the schedule by 40 ms (mean, p50, p90; 150 ms for
# p95, p99, max) and undershoot it by 5 ms (ITL 30 ms: the mock keeps an
# absolute schedule, so a late chunk makes the next gap shorter).
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
MOCK=$HERE/clients/mock_openai.py
unset OPENAI_API_KEY NIBBLE_API_KEY
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# start_mock LOG ARGS...: sets MPID and U (base URL)
start_mock() {
  local log=$1; shift
  python3 "$MOCK" "$@" >"$log" 2>&1 &
  MPID=$!; pids+=("$MPID"); U=
  for _ in $(seq 1 100); do
    U=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -n 1)
    [ -n "$U" ] && return 0
    sleep 0.1
  done
  return 1
}
stop_mock() { kill "$MPID" 2>/dev/null; wait "$MPID" 2>/dev/null; }
B() { timeout 120 "$BIN" bench serve "$@"; }

# --- bad arguments: exit 2 naming the flag ---
for a in "--concurrency 0" "--concurrency 1,x" "--request-rate -1" "--concurrency 1 --request-rate 2" \
         "--input-len 5:2" "--frobnicate" "--duration 1 --num-prompts 3" "--stop-at-slo" "--endpoint ftp://x" \
         "--prompts $tmp/none.jsonl" "--max-error-rate 2"; do
  B $a >/dev/null 2>"$tmp/e"; rc=$?
  check "bad arguments '$a' exit 2 with a message" '[ $rc -eq 2 ] && [ -s "$tmp/e" ]'
done
"$BIN" bench compare "$tmp/none.json" >/dev/null 2>&1; rc=$?
check "bench compare with one file exits 2" '[ $rc -eq 2 ]'

# --- the schedule: TTFT cycles 50/100/150/200 ms per request, ITL 10/20/30/40 ms per chunk, 9 chunks ---
start_mock "$tmp/m1.log" --ttft 0.05,0.10,0.15,0.20 --itl 0.01,0.02,0.03,0.04 --tokens 9 || { bad "mock did not start"; finish; exit 1; }
B --endpoint "$U" --concurrency 4 --num-prompts 16 --warmup 0 --input-len 6 --output-len 20 --out "$tmp/r1" >"$tmp/o1" 2>&1; rc=$?
check "schedule run exits 0" '[ $rc -eq 0 ]'
check "table printed with TTFT/TPOT/ITL/E2E rows" 'grep -q "| TTFT |" "$tmp/o1" && grep -q "| E2E  |" "$tmp/o1" && grep -q "c=4" "$tmp/o1"'
python3 - "$tmp/r1/results.json" <<'PY' >"$tmp/p1" 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
lv = d["levels"][0]
def pct(xs, q):  # numpy's default (linear): the definition documented in src/bench/stats.h
    xs = sorted(xs); h = q * (len(xs) - 1); i = int(h)
    return xs[i] if i + 1 >= len(xs) else xs[i] + (h - i) * (xs[i + 1] - xs[i])
ttft = [0.05, 0.10, 0.15, 0.20] * 4
gaps = [0.01, 0.02, 0.03, 0.04, 0.01, 0.02, 0.03, 0.04]        # 8 gaps between 9 chunks
itl = gaps * 16
e2e = [t + sum(gaps) for t in ttft]
tpot = [sum(gaps) / 8] * 16
bad = 0
for key, xs, lo_tol in (("ttft_s", ttft, 0.005), ("e2e_s", e2e, 0.005), ("itl_s", itl, 0.03), ("tpot_s", tpot, 0.005)):
    want = {"mean": sum(xs) / len(xs), "p50": pct(xs, .5), "p90": pct(xs, .9), "p95": pct(xs, .95),
            "p99": pct(xs, .99), "max": max(xs)}
    for k, w in want.items():
        got = lv[key][k]
        hi_tol = 0.04 if k in ("mean", "p50", "p90") else 0.15  # tails catch the busy machine's hiccups
        ok = got is not None and w - lo_tol <= got <= w + hi_tol
        bad += not ok
        print("%s %s %s: want %.4f got %s" % ("ok" if ok else "BAD", key, k, w, got))
assert lv["requests_ok"] == 16 and lv["requests_failed"] == 0, lv
assert lv["output_tokens"] == 16 * 9, lv["output_tokens"]
s = lv["server"]
assert s["available"] and s["flavor"] == "vllm", s
assert s["requests"] == 16 and s["generation_tokens"] == 144 and s["prompt_tokens"] == 16 * 6, s
assert 1 <= s["running_peak"] <= 4, s
assert set(["concurrency", "requests_ok", "requests_failed", "errors", "req_per_s", "output_tok_per_s",
            "total_tok_per_s", "ttft_s", "tpot_s", "itl_s", "e2e_s", "server"]) <= set(lv), sorted(lv)
assert d["parameters"]["concurrency"] == [4] and "knee" in d
sys.exit(1 if bad else 0)
PY
check "TTFT/ITL/TPOT/E2E mean and percentiles match the schedule; server view from vllm: /metrics" '[ $? -eq 0 ] || { cat "$tmp/p1"; false; }'
check "requests.csv has one row per request" '[ $(($(wc -l <"$tmp/r1/requests.csv") - 1)) -eq 16 ]'
if command -v gnuplot >/dev/null; then
  check "plots written (PNG and SVG)" '[ -s "$tmp/r1/throughput.png" ] && [ -s "$tmp/r1/ttft.svg" ] && [ -s "$tmp/r1/tpot.png" ]'
else
  check "no gnuplot: said so, results still written" 'grep -q "gnuplot is not installed" "$tmp/o1" && [ -s "$tmp/r1/results.json" ]'
fi
stop_mock

# --- chat, no usage in the stream: output tokens = content chunks ---
start_mock "$tmp/m2.log" --ttft 0.01 --itl 0.005 --tokens 7 --no-usage
B --endpoint "$U/v1/" --chat --concurrency 2 --num-prompts 6 --json >"$tmp/r2.json" 2>"$tmp/o2"; rc=$?
check "chat without usage: every request counts 7 content chunks" \
  '[ $rc -eq 0 ] && python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; assert l[\"output_tokens\"]==6*7 and l[\"requests_ok\"]==6, l" "$tmp/r2.json"'
check "--json keeps the tables on stderr" 'grep -q "| TTFT |" "$tmp/o2" && ! grep -q "| TTFT |" "$tmp/r2.json"'
# --prompts: each line's max_tokens, else --output-len (2, 2, 3 tokens; cycled over 6 requests)
printf '%s\n' '{"prompt": "one two", "max_tokens": 2}' '' '{"messages": [{"role": "user", "content": "three"}], "max_tokens": 2}' \
  '{"prompt": "four"}' >"$tmp/p.jsonl"
B --endpoint "$U" --prompts "$tmp/p.jsonl" --output-len 3 --concurrency 2 --num-prompts 6 --warmup 0 --json >"$tmp/r2b.json" 2>/dev/null; rc=$?
check "--prompts FILE.jsonl: per-line max_tokens, else --output-len" \
  '[ $rc -eq 0 ] && python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; assert l[\"output_tokens\"]==14 and l[\"requests_ok\"]==6, l" "$tmp/r2b.json"'
printf '%s\n' '{"prompt": "ok"}' '{"text": "no prompt"}' >"$tmp/bad.jsonl"
B --endpoint "$U" --extra-body '[1]' >/dev/null 2>"$tmp/e"; rc=$?
check "--extra-body not an object exits 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--extra-body: expected a JSON object" "$tmp/e"'
B --endpoint "$U" --extra-body '{"stream": false}' >/dev/null 2>"$tmp/e"; rc=$?
check "--extra-body with stream exits 2" '[ $rc -eq 2 ] && grep -q "stream" "$tmp/e"'

B --endpoint "$U" --prompts "$tmp/bad.jsonl" >/dev/null 2>"$tmp/e"; rc=$?
check "--prompts with a bad line exits 2 naming the file and line 2" '[ $rc -eq 2 ] && grep -q "bad.jsonl: line 2" "$tmp/e"'
stop_mock

# --- --extra-body: its fields go into every body, over the generated ones ---
start_mock "$tmp/m4.log" --ttft 0.01 --itl 0.005 --tokens 3 --record "$tmp/bodies.jsonl"
echo '{"logit_bias": {"5": -100}, "top_k": 3, "temperature": 0.5}' >"$tmp/extra.json"
B --endpoint "$U" --extra-body @"$tmp/extra.json" --concurrency 2 --num-prompts 4 --warmup 0 --json >"$tmp/r4.json" 2>/dev/null; rc=$?
check "--extra-body @FILE: every body carries its fields (temperature overridden), still streamed" \
  '[ $rc -eq 0 ] && python3 -c "
import json,sys
b=[json.loads(l) for l in open(sys.argv[1])]
assert len(b)==4 and all(x[\"logit_bias\"]=={\"5\": -100} and x[\"top_k\"]==3 and x[\"temperature\"]==0.5 and x[\"stream\"] is True for x in b), b" "$tmp/bodies.jsonl"'
stop_mock

# --- 500 on every 5th request: exactly 20% failures with the reason; exit 1, or 0 under --max-error-rate ---
start_mock "$tmp/m3.log" --ttft 0.01 --itl 0.005 --tokens 3 --fail-every 5
B --endpoint "$U" --concurrency 4 --num-prompts 20 --warmup 0 --out "$tmp/r3" >"$tmp/o3" 2>&1; rc=$?
check "500 every 5th: exit 1 over the default --max-error-rate 0" '[ $rc -eq 1 ]'
check "500 every 5th: 16 ok, 4 failed, errors {\"HTTP 500\": 4}, the server's message in requests.csv" \
  'python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; assert (l[\"requests_ok\"],l[\"requests_failed\"],l[\"errors\"],l[\"error_rate\"])==(16,4,{\"HTTP 500\":4},0.2), l" "$tmp/r3/results.json" && [ $(grep -c "scripted failure" "$tmp/r3/requests.csv") -eq 4 ]'
B --endpoint "$U" --concurrency 4 --num-prompts 20 --warmup 0 --max-error-rate 0.25 >/dev/null 2>&1; rc=$?
check "500 every 5th: exit 0 with --max-error-rate 0.25" '[ $rc -eq 0 ]'
stop_mock

# --- a stream cut half-way is a failure ---
start_mock "$tmp/m4.log" --ttft 0.01 --itl 0.005 --tokens 6 --cut-every 2 --cut-after 3
B --endpoint "$U" --concurrency 2 --num-prompts 10 --warmup 0 --json >"$tmp/r4.json" 2>/dev/null; rc=$?
check "cut streams: every 2nd request fails as 'stream cut before [DONE]', exit 1" \
  '[ $rc -eq 1 ] && python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; assert l[\"errors\"]=={\"stream cut before [DONE]\":5} and l[\"requests_ok\"]==5, l" "$tmp/r4.json"'
stop_mock

# --- a stalled stream fails after --request-timeout; the run goes on ---
start_mock "$tmp/m5.log" --ttft 0.01 --itl 0.005 --tokens 4 --stall-every 3 --stall-after 1 --stall-seconds 60
t0=$(date +%s)
B --endpoint "$U" --concurrency 3 --num-prompts 6 --warmup 0 --request-timeout 0.5 --json >"$tmp/r5.json" 2>/dev/null; rc=$?
t1=$(date +%s)
check "stalled streams: 2 of 6 fail as stalled, in well under the mock's 60 s stall" \
  '[ $rc -eq 1 ] && [ $((t1 - t0)) -lt 30 ] && python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; e=l[\"errors\"]; assert l[\"requests_ok\"]==4 and len(e)==1 and list(e.values())==[2] and list(e)[0].startswith(\"stalled\"), l" "$tmp/r5.json"'
stop_mock

# --- refused connections ---
B --endpoint "$U" --concurrency 2 --num-prompts 4 --warmup 0 --no-metrics --json >"$tmp/r6.json" 2>/dev/null; rc=$?
check "refused connections: all fail with curl's reason, exit 1" \
  '[ $rc -eq 1 ] && python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"levels\"][0]; assert l[\"requests_failed\"]==4 and \"connect\" in list(l[\"errors\"])[0], l" "$tmp/r6.json"'

# --- Poisson arrivals: the recorded send times pass a KS test; rate inf sends all at once ---
start_mock "$tmp/m7.log" --ttft 0 --itl 0 --tokens 2
B --endpoint "$U" --request-rate 40,inf --num-prompts 200 --seed 3 --out "$tmp/r7" >/dev/null 2>&1; rc=$?
python3 - "$tmp/r7/requests.csv" <<'PY' >"$tmp/p7" 2>&1
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r40 = sorted(float(r["send_s"]) for r in rows if r["request_rate"] == "40")
rinf = sorted(float(r["send_s"]) for r in rows if r["request_rate"] == "inf")
assert len(r40) == 200 and len(rinf) == 200, (len(r40), len(rinf))
gaps = sorted(b - a for a, b in zip(r40, r40[1:]))
n = len(gaps)
d = max(max(abs((i + 1) / n - (1 - math.exp(-40 * g))), abs(i / n - (1 - math.exp(-40 * g)))) for i, g in enumerate(gaps))
crit = 1.628 / math.sqrt(n)  # 1% level
print("KS D = %.4f, critical %.4f, mean gap %.4f s" % (d, crit, sum(gaps) / n))
assert d < crit
assert rinf[-1] - rinf[0] < 0.5, rinf[-1] - rinf[0]
PY
check "request rate 40/s: send-time gaps pass KS against Exp(40) at 1%; inf: all 200 sent at once" '[ $rc -eq 0 ] && [ $? -eq 0 ] || { cat "$tmp/p7"; false; }'
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert [l['request_rate'] for l in d['levels']]==[40,'inf']" "$tmp/r7/results.json"
check "rate levels keyed by request_rate (inf as \"inf\")" '[ $? -eq 0 ]'
stop_mock

# --- the knee and --stop-at-slo: TTFT grows 60 ms per running stream ---
start_mock "$tmp/m8.log" --ttft 0.02 --itl 0.005 --tokens 4 --ttft-per-running 0.06
B --endpoint "$U" --concurrency 1,2,8,16 --num-prompts 8 --slo-ttft-p99 0.2 --stop-at-slo --out "$tmp/r8" >"$tmp/o8" 2>&1; rc=$?
check "knee = 2 (TTFT p99 under 200 ms), ladder stopped after 8 (the first level past the SLO)" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"knee\"][\"concurrency\"]==2 and [l[\"concurrency\"] for l in d[\"levels\"]]==[1,2,8], (d[\"knee\"], len(d[\"levels\"]))" "$tmp/r8/results.json" && grep -q "knee" "$tmp/o8"'

# --- bench compare: the same load on a faster server ---
stop_mock
start_mock "$tmp/m9.log" --ttft 0.01 --itl 0.005 --tokens 4
B --endpoint "$U" --concurrency 1,2,8 --num-prompts 8 --slo-ttft-p99 0.2 --out "$tmp/r9" >/dev/null 2>&1
"$BIN" bench compare "$tmp/r8/results.json" "$tmp/r9/results.json" --out "$tmp/cmp" >"$tmp/o9" 2>&1; rc=$?
check "bench compare: a table per common level with B/A, exit 0" '[ $rc -eq 0 ] && [ $(grep -c "^== c=" "$tmp/o9") -eq 3 ] && grep -q "TTFT p99 (ms)" "$tmp/o9" && grep -q "B/A" "$tmp/o9"'
check "bench compare: candidate B has the lower TTFT p99 at c=8 (ratio < 1)" \
  'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); l=[x for x in c[\"levels\"] if x[\"concurrency\"]==8][0]; assert l[\"metrics\"][\"TTFT p99 (ms)\"][\"ratio\"] < 0.5, l" "$tmp/cmp/compare.json"'
if command -v gnuplot >/dev/null; then
  check "bench compare: one plot (PNG, SVG)" '[ -s "$tmp/cmp/compare.png" ] && [ -s "$tmp/cmp/compare.svg" ]'
fi
"$BIN" bench compare "$tmp/r9/requests.csv" "$tmp/r9/results.json" >/dev/null 2>&1; rc=$?
check "bench compare of a non-JSON file exits 2" '[ $rc -eq 2 ]'

# --- Ctrl-C: partial report and files ---
stop_mock
start_mock "$tmp/m10.log" --ttft 0.01 --itl 0.05 --tokens 20
"$BIN" bench serve --endpoint "$U" --concurrency 2,4 --duration 30 --out "$tmp/r10" >"$tmp/o10" 2>&1 &
bp=$!; pids+=("$bp")
sleep 3
kill -INT $bp
for _ in $(seq 1 100); do kill -0 $bp 2>/dev/null || break; sleep 0.1; done
wait $bp; rc=$?
check "SIGINT: exits 1 within 10 s, says interrupted" '[ $rc -eq 1 ] && grep -q "interrupted" "$tmp/o10"'
check "SIGINT: results.json (interrupted, the partial level) and requests.csv written" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"interrupted\"] and len(d[\"levels\"])==1 and d[\"levels\"][0][\"requests_ok\"]>0, d[\"levels\"]" "$tmp/r10/results.json" && [ -s "$tmp/r10/requests.csv" ]'
stop_mock
finish

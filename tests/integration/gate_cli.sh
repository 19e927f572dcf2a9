#!/usr/bin/env bash
# nibble gate from the command line: the seeds' incident from summaries
# alone (INT4 rejected on the bucket floor although its perplexity passes;
# W8A8 accepted), every check printed with value / threshold / result, the
# first failing reason, --json, KLD / perplexity / bench inputs in the
# shapes eval kld, eval ppl and bench serve write, thresholds from flags,
# and exit codes 0 accept / 1 reject / 2 bad input with a message.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }

summary() { # file overall n general numbers tool json_valid
  cat >"$1" <<JSON
{"overall": {"pass_rate": $2, "n": $3},
 "buckets": {"general_qa": {"pass_rate": $4, "n": 480}, "numbers": {"pass_rate": $5, "n": 360},
             "tool_json": {"pass_rate": $6, "n": 360}},
 "json_valid_rate": $7, "n_json": 360}
JSON
}
summary "$tmp/base.json" 0.934 1200 0.970 0.915 0.905 0.997
summary "$tmp/int4.json" 0.812 1200 0.961 0.740 0.685 0.930
summary "$tmp/w8a8.json" 0.918 1200 0.950 0.909 0.884 0.994
echo '{"ppl": 5.79, "ppl_stderr": 0.02, "mean_nll": 1.756, "n_scored": 100000, "n_tokens": 100001, "ctx": 512, "stride": 512, "mode": "chunks", "model": {"path": "base.gguf", "sha256": "00", "type": "gguf"}}' >"$tmp/ppl_base.json"
echo '{"ppl": 5.82, "ppl_stderr": 0.02, "mean_nll": 1.761, "n_scored": 100000, "n_tokens": 100001, "ctx": 512, "stride": 512, "mode": "chunks", "model": {"path": "int4.gguf", "sha256": "01", "type": "gguf"}}' >"$tmp/ppl_int4.json"

"$BIN" gate --base "$tmp/base.json" --cand "$tmp/int4.json" --ppl-base "$tmp/ppl_base.json" --ppl-cand "$tmp/ppl_int4.json" >"$tmp/o.txt" 2>&1
rc=$?
cat "$tmp/o.txt"
check "INT4: rejected (exit 1)" '[ $rc -eq 1 ]'
check "INT4: perplexity check passes (+0.52%)" 'grep -E "^  ppl_delta .* pass .*\+0\.52%" "$tmp/o.txt" >/dev/null'
check "INT4: first failing reason is the bucket floor on numbers" 'grep -q "^reason: bucket_floor numbers" "$tmp/o.txt"'
check "INT4: every bucket floor printed with value and threshold" '[ "$(grep -c "^  bucket_floor .*>= 0.85" "$tmp/o.txt")" -eq 3 ]'
check "INT4: json validity printed and failing" 'grep -E "^  json_valid .*0\.9300 .*FAIL" "$tmp/o.txt" >/dev/null'

"$BIN" gate --base "$tmp/base.json" --cand "$tmp/w8a8.json" >"$tmp/o.txt" 2>&1
rc=$?
check "W8A8: accepted (exit 0)" '[ $rc -eq 0 ] && grep -q "^verdict: ACCEPT" "$tmp/o.txt"'
"$BIN" gate --base "$tmp/base.json" --cand "$tmp/w8a8.json" --bucket-floor 0.89 >"$tmp/o.txt" 2>&1
rc=$?
check "W8A8 with --bucket-floor 0.89: rejected on tool_json" '[ $rc -eq 1 ] && grep -q "^reason: bucket_floor tool_json" "$tmp/o.txt"'

# --json, with the KLD of eval kld
echo '{"kld_mean": 0.12, "kld_median": 0.05, "kld_p90": 0.2, "kld_p99": 0.9, "kld_max": 3.1, "top1_agreement": 0.86, "ppl_base": 5.79, "ppl_cand": 5.82, "ppl_ratio": 1.005, "n": 5000, "classes": {"digit": {"n": 300, "kld_mean": 0.4, "top1_agreement": 0.7}}, "worst_class": "digit"}' >"$tmp/kld.json"
"$BIN" gate --base "$tmp/base.json" --cand "$tmp/w8a8.json" --kld "$tmp/kld.json" --json >"$tmp/o.json" 2>"$tmp/e.txt"
rc=$?
check "--kld over the thresholds: rejected on kld_max" '[ $rc -eq 1 ] && [ "$(jq -r .first_failure.check "$tmp/o.json")" = kld_max ]'
check "--json lists every check with value, threshold, result" \
  '[ "$(jq "[.checks[] | select(.value != null and .threshold != null and .result != null)] | length" "$tmp/o.json")" -ge 10 ] && [ "$(jq -r .verdict "$tmp/o.json")" = reject ]'
check "top1 agreement 0.86 fails too" '[ "$(jq -r ".checks[] | select(.check == \"top1_min\") | .result" "$tmp/o.json")" = fail ]'
"$BIN" gate --base "$tmp/base.json" --cand "$tmp/w8a8.json" --kld "$tmp/kld.json" --kld-max 0.2 --top1-min 0.85 >/dev/null 2>&1
check "--kld-max / --top1-min move the line (accepted)" '[ $? -eq 0 ]'

# bench inputs, matched by concurrency
bench() { # file c1_p99 c1_tp c8_p99 c8_tp
  echo "{\"levels\": [{\"concurrency\": 1, \"requests_ok\": 50, \"requests_failed\": 0, \"req_per_s\": 1, \"output_tok_per_s\": $3, \"total_tok_per_s\": $3, \"ttft_s\": {\"mean\": 0.1, \"p50\": 0.1, \"p90\": 0.1, \"p95\": 0.1, \"p99\": $2, \"max\": 0.3}},
   {\"concurrency\": 8, \"requests_ok\": 50, \"requests_failed\": 0, \"req_per_s\": 4, \"output_tok_per_s\": $5, \"total_tok_per_s\": $5, \"ttft_s\": {\"mean\": 0.2, \"p50\": 0.2, \"p90\": 0.3, \"p95\": 0.3, \"p99\": $4, \"max\": 0.9}}]}" >"$1"
}
bench "$tmp/bb.json" 0.10 50 0.40 200
bench "$tmp/bc.json" 0.11 60 0.48 260
"$BIN" gate --base "$tmp/base.json" --cand "$tmp/w8a8.json" --bench-base "$tmp/bb.json" --bench-cand "$tmp/bc.json" \
  --max-p99-ttft-regression 0.1 --min-throughput-gain 0.2 >"$tmp/o.txt" 2>&1
rc=$?
check "bench: p99 TTFT +20% at concurrency 8 over a 10% limit: rejected" \
  '[ $rc -eq 1 ] && grep -q "^reason: p99_ttft_regression" "$tmp/o.txt" && grep -q "concurrency 8" "$tmp/o.txt"'
check "bench: throughput gain +30% printed as passing" 'grep -E "^  throughput_gain .*0\.3000 .*pass" "$tmp/o.txt" >/dev/null'
"$BIN" gate --base "$tmp/base.json" --cand "$tmp/w8a8.json" --bench-base "$tmp/bb.json" --bench-cand "$tmp/bc.json" >"$tmp/o.txt" 2>&1
check "bench without thresholds: reported as info, accepted" '[ $? -eq 0 ] && grep -q "^  p99_ttft_regression .* info" "$tmp/o.txt"'

# a bucket on one side only / too few items: reported, and the gate fails
echo '{"overall": {"pass_rate": 1, "n": 30}, "buckets": {"a": {"pass_rate": 1, "n": 30}}}' >"$tmp/a.json"
echo '{"overall": {"pass_rate": 1, "n": 35}, "buckets": {"a": {"pass_rate": 1, "n": 30}, "b": {"pass_rate": 1, "n": 5}}}' >"$tmp/ab.json"
"$BIN" gate --base "$tmp/a.json" --cand "$tmp/ab.json" >"$tmp/o.txt" 2>&1
check "bucket only in the candidate: reported, rejected" '[ $? -eq 1 ] && grep -q "bucket_present .*b .*FAIL" "$tmp/o.txt"'
"$BIN" gate --base "$tmp/a.json" --cand "$tmp/a.json" --min-bucket-n 31 >"$tmp/o.txt" 2>&1
check "too few items (--min-bucket-n 31): rejected on bucket_n" '[ $? -eq 1 ] && grep -q "^reason: bucket_n a" "$tmp/o.txt"'

# bad input: exit 2 with a message
bad_input() { # name, expected message, args...
  local name=$1 want=$2; shift 2
  "$BIN" gate "$@" >"$tmp/o.txt" 2>&1
  local rc=$?
  check "$name: exit 2 and '$want'" '[ $rc -eq 2 ] && grep -q -- "$want" "$tmp/o.txt"'
}
echo '{"overall": {"pass_rate": 0.9, "n": 10}}' >"$tmp/nobuckets.json"
echo '{"overall": ' >"$tmp/broken.json"
bad_input "missing --cand" "--cand" --base "$tmp/base.json"
bad_input "missing file" "nope.json" --base "$tmp/base.json" --cand "$tmp/nope.json"
bad_input "malformed JSON" "broken.json" --base "$tmp/base.json" --cand "$tmp/broken.json"
bad_input "missing field" "'buckets'" --base "$tmp/base.json" --cand "$tmp/nobuckets.json"
bad_input "ppl without its pair" "--ppl-cand" --base "$tmp/base.json" --cand "$tmp/w8a8.json" --ppl-base "$tmp/ppl_base.json"
bad_input "kld file without kld keys" "kld_mean" --base "$tmp/base.json" --cand "$tmp/w8a8.json" --kld "$tmp/base.json"
bad_input "threshold out of range" "--bucket-floor" --base "$tmp/base.json" --cand "$tmp/w8a8.json" --bucket-floor 2
echo '{"levels": [{"concurrency": 4, "output_tok_per_s": 10, "ttft_s": {"p99": 1}}]}' >"$tmp/b4.json"
bad_input "bench with no level in common" "no load level in common" --base "$tmp/base.json" --cand "$tmp/w8a8.json" \
  --bench-base "$tmp/bb.json" --bench-cand "$tmp/b4.json"
finish

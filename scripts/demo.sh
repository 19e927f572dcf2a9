#!/usr/bin/env bash
# `make demo`: the acceptance workflow of the seeds on the built-in default
# model (docs/golden.md): plan -> quantize to Q4_0 -> serve the candidate ->
# eval kld and eval golden against the F16 default -> gate, with its verdict
# and reasons. The default model has random weights (synthesized on first
# use into $XDG_CACHE_HOME/nibble), so its absolute pass rates mean nothing;
# the golden set it runs (examples/golden/story.jsonl) holds items derived
# from its own F16 outputs, so what the gate shows is how far the Q4_0
# candidate strays from its baseline.
set -euo pipefail
BIN=${1:-build/nibble}
HERE=$(cd "$(dirname "$0")/.." && pwd)
SET=$HERE/examples/golden/story.jsonl
TEXT=$HERE/examples/golden/sample.txt
work=$(mktemp -d "${TMPDIR:-/tmp}/nibble-demo.XXXXXX")
spid=
cleanup() { [ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# the built-in model is synthesized on first use (a one-token generate makes sure it exists)
"$BIN" generate -p "Once upon a time" -n 1 --temp 0 >/dev/null 2>&1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/nibble
base=$(ls "$cache"/default-*.gguf | head -n 1)
cand=$work/default-Q4_0.gguf

echo "== 1. plan: does the baseline fit this host? (nibble plan --host)"
"$BIN" plan --host "$base" >"$work/plan.txt" 2>&1 || true
grep -E '^(  model|  weights|  KV cache|②|③|           sequences|result)' "$work/plan.txt" || cat "$work/plan.txt"
echo
echo "== 2. quantize the F16 baseline to Q4_0"
"$BIN" quantize "$base" "$cand" --type Q4_0 -q 2>&1 | tail -n 1
echo
echo "== 3. serve the candidate (nibble serve, a free port)"
"$BIN" serve -m "$cand" --port 0 --max-model-len 512 >"$work/serve.log" 2>&1 &
spid=$!
port=
for _ in $(seq 1 600); do
  [ -z "$port" ] && port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/serve.log" | grep -o '[0-9]*$' | head -n 1 || true)
  if [ -n "$port" ] && [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then break; fi
  kill -0 "$spid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
grep 'ready' "$work/serve.log" || true
echo
echo "== 3b. bench serve: a short load ladder (1, 4) against the candidate's server"
echo "\$ nibble bench serve --endpoint http://127.0.0.1:$port --concurrency 1,4 --num-prompts 8 --input-len 24 --output-len 16 --ignore-eos"
"$BIN" bench serve --endpoint "http://127.0.0.1:$port" --concurrency 1,4 --num-prompts 8 --input-len 24 \
  --output-len 16 --ignore-eos 2>/dev/null || echo "(nibble bench serve failed: exit $?)"
echo
echo "== 4. eval kld: the candidate's next-token distributions against the baseline's on the same tokens"
kld_args=()
if "$BIN" eval kld "$base" "$cand" -f "$TEXT" --json >"$work/kld.json" 2>"$work/kld.err"; then
  jq -c '{kld_mean, kld_p99, top1_agreement, ppl_base, ppl_cand, worst_class}' "$work/kld.json" 2>/dev/null || cat "$work/kld.json"
  kld_args=(--kld "$work/kld.json")
else
  echo "   (skipped: $(head -n 1 "$work/kld.err"))"
fi
echo
echo "== 5. eval golden: the baseline in-process, the candidate through its endpoint (same set, greedy, seed 0)"
"$BIN" eval golden "$base" --set "$SET" --out "$work/golden-base" | sed 's/^/   base: /'
"$BIN" eval golden --endpoint "http://127.0.0.1:$port" --set "$SET" --out "$work/golden-cand" | sed 's/^/   cand: /'
echo
echo "== 6. gate: may the Q4_0 candidate replace the F16 baseline? (the seeds' thresholds)"
set +e
"$BIN" gate --base "$work/golden-base/summary.json" --cand "$work/golden-cand/summary.json" "${kld_args[@]}"
verdict=$?
set -e
echo
echo "gate exit code $verdict (0 accept, 1 reject, 2 bad input). Items and summaries were in $work (removed now);"
echo "run the steps yourself with a real model: docs/golden.md."

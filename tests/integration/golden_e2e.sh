#!/usr/bin/env bash
# nibble eval golden end to end on aidreams260K (a real trained model):
#  - the example sets plus JSON, chat and choice items, in-process and with
#    --endpoint against a real `nibble serve --port 0`: the same summary and
#    the same per-item pass/output both ways (choice log-likelihoods within
#    1e-4: the same scorer code, computed in two processes);
#  - choice scoring picks the option a hand computation from `nibble logits`
#    (full-vocabulary logits and log-sum-exp, summed in Python over the
#    option's tokens) says it should, with the same log-likelihoods;
#  - /v1/completions echo + logprobs: null first, text_offset into the text;
#  - bad input exits 2 with a message and leaves nothing in --out:
#    malformed JSONL (line number), unknown check, empty set, unreachable
#    endpoint; a previous --out is left as it was.
set -u
BIN=$1
SHARED=${2:-../shared}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/../lib/check.sh"
for t in curl jq python3; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
M=$SHARED/models/aidreams260K.gguf
[ -f "$M" ] || { echo "SKIP: $M not found"; exit 77; }
export XDG_CACHE_HOME=$tmp/cache
unset OPENAI_API_KEY
spid=
trap '[ -n "$spid" ] && kill -9 $spid 2>/dev/null; rm -rf "$tmp"' EXIT

# ---- the set: the examples + items whose JSON / chat / choice paths run within 128 tokens
cat "$ROOT"/examples/golden/*.jsonl > "$tmp/set.jsonl"
cat >> "$tmp/set.jsonl" <<'JSONL'
{"id": "j1", "bucket": "json_short", "prompt": "{\"a\":", "max_tokens": 8, "check": {"json_valid": true}}
{"id": "j2", "bucket": "json_short", "prompt": "The answer is", "max_tokens": 8, "check": {"json_valid": true}}
{"id": "j3", "bucket": "json_short", "prompt": "[1, 2,", "max_tokens": 6, "check": {"json_schema": {"type": "array", "items": {"type": "number"}}}}
{"id": "c1", "bucket": "chat", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 16, "check": {"any": [{"contains": "the"}, {"contains": "a"}]}}
{"id": "c2", "bucket": "chat", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 8, "stop": ["\n"], "check": {"regex": "\\w+"}}
{"id": "h1", "bucket": "choice", "prompt": "Once upon a time", "check": {"choice": {"options": [", pixels", " dragon", " there"], "answer": 0}}}
{"id": "h2", "bucket": "choice", "prompt": "The little girl", "check": {"choice": {"options": [" ran", " was", " sang"], "answer": 2}}}
JSONL

"$BIN" eval golden "$M" --set "$tmp/set.jsonl" --out "$tmp/local" >"$tmp/local.txt" 2>&1
check "in-process run exits 0" '[ $? -eq 0 ]'
check "in-process wrote items.jsonl and summary.json" '[ -s "$tmp/local/items.jsonl" ] && [ -s "$tmp/local/summary.json" ]'
n=$(grep -c . "$tmp/set.jsonl")
check "one items.jsonl line per item ($n)" '[ "$(wc -l < "$tmp/local/items.jsonl")" -eq "$n" ]'
check "summary carries the model identity (path, sha256, type)" \
  '[ "$(jq -r .model.sha256 "$tmp/local/summary.json")" = "$(sha256sum "$M" | cut -d" " -f1)" ] && [ "$(jq -r .model.type "$tmp/local/summary.json")" = gguf ]'
check "pass rates are not all zero (story bucket > 0)" '[ "$(jq ".buckets.story.n_pass" "$tmp/local/summary.json")" -gt 0 ]'
check "json_valid_rate counts the JSON items only" \
  '[ "$(jq .n_json "$tmp/local/summary.json")" -eq "$(grep -c json_ "$tmp/set.jsonl")" ]'

# ---- the same set against a real server
"$BIN" serve -m "$M" --port 0 >"$tmp/serve.log" 2>&1 &
spid=$!
wait_ready "$spid" "$tmp/serve.log"
port=$PORT
check "server started" '[ -n "$port" ]'
"$BIN" eval golden --endpoint "http://127.0.0.1:$port" --set "$tmp/set.jsonl" --out "$tmp/remote" --parallel 6 \
  >"$tmp/remote.txt" 2>&1
check "endpoint run exits 0" '[ $? -eq 0 ]'
check "endpoint summary names the endpoint and the served model" \
  '[ "$(jq -r .endpoint.model "$tmp/remote/summary.json")" = aidreams260K ]'
norm='del(.model, .endpoint, .parameters.parallel)'
check "same summary in-process and through the endpoint" \
  'diff <(jq -S "$norm" "$tmp/local/summary.json") <(jq -S "$norm" "$tmp/remote/summary.json")'
check "same pass/output per item both ways" \
  'diff <(jq -c "[.id, .pass, .output]" "$tmp/local/items.jsonl") <(jq -c "[.id, .pass, .output]" "$tmp/remote/items.jsonl")'
check "same choice log-likelihoods both ways (1e-4)" 'python3 - "$tmp/local/items.jsonl" "$tmp/remote/items.jsonl" <<"PY"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
n = 0
for x, y in zip(a, b):
    if "loglik" in x:
        n += 1
        assert all(abs(p - q) < 1e-4 for p, q in zip(x["loglik"], y["loglik"])), (x, y)
assert n >= 8, n
PY'

# ---- echo + logprobs on nibble serve
curl -s -m 30 "http://127.0.0.1:$port/v1/completions" \
  -d '{"prompt": "Once upon a time", "max_tokens": 0, "echo": true, "logprobs": 1}' >"$tmp/echo.json"
check "echo: text is the prompt, first logprob null, one top alternative" \
  '[ "$(jq -r ".choices[0].text" "$tmp/echo.json")" = "Once upon a time" ] && [ "$(jq ".choices[0].logprobs.token_logprobs[0]" "$tmp/echo.json")" = null ] && [ "$(jq ".choices[0].logprobs.top_logprobs[1] | length" "$tmp/echo.json")" = 1 ]'
check "echo: text_offset ends inside the text, usage has 0 completion tokens" \
  '[ "$(jq ".choices[0].logprobs.text_offset[-1] < 16" "$tmp/echo.json")" = true ] && [ "$(jq ".usage.completion_tokens" "$tmp/echo.json")" = 0 ]'
code=$(curl -s -m 30 -o "$tmp/e.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" \
  -d '{"prompt": "Hi", "max_tokens": 0}')
check "max_tokens 0 without echo -> 400 naming max_tokens" '[ "$code" = 400 ] && grep -q "max_tokens" "$tmp/e.json"'
kill $spid; wait $spid 2>/dev/null; spid=

# ---- choice by hand from `nibble logits`
check "choice picks what nibble logits says (hand computation)" 'python3 - "$BIN" "$M" "$tmp/local/items.jsonl" <<"PY"
import json, subprocess, sys
BIN, M, items = sys.argv[1:4]
got = {x["id"]: x for x in map(json.loads, open(items))}
def ids(text):
    out = subprocess.run([BIN, "tokenize", "-m", M, "-p", text, "--ids"], capture_output=True, check=True, text=True).stdout
    return json.loads(out)
def loglik(prompt, option):
    p, f = ids(prompt), ids(prompt + option)
    assert f[:len(p)] == p, (p, f)   # these options start a new token after the prompt
    out = subprocess.run([BIN, "logits", "-m", M, "--ids", json.dumps(f), "--top", "512"],
                         capture_output=True, check=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    s = 0.0
    for i in range(len(p), len(f)):          # token i is predicted at position i - 1
        r = rows[i - 1]
        logit = dict((t, v) for t, v in r["top512"])[f[i]]
        s += logit - r["logsumexp"]
    return s
for iid, prompt, opts in [("h1", "Once upon a time", [", pixels", " dragon", " there"]),
                          ("h2", "The little girl", [" ran", " was", " sang"])]:
    ll = [loglik(prompt, o) for o in opts]
    pick = max(range(len(ll)), key=lambda k: (ll[k], -k))
    assert got[iid]["output"] == opts[pick], (iid, ll, got[iid])
    assert all(abs(a - b) < 2e-3 for a, b in zip(ll, got[iid]["loglik"])), (ll, got[iid]["loglik"])
    print(iid, "hand", [round(x, 4) for x in ll], "picked", pick, "pass", got[iid]["pass"])
PY'

# ---- bad input: exit 2, a message, nothing in --out
bad_case() { # name, set text, extra args, expected message regex
  local name=$1 text=$2 args=$3 want=$4
  printf '%s' "$text" >"$tmp/bad.jsonl"
  rm -rf "$tmp/bad_out"
  "$BIN" eval golden "$M" --set "$tmp/bad.jsonl" --out "$tmp/bad_out" $args >"$tmp/bad.txt" 2>&1
  local rc=$?
  check "$name: exit 2" '[ $rc -eq 2 ]'
  check "$name: message matches '$want'" 'grep -Eq "$want" "$tmp/bad.txt"'
  check "$name: nothing in --out" '[ ! -e "$tmp/bad_out" ] && ! ls -d "$tmp"/bad_out.tmp-* >/dev/null 2>&1'
}
good='{"id": "a", "bucket": "b", "prompt": "p", "check": {"exact": "x"}}'
bad_case "malformed JSONL" "$good
{\"id\": \"b\", \"bucket\": \"b\", \"prompt\": \"p\", \"check\": {\"exact\": \"x\"}
" "" 'bad.jsonl:2: malformed JSON'
bad_case "unknown check" '{"id": "a", "bucket": "b", "prompt": "p", "check": {"similar": "x"}}' "" "unknown check 'similar'"
bad_case "empty set" '' "" 'no items'
"$BIN" eval golden --endpoint http://127.0.0.1:1 --set "$tmp/set.jsonl" --out "$tmp/bad_out" >"$tmp/bad.txt" 2>&1
rc=$?
check "unreachable endpoint: exit 2" '[ $rc -eq 2 ]'
check "unreachable endpoint: message names it" 'grep -q "not reachable" "$tmp/bad.txt"'
check "unreachable endpoint: nothing in --out" '[ ! -e "$tmp/bad_out" ]'
# a failed run leaves a previous output directory as it was
before=$(md5sum "$tmp/local/summary.json")
printf '%s' '{"id": "a"' >"$tmp/bad.jsonl"
"$BIN" eval golden "$M" --set "$tmp/bad.jsonl" --out "$tmp/local" >/dev/null 2>&1
check "a failed run leaves the previous --out untouched" '[ "$(md5sum "$tmp/local/summary.json")" = "$before" ]'
"$BIN" eval golden "$M" --set "$tmp/set.jsonl" --json >"$tmp/stdout.json" 2>/dev/null
check "--json prints the summary" '[ "$(jq .overall.n "$tmp/stdout.json")" -eq "$n" ]'
finish

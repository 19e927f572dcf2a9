#!/usr/bin/env bash
# Structured outputs end to end on the built-in random-weight model: 200
# json_schema generations with random seeds (completions and chat) all parse
# and validate, 50 with every `format` nibble enforces parse as those formats
# (Python's datetime / ipaddress / uuid), guided_choice / guided_regex
# outputs match, and the refusals: an unsupported keyword (also a `format`
# nibble does not know, and a keyword beside
# $ref / enum that would be ignored) is a 400 naming it, two constraints at
# once are a 400. Loopback only; every wait bounded. NB_TEST_QUICK=1 (the
# ThreadSanitizer run, make test-tsan) makes it 16 generations, all 16 at
# once.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
for t in curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
export XDG_CACHE_HOME=$tmp/cache
unset NIBBLE_API_KEY
"$BIN" serve --port 0 --max-model-len 640 >"$tmp/log" 2>&1 &
PID=$!
trap 'kill -9 $PID 2>/dev/null; rm -rf "$tmp"' EXIT
wait_ready "$PID" "$tmp/log"
check "server ready" '[ -n "$PORT" ]'

# post PATH BODY [SECONDS]: the response into $tmp/b, the HTTP status on stdout
post() { curl -s -m "${3:-30}" -o "$tmp/b" -w '%{http_code}' "http://127.0.0.1:$PORT$1" -d "$2"; }

N=200
[ -n "${NB_TEST_QUICK:-}" ] && N=16
timeout 600 python3 "$HERE/clients/structured.py" "$PORT" $N >"$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
check "$N constrained generations all valid (json_schema, guided_choice, guided_regex)" '[ $rc -eq 0 ]'

code=$(post /v1/completions '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","allOf":[{}]}}}}')
check "unsupported keyword: 400 naming it" '[ "$code" = 400 ] && grep -q allOf "$tmp/b" && grep -q unsupported_schema "$tmp/b"'
code=$(post /v1/completions '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"when":{"type":"string","format":"color"}}}}}}')
check "a format nibble does not enforce: 400 naming it and its path, not accepted as an annotation" \
  '[ "$code" = 400 ] && grep -q "#/properties/when/format" "$tmp/b" && grep -q "color" "$tmp/b" && grep -q unsupported_schema "$tmp/b"'
code=$(post /v1/completions '{"prompt":"x","guided_json":{"type":"object","properties":{"c":{"enum":["a","bb"],"minLength":2}}}}')
check "a keyword beside enum that not every value satisfies: 400 naming it (it was ignored)" \
  '[ "$code" = 400 ] && grep -q "#/properties/c/minLength" "$tmp/b" && grep -q unsupported_schema "$tmp/b"'
code=$(post /v1/completions '{"prompt":"x","guided_json":{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":3}}')
check "a keyword beside \$ref: 400 naming it (it was ignored)" \
  '[ "$code" = 400 ] && grep -q "#/maxLength" "$tmp/b" && grep -q "ref" "$tmp/b"'
code=$(post /v1/completions '{"prompt":"x","max_tokens":16,"seed":3,"guided_json":{"type":"string","enum":["yes","no"],"maxLength":3}}' 60)
check "keywords beside enum that every value satisfies: accepted, the output one of the values" \
  '[ "$code" = 200 ] && python3 -c "import json,sys; t=json.load(open(sys.argv[1]))[\"choices\"][0][\"text\"]; sys.exit(json.loads(t) not in (\"yes\",\"no\"))" "$tmp/b" || { cat "$tmp/b"; false; }'
code=$(post /v1/completions '{"prompt":"x","guided_regex":"a+","guided_choice":["a"]}')
check "two constraints: 400" '[ "$code" = 400 ] && grep -q "give one" "$tmp/b"'
code=$(post /v1/completions '{"prompt":"x","guided_regex":"(unclosed"}')
check "bad regex: 400" '[ "$code" = 400 ] && grep -q guided_regex "$tmp/b"'
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":40,"stream":true,"response_format":{"type":"json_object"}}')
python3 - "$tmp/b" <<'PY' >"$tmp/s" 2>&1; rc=$?
import json, sys
text = ""
for line in open(sys.argv[1]):
    if line.startswith("data: ") and line.strip() != "data: [DONE]":
        d = json.loads(line[6:])
        for c in d.get("choices", []):
            text += (c.get("delta") or {}).get("content") or ""
assert isinstance(json.loads(text), dict), text
PY
check "streamed json_object reassembles to an object" '[ "$code" = 200 ] && [ $rc -eq 0 ]'
finish

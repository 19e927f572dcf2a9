#!/usr/bin/env bash
# nibble template and --chat-template end to end: the CLI renders a real
# template exactly as jinja2 did (../shared/templates cases), exits 2 with
# the template's own message when it raises; nibble serve with
# --chat-template runs that template for /v1/chat/completions (a raise is a
# 400 carrying the message; tools and chat_template_kwargs are accepted).
set -u
BIN=$1
SHARED=${2:-../shared}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
for t in curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
T=$SHARED/templates
[ -d "$T" ] || { echo "SKIP: $T not found"; exit 77; }

# case N of a cases file -> ctx.json, want.txt (or want_err.txt)
split_case() {
  python3 - "$1" "$2" "$tmp" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
json.dump(c["context"], open(sys.argv[3] + "/ctx.json", "w"))
if "expected" in c: open(sys.argv[3] + "/want.txt", "w").write(c["expected"])
else: open(sys.argv[3] + "/want_err.txt", "w").write(c["expected_error"])
PY
}

# Llama 3.1 with tools: the date preamble (strftime_now) and the tool list
split_case "$T/meta-llama-Llama-3.1-8B-Instruct.cases.json" 3
"$BIN" template "$T/meta-llama-Llama-3.1-8B-Instruct.jinja" --context "$tmp/ctx.json" --now 2026-11-29T12:00:00 \
  >"$tmp/got.txt" 2>"$tmp/err"; rc=$?
check "Llama 3.1 tools case renders byte-exact (exit 0)" '[ $rc -eq 0 ] && cmp -s "$tmp/got.txt" "$tmp/want.txt"'

# Gemma 2 with a system message raises
split_case "$T/google-gemma-2-2b-it.cases.json" 1
"$BIN" template "$T/google-gemma-2-2b-it.jinja" --context "$tmp/ctx.json" >"$tmp/got.txt" 2>"$tmp/err"; rc=$?
check "a template's raise_exception exits 2 with its message" \
  '[ $rc -eq 2 ] && grep -qF "$(cat "$tmp/want_err.txt")" "$tmp/err" && [ ! -s "$tmp/got.txt" ]'

# a built-in by name, stdin context
echo '{"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":true}' |
  "$BIN" template chatml --context - >"$tmp/got.txt"; rc=$?
printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n' >"$tmp/want.txt"
check "built-in chatml by name, context on stdin" '[ $rc -eq 0 ] && cmp -s "$tmp/got.txt" "$tmp/want.txt"'

# --chat joins text parts for a template that concatenates content
echo '{"messages":[{"role":"user","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}]}' >"$tmp/parts.json"
"$BIN" template chatml --context "$tmp/parts.json" --chat >"$tmp/got.txt"; rc=$?
check "--chat flattens text parts" '[ $rc -eq 0 ] && grep -q "^A$" "$tmp/got.txt" && grep -q "^B<|im_end|>" "$tmp/got.txt"'
"$BIN" template chatml --context "$tmp/parts.json" >/dev/null 2>"$tmp/err"; rc=$?
check "without --chat the list reaches the template (jinja2's TypeError)" \
  '[ $rc -eq 2 ] && grep -q "can only concatenate str" "$tmp/err"'

# usage errors
"$BIN" template chatml >/dev/null 2>"$tmp/err"; rc=$?
check "missing --context exits 2" '[ $rc -eq 2 ] && grep -q -- "--context" "$tmp/err"'
"$BIN" template no-such-template --context "$tmp/parts.json" >/dev/null 2>"$tmp/err"; rc=$?
check "unknown template exits 2 listing the built-ins" '[ $rc -eq 2 ] && grep -q "chatml" "$tmp/err"'
printf '{%% for x in %%}' >"$tmp/bad.jinja"
"$BIN" template "$tmp/bad.jinja" --context "$tmp/parts.json" >/dev/null 2>"$tmp/err"; rc=$?
check "a syntax error exits 2 naming the line" '[ $rc -eq 2 ] && grep -q "line 1" "$tmp/err"'
"$BIN" template chatml --context "$tmp/parts.json" --now yesterday >/dev/null 2>"$tmp/err"; rc=$?
check "bad --now exits 2" '[ $rc -eq 2 ] && grep -q -- "--now" "$tmp/err"'

# --- serve --chat-template ---------------------------------------------------
"$BIN" serve --chat-template "$tmp/nope.jinja" --port 0 >/dev/null 2>"$tmp/err"; rc=$?
check "serve --chat-template with a missing file exits 2" '[ $rc -eq 2 ] && grep -q "nope.jinja" "$tmp/err"'
M=$SHARED/models/aidreams260K.gguf
if [ ! -f "$M" ]; then echo "SKIP: $M not found (serve part)"; finish; exit $?; fi
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
unset NIBBLE_API_KEY
"$BIN" serve "$M" --chat-template "$T/google-gemma-2-2b-it.jinja" --port 0 --max-model-len 128 -t 2 >"$tmp/s.log" 2>&1 &
pid=$!
wait_ready "$pid" "$tmp/s.log"
check "server with --chat-template is ready and says so" 'grep -q "chat template: --chat-template" "$tmp/s.log"'
U=http://127.0.0.1:$PORT/v1/chat/completions
code=$(curl -m 60 -s -o "$tmp/r1" -w '%{http_code}' "$U" \
  -d '{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}],"max_tokens":2}')
check "the template's raise_exception is a 400 with its message" \
  '[ "$code" = 400 ] && grep -q "System role not supported" "$tmp/r1"'
code=$(curl -m 60 -s -o "$tmp/r2" -w '%{http_code}' "$U" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0,
       "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
       "chat_template_kwargs":{"enable_thinking":false}}')
check "tools and chat_template_kwargs are accepted (200)" \
  '[ "$code" = 200 ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))[\"choices\"][0][\"message\"]" "$tmp/r2"'
code=$(curl -m 60 -s -o "$tmp/r3" -w '%{http_code}' "$U" -d '{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":5}')
check "chat_template_kwargs must be an object (400)" '[ "$code" = 400 ] && grep -q chat_template_kwargs "$tmp/r3"'
kill $pid 2>/dev/null
wait $pid 2>/dev/null
pid=
finish

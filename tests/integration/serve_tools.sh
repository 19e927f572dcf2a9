#!/usr/bin/env bash
# Tool calls end to end on the built-in random-weight model (clients/tools.py):
# with the model's generic format, and with Qwen 2.5's template from
# ../shared/templates (the Hermes <tool_call> format) when it is there.
# Constrained calls (tool_choice required / named) over random seeds, the
# streamed deltas against the whole answer, the round trip, the 400s.
# NB_TEST_QUICK=1 (the ThreadSanitizer run, make test-tsan) makes it 4
# constrained calls instead of 24 and leaves the Hermes-format run (12) to
# the Release build's run: the requests come one at a time, so the second format
# adds parsing, not threads, and under TSan it took a minute.
set -u
BIN=$1
SHARED=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
for t in curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
export XDG_CACHE_HOME=$tmp/cache
unset NIBBLE_API_KEY
N_GENERIC=24 N_HERMES=12
[ -n "${NB_TEST_QUICK:-}" ] && N_GENERIC=4
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$tmp"' EXIT

serve() { # serve LOG [flags]: starts the server, sets PORT
  local log=$1; shift
  "$BIN" serve --port 0 "$@" >"$log" 2>&1 &
  PID=$!
  wait_ready "$PID" "$log"
}

serve "$tmp/log" --max-model-len 512
check "server ready" '[ -n "$PORT" ]'
check "startup names the tool-call format" 'grep -q "tool calls: generic format" "$tmp/log"'
timeout 600 python3 "$HERE/clients/tools.py" "$PORT" $N_GENERIC generic >"$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
check "generic format: constrained calls, streaming, round trip, refusals" '[ $rc -eq 0 ]'
# one raw curl: the whole answer's shape
curl -s -m 60 "http://127.0.0.1:$PORT/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],
  "tools":[{"type":"function","function":{"name":"ping"}}],"tool_choice":"required","max_tokens":40}' >"$tmp/b"
check "curl: message.tool_calls[0] is ping with arguments \"{}\" and finish_reason tool_calls" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=d[\"choices\"][0]; t=c[\"message\"][\"tool_calls\"][0]; assert c[\"finish_reason\"]==\"tool_calls\" and t[\"function\"]=={\"name\":\"ping\",\"arguments\":\"{}\"} and c[\"message\"][\"content\"] is None, d" "$tmp/b"'
kill -TERM $PID; wait $PID; PID=

if [ -n "${NB_TEST_QUICK:-}" ]; then
  echo "NB_TEST_QUICK: the Hermes-format run is left to the Release build's run of this test"
  finish; exit
fi
Q=$SHARED/templates/Qwen-Qwen2.5-7B-Instruct.jinja
[ -n "$SHARED" ] && [ -f "$Q" ] || skip_rest "$Q not found: the Hermes-format run needs ../shared/templates"
serve "$tmp/log2" --max-model-len 1536 --chat-template "$Q"
check "server ready with Qwen 2.5's template" '[ -n "$PORT" ]'
check "startup names the hermes format" 'grep -q "tool calls: hermes format" "$tmp/log2"'
timeout 600 python3 "$HERE/clients/tools.py" "$PORT" $N_HERMES hermes >"$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
check "hermes format (<tool_call>): constrained calls, streaming, round trip, refusals" '[ $rc -eq 0 ]'
kill -TERM $PID; wait $PID; PID=
finish

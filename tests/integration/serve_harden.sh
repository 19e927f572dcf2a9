#!/usr/bin/env bash
# nibble serve under hostile clients and careless operators (issue 15):
# framing (duplicate Content-Length, binary request line, no Host), the key
# checked before the body, routing on the exact path, unknown model 404,
# CORS, the access log, the prompt byte bound, the request deadline, the
# connection limit (503 + Retry-After), 429 + Retry-After, 503 while the
# model loads and the shutdown timeout (both through the test-only delays
# NIBBLE_TEST_LOAD_DELAY_MS / NIBBLE_TEST_TOKEN_DELAY_MS). Raw-socket
# clients in clients/harden.py; every wait is bounded; 127.0.0.1 only.
set -u
BIN=$1
SHARED=${2:-../shared}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
for t in curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
unset NIBBLE_API_KEY NIBBLE_TEST_LOAD_DELAY_MS NIBBLE_TEST_TOKEN_DELAY_MS
curl() { command curl -m 60 "$@"; }
H() { PYTHONUNBUFFERED=1 timeout 240 python3 "$HERE/clients/harden.py" "$@"; }

# start_server LOG ARGS...: sets PID and PORT once the port is known; waits
# for /health 200 unless NOWAIT is set (60 s at most).
start_server() {
  local log=$1; shift
  "$BIN" serve "$@" --port 0 >"$log" 2>&1 &
  PID=$!; pids+=("$PID")
  wait_ready "$PID" "$log" ${NOWAIT:+listening}
}
group() { # group NAME PORT KEY ARGS...: runs a harden.py group, one check per line
  local name=$1; shift
  H "$@" >"$tmp/g.$name" 2>&1; local rc=$?
  cat "$tmp/g.$name"
  grep -q "^FAIL" "$tmp/g.$name" && fails=$((fails + 1))
  [ $rc -ne 0 ] && ! grep -q "^FAIL" "$tmp/g.$name" && bad "$name: harden.py exited $rc"
  passes=$((passes + $(grep -c '^ok:' "$tmp/g.$name")))
}

if [ -f "$SHARED/models/aidreams260K.gguf" ]; then M=$SHARED/models/aidreams260K.gguf; else M=; fi

# --- flags ---
"$BIN" serve --request-timeout 0 >/dev/null 2>"$tmp/e"; rc=$?
check "--request-timeout 0 exits 2 naming the flag" '[ $rc -eq 2 ] && grep -q -- "--request-timeout" "$tmp/e"'
"$BIN" serve --access-log /nonexistent-dir/x.log --port 0 >/dev/null 2>"$tmp/e"; rc=$?
check "--access-log in a missing directory exits non-zero naming it" '[ $rc -ne 0 ] && grep -q "nonexistent-dir" "$tmp/e"'
"$BIN" serve --help >"$tmp/help"
check "--help lists --request-timeout, --allowed-origins, --access-log" \
  'grep -q -- --request-timeout "$tmp/help" && grep -q -- --allowed-origins "$tmp/help" && grep -q -- --access-log "$tmp/help"'

# --- server A: key, CORS, access log, small limits ---
KEY=k-$$
ORIGIN=http://app.example
NIBBLE_API_KEY=$KEY start_server "$tmp/a.log" ${M:+"$M"} --max-model-len 128 -t 1 --allowed-origins "$ORIGIN,http://b.example" \
  --access-log "$tmp/access.log" --request-timeout 2 --max-connections 48
if [ $? -ne 0 ]; then bad "server A did not start: $(tail -n 5 "$tmp/a.log")"; finish; exit 1; fi
ok "server A ready on $PORT"
group framing "$PORT" "$KEY" framing
group auth "$PORT" "$KEY" auth
group routing "$PORT" "$KEY" routing
group model "$PORT" "$KEY" model
group cors "$PORT" "$KEY" cors "$ORIGIN"
group prompt "$PORT" "$KEY" prompt
group deadline "$PORT" "$KEY" deadline 2
group limit "$PORT" "$KEY" limit 48
curl -s "http://127.0.0.1:$PORT/metrics" >"$tmp/metrics"
check "/metrics counts the HTTP layer's refusals (limit, deadline, framing) and open connections" \
  'grep -qE "^nibble:http_refused_total\{.*reason=\"connection_limit\"\} [1-9]" "$tmp/metrics" &&
   grep -qE "^nibble:http_refused_total\{.*reason=\"request_timeout\"\} [1-9]" "$tmp/metrics" &&
   grep -qE "^nibble:http_refused_total\{.*reason=\"bad_framing\"\} [1-9]" "$tmp/metrics" &&
   grep -qE "^nibble:http_connections_open\{" "$tmp/metrics"'

# access log: one line per request, no prompt text
curl -s -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/completions" \
  -d '{"prompt":"SECRET-PROMPT-MARKER says","max_tokens":3}' >/dev/null
curl -sN -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"SECRET-PROMPT-MARKER"}],"max_tokens":3,"stream":true}' >/dev/null
sleep 0.3
check "access log: the completion's line has method, path, status, tokens, latency" \
  'grep -E "POST /v1/completions 200 prompt_tokens=[1-9][0-9]* completion_tokens=3 latency_ms=[0-9.]+" "$tmp/access.log" >/dev/null'
check "access log: the stream's line is written when it ends" \
  'grep -E "POST /v1/chat/completions 200 prompt_tokens=[1-9][0-9]* completion_tokens=[1-3] " "$tmp/access.log" >/dev/null'
check "access log: 401s, 404s and 400s are logged too" \
  'grep -q " 401 " "$tmp/access.log" && grep -q " 404 " "$tmp/access.log" && grep -q " 400 " "$tmp/access.log"'
check "access log: never the prompt text" '! grep -q "SECRET-PROMPT-MARKER" "$tmp/access.log"'
check "access log: long paths are capped, control bytes escaped" '[ $(awk "{ print length(\$0) }" "$tmp/access.log" | sort -n | tail -n 1) -lt 500 ]'
kill -TERM $PID; wait $PID; rc=$?
check "server A: SIGTERM exit 0" '[ $rc -eq 0 ]'

# --- server B: no CORS configured; one sequence, one waiting slot -> 429 ---
NIBBLE_TEST_TOKEN_DELAY_MS=20 start_server "$tmp/b.log" ${M:+"$M"} --max-model-len 128 -t 1 --max-num-seqs 1 --max-waiting 1
if [ $? -ne 0 ]; then bad "server B did not start: $(tail -n 5 "$tmp/b.log")"; else
  group nocors "$PORT" "" nocors
  group retry429 "$PORT" "" retry429
  kill -TERM $PID; wait $PID
fi

# --- server C: 503 while loading (test-only load delay) ---
NOWAIT=1 NIBBLE_TEST_LOAD_DELAY_MS=15000 start_server "$tmp/c.log" ${M:+"$M"} --max-model-len 128 -t 1
if [ $? -ne 0 ]; then bad "server C did not start: $(tail -n 5 "$tmp/c.log")"; else
  check "the load delay is announced as test-only" 'grep -q "NIBBLE_TEST_LOAD_DELAY_MS.*test-only" "$tmp/c.log"'
  group loading "$PORT" "" loading
  for _ in $(seq 1 400); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && break; sleep 0.1
  done
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")
  check "after the delay /health is 200" '[ "$code" = 200 ]'
  kill -TERM $PID; wait $PID
fi

# --- server D: the shutdown timeout aborts a stream that cannot finish in time ---
NIBBLE_TEST_TOKEN_DELAY_MS=100 start_server "$tmp/d.log" ${M:+"$M"} --max-model-len 128 -t 1 --shutdown-timeout 1
if [ $? -ne 0 ]; then bad "server D did not start: $(tail -n 5 "$tmp/d.log")"; else
  curl -sN -m 60 "http://127.0.0.1:$PORT/v1/completions" \
    -d '{"prompt":"Once upon a time","max_tokens":100,"ignore_eos":true,"stream":true}' >"$tmp/stream" &
  cpid=$!
  for _ in $(seq 1 100); do grep -q '^data: {' "$tmp/stream" 2>/dev/null && break; sleep 0.1; done
  t0=$(date +%s.%N)
  kill -TERM $PID; wait $PID; rc=$?
  t1=$(date +%s.%N)
  wait $cpid
  secs=$(python3 -c "print(round($t1 - $t0, 2))")
  check "shutdown with a 10 s stream and --shutdown-timeout 1: exit 0 in ${secs}s (bound 8 s)" \
    '[ $rc -eq 0 ] && python3 -c "import sys; sys.exit(0 if $secs < 8 else 1)"'
  check "the log says the timeout was reached" 'grep -q "shutdown-timeout reached" "$tmp/d.log"'
  check "the stream got the abort error event and [DONE]" \
    'grep -q "\"code\":\"aborted\"" "$tmp/stream" && tail -n 2 "$tmp/stream" | grep -q "data: \[DONE\]"'
fi
finish

#!/usr/bin/env bash
# nibble serve's side of operating behind a balancer (docs/operations.md):
# /health JSON; POST /admin/drain needs the API key (401 without, 405 on
# GET; with no key configured, a loopback client: 403 from another address); after it /health answers 503 "draining" at once, a stream in flight
# completes, a request arriving during the drain is still served, then the
# process exits 0 by itself; the startup breakdown and --warmup are printed
# and exported; --log-stats-interval prints vLLM's line; aborts by reason.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
command -v curl >/dev/null && command -v python3 >/dev/null || { echo "SKIP: curl/python3 missing"; exit 77; }
unset OPENAI_API_KEY
export NIBBLE_API_KEY=drain-key-$$
AUTH="Authorization: Bearer $NIBBLE_API_KEY"
PID=
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

NIBBLE_TEST_TOKEN_DELAY_MS=60 "$BIN" serve --port 0 --max-model-len 128 -t 1 --warmup 3 --log-stats-interval 1 \
  --shutdown-timeout 60 >"$tmp/s.log" 2>&1 &
PID=$!; wait_ready "$PID" "$tmp/s.log"
U=http://127.0.0.1:$PORT
check "server ready" '[ -n "$PORT" ] && kill -0 $PID 2>/dev/null || { tail -n 5 "$tmp/s.log"; false; }'

curl -s -m 5 "$U/health" >"$tmp/h1"
check "/health JSON: $(cat "$tmp/h1")" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"status\"]==\"ok\" and d[\"model\"]==\"nibble-default\"; assert set(d)=={\"status\",\"model\",\"running\",\"waiting\",\"kv_usage\"}" "$tmp/h1"'
check "startup breakdown printed: $(grep -o 'startup:.*' "$tmp/s.log")" \
  'grep -q "startup: read [0-9.]* s, repack [0-9.]* s, kv_alloc [0-9.]* s, warmup [0-9.]* s, total [0-9.]* s" "$tmp/s.log"'
curl -s -m 5 "$U/metrics" >"$tmp/m0"
check "--warmup 3 ran 3 decode steps before ready (generation_tokens_total 3) and is exported" \
  'grep -q "^nibble:generation_tokens_total{.*} 3$" "$tmp/m0" && grep -q "nibble:startup_seconds{.*phase=\"warmup\"} 0\.[0-9]*[1-9]" "$tmp/m0"'

# a client that leaves mid-stream: counted as an abort with reason client_disconnect
curl -sN -m 1 "$U/v1/completions" -H "$AUTH" -d '{"prompt":"Once","max_tokens":100,"ignore_eos":true,"stream":true}' >/dev/null 2>&1
for _ in $(seq 1 50); do
  curl -s -m 5 "$U/metrics" | grep -q 'request_aborts_total{.*reason="client_disconnect"} 1' && break; sleep 0.1
done
check "a client that left mid-stream: request_aborts_total{reason=\"client_disconnect\"} 1" \
  'curl -s -m 5 "$U/metrics" | grep -q "request_aborts_total{.*reason=\"client_disconnect\"} 1"'

# a stream in flight (110 tokens x 60 ms), then drain
curl -sN -m 60 "$U/v1/completions" -H "$AUTH" -d '{"prompt":"Once","max_tokens":110,"ignore_eos":true,"stream":true}' >"$tmp/stream" &
cpid=$!
for _ in $(seq 1 100); do grep -q '^data: {' "$tmp/stream" 2>/dev/null && break; sleep 0.05; done
check "POST /admin/drain without the key: 401" '[ "$(curl -s -m 5 -o /dev/null -w "%{http_code}" -X POST "$U/admin/drain")" = 401 ]'
check "GET /admin/drain: 405" '[ "$(curl -s -m 5 -o /dev/null -w "%{http_code}" -H "$AUTH" "$U/admin/drain")" = 405 ]'
check "/health still 200 before the drain" '[ "$(curl -s -m 5 -o /dev/null -w "%{http_code}" "$U/health")" = 200 ]'
code=$(curl -s -m 5 -o "$tmp/d" -w '%{http_code}' -X POST -H "$AUTH" "$U/admin/drain")
check "POST /admin/drain with the key: 202 $(cat "$tmp/d")" '[ "$code" = 202 ] && grep -q "\"status\":\"draining\"" "$tmp/d" && grep -q "\"in_flight\":1" "$tmp/d"'
code=$(curl -s -m 5 -o "$tmp/h2" -w '%{http_code}' "$U/health")
check "/health at once: 503 $(cat "$tmp/h2")" '[ "$code" = 503 ] && grep -q "\"status\":\"draining\"" "$tmp/h2" && grep -q "\"running\":1" "$tmp/h2"'
code=$(curl -s -m 30 -o "$tmp/late" -w '%{http_code}' "$U/v1/completions" -H "$AUTH" -d '{"prompt":"Hi","max_tokens":3}')
check "a request arriving during the drain is served: $code" '[ "$code" = 200 ] && grep -q "\"finish_reason\"" "$tmp/late"'
wait $cpid
check "the stream in flight completes" 'tail -n 2 "$tmp/stream" | grep -q "data: \[DONE\]" && ! grep -q "\"error\"" "$tmp/stream"'
for _ in $(seq 1 100); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
alive=yes; kill -0 $PID 2>/dev/null || alive=no
wait $PID 2>/dev/null; rc=$?
check "after the drain the server exits 0 by itself" '[ $alive = no ] && [ $rc -eq 0 ] && grep -q "POST /admin/drain: draining" "$tmp/s.log" && grep -q "stopped" "$tmp/s.log"'
PID=
check "--log-stats-interval 1: vLLM-style stats lines" \
  'grep -q "Avg prompt throughput: [0-9.]* tokens/s, Avg generation throughput: [0-9.]* tokens/s, Running: [0-9]* reqs, Waiting: [0-9]* reqs, KV cache usage: [0-9.]*%, Prefix cache hit rate: [0-9.]*%, Preemptions: 0 (+0)" "$tmp/s.log"'

# Without an API key POST /admin/drain is accepted from loopback only.
unset NIBBLE_API_KEY
# From another address of this machine (no root needed: the client's source
# is the address it connects to), when it has one; refused with 403.
IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -n 1)
if [ -n "$IP" ]; then
  "$BIN" serve --host "$IP" --port 0 --max-model-len 64 -t 1 >"$tmp/n.log" 2>&1 &
  PID=$!
  NPORT=
  for _ in $(seq 1 600); do
    NPORT=$(grep -o "listening on http://$IP:[0-9]*" "$tmp/n.log" | grep -o '[0-9]*$' | head -n 1)
    [ -n "$NPORT" ] && [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$IP:$NPORT/health")" = 200 ] && break
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  code=$(curl -s -m 5 -o "$tmp/nd" -w '%{http_code}' -X POST "http://$IP:$NPORT/admin/drain")
  check "no API key, POST /admin/drain from $IP (not loopback): 403 saying to set --api-key: $(cat "$tmp/nd")" \
    '[ "$code" = 403 ] && grep -q -- "--api-key" "$tmp/nd" && grep -q drain_not_allowed "$tmp/nd"'
  check "... and the server was not drained" '[ "$(curl -s -m 5 -o /dev/null -w "%{http_code}" "http://$IP:$NPORT/health")" = 200 ]'
  kill -TERM $PID; wait $PID; PID=
else
  echo "skip: this machine has no non-loopback IPv4 address to send a drain from (test_admin checks the address test)"
fi
"$BIN" serve --port 0 --max-model-len 64 -t 1 >"$tmp/l.log" 2>&1 &
PID=$!; wait_ready "$PID" "$tmp/l.log"
code=$(curl -s -m 5 -o "$tmp/ld" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/admin/drain")
check "no API key, POST /admin/drain from 127.0.0.1: 202" '[ "$code" = 202 ] && grep -q "\"status\":\"draining\"" "$tmp/ld"'
for _ in $(seq 1 100); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
alive=yes; kill -0 $PID 2>/dev/null || alive=no
wait $PID 2>/dev/null; rc=$?
check "... and it drained and exited 0" '[ $alive = no ] && [ $rc -eq 0 ]'
PID=
finish

#!/usr/bin/env bash
# nibble serve end to end: a real server on a free loopback port, talked to
# with curl and Python standard-library clients (tests/integration/clients):
# startup account and flags, greedy text equal to `nibble generate`, SSE
# framing, the bad-input matrix (every documented error with status and
# type), 64 concurrent streams with early disconnects and /metrics back to
# zero, 429 on a full queue, and a graceful SIGTERM. Bounded: every wait has
# a timeout; only 127.0.0.1 is used.
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
[ -n "${NB_KEEP_TMP:-}" ] && trap - EXIT
export XDG_CACHE_HOME=$tmp/cache
unset NIBBLE_API_KEY
curl() { command curl -m 60 "$@"; }  # no request may hang the test

# start_server LOG ARGS...: sets PID and PORT once /health says ready (60 s at most).
start_server() {
  local log=$1; shift
  "$BIN" serve "$@" --port 0 >"$log" 2>&1 &
  PID=$!; pids+=("$PID")
  wait_ready "$PID" "$log"
}

# --- flag errors exit 2 naming the flag ---
"$BIN" serve --port 70000 >/dev/null 2>"$tmp/e"; rc=$?
check "--port 70000 exits 2 naming the range" '[ $rc -eq 2 ] && grep -q -- "--port" "$tmp/e" && grep -q "65535" "$tmp/e"'
"$BIN" serve --block-size 7 >/dev/null 2>"$tmp/e"; rc=$?
check "--block-size 7 exits 2" '[ $rc -eq 2 ] && grep -q -- "--block-size" "$tmp/e"'
"$BIN" serve --kv-cache-dtype fp4 >/dev/null 2>"$tmp/e"; rc=$?
check "--kv-cache-dtype fp4 exits 2" '[ $rc -eq 2 ] && grep -q "fp4" "$tmp/e"'
"$BIN" serve --frobnicate >/dev/null 2>"$tmp/e"; rc=$?
check "unknown option exits 2" '[ $rc -eq 2 ] && grep -q -- "--frobnicate" "$tmp/e"'
"$BIN" serve "$tmp/nope.gguf" --port 0 >/dev/null 2>"$tmp/e"; rc=$?
check "missing model exits 2 naming it" '[ $rc -eq 2 ] && grep -q "nope.gguf" "$tmp/e"'
"$BIN" serve --help | grep -q -- "--gpu-memory-utilization"
check "--help lists the vLLM flag names" '[ $? -eq 0 ]'

if [ -f "$SHARED/models/aidreams260K.gguf" ]; then
  M=$SHARED/models/aidreams260K.gguf; NAME=aidreams260K
else
  echo "SKIP: $SHARED/models not found; using the built-in default model"
  M=; NAME=nibble-default
fi
KEY=test-key-$$
MAXB=65536
NIBBLE_API_KEY=$KEY start_server "$tmp/a.log" ${M:+"$M"} --max-model-len 128 -t 2 --max-request-bytes 64KiB
if [ $? -ne 0 ]; then
  bad "server A did not become ready: $(tail -n 5 "$tmp/a.log")"
  finish; exit 1
fi
ok "server A ready on port $PORT"
check "startup log has the memory account (KV pool, concurrency)" 'grep -q "KV" "$tmp/a.log" && grep -qi "concurrency" "$tmp/a.log"'
check "startup log says which chat template is used" 'grep -qi "chat template" "$tmp/a.log"'
U=http://127.0.0.1:$PORT
AUTH="Authorization: Bearer $KEY"

code=$(curl -s -o "$tmp/h" -w '%{http_code}' "$U/health")
check "/health 200 when ready" '[ "$code" = 200 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/models")
check "/v1/models needs the key (env NIBBLE_API_KEY)" '[ "$code" = 401 ]'
curl -s -H "$AUTH" "$U/v1/models" >"$tmp/m"
check "/v1/models lists the served model name" 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"data\"][0][\"id\"]==sys.argv[2]" "$tmp/m" "$NAME"'

# greedy: the server and `nibble generate` give the same text
curl -s -H "$AUTH" "$U/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}' >"$tmp/c"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' "$tmp/c")
want=$("$BIN" generate ${M:+-m "$M"} -p "Once upon a time" -n 24 --temp 0 2>/dev/null)
check "greedy completion equals nibble generate's text" '[ -n "$want" ] && [ "$got" = "$want" ]'
check "completion response has id, created, model, usage" 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
assert d[\"id\"].startswith(\"cmpl-\") and d[\"created\"]>0 and d[\"model\"]==sys.argv[2]
assert d[\"usage\"][\"completion_tokens\"]==24 and d[\"choices\"][0][\"finish_reason\"]==\"length\"" "$tmp/c" "$NAME"'

# logit_bias: +100 forces a token (every generated token is token 300), a
# bias of -100 on it hands the step to the next-biased token (301)
lb() { curl -s -H "$AUTH" "$U/v1/completions" -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, \"temperature\": 0, \"logprobs\": 0, \"logit_bias\": $1}"; }
lb '{"300": 100, "301": 50}' >"$tmp/lb1"
lb '{"300": -100, "301": 50}' >"$tmp/lb2"
check "logit_bias +100 forces a token, -100 removes it" 'python3 -c "
import json,sys
a=json.load(open(sys.argv[1]))[\"choices\"][0][\"logprobs\"][\"tokens\"]
b=json.load(open(sys.argv[2]))[\"choices\"][0][\"logprobs\"][\"tokens\"]
assert len(a)==4 and len(set(a))==1 and len(b)==4 and len(set(b))==1 and a[0]!=b[0], (a, b)" "$tmp/lb1" "$tmp/lb2"'

# stop_token_ids (vLLM): the forced token ends the answer at once, its text left out
lb '{"300": 100}, "stop_token_ids": [300]' >"$tmp/st"
check "stop_token_ids end generation: finish_reason stop, one token, no text" 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d[\"choices\"][0]
assert c[\"finish_reason\"]==\"stop\" and c[\"text\"]==\"\" and d[\"usage\"][\"completion_tokens\"]==1, d" "$tmp/st"'

# stop strings: the text ends before the stop string
stop=$(python3 -c 'import sys; t=sys.argv[1]; print(t[4:7] if len(t) > 8 else "")' "$got")
if [ -n "$stop" ]; then
  curl -s -H "$AUTH" "$U/v1/completions" -d "$(python3 -c 'import json,sys; print(json.dumps({"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":[sys.argv[1]]}))' "$stop")" >"$tmp/s"
  check "stop string cuts the text, finish_reason stop" 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d[\"choices\"][0]
assert c[\"finish_reason\"]==\"stop\" and sys.argv[2] not in c[\"text\"] and sys.argv[3].startswith(c[\"text\"])" "$tmp/s" "$stop" "$got"'
fi

# chat, streamed with curl: role first, [DONE] last, usage chunk
curl -sN -H "$AUTH" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$tmp/sse"
check "SSE stream: data lines, role first, usage, [DONE] last" 'python3 -c "
import json,sys
lines=[l for l in open(sys.argv[1]).read().split(\"\n\") if l]
assert all(l.startswith(\"data: \") for l in lines) and lines[-1]==\"data: [DONE]\"
ch=[json.loads(l[6:]) for l in lines[:-1]]
assert ch[0][\"choices\"][0][\"delta\"][\"role\"]==\"assistant\" and ch[0][\"object\"]==\"chat.completion.chunk\"
assert ch[-1][\"choices\"]==[] and ch[-1][\"usage\"][\"completion_tokens\"]>=1
assert ch[-2][\"choices\"][0][\"finish_reason\"] in (\"stop\",\"length\")" "$tmp/sse"'
curl -s -H "$AUTH" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0}' >"$tmp/chat"
check "greedy chat: streamed text equals the non-streamed text" 'python3 -c "
import json,sys
ch=[json.loads(l[6:]) for l in open(sys.argv[1]).read().split(\"\n\") if l.startswith(\"data: {\")]
s=\"\".join(c[\"choices\"][0][\"delta\"].get(\"content\",\"\") for c in ch if c[\"choices\"])
assert s==json.load(open(sys.argv[2]))[\"choices\"][0][\"message\"][\"content\"]" "$tmp/sse" "$tmp/chat"'

# the bad-input matrix (Python stdlib client)
timeout 120 python3 "$HERE/clients/bad_input.py" "$PORT" "$KEY" 128 "$MAXB" >"$tmp/bad" 2>&1; rc=$?
grep FAIL "$tmp/bad"
check "bad-input matrix: $(tail -n 1 "$tmp/bad")" '[ $rc -eq 0 ]'

# 64 concurrent streams, a quarter disconnecting early; /metrics back to 0
timeout 150 python3 "$HERE/clients/concurrency.py" "$PORT" "$KEY" 64 >"$tmp/conc" 2>&1; rc=$?
grep FAIL "$tmp/conc"
check "64 concurrent streams: $(grep -h 'streams completed' "$tmp/conc")" '[ $rc -eq 0 ]'
curl -s "$U/metrics" >"$tmp/metrics"
for m in num_requests_running num_requests_waiting kv_cache_usage_perc num_preemptions_total prefix_cache_hit_rate \
         prompt_tokens_total generation_tokens_total thread_pool_benchings_total 'request_success_total{' time_to_first_token_seconds_bucket \
         inter_token_latency_seconds_bucket e2e_request_latency_seconds_bucket request_queue_time_seconds_bucket; do
  grep -q "^nibble:$m" "$tmp/metrics" || bad "/metrics lacks nibble:$m"
done
check "/metrics: aborted streams counted" 'grep -q "finished_reason=\"abort\"} [1-9]" "$tmp/metrics"'

kill -TERM $PID; wait $PID; rc=$?
check "SIGTERM on an idle server: exit 0" '[ $rc -eq 0 ] && grep -q "stopped" "$tmp/a.log"'

# --- server B: one sequence, one waiting slot -> 429; graceful SIGTERM with a stream in flight ---
start_server "$tmp/b.log" ${M:+"$M"} --max-model-len 128 -t 1 --max-num-seqs 1 --max-waiting 1 --shutdown-timeout 20
if [ $? -ne 0 ]; then
  bad "server B did not become ready: $(tail -n 5 "$tmp/b.log")"
else
  U=http://127.0.0.1:$PORT
  qpids=()
  for i in $(seq 1 12); do
    curl -s -m 60 -o "$tmp/q$i" -w '%{http_code}\n' "$U/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":100,"ignore_eos":true}' >"$tmp/qc$i" &
    qpids+=($!)
  done
  wait "${qpids[@]}"
  n429=$(cat "$tmp"/qc* | grep -c 429); n200=$(cat "$tmp"/qc* | grep -c 200)
  check "full queue: some 429 ($n429), the rest 200 ($n200)" '[ $n429 -ge 1 ] && [ $n200 -ge 1 ] && [ $((n429+n200)) -eq 12 ]'
  f429=$(grep -l rate_limit_error "$tmp"/q[0-9]* | head -n 1)
  check "429 body is an OpenAI error of type rate_limit_error" '[ -n "$f429" ]'

  curl -sN -m 60 "$U/v1/completions" -d '{"prompt":"Once","max_tokens":110,"ignore_eos":true,"stream":true}' >"$tmp/inflight" &
  cpid=$!
  for _ in $(seq 1 50); do [ -s "$tmp/inflight" ] && break; sleep 0.05; done
  kill -TERM $PID; wait $PID; rc=$?
  wait $cpid
  check "SIGTERM with a stream in flight: the stream completes, exit 0" '[ $rc -eq 0 ] && grep -v "^$" "$tmp/inflight" | tail -n 1 | grep -q "\[DONE\]"'
  check "shutdown log names the in-flight requests" 'grep -q "shutting down" "$tmp/b.log"'
fi

finish

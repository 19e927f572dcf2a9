#!/usr/bin/env bash
# `make demo`: the main job on the built-in default model. The default model
# has random weights (synthesized deterministically on first use into
# $XDG_CACHE_HOME/nibble), so its text is gibberish by design: the point is
# the pipeline (model file -> tokenizer -> batched forward -> sampler ->
# streamed UTF-8), which works the same on a real GGUF / HF / llama2.c model.
set -euo pipefail
BIN=${1:-build/nibble}

echo "== nibble generate (built-in default model, greedy, 48 tokens)"
"$BIN" generate -p "The quick brown fox" -n 48 --temp 0
echo
echo "== the same with sampling (seed 7: rerun it and the text is identical)"
"$BIN" generate -p "Once upon a time" -n 48 --temp 0.9 --seed 7
echo
cache=${XDG_CACHE_HOME:-$HOME/.cache}/nibble
model=$(ls "$cache"/default-*.gguf 2>/dev/null | head -n 1 || true)
if [ -n "$model" ]; then
  echo "== the default model ($model)"
  "$BIN" inspect "$model" > "${TMPDIR:-/tmp}/nibble-demo-inspect.txt"
  head -n 24 "${TMPDIR:-/tmp}/nibble-demo-inspect.txt"
  echo
fi
echo "== nibble serve (built-in default model): start, one chat request, one streamed request, stop"
log=$(mktemp)
"$BIN" serve --port 0 --max-model-len 256 >"$log" 2>&1 &
spid=$!
port=
for _ in $(seq 1 600); do
  [ -z "$port" ] && port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' | head -n 1 || true)
  if [ -n "$port" ] && [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then break; fi
  kill -0 $spid 2>/dev/null || break
  sleep 0.1
done
cat "$log"
if [ -n "$port" ] && kill -0 $spid 2>/dev/null; then
  echo
  echo "\$ curl http://127.0.0.1:$port/v1/chat/completions -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], \"max_tokens\": 16, \"temperature\": 0}'"
  curl -s -m 60 "http://127.0.0.1:$port/v1/chat/completions" \
    -d '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16, "temperature": 0}'
  echo
  echo
  echo "\$ curl -N http://127.0.0.1:$port/v1/chat/completions -d '{..., \"stream\": true, \"stream_options\": {\"include_usage\": true}}'"
  curl -sN -m 60 "http://127.0.0.1:$port/v1/chat/completions" \
    -d '{"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 8, "temperature": 0.8, "seed": 7, "stream": true, "stream_options": {"include_usage": true}}'
  echo "\$ curl http://127.0.0.1:$port/metrics | grep -v '^#' | head -n 12"
  metrics=$(curl -s -m 10 "http://127.0.0.1:$port/metrics")
  printf '%s\n' "$metrics" | grep -v '^#' | sed -n '1,12p'   # (no head: SIGPIPE under pipefail)
  # nibble bench serve: a short ladder (1, 4) against this server, the table and the server view
  echo
  echo "\$ nibble bench serve --endpoint http://127.0.0.1:$port --concurrency 1,4 --num-prompts 8 --input-len 24 --output-len 16 --ignore-eos"
  "$BIN" bench serve --endpoint "http://127.0.0.1:$port" --concurrency 1,4 --num-prompts 8 --input-len 24 \
    --output-len 16 --ignore-eos 2>/dev/null || echo "(nibble bench serve failed: exit $?)"
fi
kill -TERM $spid 2>/dev/null || true
wait $spid 2>/dev/null || true
tail -n 2 "$log"
rm -f "$log"
echo
echo "Run a real model:  $BIN generate -m path/to/model.gguf -p 'Hello' -n 64"
echo "                   $BIN generate -m path/to/hf-model-dir -p 'Hello' -n 64"

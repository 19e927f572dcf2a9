#!/usr/bin/env bash
# The issue-4 benchmark: the serving engine (no HTTP) on the
# TinyLlama-1.1B-shaped Q4_0 model, every number measured side by side in
# one run and printed as a ratio:
#   1. offline throughput at N = 1, 8, 32 concurrent requests: aggregate
#      decode tok/s at N=32 vs N=1 (goal >= 3x on 2 cores), and how full the
#      KV blocks in use are (live tokens / tokens the used blocks hold; goal
#      > 90%) next to a static max_model_len slot per sequence;
#   2. prefix caching: TTFT of a request whose 1,000-token system prompt is
#      cached vs not cached;
#   3. the KV dtypes' memory per token at N=32 (f32 vs f16 vs int8).
#
# usage: bench/engine.sh [BIN] [WORKDIR] [THREADS]
#   builds WORKDIR/tl-f16.gguf with nibble synth (the 32000-token llama vocab
#   from ../shared/vocab when present) and WORKDIR/tl-q4_0.gguf with nibble
#   quantize unless they exist (bench/tinyllama.sh makes the same files).
set -euo pipefail
BIN=${1:-build/nibble}
DIR=${2:-/tmp/nibble-bench}
T=${3:-2}
VOCAB=$(dirname "$0")/../../shared/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$DIR"
F16=$DIR/tl-f16.gguf
Q40=$DIR/tl-q4_0.gguf
if [ ! -f "$Q40" ]; then
  if [ ! -f "$F16" ]; then
    vflag=()
    [ -f "$VOCAB" ] && vflag=(--vocab-from "$VOCAB")
    "$BIN" synth --arch llama --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 "${vflag[@]}" -o "$F16"
  fi
  "$BIN" quantize "$F16" "$Q40" --type Q4_0 -q > "$DIR/quantize-Q4_0.log"
fi

echo "== 1. concurrency 1, 8, 32 (input 128, output 64 tokens) =="
"$BIN" bench model "$Q40" --concurrency 1,8,32 --input-len 128 --output-len 64 -t "$T"

if [ -f "$F16" ]; then
  echo
  echo "== 1b. the same model with F16 weights (decode bandwidth-bound at N=1) =="
  "$BIN" bench model "$F16" --concurrency 1,32 --input-len 16 --output-len 32 -t "$T"
fi

echo
echo "== 2. prefix caching: shared 1000-token system prompt + 24 own tokens, 8 generated =="
"$BIN" bench model "$Q40" --concurrency 1 --shared-prefix 1000 --input-len 24 --output-len 8 -t "$T"

echo
echo "== 3. KV dtype at N=32: bytes per token and decode tok/s =="
for d in f32 f16 int8; do
  "$BIN" bench model "$Q40" --concurrency 32 --input-len 32 --output-len 16 --kv-cache-dtype "$d" -t "$T" --json |
    python3 -c '
import json, sys
d = json.load(sys.stdin); l = d["levels"][0]
print("%s: %d KV bytes/token, decode %.2f tok/s, KV fill %.1f%%" % (sys.argv[1], d["kv_bytes_per_token"],
      l["decode_tok_s"], 100 * l["kv_used_blocks_fill"]))' "$d"
done

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
  "$BIN" inspect "$model" | head -n 24
  echo
fi
echo "Run a real model:  $BIN generate -m path/to/model.gguf -p 'Hello' -n 64"
echo "                   $BIN generate -m path/to/hf-model-dir -p 'Hello' -n 64"

#!/usr/bin/env bash
# The mask cost of constrained decoding against a decode step, side by side in
# one run (issue 16: mask <= 5% of a TinyLlama-1.1B-shaped decode step at
# batch 1). Synthesizes the model as bench/tinyllama.sh does (dim 2048, 22
# layers, 32 heads, 4 KV heads, ffn 5632, the 32000-token llama vocabulary),
# quantizes it to Q4_0, builds bench/bench_grammar.c against the build's
# libraries and runs it: mask median / p90 / max per constraint (wall clock,
# and the thread's CPU time, which a busy machine does not inflate), the
# decode median, and each mask's median and p90 as a % of the decode step.
# docs/serve.md "Structured outputs" has the numbers.
#
# usage: bench/grammar.sh [BUILD_DIR] [WORKDIR] [WALKS] [THREADS]
set -euo pipefail
B=${1:-build}
DIR=${2:-/tmp/nibble-bench}
WALKS=${3:-20}
THREADS=${4:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
VOCAB=$HERE/../../shared/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$DIR"
F16=$DIR/tl-f16.gguf
if [ ! -f "$F16" ]; then
  vflag=()
  [ -f "$VOCAB" ] && vflag=(--vocab-from "$VOCAB")
  "$B/nibble" synth --arch llama --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 "${vflag[@]}" -o "$F16"
fi
Q=$DIR/tl-q4_0.gguf
[ -f "$Q" ] || "$B/nibble" quantize "$F16" "$Q" --type Q4_0 > "$DIR/quantize-Q4_0.log"
libs=$(ls "$B"/libnb_*.a | tr '\n' ' ')
cc -O2 -std=c11 -I"$HERE/../include" -I"$HERE/../src" -I"$B" "$HERE/bench_grammar.c" \
  -Wl,--start-group $libs -Wl,--end-group -ljansson -lpcre2-8 -lm -lpthread -o "$DIR/bench_grammar"
"$DIR/bench_grammar" "$Q" "$WALKS" "$Q" "$THREADS"

#!/usr/bin/env bash
# The issue-3 benchmark: a TinyLlama-1.1B-shaped model (dim 2048, 22 layers,
# 32 heads, 4 KV heads, ffn 5632, 32000 vocab) synthesized with nibble synth,
# quantized to Q8_0, Q4_0 and Q4_K_M with nibble quantize, then
# `nibble bench model` on each: pp and tg tok/s (mean +/- sd over reps) and
# the decode roofline against the machine's measured read bandwidth, printed
# side by side with llama.cpp's llama-bench numbers on a machine of this kind
# (2 threads, same shapes and types; from the issue), as ratios.
#
# usage: bench/tinyllama.sh [BIN] [WORKDIR] [REPS]
#   needs ../shared/vocab/ggml-vocab-llama-spm.gguf for the 32000-token vocab
#   (falls back to the built-in 512-token one: then logits cost less).
set -euo pipefail
BIN=${1:-build/nibble}
DIR=${2:-/tmp/nibble-bench}
REPS=${3:-3}
VOCAB=$(dirname "$0")/../../shared/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$DIR"
F16=$DIR/tl-f16.gguf
if [ ! -f "$F16" ]; then
  vflag=()
  [ -f "$VOCAB" ] && vflag=(--vocab-from "$VOCAB")
  "$BIN" synth --arch llama --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 "${vflag[@]}" -o "$F16"
fi
for t in Q8_0 Q4_0 Q4_K_M; do
  f=$DIR/tl-$(echo "$t" | tr 'A-Z' 'a-z').gguf
  [ -f "$f" ] || "$BIN" quantize "$F16" "$f" --type "$t" > "$DIR/quantize-$t.log"
done

# llama.cpp reference (issue #3 table): tg64 and pp128 tok/s, and the issue's
# roofline (29.4 GB/s read bandwidth / weight bytes per token)
declare -A LC_TG=([F16]=12.0 [Q8_0]=18.4 [Q4_0]=28.7 [Q4_K_M]=18.9)
declare -A LC_PP=([F16]=63.5 [Q8_0]=48.3 [Q4_0]=87.9 [Q4_K_M]=92.2)
declare -A ISSUE_ROOF=([F16]=14.2 [Q8_0]=26.7 [Q4_0]=49.1 [Q4_K_M]=46.6)

printf '| type | GB/token | tg64 t/s | vs llama.cpp | %% of our probe'"'"'s roofline | %% of the issue'"'"'s roofline (29.4 GB/s) | pp128 t/s | vs llama.cpp |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for t in F16 Q8_0 Q4_0 Q4_K_M; do
  f=$DIR/tl-$(echo "$t" | tr 'A-Z' 'a-z').gguf
  j=$("$BIN" bench model "$f" -p 128 -n 64 -r "$REPS" --json)
  python3 - "$t" "$j" "${LC_TG[$t]}" "${LC_PP[$t]}" "${ISSUE_ROOF[$t]}" <<'PY'
import json, sys
t, j, lt, lp, ir = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
gb = j["weight_bytes_per_token"] / 1e9
roof = j["tg_roofline_tok_s"]
print(f"| {t} | {gb:.2f} | {j['tg_tok_s']:.1f} +/- {j['tg_tok_s_sd']:.1f} | {j['tg_tok_s']/lt:.2f}x | "
      f"{100*j['tg_tok_s']/roof:.0f}% of {roof:.1f} ({j['read_bandwidth_gb_s']:.1f} GB/s) | {100*j['tg_tok_s']/ir:.0f}% of {ir} | "
      f"{j['pp_tok_s']:.1f} +/- {j['pp_tok_s_sd']:.1f} | {j['pp_tok_s']/lp:.2f}x |")
PY
done

#!/usr/bin/env bash
# The TinyLlama-1.1B-shaped benchmark (issues 3 and 14): a model of that shape
# (dim 2048, 22 layers, 32 heads, 4 KV heads, ffn 5632, 32000 vocab)
# synthesized with nibble synth, quantized to Q8_0, Q4_0, Q4_K_M and nibble's
# own W8 and W4G128 (the issue's types) with nibble quantize, then `nibble bench model` on each type: tg and pp tok/s
# (mean +/- sd over reps) and decode against the roofline, i.e. the weight
# bytes per token over the read bandwidth of the best of the probe's access
# patterns (`nibble bench bw`, printed once at the top, with the CPU's name).
# Numbers are for the machine it runs on; compare only with numbers taken
# side by side on the same machine.
#
# usage: bench/tinyllama.sh [BIN] [WORKDIR] [REPS] [-- extra bench flags, e.g. --isa avx2 -t 2]
#   needs ../shared/vocab/ggml-vocab-llama-spm.gguf for the 32000-token vocab
#   (falls back to the built-in 512-token one: then logits cost less).
#   TYPES="F16 Q4_0" limits the types.
set -euo pipefail
BIN=${1:-build/nibble}
DIR=${2:-/tmp/nibble-bench}
REPS=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
TYPES=${TYPES:-F16 Q8_0 Q4_0 Q4_K_M W8 W4G128}
VOCAB=$(dirname "$0")/../../shared/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$DIR"
F16=$DIR/tl-f16.gguf
if [ ! -f "$F16" ]; then
  vflag=()
  [ -f "$VOCAB" ] && vflag=(--vocab-from "$VOCAB")
  "$BIN" synth --arch llama --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 "${vflag[@]}" -o "$F16"
fi
for t in $TYPES; do
  [ "$t" = F16 ] && continue
  f=$DIR/tl-$(echo "$t" | tr 'A-Z' 'a-z').gguf
  [ -f "$f" ] || "$BIN" quantize "$F16" "$f" --type "$t" > "$DIR/quantize-$t.log"
done

threads=()
for ((i = 0; i < ${#EXTRA[@]}; i++)); do
  case "${EXTRA[$i]}" in -t|--threads) threads=(-t "${EXTRA[$((i + 1))]}") ;; esac
done
bw=$("$BIN" bench bw "${threads[@]}" --size 512 --passes 3 --json)
python3 - "$bw" <<'PY'
import json, sys
b = json.loads(sys.argv[1])
print(f"cpu: {b['cpu']}\n{b['features']}\nthreads: {b['threads']}\n")
print("read bandwidth by access pattern (best of 3 passes; the max is the roofline):")
for p in b["read_bandwidth_patterns"]:
    print(f"  {p['pattern']:<62} {p['gb_s']:6.1f} GB/s{'  <- max' if p['best'] else ''}")
print()
PY

printf '| type | GB/token | tg64 t/s | %% of roofline | same-minute %% (median, range of re-measured GB/s) | roofline t/s (GB/s, pattern) | pp128 t/s | decode reads (chosen) | kernels |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for t in $TYPES; do
  f=$DIR/tl-$(echo "$t" | tr 'A-Z' 'a-z').gguf
  j=$("$BIN" bench model "$f" -p 128 -n 64 -r "$REPS" --json "${EXTRA[@]}")
  python3 - "$t" "$j" <<'PY'
import json, sys
t, j = sys.argv[1], json.loads(sys.argv[2])
gb = j["weight_bytes_per_token"] / 1e9
roof = j["tg_roofline_tok_s"]
pct = f"{100*j['tg_tok_s']/roof:.0f}%" if roof > 0 else "-"
after = j.get("read_bandwidth_gb_s_after_each_tg", [])
same = (f"{j['tg_roofline_pct_same_minute']:.0f}% ({min(after):.1f}-{max(after):.1f})"
        if after else "-")
# the kernels line names the CPU's table distance; these are what decode used
# (kernels/tune.c may have measured others at load)
pf = j.get("decode_prefetch", {})
reads = (f"prefetch {pf['bytes']}, L2 {pf['l2_bytes']}, {pf['streams']} stream(s)/thread"
         f" ({'measured at load' if pf.get('tuned') else 'table'})" if pf else "-")
print(f"| {t} | {gb:.2f} | {j['tg_tok_s']:.1f} +/- {j['tg_tok_s_sd']:.1f} | {pct} | {same} | "
      f"{roof:.1f} ({j['read_bandwidth_gb_s']:.1f}, {j.get('read_bandwidth_pattern', '?')}) | "
      f"{j['pp_tok_s']:.1f} +/- {j['pp_tok_s_sd']:.1f} | {reads} | {j.get('kernels', j['isa'])} |")
PY
done

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
#        bench/engine.sh --batched [BIN] [WORKDIR] [THREADS (1)] [REPS (3)]
#   --batched: only the batched-decode comparison (docs/speed.md, "Batched
#   decode"): decode throughput at N = 1, 8, 32 (per CPU-second and per
#   wall second, see below) with the defaults (new) and with OLD_ENV set
#   (old; default NIBBLE_SGEMM_MAX=0: the 16-token GEMM for every batch of
#   8+ instead of the small-batch int8 GEMMs of kernels/sbatch.h - which
#   changes nothing where the AMX GEMMs take the batches: there
#   OLD_ENV=NIBBLE_AMX_GEMM=0 compares them with the AVX-512 VNNI ones),
#   the settings interleaved REPS times; prints each run and, per setting,
#   the min and median of N=8/N=1 and N=32/N=1 and of new/old.
#   builds WORKDIR/tl-f16.gguf with nibble synth (the 32000-token llama vocab
#   from ../shared/vocab when present) and WORKDIR/tl-q4_0.gguf with nibble
#   quantize unless they exist (bench/tinyllama.sh makes the same files).
set -euo pipefail
BATCHED=0
if [ "${1:-}" = --batched ]; then
  BATCHED=1
  shift
fi
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

if [ "$BATCHED" = 1 ]; then
  # On a shared, saturated host wall-clock tok/s is mostly waiting for a core,
  # so besides bench model's decode tok/s (wall) this takes its
  # decode_tok_per_cpu_s: decode tokens per CPU-second of the process over
  # the same phase. THREADS defaults to 1 here: with more, the pool's
  # spin-waits on a busy host count as CPU time.
  T=${3:-1}
  REPS=${4:-3}
  OLD_ENV=${OLD_ENV:-NIBBLE_SGEMM_MAX=0}
  echo "== batched decode: the defaults (new) / $OLD_ENV (old), interleaved x$REPS, $T thread(s) =="
  lscpu | grep 'Model name' || true
  out=$(mktemp)
  for r in $(seq "$REPS"); do
    for mode in new old; do
      set --
      if [ "$mode" = old ]; then set -- "$OLD_ENV"; fi
      env "$@" "$BIN" bench model "$Q40" --concurrency 1,8,32 --input-len 16 --output-len 48 -t "$T" --json |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], *["%.3f %.3f" % (l["decode_tok_per_cpu_s"], l["decode_tok_s"]) for l in d["levels"]])' "$mode" "$r" |
        tee -a "$out"
    done
  done
  python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().split("\n") if l]
print("columns above: setting, rep, then per N = 1, 8, 32: decode tok per CPU-second, decode tok/s (wall)")
def mm(v): return "min %.2f median %.2f" % (min(v), statistics.median(v))
for col, what in ((0, "per CPU-second"), (1, "wall")):
    by = {"new": [], "old": []}
    for l in rows:
        by[l[0]].append([float(l[2 + 2 * i + col]) for i in range(3)])
    print("-- %s" % what)
    for m in ("old", "new"):
        v = by[m]
        print("%s: N=1 %s tok/s | N=8/N=1 %s | N=32/N=1 %s" % (m, mm([x[0] for x in v]), mm([x[1] / x[0] for x in v]),
                                                            mm([x[2] / x[0] for x in v])))
    for i, n in enumerate((1, 8, 32)):
        print("new/old at N=%d (pairs): %s" % (n, mm([a[i] / b[i] for a, b in zip(by["new"], by["old"])])))
PY
  rm -f "$out"
  exit 0
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

#!/usr/bin/env bash
# Quality of calibrated quantization (docs/quantize.md, "Quality"): for
# each model, every method and type is compared with the model itself on
# held-out text: mean KL divergence, top-1 agreement and delta perplexity.
#
#   bench/quant_quality.sh [NIBBLE] [SHARED] [--update-doc] [--tinyllama]
#
# Models: aidreams260K (trained weights, dim 64: W4G64/W4G128 fall back to
# W4G32/W4G64 where the row does not fit, 172-wide FFN rows stay F16, the
# K-quants fall back to Q5_0/Q5_1) and a synthetic llama with activation
# outliers (nibble synth --dim 256 --layers 4 --ffn 768 --outliers 4
# --outlier-scale 20: 4 residual channels weighted 20x in every norm).
# Text: shared/reference/aidreams-sample.txt, the first half for calibration
# (and the imatrix), the second half for evaluation (-c 128).
# Metrics come from `nibble eval kld BASE CAND -f TEXT --json` when that
# command works, else from `nibble quantize --check --json` (the same
# llama-perplexity statistics, src/eval/compare.h).
# --update-doc rewrites the table between the QUALITY markers of
# docs/quantize.md. --tinyllama[=LAYERS] also times each method on a
# TinyLlama-1.1B-shaped synthetic model (dim 2048, 32/4 heads, ffn 5632;
# 2 layers by default, 22 for the whole model) and reports wall, CPU and
# peak RSS (GNU time), niced; calibration: 16 samples of 256 tokens from the
# repository's docs/*.md (aidreams-sample.txt is too short for 16 windows).
# --tinyllama-only skips the quality table. See the doc for the scaling.
set -u
BIN=${1:-build/nibble}
SHARED=${2:-../shared}
shift $(( $# >= 2 ? 2 : $# ))
UPDATE=0; TINY=0; TINY_LAYERS=2; QUALITY=1
for a in "$@"; do
  case $a in
    --update-doc) UPDATE=1 ;;
    --tinyllama) TINY=1 ;;
    --tinyllama=*) TINY=1; TINY_LAYERS=${a#--tinyllama=} ;;
    --tinyllama-only) TINY=1; QUALITY=0 ;;
  esac
done
DOCS=$(cd "$(dirname "$0")/.." && pwd)/docs
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
TEXT=$SHARED/reference/aidreams-sample.txt
n=$(wc -l <"$TEXT")
head -n $((n / 2)) "$TEXT" >"$W/calib.txt"
tail -n +$((n / 2 + 1)) "$TEXT" >"$W/eval.txt"
CAL="--calib $W/calib.txt --calib-samples 128 --calib-seq-len 128 --seed 1"
EVAL_KLD=0
"$BIN" eval kld --help >/dev/null 2>&1 && EVAL_KLD=1

[ $QUALITY = 1 ] && "$BIN" synth --arch llama --dim 256 --layers 4 --heads 8 --kv-heads 8 --ffn 768 --outliers 4 --outlier-scale 20 \
  -o "$W/synth-outliers.gguf" >/dev/null || exit 1
declare -A MODEL=([aidreams260K]=$SHARED/models/aidreams260K.gguf [synth-outliers]=$W/synth-outliers.gguf)

# metrics of CAND against BASE on the held-out text: "kld top1 dppl"
metrics() {
  local base=$1 cand=$2
  if [ $EVAL_KLD = 1 ]; then
    "$BIN" eval kld "$base" "$cand" -f "$W/eval.txt" -c 128 --json 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); print('%.6f %.4f %+.4f' % (d['kld_mean'], d['top1_agreement'], d['ppl_cand']-d['ppl_base']))"
  else
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['check']; print('%.6f %.4f %+.4f' % (d['kld_mean'], d['same_top'], d['ppl_quant']-d['ppl_base']))" "$3"
  fi
}

ROWS="$W/rows.md"
: >"$ROWS"
run() { # model type method-label args...
  local m=$1 t=$2 label=$3; shift 3
  local out="$W/$m-$t-$label.gguf" j="$W/$m-$t-$label.json"
  local t0=$(date +%s.%N)
  if ! "$BIN" quantize "${MODEL[$m]}" "$out" --type "$t" "$@" -q --check "$W/eval.txt" -c 128 --json >"$j" 2>"$W/err"; then
    echo "| $m | $t | $label | failed: $(tail -1 "$W/err") | | | |" >>"$ROWS"
    return
  fi
  local secs=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)")
  read -r kld top1 dppl <<<"$(metrics "${MODEL[$m]}" "$out" "$j")"
  echo "| $m | $t | $label | $kld | $top1 | $dppl | $secs |" | tee -a "$ROWS"
  rm -f "$out"
}

for m in aidreams260K synth-outliers; do
  [ $QUALITY = 1 ] || break
  "$BIN" imatrix "${MODEL[$m]}" -f "$W/calib.txt" -o "$W/$m.imatrix.gguf" -c 128 >/dev/null 2>&1
  for g in 32 64 128; do
    run $m W4G$g rtn
    run $m W4G$g awq --method awq $CAL
    run $m W4G$g gptq --method gptq $CAL
    run $m W4G$g gptq+desc_act --method gptq --desc-act $CAL
  done
  for t in Q4_K Q3_K; do
    run $m $t rtn --pure
    run $m $t rtn+imatrix --pure --imatrix "$W/$m.imatrix.gguf"
  done
  run $m W8A8 rtn
  run $m W8A8 smoothquant --method smoothquant $CAL
done

{
  echo "| model | type | method | mean KLD | top-1 | Δppl | seconds |"
  echo "|---|---|---|---:|---:|---:|---:|"
  cat "$ROWS"
  echo
  echo "Measured $(date -u +%Y-%m-%d) with \`bench/quant_quality.sh\` (metrics from $([ $EVAL_KLD = 1 ] && echo 'nibble eval kld' || echo 'nibble quantize --check'); seconds include the check; shared 2-core machine)."
} >"$W/table.md"
[ $QUALITY = 1 ] && cat "$W/table.md"

if [ $TINY = 1 ]; then
  TM="$W/tiny$TINY_LAYERS.gguf"
  "$BIN" synth --arch llama --dim 2048 --layers "$TINY_LAYERS" --heads 32 --kv-heads 4 --ffn 5632 --outliers 8 \
    -o "$TM" >/dev/null || exit 1
  ls -l "$TM" | awk -v l="$TINY_LAYERS" '{print "TinyLlama-shaped, " l " layers: F16 file", $5, "bytes"}'
  cat "$DOCS"/*.md >"$W/tcalib.txt"
  TC="--calib $W/tcalib.txt --calib-samples 16 --calib-seq-len 256 --seed 1"
  for args in "--type W4G128" "--type W4G128 --method gptq $TC" "--type W4G128 --method awq $TC" \
              "--type W8A8 --method smoothquant $TC"; do
    # no -q: the calibrated methods print their wall / CPU seconds per phase
    /usr/bin/time -f "%e s wall, %U s user, %S s sys, peak RSS %M KiB" nice "$BIN" quantize "$TM" "$W/t.gguf" $args \
      >/dev/null 2>"$W/terr"
    echo "tiny$TINY_LAYERS $args:"
    grep -E "^(gptq|awq|smoothquant): (wall|CPU)" "$W/terr" | sed 's/^/  /'
    echo "  $(tail -1 "$W/terr")"
    rm -f "$W/t.gguf"
  done
fi

if [ $UPDATE = 1 ] && [ $QUALITY = 1 ]; then
  python3 - "$W/table.md" docs/quantize.md <<'PY'
import sys
table = open(sys.argv[1]).read()
doc = open(sys.argv[2]).read()
a, b = '<!-- QUALITY:BEGIN -->', '<!-- QUALITY:END -->'
i, j = doc.index(a) + len(a), doc.index(b)
open(sys.argv[2], 'w').write(doc[:i] + '\n' + table + doc[j:])
PY
fi

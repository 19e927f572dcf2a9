#!/usr/bin/env bash
# nibble quantize from the command line: error paths (exit 2 naming the
# problem), then aidreams260K (F32, 172-wide FFN -> F16 fallbacks) to Q8_0:
# the per-tensor report, greedy generation against llama.cpp's continuation,
# and --check against llama-perplexity's 10.105.
#
# Measured when this test was written (aidreams260K, Q8_0): all 48 greedy
# tokens of "Once upon a time" equal llama.cpp's; --check -c 128: PPL(Q8_0)
# 10.1069 vs 10.1057, mean KLD 0.00025, same top 98.4%. The assertions keep
# a margin: the first 24 tokens, PPL within 2%, KLD < 0.005, same top > 95%.
set -u
BIN=$1
SHARED=${2:-../shared}
. "$(dirname "$0")/../lib/check.sh"
export XDG_CACHE_HOME=$tmp/cache

# --- error paths (need no shared/) ---
"$BIN" quantize "$tmp/nope.gguf" "$tmp/out.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "missing input exits 2 naming the path" '[ $rc -eq 2 ] && grep -q "nope.gguf" "$tmp/e"'
"$BIN" quantize "$tmp/nope.gguf" "$tmp/out.gguf" --type Q3_BOGUS >/dev/null 2>"$tmp/e"; rc=$?
check "bad type exits 2 listing the valid types" \
  '[ $rc -eq 2 ] && grep -q "Q3_BOGUS" "$tmp/e" && grep -q "Q4_K_M" "$tmp/e" && grep -q "W4G128" "$tmp/e" && grep -q "FP8_E4M3" "$tmp/e"'
"$BIN" quantize "$tmp/a.gguf" "$tmp/b.gguf" >/dev/null 2>"$tmp/e"; rc=$?
check "no --type exits 2" '[ $rc -eq 2 ] && grep -q -- "--type" "$tmp/e"'
"$BIN" quantize "$tmp/a.gguf" "$tmp/b.gguf" --type Q8_0 --keep nonsense >/dev/null 2>"$tmp/e"; rc=$?
check "--keep without =TYPE exits 2" '[ $rc -eq 2 ] && grep -q "PATTERN=TYPE" "$tmp/e"'
"$BIN" quantize "$tmp/a.gguf" "$tmp/b.gguf" --type Q8_0 --bogus >/dev/null 2>"$tmp/e"; rc=$?
check "unknown option exits 2 naming it" '[ $rc -eq 2 ] && grep -q -- "--bogus" "$tmp/e"'
"$BIN" quantize --list >"$tmp/l" 2>/dev/null; rc=$?
check "--list shows registry formats and mixes" '[ $rc -eq 0 ] && grep -q "^NF4" "$tmp/l" && grep -q "^Q4_K_M" "$tmp/l"'

if [ ! -f "$SHARED/models/aidreams260K.gguf" ]; then
  skip_rest "$SHARED/models not found; model checks skipped"
fi
M=$SHARED/models/aidreams260K.gguf
REF=$SHARED/reference/aidreams260K.json
TEXT=$SHARED/reference/aidreams-sample.txt
Q=$tmp/a-q8_0.gguf

"$BIN" quantize "$M" "$Q" --type Q8_0 -t 2 >"$tmp/r" 2>"$tmp/e"; rc=$?
check "quantize to Q8_0 exits 0" '[ $rc -eq 0 ] && [ -s "$Q" ]'
check "report names the 172-wide fallback" 'grep -q "blk.0.ffn_down.weight.*F16.*fallback: 172 not a multiple of 32" "$tmp/r"'
check "report has totals (bits per weight, compression vs F16)" 'grep -q "bits per weight" "$tmp/r" && grep -q "x smaller" "$tmp/r"'

"$BIN" quantize "$M" "$tmp/j.gguf" --type Q8_0 --json >"$tmp/j" 2>/dev/null
check "--json: per-tensor types, fallbacks and totals" 'python3 - "$tmp/j" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in d["tensors"]}
assert d["scheme"] == "Q8_0" and d["file_type"] == 7
assert t["blk.0.ffn_down.weight"]["type"] == "F16" and t["blk.0.ffn_down.weight"]["fallback"]
assert t["blk.0.ffn_up.weight"]["type"] == "Q8_0" and t["output_norm.weight"]["type"] == "F32"
assert 0 < t["blk.0.attn_q.weight"]["rel_rms"] < 0.02
tot = d["totals"]
assert tot["n_fallback"] == 4 and tot["n_params"] == 263744
assert tot["bytes"] == sum(x["bytes"] for x in d["tensors"])
assert abs(tot["bits_per_weight"] - 8 * tot["bytes"] / tot["n_params"]) < 1e-6
assert abs(tot["compression_vs_f16"] - 2 * tot["n_params"] / tot["bytes"]) < 1e-6
PY'

want=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["cases"][0]["continuation_tokens"][:24])))' "$REF")
got=$("$BIN" generate -m "$Q" -p "Once upon a time" -n 24 --temp 0 --ids 2>/dev/null | tr -d '[],')
check "Q8_0 greedy: first 24 tokens equal llama.cpp's F32 continuation" '[ "$got" = "$want" ]'

"$BIN" quantize "$M" "$tmp/c.gguf" --type Q8_0 --check "$TEXT" -c 128 >"$tmp/c" 2>/dev/null; rc=$?
check "--check prints KLD, same top and both PPLs" \
  '[ $rc -eq 0 ] && grep -q "Mean    KLD" "$tmp/c" && grep -q "Same top p" "$tmp/c" && grep -q "Mean PPL(Q)" "$tmp/c" && grep -q "Mean PPL(base)" "$tmp/c"'
"$BIN" quantize "$M" "$tmp/c.gguf" --type Q8_0 --check "$TEXT" -c 128 --json >"$tmp/cj" 2>/dev/null
check "--check: PPL(Q8_0) within 2% of 10.105, base = llama-perplexity's, KLD small" 'python3 - "$tmp/cj" <<PY
import json, sys
c = json.load(open(sys.argv[1]))["check"]
assert c["n_chunks"] == 23 and c["n_scored"] == 23 * 63, c
assert abs(c["ppl_base"] - 10.105) < 0.002, c["ppl_base"]
assert abs(c["ppl_quant"] / 10.105 - 1) < 0.02, c["ppl_quant"]
assert 0 < c["kld_mean"] < 0.005, c["kld_mean"]
assert c["same_top"] > 0.95, c["same_top"]
PY'
"$BIN" quantize "$M" "$tmp/c.gguf" --type Q8_0 --check "$TEXT" -c 128 --chunks 2 --json >"$tmp/cj" 2>/dev/null
check "--chunks limits the check" 'python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"check\"][\"n_chunks\"] == 2" "$tmp/cj"'

finish

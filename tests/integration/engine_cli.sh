#!/usr/bin/env bash
# The serving engine from the command line: `nibble generate` (which runs
# through the engine) with a KV dtype, `nibble bench model --concurrency`
# (N requests at once, no HTTP), the startup refusal when the KV pool cannot
# hold one max_model_len sequence (exit 2, vLLM's wording) and forced
# preemption under a tiny pool. Expected text comes from llama.cpp
# (shared/reference/aidreams260K.json).
set -u
BIN=$1
SHARED=${2:-../shared}
fails=0; passes=0
ok() { passes=$((passes+1)); echo "ok: $*"; }
bad() { fails=$((fails+1)); echo "FAIL: $*"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache

"$BIN" generate --kv-cache-dtype q3 -p hi >/dev/null 2>"$tmp/e"; rc=$?
check "bad --kv-cache-dtype exits 2 naming the choices" '[ $rc -eq 2 ] && grep -q "auto, f32, f16, bf16, fp8, int8" "$tmp/e"'

M=$SHARED/models/aidreams260K.gguf
if [ ! -f "$M" ]; then
  echo "SKIP: $M not found"
  echo "$passes passed, $fails failed"
  [ $fails -eq 0 ] && exit 77 || exit 1
fi
REF=$SHARED/reference/aidreams260K.json
want_text=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cases"][0]["continuation_text"])' "$REF")

got=$("$BIN" generate -m "$M" -p "Once upon a time" -n 48 --temp 0 --kv-cache-dtype f16 2>/dev/null)
check "generate with an f16 KV cache gives llama.cpp's greedy text" '[ "$got" = "$want_text" ]'

"$BIN" bench model "$M" --concurrency 1,4 --input-len 16 --output-len 16 -t 2 >"$tmp/b" 2>"$tmp/e"; rc=$?
check "bench --concurrency runs" '[ $rc -eq 0 ]'
check "bench prints one row per level and the decode ratio" 'grep -q "^| 1 |" "$tmp/b" && grep -q "^| 4 |" "$tmp/b" && grep -q "aggregate decode tok/s at N=4 vs N=1" "$tmp/b"'

"$BIN" bench model "$M" --concurrency 2 --input-len 8 --output-len 8 --max-model-len 128 --kv-cache-bytes 4096 \
  >/dev/null 2>"$tmp/e"; rc=$?
check "a pool smaller than one max_model_len sequence refuses with exit 2" '[ $rc -eq 2 ]'
check "the refusal names max model len and the pool's tokens" 'grep -q "max model len 128 is larger than the maximum number of tokens that can be stored in KV cache (2)" "$tmp/e"'

# 128 tokens of f32 KV (2 x 4 layers x 64 x 4 bytes = 2048 per token): four 64-token requests contend
"$BIN" bench model "$M" --concurrency 4 --input-len 32 --output-len 32 --max-model-len 64 --kv-cache-bytes 262144 \
  --block-size 4 --json -t 2 >"$tmp/j" 2>"$tmp/e"; rc=$?
check "tiny pool: requests complete with preemptions counted" '[ $rc -eq 0 ] && python3 - "$tmp/j" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
lv = d["levels"][0]
assert lv["concurrency"] == 4 and lv["preemptions"] > 0, lv
PY'

"$BIN" bench model "$M" --concurrency 4 --input-len 8 --output-len 8 --shared-prefix 64 --json -t 2 >"$tmp/p" 2>"$tmp/e"; rc=$?
check "shared prefix: cached prefix tokens are hits only with prefix caching on" '[ $rc -eq 0 ] && python3 - "$tmp/p" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
off, on = d["levels"]
assert not off["prefix_caching"] and on["prefix_caching"]
assert off["prefix_hit_tokens"] == 0 and on["prefix_hit_tokens"] == 4 * 64, (off, on)
PY'

# -d (llama-bench's --n-depth): the tests start from a D-token context, the
# KV read at that depth is counted in the roofline; a depth past what the
# model takes is refused by name
"$BIN" bench model "$M" -p 8 -n 8 -d 100 -r 1 --no-bw --json -t 2 >"$tmp/d" 2>"$tmp/e"; rc=$?
check "bench model -d runs and reports its depth and KV bytes" '[ $rc -eq 0 ] && python3 - "$tmp/d" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
# 2 x 4 layers x 64 x 4 bytes = 2048 bytes of f32 KV per token, 100 + 8/2 tokens of mean context
assert d["depth"] == 100 and d["pp_tok_s"] > 0 and d["tg_tok_s"] > 0, d
assert d["kv_bytes_per_token"] == 104 * 2048, d
assert isinstance(d["pool_benchings"], int) and d["pool_benchings"] >= 0, d
PY'
"$BIN" bench model "$M" -p 8 -n 8 -d 100 -r 1 --no-bw -t 2 >"$tmp/d" 2>"$tmp/e"
check "bench model -d labels the tests as llama-bench does" 'grep -q "^| pp8 @ d100 |" "$tmp/d" && grep -q "^| tg8 @ d100 |" "$tmp/d"'
check "bench model within the trained context (128) warns of nothing" '! grep -q "warning" "$tmp/e"'
"$BIN" bench model "$M" -p 0 -n 8 -d 200 -r 1 --no-bw -t 2 >"$tmp/d" 2>"$tmp/e"; rc=$?
check "bench model past the trained context runs, and says so" '[ $rc -eq 0 ] && grep -q "^| tg8 @ d200 |" "$tmp/d" && grep -q "context of 209 tokens, past the 128 the model was trained for" "$tmp/e"'
# the bandwidth re-measured after each decode run, and decode's share of it
"$BIN" bench model "$M" -p 0 -n 16 -r 2 --json -t 2 >"$tmp/w" 2>"$tmp/e"; rc=$?
check "bench model re-measures the bandwidth after each tg run" '[ $rc -eq 0 ] && python3 - "$tmp/w" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
a = d["read_bandwidth_gb_s_after_each_tg"]
assert len(a) == 2 and all(x > 0 for x in a), d
assert d["tg_roofline_pct_same_minute"] > 0, d
PY'
"$BIN" bench model "$M" -p 8 -n 8 -d x -t 2 >/dev/null 2>"$tmp/e"; rc=$?
check "bench model -d x exits 2 naming the option" '[ $rc -eq 2 ] && grep -q -- "-d" "$tmp/e"'

# the decode prefetch distance: measured at load on request, but not over
# weights the cache holds (this model's 1 MiB); a set distance is reported as
# set; a bad value exits 2 naming what is allowed
"$BIN" bench model "$M" -p 0 -n 4 -r 1 --no-bw -t 2 --decode-prefetch tune >"$tmp/t" 2>"$tmp/e"; rc=$?
check "--decode-prefetch tune on a model the cache holds keeps the CPU's distance and says why" \
  '[ $rc -eq 0 ] && grep -q "^decode prefetch: [0-9]* bytes, L2 [0-9]*, [0-9] stream(s) per thread (the CPU.s default; not measured: 0 MiB of weights" "$tmp/t"'
"$BIN" bench model "$M" -p 0 -n 4 -r 1 --no-bw -t 2 --decode-prefetch 4096 --json >"$tmp/t" 2>"$tmp/e"; rc=$?
check "--decode-prefetch 4096 is the distance used, in the JSON" '[ $rc -eq 0 ] && python3 - "$tmp/t" <<PY
import json, sys
p = json.load(open(sys.argv[1]))["decode_prefetch"]
assert p["bytes"] == 4096 and p["tuned"] is False, p
PY'
"$BIN" bench model "$M" -p 0 -n 4 -r 1 --no-bw -t 2 --decode-streams 3 --json >"$tmp/t" 2>"$tmp/e"; rc=$?
check "--decode-streams 3 is the count used, in the JSON and the kernels line" '[ $rc -eq 0 ] && python3 - "$tmp/t" <<PY
import json, sys
j = json.load(open(sys.argv[1]))
assert j["decode_prefetch"]["streams"] == 3, j["decode_prefetch"]
assert "in 3 streams per thread" in j["kernels"], j["kernels"]
PY'
"$BIN" bench model "$M" -p 0 -n 4 -r 1 --no-bw -t 2 --decode-streams 5 >"$tmp/t" 2>"$tmp/e"; rc=$?
check "--decode-streams 5 exits 2 naming the allowed range" '[ $rc -eq 2 ] && grep -q -- "--decode-streams: .5.: expected auto or 1..4" "$tmp/e"'
"$BIN" bench model "$M" -p 0 -n 4 -r 1 --no-bw -t 2 --decode-prefetch-l2 8192 --json >"$tmp/t" 2>"$tmp/e"; rc=$?
check "--decode-prefetch-l2 8192 is the L2 distance used, in the JSON and the kernels line" '[ $rc -eq 0 ] && python3 - "$tmp/t" <<PY
import json, sys
j = json.load(open(sys.argv[1]))
assert j["decode_prefetch"]["l2_bytes"] == 8192, j["decode_prefetch"]
assert ", L2 8192)" in j["kernels"], j["kernels"]
PY'
"$BIN" bench model "$M" -p 0 -n 4 --decode-prefetch-l2 100 >/dev/null 2>"$tmp/e"; rc=$?
check "--decode-prefetch-l2 100 exits 2 naming auto, the byte range and the cache line" \
  '[ $rc -eq 2 ] && grep -q "decode-prefetch-l2: .100.: expected auto, or bytes in 0..65536, a multiple of 64" "$tmp/e"'
"$BIN" bench model "$M" -p 0 -n 4 --decode-prefetch soon >/dev/null 2>"$tmp/e"; rc=$?
check "--decode-prefetch soon exits 2 naming auto, tune and the byte range" \
  '[ $rc -eq 2 ] && grep -q "expected auto, tune or bytes in 0..65536" "$tmp/e"'

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]

#!/usr/bin/env bash
# nibble synth + nibble inspect end to end:
#   synth a tiny model, inspect it as text and as JSON (parsed with python3),
#   inspect the shared Q4_K_M model (params and dtype census from
#   shared/models/README.md), and a truncated file must exit 2 naming the
#   byte offset. $1 = nibble binary, $2 = shared dir.
set -u
BIN=${1:?usage: inspect_synth.sh NIBBLE SHARED}
SHARED=${2:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- synth: deterministic, and the shape we asked for ------------------------
"$BIN" synth --arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --seed 7 -o "$TMP/a.gguf" >/dev/null \
    || fail "synth a"
"$BIN" synth --arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --seed 7 -o "$TMP/b.gguf" >/dev/null \
    || fail "synth b"
cmp -s "$TMP/a.gguf" "$TMP/b.gguf" || fail "same seed gave different bytes"
"$BIN" synth --arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --seed 8 -o "$TMP/c.gguf" >/dev/null \
    || fail "synth c"
cmp -s "$TMP/a.gguf" "$TMP/c.gguf" && fail "different seeds gave the same bytes"
"$BIN" synth --arch llama --heads 5 -o "$TMP/bad.gguf" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "synth with 5 heads for dim 256: exit $rc, want 2"
grep -q heads "$TMP/err" || fail "synth error does not name heads: $(cat "$TMP/err")"
"$BIN" synth -o "$TMP/x.gguf" 2>/dev/null; [ $? -eq 2 ] || fail "synth without --arch must exit 2"

# --- inspect the synth output --------------------------------------------------
"$BIN" inspect "$TMP/a.gguf" --tensors --sha256 >"$TMP/a.txt" || fail "inspect text"
grep -q "architecture: qwen2" "$TMP/a.txt" || fail "text: no architecture line"
grep -q "blk.1.attn_q.bias" "$TMP/a.txt" || fail "text: --tensors lists no qkv bias"
sha=$(sha256sum "$TMP/a.gguf" | cut -d' ' -f1)
grep -q "sha256: $sha" "$TMP/a.txt" || fail "text: sha256 differs from sha256sum ($sha)"
"$BIN" inspect "$TMP/a.gguf" --json --tensors --sha256 >"$TMP/a.json" || fail "inspect --json"
# independent expectation for qwen2 dim 64, 2 layers, 4 heads (hd 16), 2 kv heads, ffn 96, vocab 512, tied:
#   embd 64*512; per layer: norms 2*64, q 64*64, k/v 2*64*32, biases 64+32+32, o 64*64, ffn 3*64*96; final norm 64
python3 - "$TMP/a.json" "$sha" <<'PY' || fail "json checks"
import json, sys
j = json.load(open(sys.argv[1]))
layer = 2*64 + 64*64 + 2*64*32 + (64+32+32) + 64*64 + 3*64*96
want = 64*512 + 64 + 2*layer
assert j["architecture"] == "qwen2", j["architecture"]
assert j["n_params"] == want, (j["n_params"], want)
assert j["hparams"]["embedding_length"] == 64 and j["hparams"]["attention.head_count_kv"] == 2
assert j["quantization"]["file_type_name"] == "MOSTLY_F16"
assert j["dtypes"]["F32"]["tensors"] == 1 + 2*5, j["dtypes"]
assert j["dtypes"]["F16"]["tensors"] == 1 + 2*7, j["dtypes"]
assert j["sha256"] == sys.argv[2]
assert len(j["tensors"]) == 1 + 1 + 2*12
assert all(t["offset"] % 32 == 0 for t in j["tensors"])
assert "output.weight" not in [t["name"] for t in j["tensors"]]
toks = j["metadata"]["tokenizer.ggml.tokens"]
assert toks["count"] == 512 and len(toks["head"]) == 8, toks
assert j["metadata"]["tokenizer.ggml.model"] == "gpt2"
PY

# --- errors: missing file, truncated file -> exit 2 with the byte offset ---------
"$BIN" inspect "$TMP/none.gguf" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] || fail "missing file: exit $rc, want 2"
head -c 300 "$TMP/a.gguf" >"$TMP/trunc.gguf"
"$BIN" inspect "$TMP/trunc.gguf" 2>"$TMP/err" >/dev/null; rc=$?
[ $rc -eq 2 ] || fail "truncated file: exit $rc, want 2"
grep -q "byte offset" "$TMP/err" || fail "truncated file: message has no byte offset: $(cat "$TMP/err")"
grep -q "trunc.gguf" "$TMP/err" || fail "truncated file: message does not name the file"

# --- the shared Q4_K_M model ------------------------------------------------------
Q="$SHARED/models/synth-llama-Q4_K_M.gguf"
if [ -z "$SHARED" ] || [ ! -f "$Q" ]; then
    echo "SKIP: $Q not found (the shared/ folder with test models is absent); the synth checks above passed"
    exit 77
fi
"$BIN" inspect "$Q" >"$TMP/q.txt" || fail "inspect Q4_K_M"
grep -q "parameters: *19,400,960" "$TMP/q.txt" || fail "Q4_K_M: parameter count is not 19,400,960"
grep -q "MOSTLY_Q4_K_M" "$TMP/q.txt" || fail "Q4_K_M: file type name missing"
"$BIN" inspect "$Q" --json --tensors >"$TMP/q.json" || fail "inspect Q4_K_M --json"
# README table: token_embd Q4_K, output Q6_K, attn_q/k/output + ffn_gate/up Q4_K,
# attn_v and ffn_down Q4_K in blocks 0,1 and Q6_K in 2,3; norms F32.
python3 - "$TMP/q.json" <<'PY' || fail "Q4_K_M census"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["n_params"] == 19400960, j["n_params"]
want = {"token_embd.weight": "Q4_K", "output.weight": "Q6_K", "output_norm.weight": "F32"}
for b in range(4):
    for n in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
        want[f"blk.{b}.{n}.weight"] = "Q4_K"
    for n in ("attn_v", "ffn_down"):
        want[f"blk.{b}.{n}.weight"] = "Q4_K" if b < 2 else "Q6_K"
    for n in ("attn_norm", "ffn_norm"):
        want[f"blk.{b}.{n}.weight"] = "F32"
got = {t["name"]: t["dtype"] for t in j["tensors"]}
assert got == want, {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
census = {}
for d in want.values():
    census[d] = census.get(d, 0) + 1
assert {k: v["tensors"] for k, v in j["dtypes"].items()} == census, j["dtypes"]
assert j["quantization"]["file_type"] == 15 and j["quantization"]["file_type_name"] == "MOSTLY_Q4_K_M"
assert j["hparams"]["block_count"] == 4 and j["hparams"]["vocab_size"] == 32000
PY
echo "OK: synth + inspect"

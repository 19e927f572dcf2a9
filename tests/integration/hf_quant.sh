#!/usr/bin/env bash
# Quantized HF checkpoints, whole model: synth-llama and aidreams260K are
# quantized with RTN into each of nibble's HF-mappable types, exported as
# AWQ / GPTQ / compressed-tensors / bitsandbytes, loaded back, and their
# logits compared with the same weights in nibble's own GGUF; a second export
# of the HF directory must be byte-identical (import is the exact inverse of
# export). GPTQ act-order: a checkpoint whose groups share their scales is
# given a shuffled g_idx (desc_act true): the loader's input permutation must
# give the same logits as the contiguous original, up to the Q8_0 rounding of
# the permuted activations (measured 0.09; a loader that skips the gather
# changes the top-1 token and logits by several units). Bad inputs exit 2
# naming the tensor and field.
set -u
BIN=$1
SHARED=$2
M=$SHARED/models
[ -f "$M/synth-llama-F16.gguf" ] && [ -f "$M/aidreams260K.bin" ] || { echo "SKIP: $M absent"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
IDS='[1,5,9,200,33,4000,17,29871,13,450]'

# logits of the last two positions (top 8 + logsumexp) of model $1, extra args after
logits() { "$BIN" logits -m "$@" --top 8 -t 2 2>/dev/null | tail -2; }
# max |difference| of two logits outputs
cmp_logits() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) == 2, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    k = [key for key in x if key.startswith("top")][0]
    assert [t[0] for t in x[k]][:3] == [t[0] for t in y[k]][:3], (x[k], y[k])
    worst = max([worst, abs(x["logsumexp"] - y["logsumexp"])] + [abs(p[1] - q[1]) for p, q in zip(x[k], y[k])])
print("max |dlogit| = %.3g" % worst)
sys.exit(0 if worst <= tol else 1)
EOF
}

check() { # name gguf layout tokenizer-for-export logits-args...
    local name=$1 gguf=$2 layout=$3 tok=$4; shift 4
    local d=$T/$name
    local lay=()
    [ -n "$layout" ] && lay=(--layout "$layout")
    "$BIN" export "$gguf" "$d" --format hf "${lay[@]}" $tok 2>"$T/err" || { cat "$T/err"; fail "$name: export"; }
    logits "$gguf" "$@" >"$T/a" || fail "$name: logits of the GGUF"
    logits "$d" "$@" >"$T/b" || { "$BIN" logits -m "$d" "$@" 2>&1 | tail -3; fail "$name: logits of the HF export"; }
    echo -n "$name: "
    cmp_logits "$T/a" "$T/b" 1e-4 || fail "$name: logits differ"
    "$BIN" export "$d" "$d.again" --format hf "${lay[@]}" 2>/dev/null || fail "$name: re-export"
    cmp "$d/model.safetensors" "$d.again/model.safetensors" || fail "$name: import(export(x)) is not x"
}

S=$M/synth-llama-F16.gguf
SPM="--tokenizer $M/llama2-tokenizer.model"
for ty in W4G128 W4G64S W8 W8A8 FP8_E4M3 NF4; do
    "$BIN" quantize "$S" "$T/s-$ty.gguf" --type "$ty" --keep token_embd.weight=F16 -q -t 2 >/dev/null 2>&1 || fail "quantize $ty"
done
check synth-awq "$T/s-W4G128.gguf" awq "$SPM" --ids "$IDS"
check synth-gptq "$T/s-W4G128.gguf" gptq "$SPM" --ids "$IDS"
check synth-ct-w4a16 "$T/s-W4G128.gguf" compressed-tensors "$SPM" --ids "$IDS"
check synth-gptq-sym "$T/s-W4G64S.gguf" "" "$SPM" --ids "$IDS"
check synth-ct-int8 "$T/s-W8.gguf" "" "$SPM" --ids "$IDS"
check synth-ct-w8a8 "$T/s-W8A8.gguf" "" "$SPM" --ids "$IDS"
check synth-ct-fp8 "$T/s-FP8_E4M3.gguf" "" "$SPM" --ids "$IDS"
check synth-bnb-nf4 "$T/s-NF4.gguf" "" "$SPM" --ids "$IDS"
grep -q '"quant_method": "awq"' "$T/synth-awq/config.json" || fail "awq config"
grep -q '"checkpoint_format": "gptq"' "$T/synth-gptq/config.json" || fail "gptq config"
grep -q '"format": "float-quantized"' "$T/synth-ct-fp8/config.json" || fail "fp8 config"
[ -f "$T/synth-awq/tokenizer.model" ] || fail "tokenizer not copied"

# aidreams260K (llama2.c): the 172-wide FFN stays F16 and is listed as not converted
AT="--tokenizer $M/aidreams260K.tok512.bin"
"$BIN" quantize "$M/aidreams260K.bin" "$T/a-W4G32.gguf" --type W4G32 -q -t 2 >/dev/null 2>&1 || fail "quantize aidreams"
check aidreams-ct "$T/a-W4G32.gguf" compressed-tensors "" $AT -p "Once upon a time there was"
grep -q 'model.layers.0.mlp.down_proj' "$T/aidreams-ct/config.json" || fail "aidreams: F16 down_proj not in ignore"
"$BIN" export "$T/a-W4G32.gguf" "$T/aidreams-awq" --format hf --layout awq 2>"$T/err"
[ $? -eq 2 ] || fail "aidreams awq: expected exit 2"
grep -q "ffn_gate.weight: 172 output rows" "$T/err" || { cat "$T/err"; fail "aidreams awq message"; }

# inspect: quantization_config, the on-disk census, bits/weight incl. scales and zeros
"$BIN" inspect "$T/synth-gptq" >"$T/insp" 2>&1 || fail "inspect gptq"
grep -q 'quantization_config {"bits":4,"checkpoint_format":"gptq"' "$T/insp" && grep -q "g_idx .* 28 tensors" "$T/insp" &&
    grep -q "bits/weight incl. scales, zeros and g_idx" "$T/insp" || { cat "$T/insp"; fail "inspect census"; }
"$BIN" inspect --json "$T/synth-awq" | python3 -c "
import json, sys
j = json.load(sys.stdin); s = j['storage']
assert j['quantization']['quant_method'] == 'awq'
assert s['packed']['tensors'] == 28 and s['zeros']['tensors'] == 28 and s['inconsistencies'] == []
files = s['file_bytes']
print('inspect: awq file %.4f bits/weight' % s['file_bits_per_weight'])" || fail "inspect --json"

# plan: the weight bytes are the checkpoint's exactly (all layouts) and the
# parameter count is the loaded model's
for d in synth-awq synth-gptq synth-ct-w4a16 synth-ct-int8 synth-ct-fp8 synth-bnb-nf4 aidreams-ct; do
    "$BIN" plan "$T/$d" --host --json >"$T/plan.json" 2>/dev/null || fail "plan $d"
    "$BIN" inspect --json "$T/$d" >"$T/insp.json" || fail "inspect $d"
    python3 - "$T/plan.json" "$T/insp.json" "$d" <<'EOF' || fail "plan $d disagrees"
import json, sys
p = json.load(open(sys.argv[1]))["weights"]; i = json.load(open(sys.argv[2]))
f = i["storage"]["file_bytes"]
assert p["bytes"] == f, (p["bytes"], f)
assert p["params"] == i["n_params"], (p["params"], i["n_params"])
print("plan %s: %d bytes = the files', %d params = loaded" % (sys.argv[3], f, p["params"]))
EOF
done

# shards: a 4 MB limit splits synth-gptq into several files + index; same logits
"$BIN" export "$T/s-W4G128.gguf" "$T/shards" --format hf --layout gptq --max-shard-size 4MB $SPM 2>/dev/null || fail "sharded export"
[ -f "$T/shards/model.safetensors.index.json" ] && ls "$T/shards"/model-00001-of-*.safetensors >/dev/null || fail "no shards"
logits "$T/shards" --ids "$IDS" >"$T/c"
logits "$T/s-W4G128.gguf" --ids "$IDS" >"$T/a"
cmp_logits "$T/a" "$T/c" 1e-4 || fail "sharded logits"

# nibble quantize --format hf writes the same directory directly
"$BIN" quantize "$S" "$T/q-hf" --type W4G128 --format hf --layout gptq $SPM -q -t 2 >/dev/null 2>&1 || fail "quantize --format hf"
cmp "$T/q-hf/model.safetensors" "$T/synth-gptq/model.safetensors" || fail "quantize --format hf differs from export"
[ -f "$T/q-hf/tokenizer.model" ] && ! ls "$T"/q-hf.nibble-tmp.gguf >/dev/null 2>&1 || fail "quantize --format hf: tokenizer / temp file"

# quantized outputs of non-GGUF inputs carry the tokenizer in their metadata:
# an HF directory and a llama2.c .bin quantized to GGUF generate without --tokenizer
"$BIN" quantize "$T/synth-awq" "$T/fromhf.gguf" --type Q8_0 -q -t 2 >/dev/null 2>&1 || fail "quantize HF -> GGUF"
"$BIN" logits -m "$T/fromhf.gguf" -p "Hello world" --top 2 -t 2 >/dev/null 2>&1 || fail "HF -> GGUF has no tokenizer"
"$BIN" quantize "$M/aidreams260K.bin" "$T/aid.gguf" --type Q8_0 -q -t 2 >/dev/null 2>&1 || fail "quantize .bin -> GGUF"
"$BIN" generate -m "$T/aid.gguf" -p "Once upon a time" -n 4 -t 2 >/dev/null 2>&1 || fail ".bin -> GGUF has no tokenizer"

# safetensors helpers for the edits below
cat >"$T/st.py" <<'EOF'
import json, struct, sys, array
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", None)
    data = {k: bytearray(b[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]]) for k, v in h.items()}
    return h, data, meta
def save(p, h, data, meta):
    out, off = {}, 0
    if meta: out["__metadata__"] = meta
    for k in h:
        out[k] = {"dtype": h[k]["dtype"], "shape": h[k]["shape"], "data_offsets": [off, off + len(data[k])]}
        off += len(data[k])
    j = json.dumps(out).encode()
    j += b" " * (-len(j) % 8)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(j)) + j)
        for k in h: f.write(data[k])
EOF

# GPTQ desc_act: every group of a row gets group 0's scale and zero (contiguous
# copy "flat"), then a shuffled g_idx with 32 members per group ("act")
cp -r "$T/synth-gptq" "$T/flat"
python3 - "$T/flat/model.safetensors" <<'EOF' || fail "flat edit"
import sys, array, random
sys.path.insert(0, sys.argv[1].rsplit("/", 2)[0])
from st import load, save
h, d, m = load(sys.argv[1])
for k in list(h):
    if k.endswith(".scales") or k.endswith(".qzeros"):
        ng = h[k]["shape"][0]; row = len(d[k]) // ng
        d[k] = bytearray(bytes(d[k][:row]) * ng)
save(sys.argv[1], h, d, m)
EOF
cp -r "$T/flat" "$T/act"
python3 - "$T/act/model.safetensors" "$T/act/config.json" <<'EOF' || fail "act edit"
import sys, array, random, json
sys.path.insert(0, sys.argv[1].rsplit("/", 2)[0])
from st import load, save
h, d, m = load(sys.argv[1])
rng = random.Random(7)
for k in list(h):
    if k.endswith(".g_idx"):
        K = h[k]["shape"][0]; ng = h[k.replace("g_idx", "scales")]["shape"][0]; G = K // ng
        p = list(range(K)); rng.shuffle(p)
        g = array.array("i", [0] * K)
        for i, x in enumerate(p): g[x] = i // G
        d[k] = bytearray(g.tobytes())
save(sys.argv[1], h, d, m)
c = json.load(open(sys.argv[2])); c["quantization_config"]["desc_act"] = True
json.dump(c, open(sys.argv[2], "w"))
EOF
logits "$T/flat" --ids "$IDS" >"$T/f" || fail "flat logits"
logits "$T/act" --ids "$IDS" >"$T/g" || { "$BIN" logits -m "$T/act" --ids "$IDS" 2>&1 | tail -2; fail "act-order logits"; }
echo -n "desc_act: "
cmp_logits "$T/f" "$T/g" 0.3 || fail "desc_act logits differ from the contiguous checkpoint"
# desc_act false with a shuffled g_idx is inconsistent
sed -i 's/"desc_act": true/"desc_act": false/' "$T/act/config.json"
"$BIN" logits -m "$T/act" --ids "$IDS" >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "g_idx': element" "$T/err" || { cat "$T/err"; fail "desc_act false + shuffled g_idx"; }

# bad inputs: exit 2, the message names tensor and field
bad() { # name python-edit expected-substring
    rm -rf "$T/bad"; cp -r "$T/synth-gptq" "$T/bad"
    python3 - "$T/bad/model.safetensors" "$T/bad/config.json" <<EOF || fail "$1: edit"
import sys, json, array
sys.path.insert(0, "$T")
from st import load, save
h, d, m = load(sys.argv[1])
c = json.load(open(sys.argv[2]))
$2
save(sys.argv[1], h, d, m)
json.dump(c, open(sys.argv[2], "w"))
EOF
    "$BIN" logits -m "$T/bad" --ids "$IDS" >/dev/null 2>"$T/err"
    local rc=$?
    [ $rc -eq 2 ] || { cat "$T/err"; fail "$1: exit $rc, expected 2"; }
    grep -qF "$3" "$T/err" || { cat "$T/err"; fail "$1: message lacks '$3'"; }
    echo "bad input $1: ok ($(head -c 150 "$T/err"))"
}
bad missing-qzeros 'k = "model.layers.1.self_attn.k_proj.qzeros"; del h[k]; del d[k]' "model.layers.1.self_attn.k_proj.qzeros' is missing"
bad scales-shape 'k = "model.layers.0.mlp.up_proj.scales"; h[k]["shape"] = [h[k]["shape"][0] * 2, h[k]["shape"][1] // 2]' "up_proj.scales': field 'shape'"
bad gidx-range 'k = "model.layers.0.self_attn.q_proj.g_idx"; a = array.array("i", bytes(d[k])); a[3] = 999; d[k] = bytearray(a.tobytes())' "q_proj.g_idx: element 3 = 999"
bad unknown-method 'c["quantization_config"]["quant_method"] = "exl2"' "'quantization_config.quant_method' = 'exl2'"
bad bits 'c["quantization_config"]["bits"] = 3' "'quantization_config.bits' = 3"
bad group-size 'c["quantization_config"]["group_size"] = 64' "qzeros': field 'shape'"
bad qweight-dtype 'k = "model.layers.0.mlp.down_proj.qweight"; h[k]["dtype"] = "F32"' "down_proj.qweight': field 'dtype' = F32"
# inspect shows the census and flags what the loader refuses (exit 2)
"$BIN" inspect "$T/bad" >"$T/insp" 2>&1
[ $? -eq 2 ] && grep -q "^inconsistency: tensor 'model.layers.0.mlp.down_proj.qweight'" "$T/insp" && grep -q "^storage" "$T/insp" ||
    { cat "$T/insp"; fail "inspect of a bad checkpoint"; }
echo "OK"

#!/usr/bin/env bash
# Calibrated quantization end to end (docs/quantize.md "Calibrated methods"):
#  - bad input: --method without --calib, an empty calibration file, an
#    imatrix for another model: exit 2 with a message naming the problem and
#    no output file; a text shorter than one sample gives one short sample
#    (warned) and a loadable output; rows that no group divides fall back
#    (named in the report); a NaN or an Inf weight is refused by rtn, awq,
#    smoothquant and gptq (exit 2 naming tensor, row and column, no output
#    file); NaN/Inf statistics and all-zero inputs are unit-tested
#    (test_gptq, test_awq);
#  - calibration data: the same --seed gives a byte-identical file, another
#    seed other tensors; the warnings for fewer than 100 samples (and none
#    at 100), duplicated samples, very short samples and cut documents;
#    --calib-report's counts, duplicate rate and histogram; JSONL "messages"
#    rendered with the model's chat template (added to aidreams260K) give
#    the same tensors as the rendered text, the generic template others;
#  - nibble imatrix on aidreams260K (GGUF and legacy .dat), quantize --imatrix
#    with both, and an imatrix of aidreams refused for synth-llama;
#  - GPTQ on tensors of a type it cannot write (--keep attn_v=Q8_0): one
#    warning naming them, and the per-tensor report says rtn and why; AWQ
#    on GQA models, whose o has no 1:1 fold: warned the same way;
#  - aidreams260K to W4G32 with rtn, gptq, gptq --desc-act and awq: every
#    output loads and generates, carries its recipe metadata, and GPTQ and
#    AWQ have a lower mean KLD than RTN on the sample text (the ordering is
#    asserted, not a number);
#  - GPTQ --desc-act with --format hf (synthetic llama, 384-wide FFN):
#    quantization_config records desc_act, static_groups and damp_percent,
#    every module has g_idx = k / 32 (AutoGPTQ's act order with static
#    groups), and the directory generates the GGUF output's greedy tokens;
#  - AWQ's module-output search through the other attention paths of the
#    serving forward pass: synthetic GQA llama (8 heads, 2 KV heads) and
#    qwen2 (NEOX RoPE, q/k/v biases) quantize, load and beat RTN on mean KLD;
#  - SmoothQuant's folding written as F32 leaves the float logits unchanged
#    (top-K logits of every position within 1e-4), and --format gguf-compat
#    writes Q4_1 tensors.
set -u
BIN=$1
SHARED=${2:-../shared}
. "$(dirname "$0")/../lib/check.sh"
export XDG_CACHE_HOME=$tmp/cache

M=$SHARED/models/aidreams260K.gguf
T=$SHARED/reference/aidreams-sample.txt
if [ ! -f "$M" ] || [ ! -f "$T" ]; then
  echo "SKIP: $M or $T not found"
  exit 77
fi

# --- bad input ---
"$BIN" quantize "$M" "$tmp/o.gguf" --type W4G32 --method gptq >/dev/null 2>"$tmp/e"; rc=$?
check "--method gptq without --calib exits 2" '[ $rc -eq 2 ] && grep -q -- "--calib" "$tmp/e" && [ ! -e "$tmp/o.gguf" ]'
: >"$tmp/empty.txt"
"$BIN" quantize "$M" "$tmp/o.gguf" --type W4G32 --method gptq --calib "$tmp/empty.txt" >/dev/null 2>"$tmp/e"; rc=$?
check "empty calibration text exits 2, no output" '[ $rc -eq 2 ] && grep -q "calib" "$tmp/e" && [ ! -e "$tmp/o.gguf" ]'
printf '{"text": "hello"}\n{"nope": 1}\n' >"$tmp/bad.jsonl"
"$BIN" quantize "$M" "$tmp/o.gguf" --type W4G32 --method awq --calib "$tmp/bad.jsonl" >/dev/null 2>"$tmp/e"; rc=$?
check "bad JSONL line is named" '[ $rc -eq 2 ] && grep -q "bad.jsonl:2" "$tmp/e" && [ ! -e "$tmp/o.gguf" ]'
printf 'Once upon a time.' >"$tmp/short.txt"
"$BIN" quantize "$M" "$tmp/short.gguf" --type W4G32 --method gptq --calib "$tmp/short.txt" --calib-seq-len 128 \
  >/dev/null 2>"$tmp/e"; rc=$?
"$BIN" generate -m "$tmp/short.gguf" -p "Once" -n 4 --temp 0 >/dev/null 2>&1; rc2=$?
check "calibration text shorter than one sample: one short sample, warned, output loads" \
  '[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "only 1 samples" "$tmp/e" && grep -q "shorter than" "$tmp/e"'
"$BIN" quantize "$M" "$tmp/o.gguf" --type W4G32 --method smoothquant --calib "$T" >/dev/null 2>"$tmp/e"; rc=$?
check "smoothquant refuses W4 types" '[ $rc -eq 2 ] && grep -q "W8A8" "$tmp/e"'

gguf_edit() { python3 "$(dirname "$0")/../lib/gguf_edit.py" "$@"; } # poison / template / tensors

# --- NaN / Inf weights: every method refuses them before writing, naming the tensor, row and column ---
gguf_edit poison "$M" "$tmp/nan.gguf" blk.1.attn_k.weight 3 5 nan
gguf_edit poison "$M" "$tmp/inf.gguf" blk.2.ffn_up.weight 40 7 -inf
for m in rtn awq smoothquant gptq; do
  case $m in
    rtn) args="--type Q8_0" ;;
    smoothquant) args="--type W8A8 --method smoothquant --calib $T --calib-samples 8 --calib-seq-len 64" ;;
    *) args="--type W4G32 --method $m --calib $T --calib-samples 8 --calib-seq-len 64" ;;
  esac
  "$BIN" quantize "$tmp/nan.gguf" "$tmp/o.gguf" $args -q >/dev/null 2>"$tmp/e"; rc=$?
  check "$m: a NaN weight is refused (exit 2) naming tensor, row and column; no output" \
    '[ $rc -eq 2 ] && grep -q "blk.1.attn_k.weight.: row 3, column 5 is NaN" "$tmp/e" && ! ls "$tmp"/o.gguf* >/dev/null 2>&1'
  "$BIN" quantize "$tmp/inf.gguf" "$tmp/o.gguf" $args -q >/dev/null 2>"$tmp/e"; rc=$?
  check "$m: an Inf weight is refused (exit 2) naming tensor, row and column; no output" \
    '[ $rc -eq 2 ] && grep -q "blk.2.ffn_up.weight.: row 40, column 7 is Inf" "$tmp/e" && ! ls "$tmp"/o.gguf* >/dev/null 2>&1'
done

# --- calibration data: seeded sampling, the seeds' warnings, --calib-report, chat messages ---
Q="--type W4G32 --method gptq -q"
S="--calib $T --calib-samples 8 --calib-seq-len 64"
"$BIN" quantize "$M" "$tmp/s7a.gguf" $Q $S --seed 7 >/dev/null 2>"$tmp/e-s7"
"$BIN" quantize "$M" "$tmp/s7b.gguf" $Q $S --seed 7 >/dev/null 2>&1
"$BIN" quantize "$M" "$tmp/s8.gguf" $Q $S --seed 8 >/dev/null 2>&1
check "--seed: the same seed gives a byte-identical file" '[ -s "$tmp/s7a.gguf" ] && cmp -s "$tmp/s7a.gguf" "$tmp/s7b.gguf"'
check "--seed: another seed draws other windows (other tensors, not only other metadata)" \
  '[ -s "$tmp/s8.gguf" ] && [ "$(gguf_edit tensors "$tmp/s7a.gguf")" != "$(gguf_edit tensors "$tmp/s8.gguf")" ]'
check "8 samples: the fewer-than-100 warning; no histogram without --calib-report" \
  'grep -q "only 8 samples (fewer than 100)" "$tmp/e-s7" && ! grep -q "length histogram" "$tmp/e-s7" && ! grep -q duplicates "$tmp/e-s7"'
"$BIN" quantize "$M" "$tmp/o.gguf" $Q --calib "$T" --calib-samples 100 --calib-seq-len 16 >/dev/null 2>"$tmp/e"
check "100 samples: no fewer-than-100 warning" '[ -s "$tmp/o.gguf" ] && ! grep -q "fewer than 100" "$tmp/e"'
rm -f "$tmp/o.gguf"
# 8 JSONL documents at --calib-seq-len 64: three copies of one (2 duplicates), one of a few tokens
# (under 64/8), one of far more than 64 tokens (cut), three ordinary ones
long=$(for i in $(seq 12); do printf 'The little dog ran to the park and played with a red ball. '; done)
{
  for i in 1 2 3; do echo '{"text": "Lily and Ben went to the big park to play in the warm sun."}'; done
  echo '{"text": "Hi."}'
  echo "{\"text\": \"$long\"}"
  echo '{"text": "Once upon a time there was a girl who liked to sing songs with her mom."}'
  echo '{"text": "Tom had a toy car. He liked to push it fast on the floor of his room."}'
  echo '{"text": "The sun was hot, so the cat slept under the tree all day long."}'
} >"$tmp/docs.jsonl"
"$BIN" quantize "$M" "$tmp/o.gguf" $Q --calib "$tmp/docs.jsonl" --calib-seq-len 64 --calib-report >/dev/null 2>"$tmp/e"; rc=$?
check "duplicated, very short and very long samples are warned about" \
  '[ $rc -eq 0 ] && grep -q "2 of 8 samples are duplicates (25.0%)" "$tmp/e" && grep -q "1 samples are shorter than 8 tokens" "$tmp/e" && grep -q "1 documents were longer than 64 tokens and were cut" "$tmp/e"'
check "--calib-report: counts, duplicate rate and the length histogram" "python3 - \"$tmp/e\" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'calibration: 8 samples, (\d+) tokens, from 8 documents; duplicates 25.00%', text)
rows = re.findall(r'^ +(\d+)\.\.(\d+) +(\d+)$', text.split('length histogram (tokens):')[-1], re.M)
print('tokens', m and m.group(1), 'histogram', rows)
assert m and len(rows) == 8 and rows[0][:2] == ('0', '7') and rows[7][:2] == ('56', '64')
counts = [int(r[2]) for r in rows]
assert sum(counts) == 8 and counts[0] == 1 and counts[7] == 1  # 'Hi.' and the cut document
PY"
rm -f "$tmp/o.gguf"
# "messages" go through the model's chat template as nibble serve renders a chat (the template's own
# BOS text, no second BOS): the same tensors as "text" documents holding the rendered text after BOS
printf '%s' '{{ bos_token }}{% for m in messages %}[[{{ m.role }}]] {{ m.content }}
{% endfor %}' >"$tmp/tmpl.jinja"
gguf_edit template "$M" "$tmp/chat.gguf" "$tmp/tmpl.jinja"
cat >"$tmp/msgs.jsonl" <<'JSONL'
{"messages": [{"role": "user", "content": "Tell me a story about a cat."}, {"role": "assistant", "content": "Once upon a time there was a little cat named Tom."}]}
{"messages": [{"role": "system", "content": "You tell short stories."}, {"role": "user", "content": "What did Lily find?"}, {"role": "assistant", "content": "Lily found a big red ball in the park."}]}
JSONL
python3 - "$tmp/msgs.jsonl" "$tmp/rendered.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], 'w') as out:
    for line in open(sys.argv[1]):
        m = json.loads(line)['messages']
        out.write(json.dumps({'text': ''.join('[[%s]] %s\n' % (x['role'], x['content']) for x in m)}) + '\n')
PY
"$BIN" quantize "$tmp/chat.gguf" "$tmp/c-msgs.gguf" $Q --calib "$tmp/msgs.jsonl" >/dev/null 2>&1; rc1=$?
"$BIN" quantize "$tmp/chat.gguf" "$tmp/c-text.gguf" $Q --calib "$tmp/rendered.jsonl" >/dev/null 2>&1; rc2=$?
"$BIN" quantize "$M" "$tmp/c-generic.gguf" $Q --calib "$tmp/msgs.jsonl" >/dev/null 2>&1; rc3=$?
check "messages rendered with the model's chat template = the rendered text (identical tensors)" \
  '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(gguf_edit tensors "$tmp/c-msgs.gguf")" = "$(gguf_edit tensors "$tmp/c-text.gguf")" ]'
check "a model without a template renders messages with the generic one (other tensors)" \
  '[ $rc3 -eq 0 ] && [ "$(gguf_edit tensors "$tmp/c-msgs.gguf")" != "$(gguf_edit tensors "$tmp/c-generic.gguf")" ]'

# --- imatrix ---
"$BIN" imatrix "$M" -f "$T" -o "$tmp/im.gguf" -c 128 >/dev/null 2>&1; rc1=$?
"$BIN" imatrix "$M" -f "$T" -o "$tmp/im.dat" -c 128 >/dev/null 2>&1; rc2=$?
check "imatrix writes GGUF and .dat" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -s "$tmp/im.gguf" ] && [ -s "$tmp/im.dat" ]'
"$BIN" inspect "$tmp/im.gguf" >"$tmp/i" 2>&1
check "imatrix GGUF has llama.cpp's keys" 'grep -q "general.type.*imatrix" "$tmp/i" && grep -q "imatrix.chunk_count" "$tmp/i"'
for f in gguf dat; do
  "$BIN" quantize "$M" "$tmp/q-$f.gguf" --type Q4_K --pure --imatrix "$tmp/im.$f" -q --check "$T" -c 128 --json \
    >"$tmp/j-$f" 2>/dev/null
done
"$BIN" quantize "$M" "$tmp/q-rtn.gguf" --type Q4_K --pure -q --check "$T" -c 128 --json >"$tmp/j-rtn" 2>/dev/null
# A measurement that fails gives "unmeasured", which fails every comparison
# (less: both finite numbers and A < B) as well as its own "measured" check.
kld() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['check']['kld_mean'])" "$1" 2>/dev/null || echo unmeasured; }
less() { python3 -c 'import math, sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (math.isfinite(a) and math.isfinite(b) and a < b))' "$1" "$2" 2>/dev/null; }
measured() { for v in "$@"; do [ "$v" != unmeasured ] || return 1; done; }
k_rtn=$(kld "$tmp/j-rtn"); k_g=$(kld "$tmp/j-gguf"); k_d=$(kld "$tmp/j-dat")
echo "Q4_K pure (Q5_0 fallbacks) mean KLD: rtn $k_rtn, imatrix gguf $k_g, imatrix dat $k_d"
check "Q4_K KLD measured (rtn, imatrix gguf, imatrix dat)" 'measured "$k_rtn" "$k_g" "$k_d"'
check "imatrix lowers KLD (GGUF and .dat)" 'less "$k_g" "$k_rtn" && less "$k_d" "$k_rtn"'
"$BIN" inspect "$tmp/q-gguf.gguf" >"$tmp/i" 2>&1
check "imatrix recipe metadata" 'grep -q "quantize.imatrix.entries_count" "$tmp/i" && grep -q "rtn+imatrix" "$tmp/i"'
S=$SHARED/models/synth-llama-F16.gguf
if [ -f "$S" ]; then
  "$BIN" quantize "$S" "$tmp/o.gguf" --type Q4_K --imatrix "$tmp/im.gguf" >/dev/null 2>"$tmp/e"; rc=$?
  check "imatrix for another model refused, no output" '[ $rc -eq 2 ] && grep -q "another model" "$tmp/e" && [ ! -e "$tmp/o.gguf" ]'
fi

# --- W4G32: rtn, gptq, awq ---
C="--calib $T --calib-samples 64 --calib-seq-len 128 --seed 7"
declare -A K
for m in rtn gptq gptq-desc awq; do
  case $m in
    rtn) args="" ;;
    gptq) args="--method gptq $C" ;;
    gptq-desc) args="--method gptq --desc-act $C" ;;
    awq) args="--method awq $C" ;;
  esac
  "$BIN" quantize "$M" "$tmp/$m.gguf" --type W4G32 $args -q --check "$T" -c 128 --json >"$tmp/j-$m" 2>"$tmp/e-$m"
  K[$m]=$(kld "$tmp/j-$m")
  check "$m: KLD measured" 'measured "${K[$m]}"'
  "$BIN" generate -m "$tmp/$m.gguf" -p "Once upon a time" -n 16 --temp 0 >"$tmp/g-$m" 2>/dev/null; rc=$?
  check "$m output loads and generates" '[ $rc -eq 0 ] && [ -s "$tmp/g-$m" ]'
done
echo "W4G32 mean KLD: rtn ${K[rtn]}, gptq ${K[gptq]}, gptq --desc-act ${K[gptq-desc]}, awq ${K[awq]}"
for m in gptq gptq-desc awq; do
  check "$m beats rtn on mean KLD" 'less "${K[$m]}" "${K[rtn]}"'
done
check "rows that no group divides fall back, named in the report (172-wide ffn_down -> F16)" "python3 - \"$tmp/j-gptq\" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))['tensors']
fb = [x for x in t if x['fallback'] and '172' in x['why'] and x['type'] == 'F16']
print(len(fb), 'fallback tensors, e.g.', fb[0]['name'] if fb else None, fb[0]['why'] if fb else None)
sys.exit(0 if fb and all('ffn_down' in x['name'] for x in fb) else 1)
PY"
"$BIN" quantize "$M" "$tmp/keep.gguf" --type W4G32 --keep 'blk.*.attn_v.weight=Q8_0' --method gptq $C -q --json \
  >"$tmp/j-keep" 2>"$tmp/e-keep"; rc=$?
check "gptq: tensors of a type GPTQ cannot write (Q8_0) are warned about, named" \
  '[ $rc -eq 0 ] && grep -q "gptq: 4 tensors were not quantized as planned: blk.0.attn_v.weight (GPTQ cannot write Q8_0" "$tmp/e-keep"'
check "gptq: the per-tensor report says which method rounded each tensor, and why not GPTQ" "python3 - \"$tmp/j-keep\" <<'PY'
import json, sys
t = {x['name']: x for x in json.load(open(sys.argv[1]))['tensors']}
v, q = t['blk.2.attn_v.weight'], t['blk.2.attn_q.weight']
print('attn_v:', v['type'], v['method'], v['method_note'])
assert v['type'] == 'Q8_0' and v['method'] == 'rtn' and 'GPTQ cannot write Q8_0' in v['method_note']
assert q['type'] == 'W4G32' and q['method'] == 'gptq' and q['method_note'] is None
assert sum(1 for x in t.values() if x['method_note']) == 4
PY"
"$BIN" inspect "$tmp/gptq-desc.gguf" >"$tmp/i" 2>&1
check "GPTQ recipe metadata" 'grep -q "nibble.quantize.method.*gptq" "$tmp/i" && grep -q "nibble.quantize.desc_act.*true" "$tmp/i" && grep -q "nibble.quantize.calib_sha256" "$tmp/i" && grep -q "nibble.quantize.input_sha256" "$tmp/i" && grep -q "nibble.quantize.damp" "$tmp/i"'

# --- GPTQ --desc-act to --format hf: AutoGPTQ's layout, g_idx per module, the recipe in quantization_config ---
# (aidreams260K's 172 FFN rows do not pack 8 per int32: a synthetic llama with 384)
"$BIN" synth --arch llama --dim 128 --layers 2 --heads 4 --kv-heads 4 --ffn 384 -o "$tmp/sm.gguf" >/dev/null 2>&1
"$BIN" quantize "$tmp/sm.gguf" "$tmp/sm-hf" --type W4G32 --method gptq --desc-act $C -q --format hf >/dev/null 2>&1; rc1=$?
"$BIN" quantize "$tmp/sm.gguf" "$tmp/sm-g.gguf" --type W4G32 --method gptq --desc-act $C -q >/dev/null 2>&1; rc2=$?
check "gptq --desc-act --format hf: desc_act / static_groups / damp_percent recorded, g_idx = k / 32 in every module" \
  "[ $rc1 -eq 0 ] && python3 - \"$tmp/sm-hf\" <<'PY'
import json, struct, sys
d = sys.argv[1]
qc = json.load(open(d + '/config.json'))['quantization_config']
print({k: qc[k] for k in ('quant_method', 'group_size', 'sym', 'desc_act', 'static_groups', 'damp_percent')})
assert qc['quant_method'] == 'gptq' and qc['group_size'] == 32 and qc['desc_act'] is True
assert qc['static_groups'] is True and qc['damp_percent'] == 0.01
b = open(d + '/model.safetensors', 'rb').read()
n = struct.unpack_from('<Q', b)[0]
h = json.loads(b[8:8 + n])
g = [k for k in h if k.endswith('.g_idx')]
assert len(g) == 14, g  # 7 linears x 2 layers
for k in g:
    s, e = h[k]['data_offsets']
    v = struct.unpack_from('<%di' % ((e - s) // 4), b, 8 + n + s)
    assert h[k]['dtype'] == 'I32' and list(v) == [i // 32 for i in range(len(v))], k
PY"
g1=$("$BIN" generate -m "$tmp/sm-hf" --tokenizer "$tmp/sm.gguf" -p "Once upon a time" -n 12 --temp 0 --ids 2>/dev/null)
g2=$("$BIN" generate -m "$tmp/sm-g.gguf" -p "Once upon a time" -n 12 --temp 0 --ids 2>/dev/null)
check "the HF export loads and generates the GGUF output's greedy tokens (tokenizer from the synth GGUF)" '[ $rc2 -eq 0 ] && [ -n "$g1" ] && [ "$g1" = "$g2" ]'

# --- AWQ's module search on GQA and qwen2 (biases, NEOX RoPE) synthetic models ---
n=$(wc -l <"$T")
head -n $((n / 2)) "$T" >"$tmp/calib.txt"
tail -n +$((n / 2 + 1)) "$T" >"$tmp/eval.txt"
"$BIN" synth --arch llama --dim 128 --layers 2 --heads 8 --kv-heads 2 --ffn 384 --outliers 2 -o "$tmp/gqa.gguf" >/dev/null 2>&1
"$BIN" synth --arch qwen2 --dim 128 --layers 2 --heads 4 --kv-heads 2 --ffn 384 -o "$tmp/qw.gguf" >/dev/null 2>&1
for sm in gqa qw; do
  for m in rtn awq; do
    args=""
    [ $m = awq ] && args="--method awq --calib $tmp/calib.txt --calib-samples 32 --calib-seq-len 128 --seed 1"
    "$BIN" quantize "$tmp/$sm.gguf" "$tmp/$sm-$m.gguf" --type W4G32 $args -q >/dev/null 2>"$tmp/e-$sm-$m"
    K[$sm-$m]=$("$BIN" eval kld "$tmp/$sm.gguf" "$tmp/$sm-$m.gguf" -f "$tmp/eval.txt" -c 128 --json 2>/dev/null |
      python3 -c "import json,sys; print(json.load(sys.stdin)['kld_mean'])" 2>/dev/null || echo unmeasured)
  done
  echo "$sm W4G32 mean KLD: rtn ${K[$sm-rtn]}, awq ${K[$sm-awq]}"
  check "awq on the GQA $sm model: o gets no scales (no 1:1 fold into v), warned and named" \
    'grep -q "awq: 2 tensors were not quantized as planned: blk.0.attn_output.weight (no AWQ scales" "$tmp/e-$sm-awq"'
  check "$sm: KLD measured (rtn, awq)" 'measured "${K[$sm-rtn]}" "${K[$sm-awq]}"'
  check "awq beats rtn on the synthetic $sm model" 'less "${K[$sm-awq]}" "${K[$sm-rtn]}"'
done

# --- SmoothQuant folding is exact in float; gguf-compat ---
"$BIN" quantize "$M" "$tmp/sq.gguf" --type F32 --method smoothquant $C -q >/dev/null 2>&1; rc=$?
check "smoothquant F32 (folding only) written" '[ $rc -eq 0 ]'
"$BIN" logits -m "$M" -p "Once upon a time there was a little girl" --top 5 >"$tmp/l0" 2>/dev/null
"$BIN" logits -m "$tmp/sq.gguf" -p "Once upon a time there was a little girl" --top 5 >"$tmp/l1" 2>/dev/null
check "folded float model has the same logits (1e-4)" "python3 - \"$tmp/l0\" \"$tmp/l1\" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) > 0
worst = 0
for x, y in zip(a, b):
    tx, ty = x['top5'], y['top5']
    assert [t[0] for t in tx] == [t[0] for t in ty]
    for s, t in zip(tx, ty):
        worst = max(worst, abs(s[1] - t[1]))
    worst = max(worst, abs(x['logsumexp'] - y['logsumexp']))
print('largest logit difference', worst)
sys.exit(0 if worst < 1e-4 else 1)
PY"
"$BIN" quantize "$M" "$tmp/gc.gguf" --type W4G32 --format gguf-compat --method gptq $C -q >/dev/null 2>&1; rc=$?
"$BIN" inspect "$tmp/gc.gguf" >"$tmp/i" 2>&1
check "--format gguf-compat writes Q4_1 (llama.cpp types only)" '[ $rc -eq 0 ] && grep -q "Q4_1" "$tmp/i" && ! grep -q "W4G" "$tmp/i"'
finish

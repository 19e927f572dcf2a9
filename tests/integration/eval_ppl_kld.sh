#!/usr/bin/env bash
# nibble eval ppl / eval kld from the command line on the shared models:
# JSON keys, the perplexity alias, sliding windows, KLD of a model against
# itself (0, 100% top-1), KLD(Q8_0) < KLD(Q4_K_M) < KLD(Q4_0) against F16
# on synth-llama, --save-base then --base-logits equal to a direct run, a
# class partition summing back to the overall mean, and the refusals (exit 2
# with a message): vocabulary mismatch, another text, another -c, a
# truncated baseline file, a bad --class, a stride over the window.
set -u
BIN=$1
SHARED=${2:-../shared}
. "$(dirname "$0")/../lib/check.sh"
export XDG_CACHE_HOME=$tmp/cache

"$BIN" eval ppl -f /dev/null --stride 0 >/dev/null 2>"$tmp/e"; rc=$?
check "--stride 0 exits 2 naming the flag" '[ $rc -eq 2 ] && grep -q -- "--stride" "$tmp/e"'
"$BIN" eval kld -f /dev/null >/dev/null 2>"$tmp/e"; rc=$?
check "eval kld without models exits 2" '[ $rc -eq 2 ] && grep -q "BASE and CAND" "$tmp/e"'

M=$SHARED/models
T=$SHARED/reference/aidreams-sample.txt
if [ ! -f "$M/synth-llama-F16.gguf" ] || [ ! -f "$T" ]; then
  echo "SKIP: $SHARED/models not found"
  exit 77
fi
A=$M/aidreams260K.gguf
py() { python3 -c "$@"; }

# --- eval ppl -----------------------------------------------------------------------
"$BIN" eval ppl "$A" -f "$T" -c 128 --json >"$tmp/p1" 2>/dev/null
"$BIN" perplexity -m "$A" -f "$T" -c 128 --json >"$tmp/p2" 2>/dev/null
check "eval ppl: chunked, llama-perplexity's 10.105 over 23 chunks, every documented key" 'py "
import json; d=json.load(open(\"$tmp/p1\"))
keys={\"ppl\",\"ppl_stderr\",\"mean_nll\",\"n_scored\",\"n_tokens\",\"ctx\",\"stride\",\"mode\",\"model\"}
assert keys <= set(d), keys - set(d)
assert abs(d[\"ppl\"]-10.105)<0.002 and d[\"n_chunks\"]==23 and d[\"n_scored\"]==23*63, d
assert d[\"mode\"]==\"chunked\" and d[\"stride\"] is None and d[\"ctx\"]==128 and d[\"n_tokens\"]==3039
assert abs(d[\"ppl_stderr\"]-0.66378)<0.001
m=d[\"model\"]; assert m[\"type\"]==\"gguf\" and m[\"sha256\"].startswith(\"4bce04b2\") and m[\"path\"].endswith(\"aidreams260K.gguf\")
"'
check "perplexity is an alias: the same JSON" 'cmp -s "$tmp/p1" "$tmp/p2"'
"$BIN" eval ppl -m "$A" -f "$T" -c 128 --stride 128 --json >"$tmp/s1" 2>/dev/null
"$BIN" eval ppl -m "$A" -f "$T" -c 128 --stride 32 --json >"$tmp/s2" 2>/dev/null
check "sliding: stride = ctx scores all but each window's first token; stride 32 every token but t0" 'py "
import json; a=json.load(open(\"$tmp/s1\")); b=json.load(open(\"$tmp/s2\"))
assert a[\"mode\"]==\"sliding\" and a[\"stride\"]==128 and a[\"n_scored\"]==a[\"n_tokens\"]-a[\"n_chunks\"], a
assert b[\"n_scored\"]==b[\"n_tokens\"]-1 and b[\"n_chunks\"]==92, b
assert b[\"ppl\"] < a[\"ppl\"]  # more context per token
"'
"$BIN" eval ppl "$A" -f "$T" -c 64 --stride 65 >/dev/null 2>"$tmp/e"; rc=$?
check "--stride over the window exits 2 with the allowed range" '[ $rc -eq 2 ] && grep -q "1..64" "$tmp/e"'
"$BIN" eval ppl "$A" -f "$T" -c 128 --stride 64 >"$tmp/o" 2>/dev/null
check "text output names the sliding window" 'grep -q "sliding window of 128, stride 64" "$tmp/o"'

# --- eval kld -------------------------------------------------------------------------
F16=$M/synth-llama-F16.gguf
"$BIN" eval kld "$F16" "$F16" -f "$T" -c 128 --chunks 2 --json >"$tmp/self" 2>/dev/null
check "KLD of synth-llama F16 against itself is exactly 0, top-1 100%" 'py "
import json; d=json.load(open(\"$tmp/self\"))
assert d[\"kld_mean\"]==0 and d[\"kld_max\"]==0 and d[\"top1_agreement\"]==1 and d[\"ppl_ratio\"]==1 and d[\"n\"]==126, d
assert d[\"worst_class\"] is None
"'
"$BIN" eval kld "$F16" -f "$T" -c 128 --chunks 4 --save-base "$tmp/f16.nbkl" >"$tmp/o" 2>"$tmp/e"; rc=$?
check "--save-base with the baseline only writes the file" '[ $rc -eq 0 ] && [ -s "$tmp/f16.nbkl" ] && [ ! -e "$tmp/f16.nbkl.tmp" ] && grep -q "PPL(base)" "$tmp/o"'
for q in Q8_0 Q4_K_M Q4_0; do
  "$BIN" eval kld "$M/synth-llama-$q.gguf" --base-logits "$tmp/f16.nbkl" -f "$T" --json >"$tmp/$q" 2>"$tmp/e" \
    || bad "eval kld $q: $(cat "$tmp/e")"
done
check "KLD(Q8_0) < KLD(Q4_K_M) < KLD(Q4_0) against F16, top-1 in the reverse order" 'py "
import json; d={q: json.load(open(\"$tmp/\"+q)) for q in (\"Q8_0\",\"Q4_K_M\",\"Q4_0\")}
k=[d[q][\"kld_mean\"] for q in (\"Q8_0\",\"Q4_K_M\",\"Q4_0\")]; t=[d[q][\"top1_agreement\"] for q in (\"Q8_0\",\"Q4_K_M\",\"Q4_0\")]
print(\"   KLD\", k, \"top-1\", t)
assert 0 < k[0] < k[1] < k[2], k
assert t[0] > t[1] > t[2], t
"'
"$BIN" eval kld "$F16" "$M/synth-llama-Q4_0.gguf" -f "$T" -c 128 --chunks 4 --json >"$tmp/direct" 2>/dev/null
check "--base-logits gives the direct run's numbers exactly (full-logit file)" 'py "
import json; a=json.load(open(\"$tmp/direct\")); b=json.load(open(\"$tmp/Q4_0\"))
for k in (\"kld_mean\",\"kld_median\",\"kld_p90\",\"kld_p99\",\"kld_max\",\"top1_agreement\",\"ppl_base\",\"ppl_cand\",\"ppl_ratio\",\"n\",\"classes\",\"worst_class\"):
    assert a[k]==b[k], (k, a[k], b[k])
assert a[\"base\"]==b[\"base\"] and a[\"cand\"]==b[\"cand\"]
keys={\"kld_mean\",\"kld_median\",\"kld_p90\",\"kld_p99\",\"kld_max\",\"top1_agreement\",\"ppl_base\",\"ppl_cand\",\"ppl_ratio\",\"n\",\"classes\",\"worst_class\",\"base\",\"cand\"}
assert keys <= set(a), keys - set(a)
assert set(a[\"classes\"]) == {\"digit\",\"punct\",\"space\",\"word\",\"other\"}
for c in a[\"classes\"].values(): assert set(c) == {\"n\",\"kld_mean\",\"top1_agreement\"}
assert a[\"kld_median\"] <= a[\"kld_p90\"] <= a[\"kld_p99\"] <= a[\"kld_max\"]
"'
"$BIN" eval kld "$F16" "$M/synth-llama-Q4_K_M.gguf" -f "$T" -c 128 --chunks 3 --json \
  --class 'num=[0-9]' --class 'nonum=^[^0-9]*$' >"$tmp/part" 2>/dev/null
check "a partition of classes (num / nonum) sums back to the overall mean, weighted by n" 'py "
import json; d=json.load(open(\"$tmp/part\")); c=d[\"classes\"]
n=c[\"num\"][\"n\"]+c[\"nonum\"][\"n\"]; assert n==d[\"n\"], (n, d[\"n\"])
m=(c[\"num\"][\"kld_mean\"]*c[\"num\"][\"n\"]+c[\"nonum\"][\"kld_mean\"]*c[\"nonum\"][\"n\"])/n
assert abs(m-d[\"kld_mean\"]) < 1e-9*d[\"kld_mean\"], (m, d[\"kld_mean\"])
assert c[\"num\"][\"n\"]==c[\"digit\"][\"n\"]
"'
"$BIN" eval kld "$F16" "$M/synth-llama-Q4_K_M.gguf" -f "$T" -c 128 --chunks 2 >"$tmp/o" 2>/dev/null
check "text report: KLD percentiles, same top, the class table and the worst class" \
  'grep -q "median" "$tmp/o" && grep -q "p90" "$tmp/o" && grep -q "same top" "$tmp/o" && grep -q "^worst class: " "$tmp/o" && grep -q "^digit " "$tmp/o"'

"$BIN" eval kld "$A" "$M/aidreams260K.bin" -f "$T" -c 128 --chunks 3 --json >"$tmp/x" 2>"$tmp/e"
check "across formats: aidreams260K GGUF vs its llama2.c .bin pass the vocabulary check, KLD 0" 'py "
import json; d=json.load(open(\"$tmp/x\"))
assert d[\"kld_max\"] < 1e-9 and d[\"top1_agreement\"]==1 and d[\"cand\"][\"type\"]==\"llama2c\" and d[\"base\"][\"type\"]==\"gguf\", d
"'

# --- refusals ------------------------------------------------------------------------
"$BIN" eval kld "$A" "$F16" -f "$T" -c 128 >/dev/null 2>"$tmp/e"; rc=$?
check "vocabulary mismatch (aidreams260K vs synth-llama) exits 2 with a message" \
  '[ $rc -eq 2 ] && grep -q "vocabulary mismatch" "$tmp/e" && grep -q "512" "$tmp/e" && grep -q "32000" "$tmp/e"'
"$BIN" synth --arch llama --dim 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 -o "$tmp/bpe512.gguf" >/dev/null 2>&1
"$BIN" eval kld "$A" "$tmp/bpe512.gguf" -f "$T" -c 128 >/dev/null 2>"$tmp/e"; rc=$?
check "same size, different token texts exits 2 naming the first differing token" \
  '[ $rc -eq 2 ] && grep -q "vocabulary mismatch: token" "$tmp/e"'
head -c 3000 "$T" >"$tmp/other.txt"
"$BIN" eval kld "$M/synth-llama-Q8_0.gguf" --base-logits "$tmp/f16.nbkl" -f "$tmp/other.txt" >/dev/null 2>"$tmp/e"; rc=$?
check "--base-logits on another text exits 2" '[ $rc -eq 2 ] && grep -q "different text" "$tmp/e"'
"$BIN" eval kld "$M/synth-llama-Q8_0.gguf" --base-logits "$tmp/f16.nbkl" -f "$T" -c 64 >/dev/null 2>"$tmp/e"; rc=$?
check "--base-logits with another -c exits 2" '[ $rc -eq 2 ] && grep -q "made with -c 128" "$tmp/e"'
"$BIN" eval kld "$A" --base-logits "$tmp/f16.nbkl" -f "$T" >/dev/null 2>"$tmp/e"; rc=$?
check "--base-logits of another vocabulary exits 2" '[ $rc -eq 2 ] && grep -q "vocabulary mismatch" "$tmp/e"'
head -c 100000 "$tmp/f16.nbkl" >"$tmp/trunc.nbkl"
"$BIN" eval kld "$M/synth-llama-Q8_0.gguf" --base-logits "$tmp/trunc.nbkl" -f "$T" >/dev/null 2>"$tmp/e"; rc=$?
check "a truncated baseline file exits 2" '[ $rc -eq 2 ] && grep -q "header implies" "$tmp/e"'
"$BIN" eval kld "$F16" "$F16" --base-logits "$tmp/f16.nbkl" -f "$T" >/dev/null 2>"$tmp/e"; rc=$?
check "--base-logits with two models exits 2" '[ $rc -eq 2 ] && grep -q "only the candidate" "$tmp/e"'
"$BIN" eval kld "$F16" "$F16" -f "$T" --class 'x=a(b' >/dev/null 2>"$tmp/e"; rc=$?
check "a --class regex that does not compile exits 2 with the offset" '[ $rc -eq 2 ] && grep -q "offset" "$tmp/e"'
"$BIN" eval kld "$F16" -f "$T" -c 128 --chunks 1 --save-base "$tmp/nodir/x.nbkl" >/dev/null 2>"$tmp/e"; rc=$?
check "an unwritable --save-base exits non-zero and leaves nothing" '[ $rc -ne 0 ] && [ ! -e "$tmp/nodir" ]'
finish

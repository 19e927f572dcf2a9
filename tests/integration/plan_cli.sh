#!/usr/bin/env bash
# nibble plan end to end: a preset as text (the three steps), --json parsed
# with python3 and checked against the seeds' 14B example and the KV formula,
# --compare, a GGUF file (weights = the sum of its tensor sizes), a refusal
# (exit 2 with vLLM-style words), and bad flags (exit 2 naming the flag).
# $1 = nibble binary, $2 = shared dir.
set -u
BIN=${1:?usage: plan_cli.sh NIBBLE SHARED}
SHARED=${2:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }

# --- text: the three steps -------------------------------------------------------
"$BIN" plan qwen2.5-14b --gpu v100-32g --engine fixed --weights int4 --max-model-len 8192 --lengths 4096,8192,32768 \
    >"$TMP/t.txt" || fail "plan text exit $?"
for s in "① budget" "② weights" "③ KV pool" "192.0 KiB per token" "GiB = 2^30" "split_pools" "overhead_estimate"; do
    grep -q "$s" "$TMP/t.txt" || fail "text lacks '$s'"
done

# --- JSON: seeds/000's 14B on a 32 GB card, int4, with the seed's own fixed 2 GiB overhead ---
"$BIN" plan qwen2.5-14b --gpu-mem 32GiB --engine fixed --weights int4 --max-model-len 8192 --lengths 4096,8192,32768 --json \
    >"$TMP/a.json" || fail "plan --json exit $?"
python3 - "$TMP/a.json" <<'PY' || fail "json checks"
import json, sys
j = json.load(open(sys.argv[1]))
a, w, kv = j["account"], j["weights"], j["kv"]
assert kv["bytes_per_token"] == 48 * 8 * 128 * 2 * 2, kv            # 192 KiB
assert a["budget_bytes"] == round(0.9 * 32 * 2**30), a["budget_bytes"]
assert a["pool_bytes"] == a["budget_bytes"] - w["bytes_per_card"] - a["overhead_bytes"]
assert a["kv_tokens"] == a["pool_bytes"] // kv["bytes_per_token_per_card"]
conc = {c["length"]: c["sequences"] for c in a["concurrency"]}
for L, n in conc.items():
    assert n == a["kv_tokens"] // L, (L, n)
assert 21 <= conc[4096] <= 24 and 10 <= conc[8192] <= 12 and 2 <= conc[32768] <= 3, conc   # seed: 22 / 11 / 2
assert abs(w["params"] - 14.77e9) / 14.77e9 < 0.005, w["params"]
assert j["refused"] is False and a["overhead_is_estimate"] is True
assert sum(g["bytes"] for g in w["groups"].values()) == w["bytes"]
PY

# --- compare -------------------------------------------------------------------------
"$BIN" plan llama-3.1-8b --gpu a10-24g --max-model-len 8192 --compare >"$TMP/c.txt" || fail "compare exit $?"
for s in fp16 fp8 int8 int4 fp8_not_native; do grep -q "$s" "$TMP/c.txt" || fail "compare lacks '$s'"; done
"$BIN" plan llama-3.1-8b --gpu a10-24g --max-model-len 8192 --compare=fp16,int4,q4_k_m --json >"$TMP/c.json" \
    || fail "compare --json exit $?"
python3 - "$TMP/c.json" <<'PY' || fail "compare json checks"
import json, sys
j = json.load(open(sys.argv[1]))
s = j["schemes"]
assert [x["weights"]["scheme"] for x in s] == ["fp16", "int4", "q4_k_m"]
b = [x["weights"]["bytes"] for x in s]
assert b[0] == 2 * 8030261248 and b[1] < 0.4 * b[0], b  # fp16 embeddings + lm_head keep int4 above 1/4
assert s[1]["account"]["kv_tokens"] > s[0]["account"]["kv_tokens"]
PY

# --- GGUF: weights are the file's tensor bytes -----------------------------------------
G="$SHARED/models/synth-llama-Q4_K_M.gguf"
if [ -f "$G" ]; then
    "$BIN" plan "$G" --gpu-mem 8GiB --json >"$TMP/g.json" || fail "gguf plan exit $?"
    python3 - "$TMP/g.json" "$G" <<'PY' || fail "gguf json checks"
import json, struct, sys
j = json.load(open(sys.argv[1]))
# independent GGUF walk: sum of the tensor sizes from the tensor infos
f = open(sys.argv[2], "rb"); d = f.read()
o = 4
ver, nt, nkv = struct.unpack_from("<IQQ", d, o); o += 20
def s(o):
    n, = struct.unpack_from("<Q", d, o); return o + 8 + n
sizes = {0: 4, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def val(o, t):
    if t == 8: return s(o)
    if t == 9:
        et, n = struct.unpack_from("<IQ", d, o); o += 12
        for _ in range(n): o = val(o, et)
        return o
    return o + sizes[t]
for _ in range(nkv):
    o = s(o); t, = struct.unpack_from("<I", d, o); o = val(o + 4, t)
blk = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 14: (256, 210)}
total = 0
for _ in range(nt):
    o = s(o); nd, = struct.unpack_from("<I", d, o); o += 4
    ne = struct.unpack_from("<%dQ" % nd, d, o); o += 8 * nd
    t, = struct.unpack_from("<I", d, o); o += 12
    n = 1
    for x in ne: n *= x
    be, bb = blk[t]
    total += n // be * bb
assert j["weights"]["exact"] is True
assert j["weights"]["bytes"] == total, (j["weights"]["bytes"], total)
assert j["weights"]["params"] == 19400960
PY
else
    echo "SKIP: $G not found (the shared/ folder with test models is absent)"
fi

# --- refusal: exit 2, the words nibble serve prints ---------------------------------------
"$BIN" plan llama-3.1-8b --gpu rtx4090-24g >"$TMP/r.txt" 2>"$TMP/r.err"; rc=$?
[ $rc -eq 2 ] || fail "refusal exit $rc, want 2"
grep -q "The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache" \
    "$TMP/r.err" || fail "refusal text (vLLM's words by default): $(cat "$TMP/r.err")"
"$BIN" plan llama-3.1-8b --gpu rtx4090-24g --engine fixed >/dev/null 2>"$TMP/r.err"; rc=$?
[ $rc -eq 2 ] || fail "fixed refusal exit $rc, want 2"
grep -q "max model len 131072 is larger than the maximum number of tokens that can be stored in KV cache" "$TMP/r.err" \
    || fail "refusal text (nibble serve's words with --engine fixed): $(cat "$TMP/r.err")"

# --- the overhead model against a published vLLM log (vllm#10517, RTX 3090) ------------------
# 29000 tokens: vLLM refused ("... KV cache (23648)"); 20000 tokens: it started with 1952 blocks.
"$BIN" plan llama-3.1-8b --gpu rtx3090-24g --engine vllm-v0 --max-model-len 29000 >/dev/null 2>"$TMP/v.err"; rc=$?
[ $rc -eq 2 ] || fail "vllm-v0 29000 exit $rc, want 2 (vLLM refused)"
"$BIN" plan llama-3.1-8b --gpu rtx3090-24g --engine vllm-v0 --max-model-len 20000 --json >"$TMP/v.json" \
    || fail "vllm-v0 20000 exit $?"
python3 - "$TMP/v.json" <<'PY' || fail "vllm-v0 json checks"
import json, sys
a = json.load(open(sys.argv[1]))["account"]
blocks = a["kv_tokens"] // 16
assert abs(blocks - 1952) / 1952 < 0.05, blocks                   # vLLM: 1952 blocks
names = [t["name"] for t in a["overhead"]["terms"]]
assert names[:2] == ["runtime", "activation"] and a["overhead"]["profile_tokens"] == 20000, a["overhead"]
assert a["overhead_bytes"] == sum(t["bytes"] for t in a["overhead"]["terms"])
PY

# --- --calibrate: the log's own numbers become the plan's -------------------------------------
export NIBBLE_PLAN_PROFILES="$TMP/profiles.json"
cat >"$TMP/vllm.log" <<'LOG'
INFO 12-02 10:00:00 model_runner.py:1094] Loading model weights took 14.9888 GB
INFO 12-02 10:00:05 worker.py:237] Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90
INFO 12-02 10:00:05 gpu_executor.py:76] # GPU blocks: 1952, # CPU blocks: 2048
LOG
"$BIN" plan llama-3.1-8b --gpu rtx3090-24g --engine vllm-v0 --max-model-len 20000 --calibrate "$TMP/vllm.log" --json \
    >"$TMP/k.json" || fail "calibrate exit $?"
[ -s "$TMP/profiles.json" ] || fail "calibrate stored no profile"
python3 - "$TMP/k.json" <<'PY' || fail "calibrated json checks"
import json, sys
a = json.load(open(sys.argv[1]))["account"]
assert a["overhead"]["calibrated"] is True, a["overhead"]
pool = a["pool_bytes"] / 2**30
assert abs(pool - 3.81) < 0.04, pool                                # the log's KV, back to within rounding
PY
"$BIN" plan llama-3.1-8b --gpu rtx3090-24g --engine vllm-v0 --max-model-len 20000 2>"$TMP/u.err" >/dev/null \
    || fail "plan with a stored profile exit $?"
grep -q "using the calibration stored in" "$TMP/u.err" || fail "stored calibration not used: $(cat "$TMP/u.err")"
echo "no startup lines here" >"$TMP/bad.log"
"$BIN" plan llama-3.1-8b --gpu rtx3090-24g --calibrate "$TMP/bad.log" >/dev/null 2>"$TMP/b.err"; rc=$?
[ $rc -eq 2 ] || fail "bad log exit $rc, want 2"
grep -q "no startup account found" "$TMP/b.err" || fail "bad log message: $(cat "$TMP/b.err")"
unset NIBBLE_PLAN_PROFILES
grep -q "REFUSED" "$TMP/r.txt" || fail "refusal not in the account"
"$BIN" plan llama-3.1-8b --gpu rtx4090-24g --engine vllm-v0 --max-model-len 8192 >/dev/null || fail "8192 should fit on a 4090 under vllm-v0"

# --- --engine nibble: the plan is nibble serve's own startup account, to the byte ---------------
# serve_vs_plan FLAGS...: nibble serve's startup account and the plan's with the same flags agree
serve_vs_plan() {
    # A fresh file: the wait below must not match the previous call's account and kill the
    # background job before it has exec'd (bash runs the EXIT trap, rm -rf $TMP, in that child).
    rm -f "$TMP/s.out"
    timeout 60 "$BIN" serve "$M" --port 0 "$@" >"$TMP/s.out" 2>&1 &
    SP=$!
    for _ in $(seq 1 100); do grep -q "memory in bytes" "$TMP/s.out" && break; sleep 0.1; done
    kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null
    grep -q "memory in bytes" "$TMP/s.out" || fail "serve $* printed no account: $(cat "$TMP/s.out")"
    "$BIN" plan "$M" --host --engine nibble "$@" --json >"$TMP/n.json" || fail "plan --engine nibble $* exit $?"
    python3 - "$TMP/s.out" "$TMP/n.json" <<'PY' || fail "plan --engine nibble $* differs from nibble serve's account"
import json, re, sys
line = [l for l in open(sys.argv[1]) if l.startswith("memory in bytes")][0]
serve = {k: int(v) for k, v in re.findall(r"(budget|weights|overhead|pool) (-?\d+)", line)}
a = json.load(open(sys.argv[2]))["account"]
plan = {"budget": a["budget_bytes"], "weights": a["weights_bytes_per_card"], "overhead": a["overhead_bytes"],
        "pool": a["pool_bytes"]}
assert serve == plan, (serve, plan)
PY
}
if [ -n "$SHARED" ] && [ -f "$SHARED/models/synth-llama-Q4_0.gguf" ]; then
    M="$SHARED/models/synth-llama-Q4_0.gguf"
    serve_vs_plan --max-model-len 256 --max-num-seqs 8 --max-num-batched-tokens 128
    serve_vs_plan --max-model-len 256 --max-num-seqs 8       # the step budget both default to
    serve_vs_plan --max-model-len 256 --max-num-seqs 200     # a default budget of max_num_seqs
else
    echo "SKIP: ../shared models absent: plan --engine nibble vs serve not checked"
fi

# --- bad input: exit 2 naming the flag ------------------------------------------------------
"$BIN" plan llama-3.1-8b --gpu h100-80g --memory-utilization 1.5 2>"$TMP/e1"; rc=$?
[ $rc -eq 2 ] || fail "--memory-utilization 1.5: exit $rc"
grep -q -- "--memory-utilization" "$TMP/e1" || fail "error does not name the flag: $(cat "$TMP/e1")"
"$BIN" plan llama-3.1-8b --gpu h100-80g --frobnicate 2>"$TMP/e2"; rc=$?
[ $rc -eq 2 ] || fail "unknown flag: exit $rc"
grep -q -- "--frobnicate" "$TMP/e2" || fail "error does not name the unknown flag"
"$BIN" plan llama-3.1-8b --gpu h100-80g --weights int3 2>"$TMP/e3"; rc=$?
[ $rc -eq 2 ] || fail "--weights int3: exit $rc"
grep -q -- "--weights" "$TMP/e3" || fail "error does not name --weights"
"$BIN" plan llama-3.1-8b --gpu nosuchcard 2>"$TMP/e4"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--gpu" "$TMP/e4" || fail "unknown --gpu: exit $rc $(cat "$TMP/e4")"
"$BIN" plan no-such-model --gpu h100-80g 2>/dev/null; [ $? -eq 2 ] || fail "unknown model must exit 2"
"$BIN" plan llama-3.1-8b 2>/dev/null; [ $? -eq 2 ] || fail "no hardware must exit 2"
"$BIN" plan --list-models | grep -q "qwen3-30b-a3b" || fail "--list-models"
"$BIN" plan --list-gpus | grep -q "mi300x-192g" || fail "--list-gpus"
[ -f "$G" ] || { echo "SKIP: $G not found: the GGUF checks did not run (the others passed)"; exit 77; }
echo "plan_cli: ok"

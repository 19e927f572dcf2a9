#!/usr/bin/env bash
# 32 concurrent streaming clients against nibble serve and llama-server,
# interleaved (docs/speed.md, "Serving 32 clients").
#
#   bench/serve32.sh NIBBLE MODEL.gguf OUTDIR [REPS] [CONFIGS...]
#
# CONFIGS (default: "llama nb:default"): llama = llama-server -np 32;
# nb:default = nibble serve with its defaults; nb:ARGS = nibble serve with
# ARGS (commas for spaces, e.g. nb:--max-num-batched-tokens,128).
# Each rep runs every config in turn (interleaved, so a busy host shifts them
# alike); one line per run goes to OUTDIR/summary.tsv. The load:
# 64 requests, 32 in flight, synthetic prompts of INPUT_LEN words (default
# 79: 80 prompt tokens with the Llama SPM vocabulary of /tmp/sbs/tl-*.gguf,
# one token per word plus BOS), 64 output tokens each (ignore_eos), 2 threads.
# Env: LLAMA_BIN (default /tmp/llamacpp/build/bin), THREADS (2), PORT (18431), INPUT_LEN (79),
# REP0 (0: rep numbers start at REP0+1, to add reps to an OUTDIR), EXTRA_BODY
# (passed to every run as `bench serve --extra-body`, e.g. @FILE with a
# logit_bias of -100 on the byte tokens: with a random-weight model,
# llama-server fails the requests whose output is not valid UTF-8).
set -u
NB=${1:?nibble binary}; MODEL=${2:?model}; OUT=${3:?outdir}; REPS=${4:-2}
shift 4 2>/dev/null || shift $#
CONFIGS=("$@"); [ ${#CONFIGS[@]} -eq 0 ] && CONFIGS=(llama nb:default)
LLAMA_BIN=${LLAMA_BIN:-/tmp/llamacpp/build/bin}; T=${THREADS:-2}; PORT=${PORT:-18431}
mkdir -p "$OUT"
S="$OUT/summary.tsv"
[ -f "$S" ] || printf 'rep\tconfig\tstart_utc\tload1\tout_tok_s\tttft_p50\tttft_p99\ttpot_p50\ttpot_p99\tok\tfailed\n' >"$S"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') x$(nproc)" >"$OUT/host.txt"

wait_ready() {
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.5
    done
    return 1
}

for rep in $(seq $((${REP0:-0} + 1)) $((${REP0:-0} + REPS))); do
    for cfg in "${CONFIGS[@]}"; do
        tag=$(echo "$cfg" | tr -c 'A-Za-z0-9_.\n-' '_')
        log="$OUT/r$rep-$tag.server.log"
        if [ "$cfg" = llama ]; then
            LD_LIBRARY_PATH="$LLAMA_BIN" "$LLAMA_BIN/llama-server" -m "$MODEL" -t "$T" -np 32 -c 16384 \
                --host 127.0.0.1 --port "$PORT" >"$log" 2>&1 &
        else
            args=${cfg#nb:}; [ "$args" = default ] && args=""
            # shellcheck disable=SC2086
            "$NB" serve "$MODEL" -t "$T" --host 127.0.0.1 --port "$PORT" ${args//,/ } >"$log" 2>&1 &
        fi
        pid=$!
        if ! wait_ready $pid; then echo "serve32: $cfg did not start (see $log)" >&2; kill $pid 2>/dev/null; wait $pid; continue; fi
        start=$(date -u +%H:%M:%S); load=$(cut -d' ' -f1 /proc/loadavg)
        "$NB" bench serve --endpoint "http://127.0.0.1:$PORT" --concurrency 32 --num-prompts 64 --warmup 0 \
            --input-len "${INPUT_LEN:-79}" --output-len 64 --ignore-eos --seed 1 --request-timeout 900 --no-metrics \
            ${EXTRA_BODY:+--extra-body "$EXTRA_BODY"} --out "$OUT/r$rep-$tag" \
            >"$OUT/r$rep-$tag.bench.log" 2>&1
        kill $pid; wait $pid 2>/dev/null
        python3 - "$OUT/r$rep-$tag/results.json" "$rep" "$cfg" "$start" "$load" >>"$S" <<'EOF'
import json, sys
f, rep, cfg, start, load = sys.argv[1:]
try:
    L = json.load(open(f))["levels"][0]
    g = lambda k, p: "%.3f" % L[k][p] if L[k] else "-"
    print("\t".join([rep, cfg, start, load, "%.1f" % L["output_tok_per_s"], g("ttft_s", "p50"), g("ttft_s", "p99"),
                     g("tpot_s", "p50"), g("tpot_s", "p99"), str(L["requests_ok"]), str(L["requests_failed"])]))
except Exception as e:
    print("\t".join([rep, cfg, start, load, "error: %s" % e]))
EOF
        tail -1 "$S"
    done
done

#!/usr/bin/env bash
# Prefix affinity and the short/long pools (deploy/fleet.sh, HAProxy),
# loopback, the built-in model:
#   - 8 system prompts of ~1,000 tokens, each shared by 8 requests in a
#     shuffled order, against two replicas whose KV pools hold about half of
#     them: consistent hashing over the body's first bytes (--balance hash)
#     gives the fleet a higher prefix-cache hit rate than leastconn (hits /
#     queries summed over both replicas' /metrics); mean TTFT is reported.
#   - pools: long and short requests mixed; with --long 1 every long body
#     goes to the long replica and every short one to the short one (counted
#     from each replica's /metrics); short requests' p99 TTFT with pools vs
#     one pool of two replicas is printed (a measurement for
#     docs/operations.md, not asserted).
# Skips (77) without haproxy.
set -u
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
. "$HERE/../lib/fleet.sh"

python3 - "$tmp" <<'PY'
import json, random, sys
d = sys.argv[1]
rnd = random.Random(11)
words = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact system program question night story water room mother area "
         "money month lot right study book job word business issue side kind head house service friend father power "
         "hour game line end member law car city community name president team minute idea kid body information").split()
sys_prompts = [("System %d: " % k) + " ".join(rnd.choice(words) for _ in range(340)) for k in range(8)]
order = [k for k in range(8) for _ in range(8)]
rnd.shuffle(order)
with open(d + "/affinity.jsonl", "w") as f:
    for i, k in enumerate(order):
        f.write(json.dumps({"prompt": sys_prompts[k] + "\nUser question %d: what next?\nAnswer:" % i, "max_tokens": 2}) + "\n")
# pools: one long (~1,000 tokens) per three short (~10 tokens), shuffled
items = [{"prompt": " ".join(rnd.choice(words) for _ in range(340)), "max_tokens": 4} for _ in range(12)]
items += [{"prompt": " ".join(rnd.choice(words) for _ in range(5)), "max_tokens": 4} for _ in range(36)]
rnd.shuffle(items)
with open(d + "/mixed.jsonl", "w") as f:
    for it in items: f.write(json.dumps(it) + "\n")
print(sum(1 for it in items if len(it["prompt"]) > 1000), file=open(d + "/n_long", "w"))
PY

# per replica, from its own /metrics: "requests prompt_tokens prefix_queries prefix_hits"
counters() {
  curl -s -m 5 "http://$1/metrics" | awk '
    /^nibble:request_success_total/ {r += $2} /^nibble:prompt_tokens_total/ {p += $2}
    /^nibble:prefix_cache_queries_total/ {q += $2} /^nibble:prefix_cache_hits_total/ {h += $2}
    END {printf "%d %d %d %d\n", r, p, q, h}'
}
addr() { awk -v n="$1" '$1 == n {print $3}' "$D/replicas"; }
bench() { # out-dir prompts concurrency n
  timeout 400 "$BIN" bench serve --endpoint "$U" --no-metrics --warmup 0 --seed 3 --prompts "$2" \
    --concurrency "$3" --num-prompts "$4" --out "$1" >"$1.log" 2>&1
}
summary() { python3 - "$1" <<'PY'
import json, sys
l = json.load(open(sys.argv[1] + "/results.json"))["levels"][0]
print(l["requests_ok"], l["requests_failed"], round(l["ttft_s"]["mean"] * 1000, 1) if l["ttft_s"] else "nan")
PY
}
# 8 prefixes of ~1,000 tokens; each replica's pool: 18 MiB = ~4,600 tokens of the built-in model
SERVE=(--max-model-len 1152 -t 1 --kv-cache-bytes 18MiB)

declare -A HIT TTFT P99
for mode in leastconn hash; do
  bash "$FLEET" down --dir "$D" >/dev/null 2>&1
  timeout 120 bash "$FLEET" up --dir "$D" --nibble "$BIN" --blue 2 --balance $mode --hash-bytes 512 \
    --bind "127.0.0.1:$FPORT" --check-inter 300 -- "${SERVE[@]}" >"$tmp/up_$mode" 2>&1 ||
    { bad "fleet up ($mode): $(tail -n 3 "$tmp/up_$mode")"; finish; exit 1; }
  for _ in $(seq 1 50); do curl -sf -m 2 "$U/health" >/dev/null && break; sleep 0.1; done
  read -r _ _ q1a h1a < <(counters "$(addr b1)"); read -r _ _ q2a h2a < <(counters "$(addr b2)")
  bench "$tmp/a_$mode" "$tmp/affinity.jsonl" 4 64
  read -r r1 _ q1b h1b < <(counters "$(addr b1)"); read -r r2 _ q2b h2b < <(counters "$(addr b2)")
  read -r okn failn ttft < <(summary "$tmp/a_$mode")
  HIT[$mode]=$(python3 -c "print(round(($h1b - $h1a + $h2b - $h2a) / max(1, $q1b - $q1a + $q2b - $q2a), 3))")
  TTFT[$mode]=$ttft
  [ "$failn" = 0 ] || { grep -A4 '"errors"' "$tmp/a_$mode/results.json"; tail -n 3 "$tmp/a_$mode.log"; }
  check "$mode: 64 requests ($okn ok, $failn failed; b1 $r1, b2 $r2), fleet prefix-cache hit rate ${HIT[$mode]}, mean TTFT ${ttft} ms" \
    '[ "$okn" = 64 ] && [ "$failn" = 0 ]'
done
check "prefix affinity: hash hit rate ${HIT[hash]} > leastconn ${HIT[leastconn]} (mean TTFT ${TTFT[hash]} vs ${TTFT[leastconn]} ms, reported)" \
  'python3 -c "import sys; sys.exit(0 if ${HIT[hash]} > ${HIT[leastconn]} else 1)"'

# --- pools: short and long requests mixed ---
short_p99() { python3 - "$1/requests.csv" <<'PY'
import csv, sys
t = sorted(float(r["ttft_s"]) for r in csv.DictReader(open(sys.argv[1])) if r["ok"] in ("1", "true") and int(r["prompt_tokens"]) < 200)
if not t: print("nan"); sys.exit()
h = 0.99 * (len(t) - 1); i = int(h)
print(round(1000 * (t[i] + (h - i) * (t[min(i + 1, len(t) - 1)] - t[i])), 1))
PY
}
NLONG=$(cat "$tmp/n_long")
for layout in single pools; do
  bash "$FLEET" down --dir "$D" >/dev/null 2>&1
  if [ $layout = single ]; then args=(--blue 2); else args=(--blue 1 --long 1 --long-threshold 1000); fi
  timeout 120 bash "$FLEET" up --dir "$D" --nibble "$BIN" "${args[@]}" --bind "127.0.0.1:$FPORT" --check-inter 300 \
    -- --max-model-len 1152 -t 1 >"$tmp/up_$layout" 2>&1 || { bad "fleet up ($layout)"; continue; }
  for _ in $(seq 1 50); do curl -sf -m 2 "$U/health" >/dev/null && break; sleep 0.1; done
  if [ $layout = pools ]; then read -r sa _ _ _ < <(counters "$(addr b1)"); read -r la _ _ _ < <(counters "$(addr l1)"); fi
  bench "$tmp/p_$layout" "$tmp/mixed.jsonl" 6 48
  read -r okn failn _ < <(summary "$tmp/p_$layout")
  P99[$layout]=$(short_p99 "$tmp/p_$layout")
  echo "pools measurement ($layout): 48 requests ($NLONG long), $okn ok, short requests' p99 TTFT ${P99[$layout]} ms"
  if [ $layout = pools ]; then
    read -r sb _ _ _ < <(counters "$(addr b1)"); read -r lb _ _ _ < <(counters "$(addr l1)")
    check "pools: the long replica served exactly the $NLONG long requests ($((lb - la))), the short one the other $((48 - NLONG)) ($((sb - sa)))" \
      '[ "$okn" = 48 ] && [ $((lb - la)) -eq "$NLONG" ] && [ $((sb - sa)) -eq $((48 - NLONG)) ]'
  else
    check "single pool: 48 mixed requests, $okn ok" '[ "$okn" = 48 ]'
  fi
done
echo "MEASURED short requests' p99 TTFT: one pool of 2 ${P99[single]} ms, short+long pools ${P99[pools]} ms (not asserted)"
finish

#!/usr/bin/env bash
# Replicas behind HAProxy (deploy/fleet.sh), driven by `nibble bench serve`,
# loopback only, the built-in model with a small --max-model-len:
#   - two blue replicas (+ one green at 0%): every request succeeds, both
#     blues serve, green serves none;
#   - canary under load: shift green 0 -> 10 -> 100 -> 0 while the bench
#     runs, each shift under a second, zero failed requests; then the share
#     of requests each pool served at 10 / 100 / 0 %, read from each
#     replica's own /metrics, within a few points of the weight;
#   - killing a replica (SIGKILL) mid-run loses at most the requests in
#     flight on it (counted), and requests sent afterwards all succeed;
#   - draining a replica (SIGTERM) mid-run loses none, and it exits 0.
# Skips (77) without haproxy.
set -u
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
. "$HERE/../lib/fleet.sh"

timeout 120 bash "$FLEET" up --dir "$D" --nibble "$BIN" --blue 2 --green 1 --bind "127.0.0.1:$FPORT" \
  --check-inter 300 -- --max-model-len 128 -t 1 >"$tmp/up" 2>&1
check "fleet up: 2 blue + 1 green replicas behind HAProxy" 'grep -q "fleet: up" "$tmp/up" || { cat "$tmp/up"; false; }'
grep -q "fleet: up" "$tmp/up" || { finish; exit 1; }
addr() { awk -v n="$1" '$1 == n {print $3}' "$D/replicas"; }
pid_of() { awk -v n="$1" '$1 == n {print $2}' "$D/replicas"; }
B1=$(addr b1) B2=$(addr b2) G1=$(addr g1)
for _ in $(seq 1 50); do curl -sf -m 2 "$U/health" >/dev/null && break; sleep 0.1; done

# finished requests per replica, from its own /metrics (all finish reasons)
served() {
  local a out=""
  for a in "$@"; do
    out+="$(curl -s -m 5 "http://$a/metrics" | awk '/^nibble:request_success_total/ {s += $2} END {printf "%d", s}') "
  done
  echo "$out"
}
bench() { # out-dir bench-args...
  local o=$1; shift
  timeout 300 "$BIN" bench serve --endpoint "$U" --no-metrics --warmup 0 --ignore-eos --seed 7 --out "$o" "$@" \
    >"$o.log" 2>&1
}
failed() { python3 -c 'import json,sys; print(sum(l["requests_failed"] for l in json.load(open(sys.argv[1]))["levels"]))' "$1/results.json"; }
okc() { python3 -c 'import json,sys; print(sum(l["requests_ok"] for l in json.load(open(sys.argv[1]))["levels"]))' "$1/results.json"; }
# A shift: prints the runtime API's round trip in seconds (fleet.sh measures
# it; starting bash + python on this busy machine takes longer than the shift).
shift_to() { # color pct
  local out
  out=$(bash "$FLEET" shift "$1" "$2" --dir "$D" 2>&1) || echo "shift $1 $2 failed: $out" >>"$tmp/shift_err"
  echo "$out" >>"$tmp/shifts"
  python3 -c "import re,sys; m=re.search(r'runtime API: ([0-9.]+) ms', sys.argv[1]); print(round(float(m.group(1))/1000, 4) if m else 99)" "$out"
}
checkd() { if eval "$2"; then ok "$1"; else bad "$1"; eval "$3"; fi; } # check, and on failure run $3
errs() { python3 -c 'import json,sys; e={}
for l in json.load(open(sys.argv[1]))["levels"]:
    for k,v in l["errors"].items(): e[k]=e.get(k,0)+v
print(e)' "$1/results.json"; }

# --- 1. all succeed; both blues serve; green (0%) none ---
read -r b1a b2a g1a < <(served "$B1" "$B2" "$G1")
bench "$tmp/r1" --concurrency 4 --num-prompts 24 --input-len 4:8 --output-len 4
read -r b1b b2b g1b < <(served "$B1" "$B2" "$G1")
check "two replicas: 24 requests, $(okc "$tmp/r1") ok, $(failed "$tmp/r1") failed" '[ "$(failed "$tmp/r1")" = 0 ] && [ "$(okc "$tmp/r1")" = 24 ]'
check "both blues served (b1 $((b1b - b1a)), b2 $((b2b - b2a))), green at 0% none ($((g1b - g1a)))" \
  '[ $((b1b - b1a)) -gt 0 ] && [ $((b2b - b2a)) -gt 0 ] && [ $((g1b - g1a)) -eq 0 ] && [ $((b1b + b2b - b1a - b2a)) -eq 24 ]'

# --- 2. canary under load: 0 -> 10 -> 100 -> 0 with zero failures ---
bench "$tmp/r2" --concurrency 4 --duration 8 --input-len 4:8 --output-len 8 --max-error-rate 1 &
bp=$!
sleep 1.5; s10=$(shift_to green 10)
sleep 1.5; s100=$(shift_to green 100)
sleep 1.5; s0=$(shift_to blue 100)
wait $bp
check "canary shifts under load: green 10% in ${s10}s, 100% in ${s100}s, back to 0% in ${s0}s (each < 1 s)" \
  '[ ! -s "$tmp/shift_err" ] && python3 -c "import sys; sys.exit(0 if max($s10, $s100, $s0) < 1 else 1)"'
check "canary shifts under load: $(okc "$tmp/r2") requests ok, $(failed "$tmp/r2") failed" \
  '[ "$(failed "$tmp/r2")" = 0 ] && [ "$(okc "$tmp/r2")" -gt 0 ]'

# shares at fixed weights, from each replica's own /metrics
share() { # pct n -> "green_share_percent"
  shift_to green "$1" >/dev/null
  local b1a b2a g1a b1b b2b g1b
  read -r b1a b2a g1a < <(served "$B1" "$B2" "$G1")
  bench "$tmp/s$1" --concurrency 8 --num-prompts "$2" --input-len 2:4 --output-len 2
  read -r b1b b2b g1b < <(served "$B1" "$B2" "$G1")
  local g=$((g1b - g1a)) all=$((b1b + b2b + g1b - b1a - b2a - g1a))
  echo "$g $all $(failed "$tmp/s$1")"
}
read -r g all f < <(share 10 400)
check "canary 10%: green served $g of $all ($(python3 -c "print(round(100*$g/max($all,1),1))")%, allowed 10 +- 5), $f failed" \
  '[ "$f" = 0 ] && [ "$all" -eq 400 ] && python3 -c "import sys; sys.exit(0 if abs(100*$g/$all - 10) <= 5 else 1)"'
read -r g all f < <(share 100 40)
check "canary 100%: green served $g of $all, $f failed" '[ "$f" = 0 ] && [ "$all" -eq 40 ] && [ "$g" -eq 40 ]'
read -r g all f < <(share 0 40)
check "rolled back (blue 100%): green served $g of $all, $f failed" '[ "$f" = 0 ] && [ "$all" -eq 40 ] && [ "$g" -eq 0 ]'

# --- 3. SIGKILL one replica mid-run: only its in-flight requests are lost ---
bench "$tmp/r3" --concurrency 4 --duration 6 --input-len 4:8 --output-len 24 --max-error-rate 1 &
bp=$!
sleep 2.5
kill -9 "$(pid_of b1)"
wait $bp
f3=$(failed "$tmp/r3")
late=$(python3 - "$tmp/r3/requests.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
# requests sent in the last 2 s of the 6 s run (well after the kill at ~2.5 s)
t_end = max(float(r["send_s"]) for r in rows)
late = [r for r in rows if float(r["send_s"]) > t_end - 2.0]
print(len(late), sum(1 for r in late if r["ok"] not in ("1", "true", "True")))
PY
)
read -r nlate flate <<<"$late"
check "SIGKILL b1 mid-run: $f3 requests lost ($(errs "$tmp/r3")), at most the 4 in flight (concurrency)" \
  '[ "$f3" -le 4 ] && [ "$(okc "$tmp/r3")" -gt 0 ]'
checkd "after the kill new requests go to the others: $nlate sent in the last 2 s, $flate failed" \
  '[ "$nlate" -gt 0 ] && [ "$flate" -eq 0 ]' 'errs "$tmp/r3"; grep -v ",1,200," "$tmp/r3/requests.csv" | head -n 5'

# --- 4. SIGTERM (drain) one replica mid-run: nothing lost, exit 0 ---
b2pid=$(pid_of b2)
bench "$tmp/r4" --concurrency 4 --duration 6 --input-len 4:8 --output-len 24 --max-error-rate 1 &
bp=$!
sleep 2.5
kill -TERM "$b2pid"
for _ in $(seq 1 300); do kill -0 "$b2pid" 2>/dev/null || break; sleep 0.1; done
gone=no; kill -0 "$b2pid" 2>/dev/null || gone=yes
wait $bp
checkd "SIGTERM b2 mid-run: $(okc "$tmp/r4") ok, $(failed "$tmp/r4") lost; b2 exited ($gone) after draining" \
  '[ "$(failed "$tmp/r4")" = 0 ] && [ "$gone" = yes ] && grep -q "draining" "$D/b2.log" && grep -q "stopped" "$D/b2.log"' \
  'errs "$tmp/r4"; bash "$FLEET" status --dir "$D"; tail -n 3 "$D"/*.log'
finish

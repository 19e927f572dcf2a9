#!/usr/bin/env bash
# Busy neighbours (issue 14, "Threads"): decode and prefill tok/s with 1 and
# 2 threads while 0, 1 or 2 other processes spin on the machine's first
# cores (a shell busy loop each, pinned with taskset: one on the last CPU,
# the second on the one before), for one or more nibble binaries and, when
# given, llama-bench on the same file, the runs interleaved REPS times.
# Degrading gracefully means: with a neighbour on one of two cores, 2
# threads should do about as well as 1 thread alone, never much worse.
#
# usage: bench/neighbour.sh MODEL REPS BIN [BIN...] [-- LLAMA_BENCH]
#   env: HOGS="0 1 2" THREADS="1 2" TG=64 PP=128 (PP=0: decode only)
# prints one line per run: binary, threads, neighbours, tg and pp tok/s
# (mean +/- sd over 3 reps), then per (threads, neighbours) the min and
# median of each binary's tg.
set -euo pipefail
MODEL=$1
REPS=$2
shift 2
BINS=()
LLAMA=
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then LLAMA=$2; break; fi
  BINS+=("$1")
  shift
done
HOGS=${HOGS:-0 1 2}
THREADS=${THREADS:-1 2}
TG=${TG:-64}
PP=${PP:-128}
NCPU=$(nproc)
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $NCPU CPUs; model $MODEL"

hogs=()
start_hogs() {
  hogs=()
  for ((h = 0; h < $1; h++)); do
    taskset -c $(((NCPU - 1 - h + NCPU) % NCPU)) sh -c 'while :; do :; done' &
    hogs+=($!)
  done
  sleep 0.3
}
stop_hogs() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_hogs EXIT

# "tg pp" for one run; llama-bench prints "| tg64 | ... | 45.1 ± 0.3 |"
measure() {
  local out
  if [ "$1" = llama ]; then
    out=$("$LLAMA" -m "$MODEL" -p "$PP" -n "$TG" -r 3 -t "$2" 2>/dev/null || true)
    tg=$(echo "$out" | grep -E "\| +tg$TG " | grep -oE '[0-9.]+ ± [0-9.]+' | tail -1 | sed 's/ ± / +\/- /')
    pp=$(echo "$out" | grep -E "\| +pp$PP " | grep -oE '[0-9.]+ ± [0-9.]+' | tail -1 | sed 's/ ± / +\/- /')
  else
    out=$("$1" bench model "$MODEL" -p "$PP" -n "$TG" -r 3 -t "$2" --no-bw 2>/dev/null || true)
    tg=$(echo "$out" | grep -E "^\| tg$TG " | grep -oE '[0-9.]+ \+/- [0-9.]+' | head -1)
    pp=$(echo "$out" | grep -E "^\| pp$PP " | grep -oE '[0-9.]+ \+/- [0-9.]+' | head -1)
  fi
  echo "${tg:--} | ${pp:--}"
}

RUNNERS=("${BINS[@]}")
[ -n "$LLAMA" ] && RUNNERS+=(llama)
LOG=$(mktemp)
printf '| rep | binary | threads | neighbours | tg%s t/s | pp%s t/s |\n|---|---|---|---|---|---|\n' "$TG" "$PP"
for ((r = 1; r <= REPS; r++)); do
  for h in $HOGS; do
    for t in $THREADS; do
      for b in "${RUNNERS[@]}"; do
        start_hogs "$h"
        res=$(measure "$b" "$t")
        stop_hogs
        printf '| %d | %s | %s | %s | %s |\n' "$r" "$b" "$t" "$h" "$res"
        echo "$b $t $h ${res%% *}" >>"$LOG"
      done
    done
  done
done
echo
echo "tg min / median per binary, threads, neighbours:"
python3 - "$LOG" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    b, t, h, tg = line.split()
    if tg != '-': rows.setdefault((b, t, h), []).append(float(tg))
for (b, t, h), v in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
    print(f"  {b:<40} -t {t}  neighbours {h}: {min(v):7.2f} / {statistics.median(v):7.2f}")
PY
rm -f "$LOG"

#!/usr/bin/env bash
# Long fuzzing runs: every libFuzzer target (or the ones named) for SECONDS
# each, keeping a working corpus in BUILD/fuzz-work/<target>/ between runs
# and merging what adds coverage back into tests/fuzz/corpus/<target>/
# (libFuzzer -merge=1 keeps only inputs with new coverage; inputs over
# MAX_SEED bytes are not kept, so the committed corpus stays small).
#   usage: scripts/fuzz-long.sh BUILD SECONDS [target...]
#   env:   FUZZ_PARALLEL=N   targets run at once (default 1)
#          FUZZ_NO_MERGE=1   leave tests/fuzz/corpus alone
#          MAX_SEED=bytes    largest input merged back (default 16384)
#          FUZZ_FLAGS=...    more libFuzzer flags (e.g. -detect_leaks=0)
# Build first:  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DNB_FUZZ=ON
#               cmake --build build-fuzz --target fuzz_gguf fuzz_http ...
# Prints one summary line per target (executions, coverage, corpus, result)
# and appends it to BUILD/fuzz-long-summary.txt; exit 1 when any target
# found a crash, leak, timeout or OOM (reproducers in BUILD/fuzz-artifacts/).
# Run it niced on a shared machine:  nice -n 19 scripts/fuzz-long.sh ...
set -uo pipefail
BUILD=${1:?usage: fuzz-long.sh BUILD SECONDS [target...]}
SECS=${2:?usage: fuzz-long.sh BUILD SECONDS [target...]}
shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAR=${FUZZ_PARALLEL:-1}
MAX_SEED=${MAX_SEED:-16384}
ART="$BUILD/fuzz-artifacts"
WORK="$BUILD/fuzz-work"
mkdir -p "$ART" "$WORK"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for b in "$BUILD"/fuzz_*; do [ -x "$b" ] && targets+=("$(basename "$b")"); done
fi
[ ${#targets[@]} -eq 0 ] && { echo "fuzz-long: no fuzz_* binaries in $BUILD" >&2; exit 1; }

run_one() {
  local name=$1 t=${1#fuzz_}
  local bin="$BUILD/$name" seeds="$ROOT/tests/fuzz/corpus/$t" work="$WORK/$t" log="$ART/$name.long.log"
  [ -x "$bin" ] || { echo "$name: not built"; return 1; }
  mkdir -p "$work" "$seeds"
  local rc=0 t0 t1
  t0=$(date +%s)
  "$bin" "$work" "$seeds" -max_total_time="$SECS" -rss_limit_mb=2048 -max_len=65536 -timeout=20 \
    -artifact_prefix="$ART/$name-" -print_final_stats=1 -print_pcs=0 ${FUZZ_FLAGS:-} >"$log" 2>&1 || rc=$?
  t1=$(date +%s)
  local execs cov ft units
  execs=$(grep -ao 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -ao '[0-9]*$')
  cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | grep -ao '[0-9]*$')
  ft=$(grep -ao 'ft: [0-9]*' "$log" | tail -1 | grep -ao '[0-9]*$')
  units=$(ls "$work" | wc -l)
  local result=ok
  [ $rc -ne 0 ] && result="FAILURE (exit $rc; see $log and $ART/$name-*)"
  if [ $rc -eq 0 ] && [ -z "${FUZZ_NO_MERGE:-}" ]; then
    local small; small=$(mktemp -d)
    find "$work" -type f -size -"$((MAX_SEED + 1))"c -exec cp {} "$small/" \;
    "$bin" -merge=1 "$seeds" "$small" -max_len=65536 -timeout=20 -rss_limit_mb=2048 >>"$log" 2>&1 || true
    rm -rf "$small"
  fi
  local line
  line=$(printf '%s %s: %ss, %s executions, cov %s, ft %s, work corpus %s, seeds %s, %s' "$(date -u +%FT%TZ)" \
    "$name" "$((t1 - t0))" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$units" "$(ls "$seeds" | wc -l)" "$result")
  echo "$line"
  echo "$line" >>"$BUILD/fuzz-long-summary.txt"
  [ $rc -eq 0 ]
}

status=0
running=0
for n in "${targets[@]}"; do
  run_one "$n" &
  running=$((running + 1))
  if [ $running -ge "$PAR" ]; then wait -n || status=1; running=$((running - 1)); fi
done
while [ $running -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
exit $status

#!/usr/bin/env bash
# nibble serve with 1,000 idle keep-alive connections and 200 slow clients
# (one header line every 2 s) open, while a normal client sends small
# completions for 15 s: every answer must come, within a generous 5 s
# bound (the machine may be busy; the measured latencies are printed, not
# asserted). Then the slow clients are cut at --request-timeout and the
# thread count returns near its baseline. Bounded: about 60 s.
set -u
BIN=$1
SHARED=${2:-../shared}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
[ "$(ulimit -n)" -ge 4096 ] 2>/dev/null || ulimit -n 4096 2>/dev/null || { echo "SKIP: need 4096 file descriptors"; exit 77; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
unset NIBBLE_API_KEY
if [ -f "$SHARED/models/aidreams260K.gguf" ]; then M=$SHARED/models/aidreams260K.gguf; else M=; fi
"$BIN" serve ${M:+"$M"} --port 0 --max-model-len 128 -t 1 --max-connections 2048 --request-timeout 20 >"$tmp/s.log" 2>&1 &
PID=$!; pids+=("$PID"); PORT=
for _ in $(seq 1 600); do
  PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/s.log" | grep -o '[0-9]*$' | head -n 1)
  [ -n "$PORT" ] && grep -q "serve: ready:" "$tmp/s.log" && break
  sleep 0.1
done
[ -n "$PORT" ] || { bad "server did not start: $(tail -n 3 "$tmp/s.log")"; finish; exit 1; }
threads0=$(ls /proc/$PID/task | wc -l)
rss0=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
( while kill -0 $PID 2>/dev/null; do
    awk '/VmRSS|Threads/ {printf "%s ", $2} END {print ""}' /proc/$PID/status; sleep 1
  done >"$tmp/samples" ) &
sampler=$!
PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/clients/harden.py" "$PORT" "" load 1000 200 15 >"$tmp/load" 2>&1; rc=$?
kill $sampler 2>/dev/null
cat "$tmp/load"
echo "info: server peak during the load: $(sort -k2 -n "$tmp/samples" | tail -n 1 | awk '{print $2}') threads, \
$(sort -k1 -n "$tmp/samples" | tail -n 1 | awk '{printf "%.1f", $1/1024}') MiB RSS (before: $threads0 threads, $((rss0 / 1024)) MiB)"
check "normal client answered throughout (harden.py load)" '[ $rc -eq 0 ]'
# every client closed; the server's connection threads end
for _ in $(seq 1 100); do [ "$(ls /proc/$PID/task | wc -l)" -le $((threads0 + 4)) ] && break; sleep 0.2; done
threads1=$(ls /proc/$PID/task | wc -l)
echo "info: server threads: $threads0 before, $threads1 after the clients left"
check "server threads back near the baseline ($threads0 -> $threads1)" '[ "$threads1" -le $((threads0 + 4)) ]'
kill -TERM $PID; wait $PID; rc=$?
check "SIGTERM: exit 0" '[ $rc -eq 0 ]'
finish

#!/usr/bin/env bash
# nibble serve and nibble plan inside a cgroup with a memory limit
# (base/cgroup.c):
# - The CPU engine's budget is the limit where it is below MemTotal
#   (nb_plan_config_host): with 400 MiB, the startup account and `nibble
#   plan --host` say "cgroup memory limit", and the built-in model's pool
#   shrinks from 0.5 GiB (the 64 x 2048-token cap) to what 0.9 x 400 MiB
#   leaves; it is committed and the server answers.
# - The pool is committed at startup (model/kv.h nb_kv_pool_commit) only
#   where what the process may still commit (nb_mem_available: the limit
#   less what the cgroup uses) holds it with a tenth to spare. With 2 GiB
#   the 0.5 GiB pool is committed (RSS); with 2 GiB of which another
#   process in the cgroup holds 1.5, it says the pool is left uncommitted
#   - committing it would have the kernel kill the server at startup -
#   starts, and answers; 1.5 GiB of the cgroup's page cache does not
#   count (the kernel reclaims it before it kills anyone).
# Needs a writable cgroup v1 memory hierarchy or a v2 tree with the memory
# controller (root, as in CI); skipped otherwise. Bounded: about 15 s.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
unset NIBBLE_API_KEY
cg=
pid=
hog=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$hog" ] && kill -9 "$hog" 2>/dev/null && wait "$hog" 2>/dev/null
  drop_cgroup
  rm -rf "$tmp"
}

# drop_cgroup: removes $cg, killing what is still in it
drop_cgroup() {
  [ -n "$cg" ] || return 0
  xargs -r kill -9 <"$cg/cgroup.procs" 2>/dev/null
  for _ in $(seq 1 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
  cg=
}
trap cleanup EXIT

# make_cgroup BYTES: a fresh cgroup limited to BYTES in $cg (v1 or v2)
make_cgroup() {
  drop_cgroup
  cg=/sys/fs/cgroup/memory/nb_memlimit_$$
  if mkdir "$cg" 2>/dev/null; then
    echo "$1" >"$cg/memory.limit_in_bytes" 2>/dev/null && return 0
  else
    cg=/sys/fs/cgroup/nb_memlimit_$$
    if echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && mkdir "$cg" 2>/dev/null; then
      echo "$1" >"$cg/memory.max" 2>/dev/null && return 0
    fi
  fi
  rmdir "$cg" 2>/dev/null
  cg=
  return 1
}

# start NAME: the server inside $cg, its log in $tmp/NAME.log; sets pid
start() {
  # shellcheck disable=SC2016
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$BIN" serve --port 0 -t 1 \
    >"$tmp/$1.log" 2>&1 &
  pid=$!
}

stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; }

rss_mib() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$1/status" 2>/dev/null; }

in_cgroup() {
  # shellcheck disable=SC2016
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"
}

completion() {
  local code
  code=$(curl -s -m 60 -o "$tmp/out.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" \
    -H 'Content-Type: application/json' -d '{"prompt": "Once upon a time", "max_tokens": 8}')
  check "$1: a completion answers 200 (got $code)" '[ "$code" = 200 ] && grep -q "\"text\"" "$tmp/out.json"'
}

make_cgroup 2147483648 || { echo "SKIP: cannot create a cgroup with a memory limit here (needs root and a writable cgroupfs)"; exit 77; }
start roomy
if wait_ready "$pid" "$tmp/roomy.log"; then
  rss=$(rss_mib "$pid")
  check "2 GiB limit: the budget is the limit" 'grep -q "^memory (cgroup memory limit): 2.00 GiB x 0.90" "$tmp/roomy.log"'
  check "2 GiB limit: the 0.5 GiB pool is committed at startup (RSS ${rss:-?} MiB >= 512)" '[ "${rss:-0}" -ge 512 ]'
  check "2 GiB limit: no warning about the pool" '! grep -q "left uncommitted" "$tmp/roomy.log"'
else
  bad "2 GiB limit: the server did not start: $(tail -n 3 "$tmp/roomy.log")"
fi
stop

# 1.5 GiB of page cache charged to the cgroup (a file written from inside
# it): reclaimable, so not counted against what the server may commit
make_cgroup 2147483648 || { bad "cannot make a second 2 GiB cgroup"; finish; exit; }
in_cgroup sh -c 'head -c 1536M /dev/zero >"$1" && sync' sh "$tmp/big"
start cached
if wait_ready "$pid" "$tmp/cached.log"; then
  check "2 GiB limit, 1.5 GiB of page cache in the cgroup: the pool is committed all the same, no warning" \
    '! grep -q "left uncommitted" "$tmp/cached.log" && [ "$(rss_mib "$pid")" -ge 512 ]'
else
  bad "2 GiB limit, 1.5 GiB of page cache: the server did not start: $(tail -n 3 "$tmp/cached.log")"
fi
stop
rm -f "$tmp/big"

# another process of the cgroup holds 1.5 GiB of its 2
# shellcheck disable=SC2016
sh -c 'echo $$ >"$1/cgroup.procs" && exec python3 -c "$2"' sh "$cg" \
  'import time; b = bytearray(1536 << 20); print("held", flush=True); time.sleep(120)' >"$tmp/hog.log" 2>&1 &
hog=$!
for _ in $(seq 1 100); do grep -q held "$tmp/hog.log" && break; sleep 0.1; done
start crowded
if wait_ready "$pid" "$tmp/crowded.log"; then
  check "2 GiB limit, 1.5 held by another process: the pool is left uncommitted, and the server says so" \
    'grep -q "KV pool (0.50 GiB) is more than 90% of the 0.[0-9]* GiB this host or its cgroup has available now: left uncommitted" "$tmp/crowded.log"'
  completion "2 GiB limit, 1.5 held"
  check "2 GiB limit, 1.5 held: the server is still running" 'kill -0 "$pid" 2>/dev/null'
else
  bad "2 GiB limit, 1.5 held: the server did not start (killed for memory?): $(tail -n 3 "$tmp/crowded.log")"
fi
stop
kill -9 "$hog" 2>/dev/null; wait "$hog" 2>/dev/null; hog=

make_cgroup 419430400 || { bad "cannot set a 400 MiB limit"; finish; exit; }
start tight
if wait_ready "$pid" "$tmp/tight.log"; then
  pool=$(sed -n 's/^KV blocks: [0-9]* of 16 tokens (\([0-9.]*\) GiB).*/\1/p' "$tmp/tight.log")
  check "400 MiB limit: the budget is the limit" 'grep -q "^memory (cgroup memory limit): 0.39 GiB x 0.90" "$tmp/tight.log"'
  check "400 MiB limit: the pool (${pool:-?} GiB) is what the limit leaves, under 0.5 GiB" \
    '[ -n "$pool" ] && awk -v p="$pool" "BEGIN { exit !(p > 0 && p < 0.3) }"'
  check "400 MiB limit: the smaller pool is committed, no warning" '! grep -q "left uncommitted" "$tmp/tight.log"'
  completion "400 MiB limit"
else
  bad "400 MiB limit: the server did not start: $(tail -n 3 "$tmp/tight.log")"
fi
stop
in_cgroup "$BIN" plan llama-3.1-8b --host >"$tmp/plan.txt" 2>&1
check "400 MiB limit: nibble plan --host plans for the limit" \
  'grep -q "host, 0.39 GiB per card (cgroup memory limit)" "$tmp/plan.txt"'
finish

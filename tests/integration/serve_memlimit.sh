#!/usr/bin/env bash
# nibble serve commits its KV pool at startup (model/kv.h
# nb_kv_pool_commit) only where the memory the process may still commit
# (MemAvailable, or less under a cgroup memory limit: base/cgroup.c
# nb_mem_available) holds it with a tenth to spare. The built-in model's
# pool is 0.5 GiB. In a cgroup limited to 2 GiB the server commits it (RSS
# at least the pool); in one limited to 400 MiB, where committing it would
# have the kernel kill the server at startup, it says the pool is left
# uncommitted, starts, and answers. Needs a writable cgroup v1 memory
# hierarchy or a v2 tree with the memory controller (root, as in CI);
# skipped otherwise. Bounded: about 10 s.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
unset NIBBLE_API_KEY
cg=
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# make_cgroup BYTES: a fresh cgroup limited to BYTES in $cg (v1 or v2)
make_cgroup() {
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null
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

make_cgroup 2147483648 || { echo "SKIP: cannot create a cgroup with a memory limit here (needs root and a writable cgroupfs)"; exit 77; }
start roomy
if wait_ready "$pid" "$tmp/roomy.log"; then
  rss=$(rss_mib "$pid")
  check "2 GiB limit: the 0.5 GiB pool is committed at startup (RSS ${rss:-?} MiB >= 512)" '[ "${rss:-0}" -ge 512 ]'
  check "2 GiB limit: no warning about the pool" '! grep -q "left uncommitted" "$tmp/roomy.log"'
else
  bad "2 GiB limit: the server did not start: $(tail -n 3 "$tmp/roomy.log")"
fi
stop

make_cgroup 419430400 || { bad "cannot set a 400 MiB limit"; finish; exit; }
start tight
if wait_ready "$pid" "$tmp/tight.log"; then
  check "400 MiB limit: the server says the pool is left uncommitted" \
    'grep -q "KV pool (0.50 GiB) is more than 90% of the 0.[0-9]* GiB this host or its cgroup has available now: left uncommitted" "$tmp/tight.log"'
  code=$(curl -s -m 60 -o "$tmp/out.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" \
    -H 'Content-Type: application/json' -d '{"prompt": "Once upon a time", "max_tokens": 8}')
  check "400 MiB limit: a completion answers 200 (got $code)" '[ "$code" = 200 ] && grep -q "\"text\"" "$tmp/out.json"'
  check "400 MiB limit: the server is still running" 'kill -0 "$pid" 2>/dev/null'
else
  bad "400 MiB limit: the server did not start (killed for memory?): $(tail -n 3 "$tmp/tight.log")"
fi
stop
finish

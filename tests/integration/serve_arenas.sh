#!/usr/bin/env bash
# nibble serve caps glibc's malloc arenas at 2 (src/cli/cmd_serve.c), so
# that one thread per connection does not give every connection thread an
# arena of its own whose high-water mark RSS keeps (docs/security.md
# "Soak"); an operator's MALLOC_ARENA_MAX still wins. Checked from outside:
# glibc maps each arena besides the main one as a 64 MiB-aligned heap (a
# read-write part followed by a PROT_NONE reserve) — counted in
# /proc/PID/maps after 24 concurrent completions. Default: at most 1 such
# heap. With MALLOC_ARENA_MAX=8 (the control, showing the count can fail):
# more than 1. glibc on Linux only; bounded: about 30 s.
set -u
BIN=$1
SHARED=${2:-../shared}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
ldd "$BIN" 2>/dev/null | grep -q 'libc.so.6' || { echo "SKIP: not a glibc binary"; exit 77; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
unset NIBBLE_API_KEY MALLOC_ARENA_MAX GLIBC_TUNABLES
if [ -f "$SHARED/models/aidreams260K.gguf" ]; then M=$SHARED/models/aidreams260K.gguf; else M=; fi

# run_case NAME [ENV=VALUE]: starts a server, loads it, prints the heap count
run_case() {
  local name=$1 log=$tmp/$1.log pid port=
  shift
  env "$@" "$BIN" serve ${M:+"$M"} --port 0 --max-model-len 128 -t 1 >"$log" 2>&1 &
  pid=$!; pids+=("$pid")
  for _ in $(seq 1 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' | head -n 1)
    [ -n "$port" ] && grep -q "serve: ready:" "$log" && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server did not start: $(tail -n 3 "$log")" >&2; echo -1; return; }
  python3 - "$port" <<'PY' >&2
import json, socket, sys, threading
port = int(sys.argv[1])
body = json.dumps({"prompt": "the cat sat on the mat", "max_tokens": 8}).encode()
raw = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body
bar = threading.Barrier(24)
ok = [0]
def one():
    bar.wait()
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.sendall(raw)
        r = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            r += b
        s.close()
        if r.startswith(b"HTTP/1.1 200"):
            ok[0] += 1
ts = [threading.Thread(target=one) for _ in range(24)]
[t.start() for t in ts]
[t.join() for t in ts]
print("answered 200:", ok[0], "of 48")
PY
  python3 - "$pid" <<'PY'
import sys
maps = []
for l in open("/proc/%s/maps" % sys.argv[1]):
    f = l.split()
    a, b = (int(x, 16) for x in f[0].split("-"))
    maps.append((a, b, f[1], len(f) > 5))
HEAP = 64 << 20
n = 0
for i, (a, b, perm, named) in enumerate(maps):
    if named or perm != "rw-p" or a % HEAP:
        continue
    if b - a == HEAP:
        n += 1
    elif i + 1 < len(maps) and maps[i + 1][0] == b and maps[i + 1][2] == "---p" and maps[i + 1][1] - a == HEAP:
        n += 1
print(n)
PY
  kill -TERM "$pid"; wait "$pid" 2>/dev/null
}

n_def=$(run_case default)
n_env=$(run_case env8 MALLOC_ARENA_MAX=8)
echo "info: 64 MiB arena heaps besides the main arena: default $n_def, MALLOC_ARENA_MAX=8 $n_env"
check "default: malloc arenas capped (at most 1 heap besides the main arena, got $n_def)" '[ "$n_def" -ge 0 ] && [ "$n_def" -le 1 ]'
check "MALLOC_ARENA_MAX=8 overrides the cap (more than 1 heap, got $n_env)" '[ "$n_env" -gt 1 ]'
finish

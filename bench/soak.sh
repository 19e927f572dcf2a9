#!/usr/bin/env bash
# Soak test of nibble serve (issue 15): 64 clients for DURATION seconds —
# streaming and not, random prompt and output lengths, 20% disconnecting
# early, a few bad requests per second — against the built-in model (or
# MODEL). Every 10 s the server's RSS, open fds, threads and KV blocks in use
# are sampled into OUT/soak.csv (plotted to OUT/soak.png when gnuplot is
# installed). After the load, the clients stop and the server idles 20 s.
#
# Pass criteria (printed, and the exit status):
#   - KV blocks in use return to 0;
#   - open fds and threads return to their baseline (before the load);
#   - RSS at the end of the load grew by less than 1% over RSS after warm-up
#     (the sample at max(60 s, DURATION/10)); the end of the load is the
#     last sample at t <= DURATION, while every client is still running
#     (later samples are taken while the clients drain);
#   - no unexpected client error (a status other than the one asked for, a
#     dropped connection that was not ours, a malformed stream).
#
#   usage: bench/soak.sh NIBBLE [DURATION_S (1800)] [OUT_DIR (soak-<date>)]
#   env:   MODEL=path (default: built-in), MAX_MODEL_LEN=256, CLIENTS=64, BAD_PER_S=3
# A request unanswered after 600 s counts as an error.
# Prompts are 1..48 words, max_tokens 1..64 (short, so that a busy machine
# still completes thousands of requests).
# Run it niced on a shared machine: nice -n 19 bench/soak.sh build/nibble 1800
# The CSV's last column counts glibc malloc arenas besides the main one
# (64 MiB-aligned heaps in /proc/PID/maps; nibble serve caps them, see
# docs/security.md "Soak"); empty where that cannot be read.
set -u
BIN=${1:?usage: bench/soak.sh NIBBLE [DURATION_S] [OUT_DIR]}
DUR=${2:-1800}
OUT=${3:-soak-$(date -u +%Y%m%dT%H%M%SZ)}
CLIENTS=${CLIENTS:-64}
BAD_PER_S=${BAD_PER_S:-3}
mkdir -p "$OUT"
LOG=$OUT/server.log
"$BIN" serve ${MODEL:+"$MODEL"} --port 0 --max-num-seqs 64 --max-model-len ${MAX_MODEL_LEN:-256} -t 2 >"$LOG" 2>&1 &
PID=$!
trap 'kill -9 $PID 2>/dev/null; [ -n "${CPID:-}" ] && kill -9 $CPID 2>/dev/null' EXIT
PORT=
for _ in $(seq 1 600); do
  PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$LOG" | grep -o '[0-9]*$' | head -n 1)
  [ -n "$PORT" ] && grep -q "serve: ready:" "$LOG" && break
  kill -0 $PID 2>/dev/null || { echo "soak: server died: $(tail -n 3 "$LOG")"; exit 1; }
  sleep 0.1
done
grep -q "serve: ready:" "$LOG" || { echo "soak: server not ready"; exit 1; }
MML=$(grep -o 'max_model_len [0-9]*' "$LOG" | head -n 1 | grep -o '[0-9]*$')

sample() { # t phase -> CSV line
  local rss fds thr kv
  rss=$(awk '/VmRSS/ {print $2}' /proc/$PID/status 2>/dev/null)
  fds=$(ls /proc/$PID/fd 2>/dev/null | wc -l)
  thr=$(ls /proc/$PID/task 2>/dev/null | wc -l)
  kv=$(curl -s -m 10 "http://127.0.0.1:$PORT/metrics" | awk '/^nibble:kv_cache_blocks_used/ {print $2}')
  echo "$1,$2,${rss:-},${fds:-},${thr:-},${kv:-},$(arenas)"
}
arenas() { # glibc heaps of non-main arenas: an anonymous rw-p mapping at a 64 MiB boundary, alone or followed by its ---p reserve, 64 MiB in all
  python3 - "$PID" <<'AR' 2>/dev/null
import sys
m = []
for l in open("/proc/%s/maps" % sys.argv[1]):
    f = l.split()
    a, b = (int(x, 16) for x in f[0].split("-"))
    m.append((a, b, f[1], len(f) > 5))
H = 64 << 20
print(sum(1 for i, (a, b, p, named) in enumerate(m) if not named and p == "rw-p" and a % H == 0 and
          (b - a == H or (i + 1 < len(m) and m[i + 1][0] == b and m[i + 1][2] == "---p" and m[i + 1][1] - a == H))))
AR
}
CSV=$OUT/soak.csv
echo "t_s,phase,rss_kib,fds,threads,kv_blocks_used,malloc_arenas_extra" >"$CSV"
sleep 1
base=$(sample 0 baseline)
echo "$base" >>"$CSV"
echo "soak: server pid $PID port $PORT, max_model_len $MML, $CLIENTS clients for ${DUR}s; baseline $base"

python3 - "$PORT" "$DUR" "$CLIENTS" "$BAD_PER_S" "$MML" >"$OUT/clients.log" 2>&1 <<'PY' &
import json, random, socket, sys, threading, time
port, dur, n, bad_rate, mml = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
end = time.time() + dur
lock = threading.Lock()
stats = {"ok": 0, "stream_ok": 0, "early": 0, "bad_ok": 0, "busy": 0, "errors": 0}
words = "the cat sat on a mat and then it ran far away into the deep green wood where".split()

def bump(k, msg=None):
    with lock:
        stats[k] += 1
        if msg and stats["errors"] <= 20:
            print("error:", msg, flush=True)

def http(raw, read=True, timeout=600):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(raw)
    if not read:
        return s
    buf = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        buf += b
        if b"\r\n\r\n" in buf:
            head, body = buf.split(b"\r\n\r\n", 1)
            if b"content-length:" in head.lower():
                n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
                if len(body) >= n:
                    break
            elif buf.endswith(b"0\r\n\r\n"):
                break
    s.close()
    return buf

def post(path, obj, close=True):
    body = json.dumps(obj).encode()
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
            % (path.encode(), len(body), b"Connection: close\r\n" if close else b"")) + body

def client(i):
    rnd = random.Random(i)
    while time.time() < end:
        chat = rnd.random() < 0.5
        stream = rnd.random() < 0.5
        early = rnd.random() < 0.2
        text = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, max(1, min(48, mml // 4)))))
        mt = rnd.randint(1, max(1, min(64, mml // 4)))
        obj = {"max_tokens": mt, "stream": stream, "temperature": rnd.choice([0, 0.8])}
        if chat:
            obj["messages"] = [{"role": "user", "content": text}]
        else:
            obj["prompt"] = text
        raw = post("/v1/chat/completions" if chat else "/v1/completions", obj)
        try:
            if early:
                s = http(raw, read=False)
                time.sleep(rnd.random() * 0.3)
                if rnd.random() < 0.5:
                    s.recv(rnd.randint(1, 512))
                s.close()
                bump("early")
                continue
            r = http(raw)
            status = int(r.split(b" ", 2)[1]) if r.startswith(b"HTTP/1.1 ") else 0
            if status == 200 and stream and r.rstrip().endswith(b"0") and b"data: [DONE]" in r:
                bump("stream_ok")
            elif status == 200 and not stream and b'"choices"' in r:
                bump("ok")
            elif status in (429, 503):
                bump("busy")
            elif status == 400 and b"context_length_exceeded" in r:
                bump("ok")
            else:
                bump("errors", "status %d stream %s: %r" % (status, stream, r[:300]))
        except Exception as e:
            bump("errors", repr(e))

BAD = [
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{not json", 400),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n{\"prompt\":\"x\",\"bogus\":true}", 400),
    (b"GET /v1/models/../health HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"GET /health HTTP/1.1\r\n\r\n", 400),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n{}", 400),
    (b"\x16\x03\x01\x00\x05hello", 400),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n", 413),
    (b"PUT /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405),
]

def bad():
    rnd = random.Random(99)
    while time.time() < end:
        raw, want = rnd.choice(BAD)
        try:
            s = http(raw, read=False, timeout=30)
            s.shutdown(socket.SHUT_WR) if want != 413 else None
            r = b""
            while True:  # every bad request ends with the server closing (we half-closed, or it says close)
                b = s.recv(65536)
                if not b:
                    break
                r += b
            s.close()
            status = int(r.split(b" ", 2)[1]) if r.startswith(b"HTTP/1.1 ") else 0
            if status == want:
                bump("bad_ok")
            else:
                bump("errors", "bad request %r: status %d, wanted %d: %r" % (raw[:40], status, want, r[:200]))
        except Exception as e:
            bump("errors", "bad request %r: %r" % (raw[:40], e))
        time.sleep(1.0 / bad_rate)

ts = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)] + [threading.Thread(target=bad, daemon=True)]
for t in ts:
    t.start()
last = time.time()
while any(t.is_alive() for t in ts):
    time.sleep(1)
    if time.time() - last >= 60:
        last = time.time()
        with lock:
            print("progress:", json.dumps(stats), flush=True)
for t in ts:
    t.join(700)
print("final:", json.dumps(stats), flush=True)
sys.exit(1 if stats["errors"] else 0)
PY
CPID=$!
t0=$(date +%s)
while kill -0 $CPID 2>/dev/null; do
  sleep 10
  t=$(( $(date +%s) - t0 ))
  echo "$(sample $t load)" >>"$CSV"
done
wait $CPID; crc=$?
tl=$(( $(date +%s) - t0 ))
sleep 20
echo "$(sample $(( $(date +%s) - t0 )) idle)" >>"$CSV"
final=$(tail -n 1 "$CSV")
kill -TERM $PID; wait $PID; src=$?

warm=$(( DUR / 10 > 60 ? DUR / 10 : 60 ))
python3 - "$CSV" "$warm" "$crc" "$src" "$OUT/clients.log" "$DUR" <<'PY' | tee "$OUT/summary.txt"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
warm, crc, src, dur = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[6])
base, final = rows[0], rows[-1]
load = [r for r in rows if r["phase"] == "load" and r["rss_kib"]]
w = next((r for r in load if float(r["t_s"]) >= warm), load[0] if load else base)
full = [r for r in load if float(r["t_s"]) <= dur]  # every client still running
last = full[-1] if full else (load[-1] if load else base)
growth = (float(last["rss_kib"]) - float(w["rss_kib"])) / float(w["rss_kib"]) * 100
stats = [l for l in open(sys.argv[5]) if l.startswith("final:")]
print("clients:", stats[0].strip() if stats else "no final line", "(exit %d)" % crc)
print("baseline: rss %s KiB, fds %s, threads %s, kv %s" % (base["rss_kib"], base["fds"], base["threads"], base["kv_blocks_used"]))
print("after warm-up (t=%ss): rss %s KiB; end of load (t=%ss): rss %s KiB, growth %.2f%%"
      % (w["t_s"], w["rss_kib"], last["t_s"], last["rss_kib"], growth))
print("peak during load: threads %s, fds %s, kv %s" % (max(int(r["threads"]) for r in load) if load else "-",
      max(int(r["fds"]) for r in load) if load else "-", max(int(float(r["kv_blocks_used"] or 0)) for r in load) if load else "-"))
print("after 20 s idle: rss %s KiB, fds %s, threads %s, kv %s" % (final["rss_kib"], final["fds"], final["threads"], final["kv_blocks_used"]))
print("malloc arenas besides the main one: %s at the end of the load, peak %s" % (last.get("malloc_arenas_extra") or "-",
      max((int(r["malloc_arenas_extra"]) for r in load if r.get("malloc_arenas_extra")), default="-")))
checks = [
    ("KV blocks back to 0", float(final["kv_blocks_used"] or -1) == 0),
    ("fds back to baseline", int(final["fds"]) <= int(base["fds"])),
    ("threads back to baseline", int(final["threads"]) <= int(base["threads"])),
    ("RSS growth after warm-up < 1%", growth < 1.0),
    ("no unexpected client errors", crc == 0),
    ("server exit 0 on SIGTERM", src == 0),
]
for name, ok in checks:
    print(("PASS: " if ok else "FAIL: ") + name)
sys.exit(0 if all(ok for _, ok in checks) else 1)
PY
rc=${PIPESTATUS[0]}
if command -v gnuplot >/dev/null; then
  gnuplot <<EOF 2>/dev/null
set terminal png size 1000,700
set output "$OUT/soak.png"
set datafile separator ","
set multiplot layout 2,2 title "nibble serve soak (${DUR}s, $CLIENTS clients)"
set xlabel "s"
plot "$CSV" using 1:(\$3/1024) skip 1 with lines title "RSS MiB"
plot "$CSV" using 1:4 skip 1 with lines title "fds"
plot "$CSV" using 1:5 skip 1 with lines title "threads"
plot "$CSV" using 1:6 skip 1 with lines title "KV blocks used"
unset multiplot
EOF
  [ -f "$OUT/soak.png" ] && echo "plot: $OUT/soak.png"
fi
echo "csv: $CSV"
exit $rc

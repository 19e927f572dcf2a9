#!/usr/bin/env python3
"""64 concurrent streaming clients against `nibble serve`, every fourth of
which disconnects after its first content chunk. Every other stream must
complete correctly (role chunk first, content, a finish_reason, usage when
asked, then [DONE]); afterwards /metrics must come back to 0 running
requests and 0 KV blocks used.

usage: concurrency.py PORT API_KEY [N]"""
import http.client
import json
import sys
import threading
import time

PORT, KEY = int(sys.argv[1]), sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 64
results = [None] * N


def client(i):
    drop = i % 4 == 3
    body = {"messages": [{"role": "user", "content": "Tell me a story number %d" % i}], "max_tokens": 24,
            "temperature": 0.8, "seed": i, "stream": True, "stream_options": {"include_usage": True}}
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        r = c.getresponse()
        if r.status != 200:
            results[i] = "status %d: %r" % (r.status, r.read()[:200])
            return
        if r.getheader("Content-Type", "").split(";")[0] != "text/event-stream":
            results[i] = "content type %r" % r.getheader("Content-Type")
            return
        chunks, done, buf = [], False, b""
        while not done:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            if not line.startswith(b"data: "):
                results[i] = "not an SSE data line: %r" % line[:100]
                return
            data = line[6:]
            if data == b"[DONE]":
                done = True
                break
            chunks.append(json.loads(data))
            if drop and any(ch["choices"] and ch["choices"][0]["delta"].get("content") for ch in chunks):
                c.sock.close()  # disconnect mid-stream
                results[i] = "dropped"
                return
        if drop:
            results[i] = "dropped"  # finished before it could drop: fine
            return
        if not done:
            results[i] = "stream ended without [DONE]"
            return
        if chunks[0]["choices"][0]["delta"].get("role") != "assistant":
            results[i] = "first chunk has no role: %r" % chunks[0]
            return
        fins = [ch["choices"][0]["finish_reason"] for ch in chunks if ch["choices"]]
        if fins[-1] not in ("stop", "length") or any(f is not None for f in fins[:-1]):
            results[i] = "finish reasons %r" % fins
            return
        usage = chunks[-1].get("usage")
        text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks if ch["choices"])
        if not usage or chunks[-1]["choices"] != [] or usage["completion_tokens"] < 1:
            results[i] = "usage chunk %r" % chunks[-1]
            return
        if fins[-1] == "length" and usage["completion_tokens"] != 24:
            results[i] = "length finish with %d tokens" % usage["completion_tokens"]
            return
        text.encode("utf-8")
        results[i] = "ok"
    except Exception as e:
        results[i] = "exception %r" % e


threads = [threading.Thread(target=client, args=(i,)) for i in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join(180)
bad = [(i, r) for i, r in enumerate(results) if r not in ("ok", "dropped")]
n_ok = sum(1 for r in results if r == "ok")
for i, r in bad:
    print("FAIL: client %d: %s" % (i, r))
print("%d streams completed, %d dropped on purpose, %d failed" % (n_ok, N - n_ok - len(bad), len(bad)))


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


deadline = time.time() + 15
running = used = None
zeros = 0  # two consecutive all-zero scrapes: the engine's stats snapshot lags by up to one step
while time.time() < deadline and zeros < 2:
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    running = metric(text, "nibble:num_requests_running")
    used = metric(text, "nibble:kv_cache_blocks_used")
    waiting = metric(text, "nibble:num_requests_waiting")
    zeros = zeros + 1 if (running == 0 and used == 0 and waiting == 0) else 0
    time.sleep(0.2)
ok_metrics = running == 0 and used == 0
print(("ok" if ok_metrics else "FAIL") + ": /metrics back to 0 running (%s) and 0 KV blocks used (%s)" % (running, used))
sys.exit(0 if not bad and ok_metrics and n_ok >= N // 2 else 1)

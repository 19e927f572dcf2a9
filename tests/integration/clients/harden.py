#!/usr/bin/env python3
"""Raw-socket checks of nibble serve's hardening (tests/integration/serve_harden.sh).

usage: harden.py PORT KEY GROUP [args]
Groups: framing, auth, routing, model, cors, nocors, prompt, deadline, limit,
retry429, loading, load.
Prints "ok: ..." / "FAIL: ..." lines and exits 1 when anything failed.
Every socket has a timeout; nothing here can hang.
"""
import json
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
KEY = sys.argv[2]
GROUP = sys.argv[3]
ARGS = sys.argv[4:]
fails = 0


def check(what, cond, detail=""):
    global fails
    if cond:
        print("ok:", what)
    else:
        fails += 1
        print("FAIL:", what, detail)


def connect(timeout=10.0):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.settimeout(timeout)
    return s


def read_response(s, deadline=10.0):
    """Reads one HTTP response (Content-Length bodies). Returns (status,
    headers dict lower-case, body bytes, closed) or (None, {}, raw, closed)."""
    buf = b""
    end = time.time() + deadline
    closed = False
    while b"\r\n\r\n" not in buf and time.time() < end:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not b:
            closed = True
            break
        buf += b
    if b"\r\n\r\n" not in buf:
        return None, {}, buf, closed
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs.setdefault(k.strip().lower(), []).append(v.strip())
    n = int(hdrs.get("content-length", ["0"])[0])
    while len(body) < n and time.time() < end:
        b = s.recv(65536)
        if not b:
            closed = True
            break
        body += b
    return status, hdrs, body, closed


def closes_after(s, wait=5.0):
    """True when the server closes the connection within `wait` seconds."""
    s.settimeout(wait)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return True
    except (socket.timeout, TimeoutError):
        return False
    except ConnectionResetError:
        return True


def exchange(raw, deadline=10.0):
    s = connect()
    s.sendall(raw)
    r = read_response(s, deadline)
    s.close()
    return r


def req(method, path, body=None, headers=None, auth=True):
    h = {"Host": "127.0.0.1"}
    if auth and KEY:
        h["Authorization"] = "Bearer " + KEY
    if body is not None:
        body = body if isinstance(body, bytes) else json.dumps(body).encode()
        h["Content-Type"] = "application/json"
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    raw = ("%s %s HTTP/1.1\r\n" % (method, path)).encode() + b"".join(
        ("%s: %s\r\n" % kv).encode() for kv in h.items()) + b"\r\n" + (body or b"")
    return exchange(raw)


def err_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except Exception:
        return None


def g_framing():
    s = connect()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
              b"\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}")
    st, h, b, _ = read_response(s)
    check("two Content-Length headers: 400", st == 400, st)
    check("two Content-Length headers: connection closed", closes_after(s))
    s.close()
    s = connect()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    st, h, b, _ = read_response(s)
    check("Content-Length with Transfer-Encoding: 400 and close", st == 400 and closes_after(s), st)
    s.close()
    s = connect()
    s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)))
    st, h, b, closed = read_response(s)
    check("binary request line (a TLS hello): 400", st == 400, (st, b[:80]))
    check("binary request line: connection closed", closed or closes_after(s))
    s.close()
    s = connect()
    s.sendall(b"GET /health HTTP/1.1\r\n\r\n")
    st, h, b, _ = read_response(s)
    check("HTTP/1.1 without Host: 400 and close", st == 400 and closes_after(s), st)
    s.close()
    st, h, b, _ = exchange(b"GET /health HTTP/1.0\r\n\r\n")
    check("HTTP/1.0 without Host is fine (200)", st == 200, st)
    st, h, b, _ = exchange(b"GET /health HTTP/1.1\r\nHost: a\r\nContent-Length: 12x\r\n\r\n")
    check("non-numeric Content-Length: 400", st == 400, st)


def g_auth():
    # 40 clients announce 1 MiB bodies and send 10 bytes of it, without a key:
    # each must get 401 at once, before the body, and the connection closes.
    socks = []
    t0 = time.time()
    for _ in range(40):
        s = connect()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1048576\r\n\r\n{\"prompt\":")
        socks.append(s)
    got = [read_response(s, 2.0) for s in socks]
    dt = time.time() - t0
    check("40 unauthenticated 1 MiB uploads: all 401 before the body is sent (%.2fs)" % dt,
          all(g[0] == 401 for g in got), [g[0] for g in got][:5])
    check("the 401 carries WWW-Authenticate: Bearer", "www-authenticate" in got[0][1])
    check("the 401 closes the connection (the body is never read)", all(closes_after(s, 5.0) for s in socks[:3]))
    for s in socks:
        s.close()
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    check("with the key the request is served (200)", st == 200, (st, b[:200]))
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": "Hi"}, headers={"Authorization": "Bearer wrong"})
    check("a wrong key: 401", st == 401, st)


def g_routing():
    for path, want in [("/v1/models", 200), ("/health", 200), ("/v1/models/", 404), ("/v1/models" + "/" * 245 + "xyz", 404),
                       ("/v1/models" + "/" * 300, 404), ("/health" + "/" * 250 + "/../v1/completions", 404),
                       ("/health/../v1/models", 404), ("/v1/./models", 404), ("/v1//models", 404),
                       ("/v1/model%73", 404), ("/%761/models", 404), ("/v1/models?x=1", 200), ("/" + "a" * 4000, 404),
                       ("/v1", 404), ("/v1/", 404), ("/V1/models", 404)]:
        st, h, b, _ = req("GET", path)
        check("GET %s -> %d" % (path if len(path) < 60 else path[:30] + "...(%d bytes)" % len(path), want), st == want, st)
    st, h, b, _ = req("POST", "/v1/completions/", {"prompt": "Hi"})
    check("POST /v1/completions/ -> 404", st == 404, st)
    st, h, b, _ = req("GET", "/v1/completions")
    check("GET /v1/completions -> 405 with Allow: POST", st == 405 and h.get("allow") == ["POST"], (st, h.get("allow")))


def g_model():
    st, h, b, _ = req("POST", "/v1/completions", {"model": "no-such-model", "prompt": "Hi"})
    e = json.loads(b)["error"] if st else {}
    check("unknown model: 404, OpenAI's error shape, code model_not_found",
          st == 404 and e.get("code") == "model_not_found" and e.get("param") == "model" and "type" in e, (st, b[:200]))
    st, h, b, _ = req("POST", "/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "Hi"}]})
    check("unknown model (chat): 404", st == 404, st)


def g_cors():
    origin = ARGS[0]
    st, h, b, _ = req("OPTIONS", "/v1/chat/completions", auth=False,
                      headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                               "Access-Control-Request-Headers": "authorization, content-type"})
    check("preflight from an allowed origin: 204 without the key", st == 204, st)
    check("preflight: Allow-Origin echoes the origin, Vary: Origin",
          h.get("access-control-allow-origin") == [origin] and "vary" in h, h)
    check("preflight: Allow-Methods has POST, Allow-Headers has Authorization",
          "POST" in h.get("access-control-allow-methods", [""])[0] and
          "authorization" in h.get("access-control-allow-headers", [""])[0].lower(), h)
    st, h, b, _ = req("OPTIONS", "/v1/chat/completions", auth=False,
                      headers={"Origin": "http://evil.test", "Access-Control-Request-Method": "POST"})
    check("preflight from another origin: 403, no Allow-Origin", st == 403 and "access-control-allow-origin" not in h, (st, h))
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, headers={"Origin": origin})
    check("a request from the allowed origin carries Allow-Origin", st == 200 and h.get("access-control-allow-origin") == [origin], (st, h))
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, headers={"Origin": "http://evil.test"})
    check("a request from another origin: no Allow-Origin", "access-control-allow-origin" not in h, h)
    st, h, b, _ = req("GET", "/v1/models", auth=False, headers={"Origin": origin})
    check("a 401 to the allowed origin carries Allow-Origin (the browser can read the error)",
          st == 401 and h.get("access-control-allow-origin") == [origin], (st, h))


def g_nocors():
    st, h, b, _ = req("OPTIONS", "/v1/chat/completions", auth=False,
                      headers={"Origin": "http://a.test", "Access-Control-Request-Method": "POST"})
    check("no --allowed-origins: preflight is not answered as CORS (405, no Allow-Origin)",
          st in (401, 405) and "access-control-allow-origin" not in h, (st, h))
    st, h, b, _ = req("GET", "/v1/models", headers={"Origin": "http://a.test"})
    check("no --allowed-origins: no Allow-Origin on responses", st == 200 and "access-control-allow-origin" not in h, h)


def g_prompt():
    big = "hello world " * (1 << 17)  # 1.5 MiB
    t0 = time.time()
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": big, "max_tokens": 1})
    dt = time.time() - t0
    msg = json.loads(b)["error"]["message"] if st else ""
    check("1.5 MiB prompt: 400 context_length_exceeded by the byte bound, before tokenizing (%.2fs)" % dt,
          st == 400 and err_code(b) == "context_length_exceeded" and "bytes" in msg, (st, b[:300]))
    st, h, b, _ = req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": big}], "max_tokens": 1})
    check("1.5 MiB chat message: 400 context_length_exceeded by the byte bound",
          st == 400 and err_code(b) == "context_length_exceeded" and b"bytes" in b, (st, b[:300]))
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": "hello " * 200, "max_tokens": 1})
    check("a prompt under the byte bound but over the token limit: still 400 by token count",
          st == 400 and err_code(b) == "context_length_exceeded" and b"bytes" not in b, (st, b[:300]))


def g_deadline():
    timeout = float(ARGS[0])
    # a client trickling one header line per second must be closed near the deadline
    s = connect(30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    t0 = time.time()
    closed = False
    for i in range(int(timeout * 4) + 8):
        time.sleep(0.5)
        try:
            s.sendall(b"X-Slow-%d: y\r\n" % i)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        if closes_after(s, 0.01):
            closed = True
            break
    dt = time.time() - t0
    check("a client trickling header lines is closed at the request deadline (%.1fs, deadline %gs)" % (dt, timeout),
          closed and dt < timeout * 4 + 2, dt)
    s.close()
    # a silent client too
    s = connect(30)
    t0 = time.time()
    c = closes_after(s, timeout * 4 + 2)
    check("a silent connection is closed at the deadline (%.1fs)" % (time.time() - t0), c)
    s.close()
    # a body trickled slowly
    s = connect(30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
              b"\r\nContent-Length: 1000\r\n\r\n")
    t0 = time.time()
    closed = False
    for i in range(int(timeout * 4) + 8):
        time.sleep(0.5)
        try:
            s.sendall(b"x")
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        if closes_after(s, 0.01):
            closed = True
            break
    check("a body trickled byte by byte is cut at the deadline (%.1fs)" % (time.time() - t0), closed)
    s.close()
    # one clock from accept: a first byte just before the accept thread's
    # deadline (at 0.75 x) does not restart it when the connection moves on
    # to the HTTP library; then a byte per 0.5 s. Cut before 1.75 x (a clock
    # restarted by that byte would run to at least 0.75 x + 1 x).
    s = connect(30)
    t0 = time.time()
    time.sleep(timeout * 0.75)
    closed = False
    try:
        s.sendall(b"P")
        for c in b"OST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"y" * int(timeout * 8 + 8):
            if closes_after(s, 0.5):
                closed = True
                break
            s.sendall(bytes([c]))
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        closed = closes_after(s, timeout * 2)
    dt = time.time() - t0
    check("a first byte at %.1fs does not restart the deadline: cut at %.1fs, before %.1fs (deadline %gs from accept)"
          % (timeout * 0.75, dt, timeout * 1.75, timeout), closed and dt < timeout * 1.75, dt)
    s.close()
    st, h, b, _ = req("GET", "/health")
    check("the server still answers afterwards", st == 200, st)


def g_limit():
    n = int(ARGS[0])
    held = [connect() for _ in range(n)]
    for s in held:  # real HTTP connections, kept alive
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        read_response(s)
    t0 = time.time()
    st, h, b, closed = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)
    check("connection %d beyond --max-connections %d: 503 at once (%.2fs)" % (n + 1, n, time.time() - t0),
          st == 503, (st, b[:100]))
    check("the 503 has Retry-After and code too_many_connections",
          "retry-after" in h and err_code(b) == "too_many_connections", (h, b[:200]))
    for s in held[: n // 2]:
        s.close()
    time.sleep(0.5)
    st, h, b, _ = req("GET", "/health")
    check("after some close, new connections are served again", st == 200, st)
    for s in held:
        s.close()


def g_retry429():
    results = []

    def one():
        try:
            results.append(req("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 30, "ignore_eos": True}))
        except Exception as e:  # noqa
            results.append((None, {}, str(e).encode(), True))
    ts = [threading.Thread(target=one) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    r429 = [r for r in results if r[0] == 429]
    check("a full queue gives 429 (%d of 8)" % len(r429), len(r429) >= 1, [r[0] for r in results])
    check("every 429 carries Retry-After", all("retry-after" in r[1] for r in r429), [r[1] for r in r429][:1])


def g_loading():
    st, h, b, _ = req("GET", "/health")
    check("while loading: /health 503 loading with Retry-After",
          st == 503 and b"loading" in b and "retry-after" in h, (st, b, h))
    st, h, b, _ = req("POST", "/v1/completions", {"prompt": "Hi"})
    check("while loading: completions 503 model_loading with Retry-After",
          st == 503 and err_code(b) == "model_loading" and "retry-after" in h, (st, b))
    st, h, b, _ = req("GET", "/v1/models")
    check("while loading: /v1/models answers 200", st == 200, st)


def g_load():
    """1,000 idle keep-alive connections and 200 slow clients, while a normal
    client keeps asking; reports its latencies."""
    n_idle, n_slow, secs = int(ARGS[0]), int(ARGS[1]), float(ARGS[2])
    idle = []
    t0 = time.time()
    for i in range(n_idle):
        s = connect(30)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.append(s)
    okc = sum(1 for s in idle if read_response(s, 20.0)[0] == 200)
    print("info: %d idle keep-alive connections open (%d answered) in %.1fs" % (len(idle), okc, time.time() - t0))
    stop = threading.Event()
    slow_socks = []

    def slow():
        try:
            s = connect(60)
            slow_socks.append(s)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            i = 0
            while not stop.is_set():
                s.sendall(b"X-Slow-%d: y\r\n" % i)
                i += 1
                stop.wait(2.0)
        except Exception:
            pass
    threads = [threading.Thread(target=slow, daemon=True) for _ in range(n_slow)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    lat = []
    failed = 0
    end = time.time() + secs
    while time.time() < end:
        t1 = time.time()
        try:
            st, h, b, _ = req("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 4})
            if st == 200:
                lat.append(time.time() - t1)
            else:
                failed += 1
                if failed <= 3:
                    print("info: normal client got", st, b[:200])
        except Exception as e:
            failed += 1
            if failed <= 3:
                print("info: normal client failed:", repr(e))
        time.sleep(0.2)
    stop.set()
    lat.sort()
    if lat:
        print("info: normal client: %d answers, latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d failed"
              % (len(lat), 1000 * lat[len(lat) // 2], 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                 1000 * lat[-1], failed))
    check("a normal client gets every answer within 5 s while %d idle + %d slow connections are open"
          % (n_idle, n_slow), lat and failed == 0 and lat[-1] < 5.0, (len(lat), failed))
    for s in idle + slow_socks:
        s.close()


{"framing": g_framing, "auth": g_auth, "routing": g_routing, "model": g_model, "cors": g_cors, "nocors": g_nocors,
 "prompt": g_prompt, "deadline": g_deadline, "limit": g_limit, "retry429": g_retry429, "loading": g_loading,
 "load": g_load}[GROUP]()
print("%s: %d failed" % (GROUP, fails))
sys.exit(1 if fails else 0)

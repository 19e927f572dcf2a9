#!/usr/bin/env python3
"""A scripted OpenAI-compatible streaming server for the `nibble bench serve`
tests (standard library only, loopback).

Every POST /v1/completions or /v1/chat/completions is answered, in a thread of
its own, with a stream whose timing is known in advance:
  request k (1, 2, 3... in arrival order) waits TTFT[k % len] seconds, sends
  its first content chunk, then chunk j+1 after ITL[j % len] seconds, for
  --tokens chunks (or the request's max_tokens if smaller), then a chunk with
  finish_reason "length", a usage chunk and "data: [DONE]".
--ttft-per-running S adds S per stream already running (latency grows with load).
Faults: --fail-every N answers HTTP 500 to every N-th request; --cut-every N
closes every N-th stream after --cut-after chunks without a finish_reason or
[DONE]; --stall-every N stops sending on every N-th stream after
--stall-after chunks and holds the connection for --stall-seconds.
--record FILE appends each request body to FILE as a JSON line.
GET /v1/models lists one model; GET /metrics exposes vllm:-style counters.
Prints "listening on http://127.0.0.1:PORT" once bound (--port 0 = any).
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--ttft", default="0.05", help="comma list of seconds, cycled per request")
ap.add_argument("--itl", default="0.01", help="comma list of seconds, cycled per chunk")
ap.add_argument("--tokens", type=int, default=8)
ap.add_argument("--ttft-per-running", type=float, default=0,
                help="extra TTFT per request already streaming when this one arrives (a server that saturates)")
ap.add_argument("--fail-every", type=int, default=0)
ap.add_argument("--cut-every", type=int, default=0)
ap.add_argument("--cut-after", type=int, default=2)
ap.add_argument("--stall-every", type=int, default=0)
ap.add_argument("--stall-after", type=int, default=1)
ap.add_argument("--stall-seconds", type=float, default=30)
ap.add_argument("--no-usage", action="store_true", help="never send a usage chunk")
ap.add_argument("--model", default="mock-model")
ap.add_argument("--record", default="", help="append every request body (one JSON line) to this file")
args = ap.parse_args()
TTFT = [float(x) for x in args.ttft.split(",")]
ITL = [float(x) for x in args.itl.split(",")]

lock = threading.Lock()
state = {"n": 0, "running": 0, "prompt": 0, "gen": 0, "ok": 0}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def send_body(self, code, body, ctype="application/json"):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        if self.path == "/v1/models":
            self.send_body(200, json.dumps({"object": "list", "data": [{"id": args.model, "object": "model"}]}))
        elif self.path == "/metrics":
            with lock:
                s = dict(state)
            lab = '{model_name="%s"}' % args.model
            t = "".join([
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running%s %d\n" % (lab, s["running"]),
                "vllm:num_requests_waiting%s 0\n" % lab,
                "vllm:kv_cache_usage_perc%s %g\n" % (lab, s["running"] / 100.0),
                "vllm:num_preemptions_total%s 0\n" % lab,
                "vllm:prompt_tokens_total%s %d\n" % (lab, s["prompt"]),
                "vllm:generation_tokens_total%s %d\n" % (lab, s["gen"]),
                'vllm:request_success_total{model_name="%s",finished_reason="length"} %d\n' % (args.model, s["ok"]),
                'vllm:request_success_total{model_name="%s",finished_reason="stop"} 0\n' % args.model,
            ])
            self.send_body(200, t, "text/plain; version=0.0.4")
        else:
            self.send_body(404, '{"error": {"message": "not found"}}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            req = json.loads(raw)
        except ValueError:
            self.send_body(400, '{"error": {"message": "bad JSON"}}')
            return
        chat = self.path.endswith("/chat/completions")
        if not (chat or self.path.endswith("/completions")):
            self.send_body(404, '{"error": {"message": "not found"}}')
            return
        with lock:
            state["n"] += 1
            k = state["n"]
            if args.record:
                with open(args.record, "a") as f:
                    f.write(json.dumps(req) + "\n")
        if args.fail_every and k % args.fail_every == 0:
            self.send_body(500, '{"error": {"message": "scripted failure of request %d", "type": "server_error"}}' % k)
            return
        ntok = args.tokens
        if isinstance(req.get("max_tokens"), int):
            ntok = min(ntok, req["max_tokens"])
        text = req.get("prompt") if not chat else " ".join(m.get("content", "") for m in req.get("messages", []))
        nprompt = len(str(text).split())
        cut = args.cut_every and k % args.cut_every == 0
        stall = args.stall_every and k % args.stall_every == 0
        with lock:
            busy = state["running"]
            state["running"] += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.flush()
            t0 = accepted.pop(self.connection.fileno(), None) or time.monotonic()
            t = t0 + TTFT[(k - 1) % len(TTFT)] + args.ttft_per_running * busy
            for j in range(ntok):
                if j > 0:
                    t += ITL[(j - 1) % len(ITL)]
                d = t - time.monotonic()
                if d > 0:
                    time.sleep(d)
                if cut and j == args.cut_after:
                    return  # connection closed: no finish_reason, no [DONE]
                if stall and j == args.stall_after:
                    time.sleep(args.stall_seconds)
                    return
                if chat:
                    ch = {"choices": [{"index": 0, "delta": {"content": " w%d" % j}, "finish_reason": None}]}
                else:
                    ch = {"choices": [{"index": 0, "text": " w%d" % j, "finish_reason": None}]}
                self.wfile.write(b"data: " + json.dumps(ch).encode() + b"\n\n")
                self.wfile.flush()
            fin = {"choices": [{"index": 0, "delta": {}, "text": "", "finish_reason": "length"}]}
            out = b"data: " + json.dumps(fin).encode() + b"\n\n"
            if not args.no_usage and (req.get("stream_options") or {}).get("include_usage"):
                u = {"choices": [], "usage": {"prompt_tokens": nprompt, "completion_tokens": ntok,
                                              "total_tokens": nprompt + ntok}}
                out += b"data: " + json.dumps(u).encode() + b"\n\n"
            out += b"data: [DONE]\n\n"
            self.wfile.write(out)
            self.wfile.flush()
            with lock:
                state["prompt"] += nprompt
                state["gen"] += ntok
                state["ok"] += 1
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with lock:
                state["running"] -= 1


class S(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def process_request(self, request, client_address):
        # The schedule starts when the connection is accepted (in the main
        # thread), not when the handler thread gets to run: thread start-up
        # on a busy machine is not the server's "TTFT".
        accepted[request.fileno()] = time.monotonic()
        super().process_request(request, client_address)


accepted = {}


srv = S(("127.0.0.1", args.port), H)
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
try:
    srv.serve_forever(poll_interval=0.05)
except KeyboardInterrupt:
    pass

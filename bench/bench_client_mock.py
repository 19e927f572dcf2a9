#!/usr/bin/env python3
"""A fast mock OpenAI streaming server for bench/bench_client.sh (asyncio,
standard library, loopback): every POST gets --chunks SSE content chunks, a
usage chunk and [DONE] at once (prebuilt bytes, HTTP/1.1 keep-alive), after
--hold seconds between the first chunk and the rest (0 = instantly).
GET /metrics exposes vllm:num_requests_running (streams open right now)."""
import argparse
import asyncio
import json

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--chunks", type=int, default=200)
ap.add_argument("--hold", type=float, default=0)
args = ap.parse_args()

chunk = lambda j: b"data: " + json.dumps({"choices": [{"index": 0, "text": " t%d" % j, "finish_reason": None}]}).encode() + b"\n\n"
first = chunk(0)
rest = b"".join(chunk(j) for j in range(1, args.chunks))
rest += b"data: " + json.dumps({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}).encode() + b"\n\n"
rest += b"data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": args.chunks,
                                                        "total_tokens": 4 + args.chunks}}).encode() + b"\n\n"
rest += b"data: [DONE]\n\n"
head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % (len(first) + len(rest))
running = 0


async def handle(r, w):
    global running
    try:
        while True:
            line = await r.readline()
            if not line:
                break
            method, path = line.split()[:2]
            n = 0
            while True:
                h = await r.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                if h.lower().startswith(b"content-length:"):
                    n = int(h.split(b":")[1])
            if n:
                await r.readexactly(n)
            if method == b"GET":
                body = (b"vllm:num_requests_running %d\nvllm:num_requests_waiting 0\n" % running) if path == b"/metrics" \
                    else b'{"data": [{"id": "mock"}]}'
                w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                continue
            running += 1
            try:
                w.write(head + first)
                if args.hold > 0:
                    await w.drain()
                    await asyncio.sleep(args.hold)
                w.write(rest)
                await w.drain()
            finally:
                running -= 1
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        w.close()


async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", args.port, backlog=4096)
    print("listening on http://127.0.0.1:%d" % srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()

asyncio.run(main())

#!/usr/bin/env bash
# Failed allocations while a response is built (issue 15): with the
# test-only NIBBLE_TEST_FAIL_JSON_ALLOC=K every K-th JSON allocation of a
# server thread fails. Every answer must then be either complete (200 with
# one logprob entry per completion token, usage present) or an error the
# client sees (a 4xx/5xx with an error object, or a stream cut before
# [DONE]); a 200 with a member silently missing is the bug this guards.
set -u
BIN=$1
. "$(dirname "$0")/../lib/check.sh"
command -v python3 >/dev/null || skip_rest "python3 missing"

start() { # K -> PORT, PID
  NIBBLE_TEST_FAIL_JSON_ALLOC=$1 "$BIN" serve --port 0 --max-model-len 256 -t 1 >"$tmp/log.$1" 2>&1 &
  PID=$!
  PORT=
  for _ in $(seq 1 600); do
    PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/log.$1" | grep -o '[0-9]*$' | head -n 1)
    [ -n "$PORT" ] && grep -q "serve: ready:" "$tmp/log.$1" && break
    sleep 0.1
  done
}

for K in 0 97 211; do
  start $K
  check "K=$K: the server starts" '[ -n "$PORT" ]'
  python3 - "$PORT" "$K" >"$tmp/out.$K" 2>&1 <<'PY'
import http.client, json, sys
port, K = int(sys.argv[1]), int(sys.argv[2])
counts = {"complete": 0, "error": 0, "cut": 0, "bad": 0}
def req(path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()
for i in range(40):
    chat = i % 2 == 0
    stream = i % 4 >= 2
    body = {"max_tokens": 6 + i % 5, "logprobs": True if chat else 3, "stream": stream}
    if chat:
        body["messages"] = [{"role": "user", "content": "tell me %d" % i}]
        body["top_logprobs"] = 3
    else:
        body["prompt"] = "once upon a time %d" % i
    try:
        st, data = req("/v1/chat/completions" if chat else "/v1/completions", body)
    except Exception as e:
        counts["cut"] += 1
        continue
    if st != 200:
        ok = st >= 400 and b'"error"' in data
        counts["error" if ok else "bad"] += 1
        if not ok: print("BAD status", st, data[:200])
        continue
    if stream:
        if not data.rstrip().endswith(b"data: [DONE]"):
            counts["cut"] += 1  # the client sees an unterminated stream
            continue
        n_lp = 0
        for line in data.split(b"\n"):
            if not line.startswith(b"data: {"): continue
            ch = json.loads(line[6:])
            if "error" in ch: n_lp = -1; break
            for c in ch.get("choices", []):
                lp = c.get("logprobs")
                if chat and lp: n_lp += len(lp["content"])
                elif not chat and lp: n_lp += len(lp["tokens"])
        # streamed text deltas may carry no token (n_lp counts tokens seen)
        counts["complete" if n_lp >= 0 else "error"] += 1
        continue
    o = json.loads(data)
    n = o.get("usage", {}).get("completion_tokens")
    c = o["choices"][0]
    lp = c.get("logprobs")
    if chat:
        good = n is not None and lp is not None and len(lp.get("content", [])) == n and \
            all("top_logprobs" in e and "logprob" in e and "token" in e and "bytes" in e for e in lp["content"])
    else:
        good = n is not None and lp is not None and all(len(lp.get(k, [])) == n for k in
                                                         ("tokens", "token_logprobs", "top_logprobs", "text_offset"))
    good = good and "finish_reason" in c and ("message" in c if chat else "text" in c)
    counts["complete" if good else "bad"] += 1
    if not good: print("BAD 200", data[:300])
print(json.dumps(counts))
PY
  line=$(tail -n 1 "$tmp/out.$K")
  echo "  K=$K: $line"
  check "K=$K: no 200 with a missing member or short logprobs" 'echo "$line" | grep -q "\"bad\": 0"'
  if [ "$K" = 0 ]; then
    check "K=0 (no injected failure): all 40 complete" 'echo "$line" | grep -q "\"complete\": 40"'
  else
    check "K=$K: the injected failures were seen as errors" 'echo "$line" | grep -qv "\"complete\": 40"'
  fi
  kill $PID; wait $PID 2>/dev/null
done
finish

#!/usr/bin/env python3
"""The bad-input matrix of `nibble serve`, with the Python standard library
only: every error the server documents, with its HTTP status, the OpenAI
error shape and type (and the parameter where it names one), then a check
that the server still answers a good request.

usage: bad_input.py PORT API_KEY MAX_MODEL_LEN MAX_REQUEST_BYTES"""
import http.client
import json
import sys

PORT, KEY, MML, MAXB = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fails = 0
passes = 0


def request(method, path, body=None, key=KEY, raw=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    h = {"Content-Type": "application/json"}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    if headers:
        h.update(headers)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    payload = r.read()
    allow = r.getheader("Allow")
    c.close()
    return r.status, payload, allow


def check(name, cond, detail=""):
    global fails, passes
    if cond:
        passes += 1
        print("ok:", name)
    else:
        fails += 1
        print("FAIL:", name, detail)


def expect(name, status, etype, method="POST", path="/v1/completions", body=None, param=None, contains=(), **kw):
    try:
        st, payload, allow = request(method, path, body, **kw)
    except Exception as e:  # the server must never drop the connection on bad input
        check(name, False, "request failed: %r" % e)
        return None
    try:
        err = json.loads(payload)["error"]
        shape = set(err) == {"message", "type", "param", "code"}
    except Exception:
        check(name, False, "status %d, body is not an OpenAI error: %r" % (st, payload[:200]))
        return None
    ok = st == status and shape and err["type"] == etype
    if param is not None:
        ok = ok and err["param"] == param
    for c in contains:
        ok = ok and c in err["message"]
    check(name, ok, "got %d %r" % (st, err))
    return allow


P = {"prompt": "Once upon a time", "max_tokens": 4}
C = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
E = "invalid_request_error"

def with_(base, **kw):
    d = dict(base)
    d.update(kw)
    return d

# --- body and JSON ---
expect("invalid JSON -> 400", 400, E, raw=b'{"prompt": "x",')
expect("body not an object -> 400", 400, E, raw=b'[1, 2]')
expect("duplicate keys -> 400", 400, E, raw=b'{"prompt": "a", "prompt": "b"}')
expect("invalid UTF-8 -> 400", 400, E, raw=b'{"prompt": "\xff\xfe"}')
expect("deeply nested JSON -> 400", 400, E, raw=b'{"prompt": ' + b'[' * 5000 + b']' * 5000 + b'}')
expect("empty body -> 400", 400, E, raw=b'')
# --- types ---
expect("temperature wrong type -> 400", 400, E, body=with_(P, temperature="hot"), param="temperature")
expect("max_tokens float -> 400", 400, E, body=with_(P, max_tokens=4.5), param="max_tokens")
expect("stream not a bool -> 400", 400, E, body=with_(P, stream="yes"), param="stream")
expect("stop wrong type -> 400", 400, E, body=with_(P, stop=5), param="stop")
expect("prompt wrong type -> 400", 400, E, body=with_(P, prompt={"a": 1}), param="prompt")
expect("prompt missing -> 400", 400, E, body={"max_tokens": 4}, param="prompt")
expect("seed wrong type -> 400", 400, E, body=with_(P, seed="1"), param="seed")
# --- ranges, naming the parameter and the allowed range ---
expect("temperature 3 -> 400 naming [0, 2]", 400, E, body=with_(P, temperature=3), param="temperature",
       contains=("[0, 2]",))
expect("temperature -1 -> 400", 400, E, body=with_(P, temperature=-1), param="temperature")
expect("top_p 0 -> 400", 400, E, body=with_(P, top_p=0), param="top_p", contains=("(0, 1]",))
expect("top_k -5 -> 400", 400, E, body=with_(P, top_k=-5), param="top_k")
expect("min_p 1.5 -> 400", 400, E, body=with_(P, min_p=1.5), param="min_p")
expect("presence_penalty 3 -> 400", 400, E, body=with_(P, presence_penalty=3), param="presence_penalty")
expect("frequency_penalty -3 -> 400", 400, E, body=with_(P, frequency_penalty=-3), param="frequency_penalty")
expect("repetition_penalty 0 -> 400", 400, E, body=with_(P, repetition_penalty=0), param="repetition_penalty")
expect("max_tokens 0 -> 400", 400, E, body=with_(P, max_tokens=0), param="max_tokens")
expect("min_tokens > max_tokens -> 400", 400, E, body=with_(P, min_tokens=10), param="min_tokens")
expect("logprobs 6 (completions) -> 400", 400, E, body=with_(P, logprobs=6), param="logprobs")
expect("top_logprobs 21 -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, logprobs=True, top_logprobs=21), param="top_logprobs")
expect("top_logprobs without logprobs -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, top_logprobs=2), param="top_logprobs")
expect("n = 2 -> 400", 400, E, body=with_(P, n=2), param="n", contains=("n = 1",))
expect("17 stop strings -> 400", 400, E, body=with_(P, stop=["s%d" % i for i in range(17)]), param="stop")
expect("empty stop string -> 400", 400, E, body=with_(P, stop=[""]), param="stop[0]")
expect("stream_options without stream -> 400", 400, E, body=with_(P, stream_options={"include_usage": True}),
       param="stream_options")
expect("prompt token id out of vocab -> 400", 400, E, body=with_(P, prompt=[1, 99999999]), param="prompt")
expect("logit_bias not an object -> 400", 400, E, body=with_(P, logit_bias=[1, 2]), param="logit_bias")
expect("logit_bias key not a token id -> 400", 400, E, body=with_(P, logit_bias={"abc": 1}), param="logit_bias",
       contains=("abc",))
expect("logit_bias value 101 -> 400 naming [-100, 100]", 400, E, body=with_(P, logit_bias={"5": 101}),
       param="logit_bias", contains=("[-100, 100]",))
expect("logit_bias value not a number -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, logit_bias={"5": "x"}), param="logit_bias")
expect("logit_bias token id out of vocab -> 400", 400, E, body=with_(P, logit_bias={"99999999": -100}),
       param="logit_bias", contains=("99999999",))
expect("stop_token_ids not an array -> 400", 400, E, body=with_(P, stop_token_ids=5), param="stop_token_ids")
expect("stop_token_ids negative id -> 400", 400, E, body=with_(P, stop_token_ids=[3, -1]), param="stop_token_ids[1]")
expect("1025 stop_token_ids -> 400", 400, E, body=with_(P, stop_token_ids=[3] * 1025), param="stop_token_ids",
       contains=("1024",))
expect("stop_token_ids out of vocab -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, stop_token_ids=[99999999]), param="stop_token_ids", contains=("99999999",))
# --- unknown fields, unsupported values ---
expect("unknown field -> 400 naming it", 400, E, body=with_(P, frobnicate=1), param="frobnicate",
       contains=("frobnicate",))
expect("echo with stream -> 400", 400, E, body=with_(P, echo=True, stream=True), param="echo")
expect("tools not an array -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, tools={"type": "function", "function": {"name": "f"}}), param="tools")
expect("response_format unknown type -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, response_format={"type": "xml"}), param="response_format.type")
expect("response_format json_schema without a schema -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
       param="response_format.json_schema.schema")
# --- chat messages ---
expect("messages missing -> 400", 400, E, path="/v1/chat/completions", body={"max_tokens": 4}, param="messages")
expect("messages empty -> 400", 400, E, path="/v1/chat/completions", body=with_(C, messages=[]), param="messages")
expect("unknown role -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, messages=[{"role": "wizard", "content": "x"}]), param="messages[0].role")
expect("content wrong type -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, messages=[{"role": "user", "content": 5}]), param="messages[0].content")
expect("image part -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
       param="messages[0].content[0]")
expect("unknown message field -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, messages=[{"role": "user", "content": "x", "mood": "happy"}]), param="messages[0].mood")
# --- context length, naming both numbers ---
expect("prompt + max_tokens over max_model_len -> 400", 400, E, body=with_(P, max_tokens=MML + 1000),
       param="prompt", contains=(str(MML), str(MML + 1000)))
expect("chat over max_model_len -> 400", 400, E, path="/v1/chat/completions",
       body=with_(C, max_tokens=MML * 3), param="messages", contains=(str(MML),))
# --- model, routes, methods, size, auth ---
expect("unknown model -> 404 (OpenAI, vLLM)", 404, E, body=with_(P, model="gpt-17"), param="model", contains=("gpt-17",))
expect("unknown path -> 404", 404, "not_found_error", path="/v1/nope", body=P)
expect("unknown path outside /v1 -> 404", 404, "not_found_error", method="GET", path="/nope")
allow = expect("GET on completions -> 405", 405, E, method="GET", path="/v1/completions")
check("405 carries Allow: POST", allow == "POST", repr(allow))
expect("POST on /v1/models -> 405", 405, E, path="/v1/models", body={})
expect("body over --max-request-bytes -> 413", 413, E, raw=b'{"prompt": "' + b'a' * (MAXB + 10) + b'"}')
expect("no API key -> 401", 401, "authentication_error", body=P, key=None)
expect("wrong API key -> 401", 401, "authentication_error", body=P, key=KEY + "x")
expect("key prefix only -> 401", 401, "authentication_error", body=P, key=KEY[:-1])
expect("no API key on /v1/models -> 401", 401, "authentication_error", method="GET", path="/v1/models", key=None)
st, _, _ = request("GET", "/health", key=None)
check("/health open without the key", st == 200, str(st))
st, body, _ = request("GET", "/metrics", key=None)
check("/metrics open without the key", st == 200 and b"nibble:num_requests_running" in body, str(st))

# --- the server is unharmed: good requests still work ---
st, body, _ = request("POST", "/v1/completions", with_(P, temperature=0))
ok = st == 200 and json.loads(body)["choices"][0]["finish_reason"] in ("stop", "length")
check("a good completion after the bad ones", ok, repr(body[:200]))
st, body, _ = request("POST", "/v1/chat/completions",
                      with_(C, messages=[{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                                      {"type": "text", "text": "there"}]}],
                            max_completion_tokens=3, logprobs=True, top_logprobs=2))
ok = st == 200
if ok:
    j = json.loads(body)
    lp = j["choices"][0]["logprobs"]["content"]
    ok = (j["object"] == "chat.completion" and j["usage"]["completion_tokens"] == len(lp) <= 3
          and all(len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in lp))
check("chat with text parts, system message, logprobs", ok, repr(body[:300]))

print("%d passed, %d failed" % (passes, fails))
sys.exit(1 if fails else 0)

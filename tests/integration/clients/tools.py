"""Tool calls against a running `nibble serve` (tests/integration/serve_tools.sh).

usage: tools.py PORT N FORMAT
Checks, on the built-in random-weight model: N constrained generations
(tool_choice required, random seeds) each give finish_reason "tool_calls"
and one call of a declared function whose arguments validate against its
parameters; a named tool_choice gives that function; the streamed deltas
(OpenAI's shape) reassemble to the non-streamed call with the same seed and
no tool markup leaks into content; auto/none on this model give plain
content; the round trip (assistant tool_calls + tool message) is answered.
FORMAT is the family the server's template implies (the markup to look for).
"""
import json
import random
import sys
import urllib.error
import urllib.request

PORT, N, FMT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
URL = f"http://127.0.0.1:{PORT}/v1/chat/completions"
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string", "maxLength": 12},
         "unit": {"enum": ["celsius", "fahrenheit"]},
         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
         "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string", "pattern": "^[A-Z]{3}$"}}, "required": ["tz"]}}},
    {"type": "function", "function": {"name": "ping"}},
]
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]
fails = 0


def check(what, cond):
    global fails
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails += 1


def post(body, stream=False):
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read().decode()
            return r.status, raw
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def valid_args(name, args):
    a = json.loads(args)
    if not isinstance(a, dict):
        return False
    if name == "get_weather":
        if set(a) - {"city", "unit", "days"} or "city" not in a or "unit" not in a:
            return False
        if not isinstance(a["city"], str) or len(a["city"]) > 12 or a["unit"] not in ("celsius", "fahrenheit"):
            return False
        return "days" not in a or (isinstance(a["days"], int) and 1 <= a["days"] <= 7)
    if name == "get_time":
        tz = a.get("tz")
        return isinstance(tz, str) and len(tz) == 3 and tz.isupper() and tz.isalpha()
    if name == "ping":
        return a == {}
    return False


def call_of(raw):
    d = json.loads(raw)
    c = d["choices"][0]
    return c, c["message"]


rng = random.Random(7)
bad = 0
names = set()
for i in range(N):
    seed = rng.randrange(1 << 31)
    st, raw = post({"messages": MSGS, "tools": TOOLS, "tool_choice": "required", "seed": seed,
                    "temperature": 1.0, "max_tokens": 120})
    ok = st == 200
    if ok:
        c, m = call_of(raw)
        tc = m.get("tool_calls") or []
        ok = (c["finish_reason"] == "tool_calls" and len(tc) == 1 and tc[0]["type"] == "function"
              and tc[0]["id"].startswith("call_") and isinstance(tc[0]["function"]["arguments"], str)
              and valid_args(tc[0]["function"]["name"], tc[0]["function"]["arguments"])
              and (m["content"] is None or "tool_call" not in m["content"]))
        if ok:
            names.add(tc[0]["function"]["name"])
    if not ok:
        bad += 1
        print(f"  seed {seed}: {st} {raw[:400]}")
check(f"{N} constrained calls (tool_choice required, random seeds) are valid calls of declared functions", bad == 0)
print(f"  functions chosen: {sorted(names)}")

st, raw = post({"messages": MSGS, "tools": TOOLS, "seed": 3, "max_tokens": 80,
                "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
c, m = call_of(raw) if st == 200 else ({}, {})
check("named tool_choice: a call of that function",
      st == 200 and c["finish_reason"] == "tool_calls" and m["tool_calls"][0]["function"]["name"] == "get_time"
      and valid_args("get_time", m["tool_calls"][0]["function"]["arguments"]))

# streaming: OpenAI's delta shape, reassembled equal to the whole answer
for seed in (11, 12, 13):
    body = {"messages": MSGS, "tools": TOOLS, "tool_choice": "required", "seed": seed, "temperature": 1.0,
            "max_tokens": 120}
    st, raw = post(body)
    c, m = call_of(raw)
    st2, sraw = post(dict(body, stream=True))
    calls, content, finish, first_ok = {}, "", None, True
    for line in sraw.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        d = json.loads(line[6:])
        for ch in d["choices"]:
            delta = ch["delta"]
            content += delta.get("content") or ""
            for t in delta.get("tool_calls") or []:
                k = t["index"]
                if k not in calls:
                    first_ok = first_ok and t.get("id", "").startswith("call_") and t.get("type") == "function" \
                        and t["function"].get("name") and t["function"].get("arguments") == ""
                    calls[k] = {"name": t["function"]["name"], "arguments": ""}
                calls[k]["arguments"] += t["function"].get("arguments", "")
            finish = ch.get("finish_reason") or finish
    whole = [{"name": t["function"]["name"], "arguments": t["function"]["arguments"]} for t in m["tool_calls"]]
    streamed = [calls[k] for k in sorted(calls)]
    check(f"seed {seed}: streamed tool-call deltas reassemble to the whole answer's calls", streamed == whole)
    check(f"seed {seed}: first delta per call has index, id, type, name and empty arguments; finish tool_calls",
          first_ok and finish == "tool_calls" and st2 == 200)
    check(f"seed {seed}: no tool markup streamed as content", content == (m["content"] or ""))

# auto / none on a random model: plain content (and no markup leak)
st, raw = post({"messages": MSGS, "tools": TOOLS, "seed": 5, "max_tokens": 30})
c, m = call_of(raw)
check("auto: the random model writes text, answered as content with finish stop/length",
      st == 200 and c["finish_reason"] in ("stop", "length", "tool_calls") and
      (m.get("tool_calls") is None) == (c["finish_reason"] != "tool_calls"))
st, raw = post({"messages": MSGS, "tools": TOOLS, "tool_choice": "none", "seed": 5, "max_tokens": 30})
c, m = call_of(raw)
check("tool_choice none: no tool_calls", st == 200 and "tool_calls" not in m and c["finish_reason"] != "tool_calls")

# the round trip: the call goes back as an assistant message, the result as a tool message
st, raw = post({"messages": MSGS, "tools": TOOLS, "tool_choice": "required", "seed": 9, "max_tokens": 120})
c, m = call_of(raw)
msgs = MSGS + [{"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"]},
               {"role": "tool", "tool_call_id": m["tool_calls"][0]["id"], "content": "{\"temperature\": 21}"}]
st, raw = post({"messages": msgs, "tools": TOOLS, "seed": 9, "max_tokens": 20, "tool_choice": "none"})
c, m2 = call_of(raw) if st == 200 else ({}, {})
check("round trip: the tool result is answered with content", st == 200 and isinstance(m2.get("content"), str))

# refusals
def err(body, param):
    st, raw = post(body)
    try:
        e = json.loads(raw)["error"]
    except Exception:
        return False
    if not (st == 400 and e["param"] == param):
        print(f"  {st} {raw[:300]}")
    return st == 400 and e["param"] == param

check("unknown function in tool_choice: 400 naming tool_choice.function.name",
      err({"messages": MSGS, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
          "tool_choice.function.name"))
check("tools not an array of function objects: 400 naming tools[0]",
      err({"messages": MSGS, "tools": [{"type": "retrieval"}]}, "tools[0]"))
check("a parameters schema nibble cannot enforce (required): 400 naming it",
      err({"messages": MSGS, "tool_choice": "required", "tools": [{"type": "function", "function": {
          "name": "f", "parameters": {"type": "object", "not": {}}}}]}, "tools[0].function.parameters"))
check("tool_choice required with response_format: 400",
      err({"messages": MSGS, "tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
          "tool_choice"))
check("tool_choice required without tools: 400", err({"messages": MSGS, "tool_choice": "required"}, "tool_choice"))
print(f"{'FAILED' if fails else 'all passed'} ({FMT})")
sys.exit(1 if fails else 0)

#!/usr/bin/env python3
"""Structured outputs against a running nibble serve: N constrained
generations with random seeds (16 at a time), each checked by parsing and
by validating against the schema with the small validator below (the
subset nibble enforces); guided_choice and guided_regex outputs checked the
same way. Prints one line per kind and exits 1 on any invalid output.
usage: structured.py PORT N"""
import datetime, ipaddress, json, random, re, sys, urllib.parse, urllib.request, uuid
from concurrent.futures import ThreadPoolExecutor

PORT, N = int(sys.argv[1]), int(sys.argv[2])
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.com$"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
        "score": {"type": ["number", "null"], "minimum": -1, "maximum": 1},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city"], "additionalProperties": False},
    },
    "required": ["name", "age", "tags", "address", "email"],
    "additionalProperties": False,
}
FORMATS = ["date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"]
FORMAT_SCHEMA = {"type": "object", "properties": {f: {"type": "string", "format": f} for f in FORMATS},
                 "required": FORMATS, "additionalProperties": False}
LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"


def is_format(f, v):
    """Python's own parsers where it has them; the RFC grammars spelled out otherwise."""
    try:
        if f == "date-time":
            return "T" in v and datetime.datetime.fromisoformat(v).tzinfo is not None
        if f == "date":
            return len(v) == 10 and datetime.date.fromisoformat(v) is not None
        if f == "time":
            return datetime.time.fromisoformat(v).tzinfo is not None
        if f == "ipv4":
            return ipaddress.IPv4Address(v) is not None
        if f == "ipv6":
            return ipaddress.IPv6Address(v) is not None
        if f == "uuid":
            return len(v) == 36 and uuid.UUID(v) is not None
    except ValueError:
        return False
    if f == "duration":
        return re.fullmatch(r"P(?:(?:\d+Y(?:\d+M(?:\d+D)?)?|\d+M(?:\d+D)?|\d+D)(?:T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S))?"
                            r"|T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)|\d+W)", v, re.A) is not None
    if f == "hostname":
        return len(v) <= 253 and all(re.fullmatch(LABEL, x, re.A) for x in v.split("."))
    if f == "email":
        local, _, host = v.rpartition("@")
        return (bool(local) and re.fullmatch(r"[A-Za-z0-9_%+-]+(?:\.[A-Za-z0-9_%+-]+)*", local, re.A) is not None
                and is_format("hostname", host) and "." in host and host.rsplit(".", 1)[1].isalpha())
    if f == "uri":
        u = urllib.parse.urlsplit(v)
        return bool(u.scheme) and bool(u.netloc) and is_format("hostname", u.hostname or "-") and (u.port or 0) >= 0
    return False


def valid(v, s):
    t = s.get("type")
    if "enum" in s:
        return v in s["enum"]
    if isinstance(t, list):
        return any(valid(v, dict(s, type=x)) for x in t)
    if t == "object":
        if not isinstance(v, dict) or any(k not in v for k in s.get("required", [])):
            return False
        props = s.get("properties", {})
        if s.get("additionalProperties") is False and any(k not in props for k in v):
            return False
        return all(valid(v[k], props[k]) for k in v if k in props)
    if t == "array":
        return (isinstance(v, list) and s.get("minItems", 0) <= len(v) <= s.get("maxItems", 1 << 30)
                and all(valid(x, s["items"]) for x in v))
    if t == "string":
        return (isinstance(v, str) and s.get("minLength", 0) <= len(v) <= s.get("maxLength", 1 << 30)
                and ("pattern" not in s or re.search(s["pattern"], v) is not None)
                and ("format" not in s or is_format(s["format"], v)))
    if t in ("integer", "number"):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (t == "integer" and not isinstance(v, int)):
            return False
        return s.get("minimum", -1e300) <= v <= s.get("maximum", 1e300)
    if t == "null":
        return v is None
    return True


class Failed(Exception):
    pass


def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise Failed(f"HTTP {e.code}: {e.read().decode(errors='replace')}")


def guarded(fn):
    def run(seed):
        try:
            return fn(seed)
        except Failed as e:
            return False, str(e)
    return run


def one_schema(seed):
    chat = seed % 2 == 1
    body = {"max_tokens": 160, "seed": seed, "temperature": 1.0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}}
    if chat:
        body["messages"] = [{"role": "user", "content": "Describe a person as JSON."}]
        out = post("/v1/chat/completions", body)["choices"][0]["message"]["content"]
    else:
        body["prompt"] = "A person as JSON:"
        out = post("/v1/completions", body)["choices"][0]["text"]
    try:
        return valid(json.loads(out), SCHEMA), out
    except ValueError:
        return False, out


def one_format(seed):
    body = {"max_tokens": 400, "seed": seed, "temperature": 1.0, "prompt": "Record:",
            "response_format": {"type": "json_schema", "json_schema": {"name": "record", "schema": FORMAT_SCHEMA}}}
    out = post("/v1/completions", body)["choices"][0]["text"]
    try:
        return valid(json.loads(out), FORMAT_SCHEMA), out
    except ValueError:
        return False, out


def one_choice(seed):
    out = post("/v1/completions", {"prompt": "Answer:", "max_tokens": 8, "seed": seed,
                                   "guided_choice": ["yes", "no", "not sure"]})["choices"][0]["text"]
    return out in ("yes", "no", "not sure"), out


def one_regex(seed):
    out = post("/v1/completions", {"prompt": "Date:", "max_tokens": 16, "seed": seed,
                                   "guided_regex": "20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]"})["choices"][0]["text"]
    return re.fullmatch("20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]", out) is not None, out


bad = 0
rnd = random.Random(1234)
for name, fn, n in (("json_schema", guarded(one_schema), N), ("json_schema formats", guarded(one_format), N // 4),
                    ("guided_choice", guarded(one_choice), N // 4),
                    ("guided_regex", guarded(one_regex), N // 4)):
    seeds = [rnd.randrange(1 << 31) for _ in range(n)]
    with ThreadPoolExecutor(16) as ex:
        res = list(ex.map(fn, seeds))
    wrong = [(s, o) for s, (ok, o) in zip(seeds, res) if not ok]
    print(f"{name}: {n - len(wrong)}/{n} valid")
    for s, o in wrong[:3]:
        print(f"  seed {s}: {o!r}")
    bad += len(wrong)
sys.exit(1 if bad else 0)

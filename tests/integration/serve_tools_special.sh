#!/usr/bin/env bash
# Tool-call markers that are control tokens (Mistral v11's [TOOL_CALLS] /
# [ARGS], Hermes' <tool_call> in some vocabularies): the engine leaves
# control-token text out of the output, so without help such a model's
# calls never parse. No such real model is in ../shared: this test writes a
# vocabulary GGUF (SentencePiece, byte fallback) whose [TOOL_CALLS], [ARGS]
# and [CALL_ID] are control tokens and which has no byte token for '[' or
# ']' (so the markers can only be written as those control tokens), with a
# chat template in Mistral v11's call syntax, synthesizes a random-weight
# model on it (`nibble synth --vocab-from`) and serves it:
#   - tool_choice required: the constrained output starts with the control
#     token (logprobs name it) and parses into message.tool_calls;
#   - streamed: the argument fragments reassemble to the whole answer;
#   - requests without tools still leave control-token text out.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/check.sh"
for t in curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
export XDG_CACHE_HOME=$tmp/cache
unset NIBBLE_API_KEY
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$tmp"' EXIT

# the vocabulary: GGUF v3, metadata only (the format's key/value layout)
python3 - "$tmp/vocab.gguf" <<'EOF'
import struct, sys
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9
def s(x):
    b = x.encode()
    return struct.pack('<Q', len(b)) + b
kv = []
def put(k, t, v): kv.append(s(k) + struct.pack('<I', t) + v)
toks, types = ['<unk>', '<s>', '</s>', '[TOOL_CALLS]', '[ARGS]', '[CALL_ID]', '[INST]', '[/INST]'], [2, 3, 3, 3, 3, 3, 3, 3]
for b in range(256):
    if b in (0x5B, 0x5D): continue  # no '[' / ']': the markers exist only as control tokens
    toks.append('<0x%02X>' % b); types.append(6)
words = ['\u2581', 'get', '_weather', 'city', 'unit', 'celsius', 'fahrenheit', '\u2581the', 'e', 'a', 'o', 'n']
toks += words; types += [1] * len(words)
scores = [0.0] * (len(toks) - len(words)) + [-float(i + 1) for i in range(len(words))]
tmpl = ("{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST]{{ m.content }}[/INST]"
        "{% elif m.role == 'assistant' %}{% if m.tool_calls %}{% for c in m.tool_calls %}[TOOL_CALLS]"
        "{{ c.function.name }}[ARGS]{{ c.function.arguments }}{% endfor %}{% else %}{{ m.content }}{% endif %}"
        "{{ eos_token }}{% elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]{% endif %}{% endfor %}")
put('general.architecture', STR, s('llama'))
put('tokenizer.ggml.model', STR, s('llama'))
put('tokenizer.ggml.tokens', ARR, struct.pack('<IQ', STR, len(toks)) + b''.join(s(t) for t in toks))
put('tokenizer.ggml.scores', ARR, struct.pack('<IQ', F32, len(toks)) + b''.join(struct.pack('<f', x) for x in scores))
put('tokenizer.ggml.token_type', ARR, struct.pack('<IQ', I32, len(toks)) + b''.join(struct.pack('<i', x) for x in types))
put('tokenizer.ggml.unknown_token_id', U32, struct.pack('<I', 0))
put('tokenizer.ggml.bos_token_id', U32, struct.pack('<I', 1))
put('tokenizer.ggml.eos_token_id', U32, struct.pack('<I', 2))
put('tokenizer.ggml.add_bos_token', BOOL, b'\x00')
put('tokenizer.chat_template', STR, s(tmpl))
with open(sys.argv[1], 'wb') as f:
    f.write(b'GGUF' + struct.pack('<IQQ', 3, 0, len(kv)) + b''.join(kv))
EOF
check "vocabulary written" '[ -s "$tmp/vocab.gguf" ]'
"$BIN" synth --arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --ctx 1024 \
  --vocab-from "$tmp/vocab.gguf" -o "$tmp/m.gguf" >"$tmp/synth.log" 2>&1
check "nibble synth on that vocabulary" '[ -s "$tmp/m.gguf" ] || { cat "$tmp/synth.log"; false; }'

"$BIN" serve "$tmp/m.gguf" --port 0 --max-model-len 1024 >"$tmp/log" 2>&1 &
PID=$!
wait_ready "$PID" "$tmp/log"
check "server ready" '[ -n "$PORT" ] || { tail -n 20 "$tmp/log"; false; }'
check "startup: mistral11 format, markers are control tokens" \
  'grep -q "tool calls: mistral11 format" "$tmp/log" && grep -q "markers are control tokens" "$tmp/log"'

python3 - "$PORT" <<'EOF' >"$tmp/out" 2>&1; rc=$?
import json, sys, urllib.request
port = sys.argv[1]
def post(body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}/v1/chat/completions', json.dumps(body).encode(),
                                 {'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read().decode()
fails = 0
def check(name, cond, detail=''):
    global fails
    print(('ok: ' if cond else 'FAIL: ') + name + ('' if cond else ' ' + str(detail)[:2000]))
    fails += 0 if cond else 1
tools = [{'type': 'function', 'function': {'name': 'get_weather', 'parameters': {'type': 'object',
          'properties': {'city': {'type': 'string', 'maxLength': 12}, 'unit': {'enum': ['celsius', 'fahrenheit']}},
          'required': ['city', 'unit'], 'additionalProperties': False}}}]
msgs = [{'role': 'user', 'content': 'weather in Oslo?'}]
for seed in (1, 2, 3, 4):
    base = dict(messages=msgs, tools=tools, tool_choice='required', seed=seed, temperature=1, max_tokens=120)
    d = json.loads(post(dict(base, logprobs=True)))
    c = d['choices'][0]
    lp = [t['token'] for t in (c.get('logprobs') or {}).get('content') or []]
    check(f'seed {seed}: the output begins with the control token [TOOL_CALLS] and holds [ARGS]',
          lp[:1] == ['[TOOL_CALLS]'] and '[ARGS]' in lp, lp[:12])
    tc = c['message'].get('tool_calls') or []
    ok = c['finish_reason'] == 'tool_calls' and len(tc) == 1 and tc[0]['function']['name'] == 'get_weather'
    args = json.loads(tc[0]['function']['arguments']) if ok else None
    check(f'seed {seed}: parsed into message.tool_calls (get_weather, city and unit), content null',
          ok and c['message']['content'] is None and set(args) == {'city', 'unit'} and
          args['unit'] in ('celsius', 'fahrenheit'), d)
    # streamed: OpenAI's deltas, arguments in fragments, reassembled equal to the whole answer
    calls, frags, fin, content = {}, 0, None, ''
    for line in post(dict(base, stream=True)).split('\n'):
        if not line.startswith('data: ') or line == 'data: [DONE]':
            continue
        ch = json.loads(line[6:])['choices']
        if not ch:
            continue
        delta = ch[0]['delta']
        content += delta.get('content') or ''
        for t in delta.get('tool_calls') or []:
            k = calls.setdefault(t['index'], {'name': t['function'].get('name'), 'arguments': ''})
            a = t['function'].get('arguments', '')
            k['arguments'] += a
            frags += 1 if a else 0
        fin = ch[0]['finish_reason'] or fin
    whole = [{'name': t['function']['name'], 'arguments': t['function']['arguments']} for t in tc]
    check(f'seed {seed}: streamed calls reassemble to the whole answer, in more than one fragment',
          [calls[k] for k in sorted(calls)] == whole and frags > 1 and fin == 'tool_calls' and content == '',
          (calls, whole, frags, fin, content))
# no tools: control tokens stay out of the text (no '[' can come from any other token)
for seed in (5, 6, 7):
    d = json.loads(post(dict(messages=msgs, seed=seed, temperature=1.5, max_tokens=64)))
    text = d['choices'][0]['message']['content'] or ''
    check(f'seed {seed}: without tools no control-token text in the content', '[' not in text, text)
print('done,', fails, 'failed')
sys.exit(1 if fails else 0)
EOF
cat "$tmp/out"
check "control-token markers: constrained calls parse, stream, and stay out of tool-less answers" '[ $rc -eq 0 ]'
kill -TERM $PID; wait $PID; PID=
finish

#!/usr/bin/env python3
"""Derives examples/golden/story.jsonl from what the tiny models actually
write (examples/golden/README.md says why and how):

    python3 examples/golden/derive_story.py build/nibble ../shared/models/aidreams260K.gguf > examples/golden/story.jsonl

For each story opener, both the trained aidreams260K and nibble's built-in
random-weight default model continue it greedily (`nibble generate --temp
0`); an item then expects a fragment of that continuation (so the model it
came from passes, the other one does not), a choice item offers the word the
model wrote against a word it did not write, and a variation item asks for a
continuation neither model writes (both fail). The built-in model writes
byte soup, so its fragments are its first run of 3+ ASCII letters.
"""
import json
import re
import subprocess
import sys

BIN, AIDREAMS = sys.argv[1], sys.argv[2]
N = 12
OPENERS = [
    "Once upon a time", "The little girl", "One day, a cat", "The old man", "In the forest",
    "The dog ran", "She looked at the sky", "Tom and Lily", "The sun was", "A bird sang",
    "The children played", "At night, the moon",
]
WRONG = [" dragon", " spoon", " ocean", " ladder", " violin", " carrot"]


def gen(model, prompt):
    cmd = [BIN, "generate", "-p", prompt, "-n", str(N), "--temp", "0"] + (["-m", model] if model else [])
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return out.decode("utf-8", "replace").rstrip("\n")


def printable(s):
    return re.sub(r"[\x00-\x1f\ufffd]", "?", s)


items = []
for i, p in enumerate(OPENERS):
    a = gen(AIDREAMS, p)
    words = re.findall(r"\S+", a)
    if len(words) >= 2:
        frag = a[a.index(words[0]):a.index(words[1]) + len(words[1])]
        items.append({"id": f"story-aid-{i:02d}", "bucket": "story", "prompt": p, "max_tokens": N,
                      "check": {"contains": frag}, "meta": {"derived_from": "aidreams260K", "output": printable(a)}})
    w = re.search(r"\b[A-Za-z]+\b", a)
    if i % 2 == 0 and w:
        first = a[:w.end()]  # the continuation up to and including its first word
        if first.strip():
            items.append({"id": f"story-choice-{i:02d}", "bucket": "story", "prompt": p,
                          "check": {"choice": {"options": [first, WRONG[(i // 2) % len(WRONG)]], "answer": 0}},
                          "meta": {"derived_from": "aidreams260K"}})
    d = gen(None, p)
    m = re.search(r"[A-Za-z]{3,}", d)
    if m:
        items.append({"id": f"story-def-{i:02d}", "bucket": "story", "prompt": p, "max_tokens": N,
                      "check": {"contains": m.group(0)}, "meta": {"derived_from": "built-in default", "output": printable(d)}})
    if i % 3 == 0:
        items.append({"id": f"story-var-{i:02d}", "bucket": "story", "prompt": p + ",", "max_tokens": N,
                      "check": {"regex": r"\b(there was|there lived)\b"}, "meta": {"derived_from": "variation"}})
for it in items:
    print(json.dumps(it, ensure_ascii=False))

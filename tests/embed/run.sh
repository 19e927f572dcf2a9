#!/usr/bin/env bash
# Runs the embedding example on aidreams260K with llama.cpp's greedy text as
# the expected output; without shared/ on a model synthesized with
# `nibble synth` (the library has no built-in default model).
#   run.sh EMBED_EXAMPLE NIBBLE_BINARY [SHARED_DIR]
set -u
BIN=$1
NIBBLE=$2
SHARED=${3:-../shared}
if [ -f "$SHARED/models/aidreams260K.gguf" ]; then
  want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cases"][0]["continuation_text"], end="")' \
         "$SHARED/reference/aidreams260K.json")
  exec "$BIN" "$SHARED/models/aidreams260K.gguf" "$want"
fi
echo "note: $SHARED/models not found; running on a synthesized model"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT  # so no exec below: the shell must live to run it
"$NIBBLE" synth --arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --ctx 256 -o "$tmp/m.gguf" >/dev/null || exit 1
"$BIN" "$tmp/m.gguf"

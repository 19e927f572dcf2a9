#!/usr/bin/env bash
# Runs the embedding example on aidreams260K with llama.cpp's greedy text as
# the expected output, or on the built-in default model without shared/.
set -u
BIN=$1
SHARED=${2:-../shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache
if [ -f "$SHARED/models/aidreams260K.gguf" ]; then
  want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cases"][0]["continuation_text"], end="")' \
         "$SHARED/reference/aidreams260K.json")
  exec "$BIN" "$SHARED/models/aidreams260K.gguf" "$want"
fi
echo "SKIP: $SHARED/models not found; running the built-in default model"
exec "$BIN" ""
